"""Every file the project writes (elmo.artifacts): the names in Outputs, atomic writes, checkpoint payloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from elmo.artifacts import (
    FORMAT_VERSION,
    Outputs,
    atomic_write,
    atomic_write_bytes,
    check_writable,
    load_checkpoint,
    payload,
    save_checkpoint,
    write_json,
)
from elmo.errors import ElmoError


def test_outputs_name_every_file_under_its_folder():
    out = Outputs.of("m", "r", "i")
    assert out == Outputs(Path("m"), Path("r"), Path("i"))
    assert Outputs() == Outputs.of("models")  # the scripts' defaults: models/, results/, images/
    assert out.word2idx == Path("m/word2idx.pkl") and out.bilm == Path("m/bilstm.pt")
    assert [out.lm(d) for d in ("forward", "backward")] == [Path("m/forward.pt"), Path("m/backward.pt")]
    assert out.classifier() == Path("m/classifier.pt")
    assert out.classifier("frozen_lambda") == Path("m/classifier_frozen_lambda.pt")
    assert out.static("word2vec") == Path("m/word2vec.pt")
    assert out.checkpoint("forward_lm") == Path("m/checkpoints/forward_lm.pt")
    assert out.result("lm") == Path("r/lm.json") and out.image("lm_loss") == Path("i/lm_loss.png")


def test_payload_tags_format_and_version_and_loads_back(tmp_path):
    obj = payload("bilm", config={"a": 1}, weights=torch.ones(2))
    assert list(obj)[:2] == ["format", "version"] and obj["format"] == "elmo.bilm" and obj["version"] == FORMAT_VERSION
    save_checkpoint(obj, tmp_path / "x.pt")
    loaded = load_checkpoint(tmp_path / "x.pt", ("elmo.lm", "elmo.bilm"))
    assert loaded["config"] == {"a": 1} and torch.equal(loaded["weights"], torch.ones(2))
    save_checkpoint({**obj, "version": FORMAT_VERSION + 1}, tmp_path / "new.pt")
    with pytest.raises(ElmoError, match="checkpoint version 2 is not supported"):
        load_checkpoint(tmp_path / "new.pt", "elmo.bilm")
    with pytest.raises(ElmoError, match="model file not found"):
        load_checkpoint(tmp_path / "none.pt", "elmo.bilm")


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write_bytes(target, b"first")
    assert target.read_bytes() == b"first"

    def broken(handle):
        handle.write(b"half")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError, match="disk gone"):
        atomic_write(target, broken)
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]
    write_json(tmp_path / "r.json", {"x": [1, 2]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"x": [1, 2]}


def test_unwritable_places_raise_the_project_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(ElmoError, match=f"cannot write to {blocker}"):
        atomic_write_bytes(blocker / "x.bin", b"")
    with pytest.raises(ElmoError, match=f"cannot write to output folder {blocker / 'out'}"):
        check_writable(tmp_path / "fine", blocker / "out")
    assert (tmp_path / "fine").is_dir() and not list((tmp_path / "fine").iterdir())  # the probe file is gone
