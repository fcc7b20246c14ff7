"""Write only where told: a training command given ``--models-dir M`` alone writes its results and plots into
``M/results`` and ``M/images``, nothing into the working folder (``pretrain``, then ``classify`` and ``baselines``
reading the biLM from ``M``); given none of the three folder flags, ``models/``, ``results/`` and ``images/``."""

from __future__ import annotations

from pathlib import Path

from published_reference import OPTIONS, WEIGHTS

from elmo.artifacts import Outputs
from elmo.cli import run
from elmo.pipelines.common import CommonArgs


def test_folders_not_given_follow_the_first_given():
    assert Outputs.of() == Outputs() == CommonArgs().outputs == Outputs(Path("models"), Path("results"), Path("images"))
    assert Outputs.of("m") == Outputs(Path("m"), Path("m/results"), Path("m/images"))
    assert Outputs.of(None, "r") == Outputs(Path("r/models"), Path("r"), Path("r/images"))
    assert Outputs.of(None, None, "i") == Outputs(Path("i/models"), Path("i/results"), Path("i"))
    assert Outputs.of("m", None, "i") == Outputs(Path("m"), Path("m/results"), Path("i"))
    assert CommonArgs(results_dir="r", images_dir="i").outputs == Outputs(Path("r/models"), Path("r"), Path("i"))


def test_runs_given_only_models_dir_leave_the_working_folder_untouched(tmp_path, tiny_agnews, monkeypatch, capsys):
    cwd, models = tmp_path / "cwd", tmp_path / "run"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    common = ["--data-dir", str(tiny_agnews), "--models-dir", str(models), "--epochs", "1", "--threads", "1"]
    assert run("pretrain", [*common, "--embedding-dim", "16", "--hidden-size", "16", "--max-docs", "120"]) == 0
    assert f"output folders: models {models}, results {models / 'results'}, plots {models / 'images'}\n" \
        in capsys.readouterr().out
    assert run("classify", [*common, "--mixes", "frozen_lambda", "--encoder-hidden", "8", "--token-embedding-dim", "8",
                            "--max-docs", "120", "--quiet"]) == 0
    assert run("baselines", [*common, "--methods", "tfidf_logreg", "--max-docs", "120", "--quiet"]) == 0
    assert list(cwd.iterdir()) == []
    assert {p.name for p in (models / "results").iterdir()} == {"lm.json", "classification.json", "baselines.json"}
    assert {"lm_loss.png", "lm_confusion_forward.png", "confusion_frozen_lambda.png", "confusion_tfidf_logreg.png"} \
        <= {p.name for p in (models / "images").iterdir()}
    assert (models / "bilstm.pt").is_file() and (models / "classifier.pt").is_file()


def refused_in(folder: Path, capsys, command: str, argv: list[str]) -> str:
    """``command`` run in ``folder`` with no output-folder flag: exit status 2 and one line on stderr."""
    assert run(command, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_failed_run_leaves_no_output_folder_behind(tmp_path, tiny_agnews, monkeypatch, capsys):
    """The output folders are proven writable before training but made only when a file is written into them, so
    a run that stops first leaves the working folder as it was (``python classification.py`` with no biLM there,
    ``finetune`` with a missing biLM file or training text, ``pretrain`` without its data)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    err = refused_in(cwd, capsys, "classify", ["--data-dir", str(tiny_agnews), "--threads", "1", "--quiet"])
    assert "models holds no biLM" in err
    assert list(cwd.iterdir()) == []
    published = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS)]  # read only
    for argv, message in ((["--options-file", str(tmp_path / "missing.json"), "--weight-file", str(WEIGHTS)],
                           "--options-file"),
                          ([*published, "--train-file", str(tmp_path / "missing.txt")], "missing.txt")):
        err = refused_in(cwd, capsys, "finetune", ["--data-dir", str(tiny_agnews), "--threads", "1", *argv])
        assert message in err, err
        assert list(cwd.iterdir()) == []
    err = refused_in(cwd, capsys, "pretrain", ["--data-dir", str(tmp_path / "nowhere"), "--no-download", "--threads", "1"])
    assert "--no-download" in err and list(cwd.iterdir()) == []
    # given folders that do not exist yet: not made either
    nested = ["--models-dir", str(tmp_path / "run" / "m"), "--results-dir", str(tmp_path / "run" / "r")]
    refused_in(cwd, capsys, "classify", ["--data-dir", str(tiny_agnews), "--threads", "1", *nested])
    assert not (tmp_path / "run").exists() and list(cwd.iterdir()) == []
