"""The command line (elmo.cli), in process: the command list, --help of every entry point, flag errors, exit codes."""

from __future__ import annotations

import re
import runpy
import sys

import pytest
from support import ROOT

import elmo.runtime.device as device_module
from elmo.cli import COMMANDS, build_parser, main, run

#: The commands the README documents (others may be added; none of these may go).
DOCUMENTED = {"pretrain", "finetune", "classify", "baselines", "predict", "embed", "export", "fetch"}
SHIMS = {"ELMO.py": ("pretrain", "--max-docs"), "classification.py": ("classify", "--mixes"),
         "baselines.py": ("baselines", "--static-dim")}


def run_as_main(monkeypatch, argv: list[str], script: str | None = None) -> int:
    """Run ``python -m elmo argv`` (``script`` None) or ``python <script> argv`` in this process; returns its exit code."""
    monkeypatch.setattr(sys, "argv", [script or "elmo", *argv])
    with pytest.raises(SystemExit) as done:
        if script is None:
            runpy.run_module("elmo", run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(ROOT / script), run_name="__main__")
    code = done.value.code
    return 0 if code is None else code


def test_python_m_elmo_help_lists_every_command(monkeypatch, capsys):
    assert DOCUMENTED <= set(COMMANDS)
    assert run_as_main(monkeypatch, ["--help"]) == 0
    out = capsys.readouterr().out
    for name, command in COMMANDS.items():
        assert f"    {name}" in out and command.help.split()[0] in out, name
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)


def test_no_or_an_unknown_command_prints_usage_and_exits_2(capsys):
    for argv in ([], ["train"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
        assert "usage: python -m elmo" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_generated_from_its_config(command, capsys):
    """Every field has its flag in ``--help``, except the lab's (``lab=True``), which the user commands do not take."""
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: python -m elmo {command}" in out
    for name, field in COMMANDS[command].args.__dataclass_fields__.items():
        shown = name if field.metadata.get("positional") else "--" + name.replace("_", "-")
        if field.metadata.get("lab"):
            assert f"{shown} " not in out, name
        else:
            assert re.search(rf"{re.escape(shown)}\b(?!-)", out.replace("--[no-]", "--")), name


@pytest.mark.parametrize("script", ["ELMO.py", "classification.py"])
def test_the_help_of_the_two_scripts_fits_in_100_lines(monkeypatch, capsys, script):
    """One or two lines a flag on an 80-column terminal; the lab's options are not among them."""
    monkeypatch.setenv("COLUMNS", "80")
    assert run_as_main(monkeypatch, ["--help"], script) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= 100, out
    assert max(len(line) for line in out.splitlines()) <= 80
    for hidden in ("--labelled-fraction", "--text-fraction", "--track-test", "--encoder-projection", "--lr-gamma"):
        assert hidden not in out


def test_the_lab_fields_are_flags_only_with_lab(capsys):
    """``add_flags(..., lab=True)`` (``python -m lab elmo``) adds the fields marked ``lab=True``; without it the
    field keeps its default and its flag is an unknown argument."""
    import argparse

    from elmo.cli import add_flags
    from elmo.pipelines.classification import ClassifyArgs

    lab = add_flags(argparse.ArgumentParser(), ClassifyArgs, lab=True)
    config = ClassifyArgs(**vars(lab.parse_args(["--labelled-fraction", "0.1", "--track-test"])))
    assert config.labelled_fraction == 0.1 and config.track_test is True
    assert ClassifyArgs(**vars(add_flags(argparse.ArgumentParser(), ClassifyArgs).parse_args([]))) == ClassifyArgs()
    with pytest.raises(SystemExit):
        run("classify", ["--labelled-fraction", "0.1"])
    assert "unrecognized arguments: --labelled-fraction 0.1" in capsys.readouterr().err


@pytest.mark.parametrize("script", sorted(SHIMS))
def test_each_shim_help_exits_0_naming_itself(monkeypatch, capsys, script):
    command, flag = SHIMS[script]
    assert run_as_main(monkeypatch, ["--help"], script) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {script}") and flag in out and COMMANDS[command].help in out


def test_predict_without_text_or_file_exits_2_saying_what_to_give(capsys, tmp_path):
    assert run("predict", []) == 2
    assert capsys.readouterr().err == "error: give either --text TEXT or --input-file FILE\n"
    assert run("predict", ["--text", "a", "--input-file", str(tmp_path / "x.txt")]) == 2
    assert "give either --text TEXT or --input-file FILE" in capsys.readouterr().err
    assert run("predict", ["--text", "the match", "--models-dir", str(tmp_path)]) == 2
    assert "classifier.pt not found: train it with `python classification.py" in capsys.readouterr().err


def test_a_bad_flag_value_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as done:
        run("pretrain", ["--precision", "fp8"])
    assert done.value.code == 2 and "invalid choice: 'fp8'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("classify", ["--epochs", "many"])
    assert "invalid int value: 'many'" in capsys.readouterr().err


def test_boolean_and_list_flags(tmp_path):
    import argparse

    from elmo.cli import add_flags
    from elmo.pipelines.classification import ClassifyArgs

    parser = add_flags(argparse.ArgumentParser(), ClassifyArgs)
    args = parser.parse_args(["--no-download", "--mixes", "frozen_lambda", "learned_function", "--layer-norm"])
    config = ClassifyArgs(**vars(args))
    assert config.download is False and config.layer_norm is True
    assert list(config.mixes) == ["frozen_lambda", "learned_function"]
    defaults = ClassifyArgs(**vars(parser.parse_args([])))
    assert defaults == ClassifyArgs()  # every flag's default is the dataclass default


def test_a_list_flag_takes_no_value_only_where_its_field_says_nargs_star(capsys):
    """``bench --memory-docs`` with no value skips the script memory runs (the empty tuple); a list flag without
    ``nargs="*"``, such as ``--mixes``, still needs one value at least."""
    import argparse

    from elmo.cli import add_flags
    from elmo.pipelines.classification import ClassifyArgs
    from lab.bench.speed import BenchArgs

    bench = add_flags(argparse.ArgumentParser(), BenchArgs)
    assert tuple(BenchArgs(**vars(bench.parse_args(["--memory-docs"]))).memory_docs) == ()
    assert tuple(BenchArgs(**vars(bench.parse_args(["--memory-docs", "200", "400"]))).memory_docs) == (200, 400)
    assert BenchArgs(**vars(bench.parse_args([]))).memory_docs == BenchArgs().memory_docs
    with pytest.raises(SystemExit):
        add_flags(argparse.ArgumentParser(), ClassifyArgs).parse_args(["--mixes"])
    assert "expected at least one argument" in capsys.readouterr().err


@pytest.mark.parametrize("command, old", [
    ("classify", ["--settings", "learned_function"]), ("classify", ["--predict", "a text"]),
    ("classify", ["--predict-file", "texts.txt"]), ("classify", ["--bilm-options-file", "o.json"]),
    ("classify", ["--bilm-weight-file", "w.hdf5"]), ("classify", ["--fine-tune"]), ("predict", ["--file", "t.txt"]),
    ("embed", ["--cuda-device", "0"]), ("embed", ["--bilm", "models"]), ("export", ["--bilm", "models"]),
    ("export", ["--out-dir", "out"]),
])
def test_the_old_spellings_are_gone(capsys, command, old):
    """0.4.0 renamed these flags without keeping aliases (CHANGELOG.md): argparse refuses them."""
    given = {"embed": ["in.txt", "out.hdf5", "--top"], "export": ["--out", "out"]}.get(command, [])
    with pytest.raises(SystemExit) as done:
        run(command, [*given, *old])
    assert done.value.code == 2 and f"unrecognized arguments: {old[0]}" in capsys.readouterr().err


def test_the_deprecated_python_names_are_gone():
    import elmo

    for name in ("ELMoEmbedder", "MIX_SETTINGS", "BilmTfConfig"):
        assert not hasattr(elmo, name), name


def test_an_error_naming_a_config_field_reads_as_the_flag_on_the_command_line(capsys):
    from elmo.cli import flag_message
    from elmo.errors import ElmoError
    from elmo.pipelines.baselines import BaselinesArgs
    from elmo.pipelines.classification import ClassifyArgs
    from elmo.pipelines.pretraining import PretrainArgs

    error = ElmoError("ClassifierConfig.token_embedding_dim must be >= 0, got -1",
                      field="ClassifierConfig.token_embedding_dim")
    assert flag_message(error, ClassifyArgs) == "--token-embedding-dim must be >= 0, got -1"
    error = ElmoError("BiLMConfig.embedding_dim (8) must equal the LSTM output width (16: BiLMConfig.proj_size if "
                      "set, else BiLMConfig.hidden_size); BiLMConfig.vocab_size", field="BiLMConfig.embedding_dim")
    assert flag_message(error, PretrainArgs) == ("--embedding-dim (8) must equal the LSTM output width (16: --proj-size "
                                                 "if set, else --hidden-size); BiLMConfig.vocab_size")  # no such flag
    assert flag_message(ElmoError("a.csv not found (and download=False is set)", field="download"),
                        BaselinesArgs) == "a.csv not found (and --no-download is set)"
    assert flag_message(ElmoError("bad rows; pass skip_bad_rows=True.", field="skip_bad_rows"),
                        PretrainArgs) == "bad rows; pass --skip-bad-rows."
    unchanged = ElmoError("CommonArgs.val_fraction and val_fraction_x: val_fraction", field="val_fraction")
    assert flag_message(unchanged, PretrainArgs) == "CommonArgs.val_fraction and val_fraction_x: --val-fraction"
    assert flag_message(ElmoError("plain", field=None), PretrainArgs) == "plain"
    # end to end: the model's config names its field, the command line the flag
    assert run("classify", ["--token-embedding-dim", "-1"]) == 2
    assert capsys.readouterr().err == "error: --token-embedding-dim must be >= 0, got -1\n"
    assert run("classify", ["--encoder-projection", "-1"], lab=True) == 2  # a lab flag: python -m lab elmo classify
    assert capsys.readouterr().err == "error: --encoder-projection must be >= 0, got -1\n"
    assert run("classify", ["--elmo-dropout", "1.0"]) == 2
    assert capsys.readouterr().err == "error: --elmo-dropout must be in [0, 1), got 1.0\n"
    assert run("pretrain", ["--lr-gamma", "2"], lab=True) == 2
    assert capsys.readouterr().err == "error: --lr-gamma must be in (0, 1], got 2.0\n"


@pytest.mark.parametrize("script, command", [("ELMO.py", "pretrain"), ("classification.py", "classify")])
@pytest.mark.cpu_features
def test_bf16_on_a_cpu_without_native_bf16_exits_2_before_writing_anything(monkeypatch, capsys, tiny_agnews, tmp_path,
                                                                           script, command):
    """``python ELMO.py --precision bf16`` on an AVX2-only CPU: run in this process with the CPU check answering no."""
    monkeypatch.setattr(device_module, "cpu_has_bf16", lambda: False)
    argv = ["--precision", "bf16", "--data-dir", str(tiny_agnews), "--models-dir", str(tmp_path / "models"),
            "--results-dir", str(tmp_path / "results"), "--images-dir", str(tmp_path / "images"), "--quiet"]
    assert run_as_main(monkeypatch, argv, script) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --precision bf16 needs a CPU with native bf16") and "Traceback" not in err
    assert "use --precision fp32 or auto (auto picks fp32 here)" in err
    assert not any((tmp_path / d).exists() for d in ("models", "results", "images"))
    assert run(command, [*argv[2:], "--precision", "fp16"]) == 2  # and fp16 needs CUDA whatever the CPU
    assert "--precision fp16 needs a CUDA device" in capsys.readouterr().err
