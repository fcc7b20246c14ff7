"""``python -m elmo export`` through the command line, in process (elmo.cli.main): it writes bilm-tf's three files;
it refuses to write over an input, names a missing file and refuses our own biLM, each with exit status 2 and one
line on stderr, the inputs left byte-identical."""

from __future__ import annotations

import importlib
import shutil
from dataclasses import replace
from pathlib import Path

import huggingface_hub
import torch
from published_reference import FIXTURES, OPTIONS, WEIGHTS

from elmo.cli import main
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.published_io import load_published_bilm
from elmo.model.serialization import save_bilm

PUBLISHED = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS)]


def refused(capsys, argv: list[str], *inputs: Path) -> str:
    """Run ``python -m elmo export argv``: exit status 2, one line on stderr, no traceback, ``inputs`` unchanged."""
    before = {p: p.read_bytes() for p in inputs}
    assert main(["export", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert {p: p.read_bytes() for p in inputs} == before
    return err


def test_export_writes_options_weights_and_vocabulary(capsys, tmp_path):
    out = tmp_path / "new" / "elmo"
    assert main(["export", "--out", str(out), *PUBLISHED, "--vocab-file", str(FIXTURES / "vocab_test.txt")]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "vocab.txt", "weights.hdf5"]
    err = capsys.readouterr().err
    assert f"wrote {out / 'weights.hdf5'} (33 datasets" in err and "(458 tokens)" in err and "note:" not in err
    assert load_published_bilm(out / "options.json", out / "weights.hdf5").config == \
        load_published_bilm(OPTIONS, WEIGHTS).config
    assert main(["export", "--out", str(out), *PUBLISHED, "--quiet"]) == 0  # files of those names are replaced
    assert capsys.readouterr().err == ""
    assert (out / "vocab.txt").read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\n"


def test_export_refuses_an_out_dir_that_would_overwrite_its_input(capsys, tmp_path):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    shutil.copy(OPTIONS, options)
    shutil.copy(WEIGHTS, weights)
    err = refused(capsys, ["--out", str(tmp_path), "--options-file", str(options), "--weight-file", str(weights)],
                  options, weights)
    assert err == (f"error: --out (options.json) {options} is the same file as --options-file {options}: writing it "
                   "would destroy that input; choose another output path\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\n", encoding="utf-8")
    err = refused(capsys, ["--out", str(tmp_path), *PUBLISHED, "--vocab-file", str(vocab)], vocab)
    assert f"--out (vocab.txt) {vocab} is the same file as --vocab-file {vocab}" in err


def test_export_names_a_missing_file(capsys, tmp_path):
    missing = tmp_path / "missing_weights.hdf5"
    out = ["--out", str(tmp_path / "out")]
    err = refused(capsys, [*out, "--options-file", str(OPTIONS), "--weight-file", str(missing)])
    assert err == f"error: {missing}: weight file not found\n"
    err = refused(capsys, [*out, *PUBLISHED, "--vocab-file", str(tmp_path / "words.txt")])
    assert err == f"error: {tmp_path / 'words.txt'}: vocabulary file not found\n"
    err = refused(capsys, [*out, "--options-file", str(OPTIONS)])
    assert err == "error: --options-file needs --weight-file too: a bilm-tf biLM is the pair of files\n"
    assert "give one biLM" in refused(capsys, out)
    err = refused(capsys, [*out, "--models-dir", str(tmp_path / "models")])
    assert err.startswith(f"error: --models-dir {tmp_path / 'models'} holds no biLM: looked for bilstm.pt, "
                          "published_lm.pt, bilm/config.json + bilm/model.safetensors, config.json + model.safetensors, "
                          "options.json + weights.hdf5; train the "
                          "published architecture with `python -m elmo pretrain --architecture")
    assert not (tmp_path / "out").exists()


def test_export_refuses_an_out_dir_that_is_a_file(capsys, tmp_path):
    blocking = tmp_path / "file"
    blocking.write_text("x")
    err = refused(capsys, ["--out", str(blocking / "elmo"), *PUBLISHED], blocking)
    assert err == (f"error: {blocking} is a file, not a folder (in --out {blocking / 'elmo'}): choose another path or "
                   "move the file\n")


def test_export_refuses_our_own_bilm_saying_why(capsys, tmp_path):
    torch.manual_seed(0)
    words = list(SPECIALS) + [f"w{i}" for i in range(10)]
    bilm = BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=8, hidden_size=8, cutoffs=(6,))).eval()
    save_bilm(bilm, Vocabulary(words), tmp_path / "models" / "bilstm.pt", {})
    err = refused(capsys, ["--out", str(tmp_path / "out"), "--models-dir", str(tmp_path / "models")],
                  tmp_path / "models" / "bilstm.pt")
    assert err.startswith(f"error: --models-dir {tmp_path / 'models'}: our biLM cannot be written as bilm-tf's files: "
                          "bilm-tf's format has one token layer that both directions read")
    assert "is read by bilm-tf alone" in err and not (tmp_path / "out").exists()


def connection_error() -> Exception:
    """The error huggingface_hub's HTTP client raises where the Hub cannot be reached (httpx2, httpx or requests,
    whichever its version uses)."""
    http = importlib.import_module("huggingface_hub.utils._http")
    client = next((getattr(http, name) for name in ("httpx2", "httpx") if hasattr(http, name)), None)
    error = client.ConnectError if client is not None else importlib.import_module("requests").ConnectionError
    return error("[Errno -2] Name or service not known")


def test_a_push_to_hub_that_cannot_reach_the_hub_is_one_line_saying_the_folder_was_written(capsys, tmp_path,
                                                                                          monkeypatch):
    def offline(*args, **kwargs):
        raise connection_error()

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", offline)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", offline)
    out = tmp_path / "elmo-hub"
    err = refused(capsys, ["--format", "hub", *PUBLISHED, "--out", str(out), "--push-to-hub", "someone/tiny-elmo"],
                  OPTIONS, WEIGHTS)
    assert err == (f"error: wrote {out}, but could not push it to the Hub model someone/tiny-elmo: "
                   "[Errno -2] Name or service not known\n")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]


def test_export_takes_any_published_bilm_a_models_dir_holds(capsys, tmp_path):
    published = load_published_bilm(OPTIONS, WEIGHTS)
    published.save_pretrained(tmp_path / "saved")  # a save_pretrained folder: open_bilm opens it as any other
    shutil.copy(OPTIONS, tmp_path / "options.json")
    shutil.copy(WEIGHTS, tmp_path / "weights.hdf5")
    for models in (tmp_path / "saved", tmp_path):
        out = tmp_path / f"out_{models.name}"
        assert main(["export", "--out", str(out), "--models-dir", str(models), "--quiet"]) == 0
        again = load_published_bilm(out / "options.json", out / "weights.hdf5")
        assert replace(again.config, weights_digest="") == replace(published.config, weights_digest="")
        assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), published.state_dict().values()))
    err = refused(capsys, ["--out", str(tmp_path), "--models-dir", str(tmp_path)], tmp_path / "weights.hdf5")
    assert f"--out (options.json) {tmp_path / 'options.json'} is the same file as --models-dir (options.json)" in err


def test_export_refuses_to_write_a_models_dirs_bilm_folder_over_itself(capsys, tmp_path):
    """The ``bilm/`` folder the training commands write is what ``export --models-dir`` reads: neither format may
    write into it (``--format hub --out models/bilm``, bilm-tf's ``vocab.txt`` there)."""
    models = tmp_path / "models"
    bilm = load_published_bilm(OPTIONS, WEIGHTS)
    bilm.vocab = Vocabulary(list(SPECIALS) + ["The", "market"])  # as pretrain --architecture writes it
    bilm.save_pretrained(models / "bilm")
    files = sorted((models / "bilm").iterdir())
    for form in ("hub", "bilm-tf"):
        err = refused(capsys, ["--out", str(models / "bilm"), "--models-dir", str(models), "--format", form], *files)
        name = "config.json" if form == "hub" else "vocab.txt"
        assert f"--out ({name}) {models / 'bilm' / name} is the same file as --models-dir (bilm/{name})" in err, err
