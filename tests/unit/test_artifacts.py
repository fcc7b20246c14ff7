"""Every file the project writes (elmo.artifacts): the names in Outputs, atomic writes, checkpoint payloads."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch

from elmo.artifacts import (
    FORMAT_VERSION,
    Outputs,
    atomic_folder,
    atomic_hdf5,
    atomic_write,
    atomic_write_bytes,
    check_writable,
    load_checkpoint,
    payload,
    refuse_overwriting_inputs,
    save_checkpoint,
    write_json,
)
from elmo.errors import ElmoError
from elmo.pipelines.plots import plot_curves


def test_outputs_name_every_file_under_its_folder():
    out = Outputs.of("m", "r", "i")
    assert out == Outputs(Path("m"), Path("r"), Path("i"))
    assert Outputs() == Outputs.of()  # no folder flag given: models/, results/, images/ (tests/unit/pipelines/test_output_folders.py)
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
    with pytest.raises(ElmoError, match=f"{blocker} is a file, not a folder"):
        atomic_write_bytes(blocker / "x.bin", b"")
    with pytest.raises(ElmoError, match=f"{blocker} is a file, not a folder \\(in --results-dir {blocker / 'out'}\\)"):
        check_writable(tmp_path / "fine", blocker / "out", flags=("--models-dir", "--results-dir"))
    with pytest.raises(ElmoError, match=f"{blocker} is a file, not a folder"):
        check_writable(blocker / "deeper" / "out")
    assert blocker.read_text() == "not a folder"
    assert not (tmp_path / "fine").exists()  # proven writable, not created: made when a file is written into it
    check_writable(tmp_path / "fine" / "deeper", tmp_path)
    assert sorted(tmp_path.iterdir()) == [blocker]  # the probe files are gone


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_follow_the_umask_and_replaced_files_keep_their_permissions(tmp_path, umask):
    """Not mkstemp's 0600: a new file gets 0o666 less the umask, as open() gives it; a file written over keeps
    the permissions it had (a shared results file stays shared)."""
    writers = {"bytes": lambda p: atomic_write_bytes(p, b"x"), "json": lambda p: write_json(p, [1]),
               "pt": lambda p: save_checkpoint(payload("test"), p)}

    def hdf5(path):
        with atomic_hdf5(path) as out:
            out.create_dataset("x", data=[1.0])

    writers["hdf5"] = hdf5
    writers["png"] = lambda p: plot_curves({"loss": [2.0, 1.0]}, p, "a plot", "loss")  # matplotlib, images/
    previous = os.umask(umask)
    try:
        for name, write in writers.items():
            path = tmp_path / f"new_{name}"
            write(path)
            assert mode(path) == 0o666 & ~umask, name
            path.chmod(0o640)
            write(path)
            assert mode(path) == 0o640, name
        with open(tmp_path / "plain", "w"):
            pass
        fresh = tmp_path / "fresh.bin"
        atomic_write_bytes(fresh, b"y")
        assert mode(fresh) == mode(tmp_path / "plain")  # exactly what open() gives
    finally:
        os.umask(previous)
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_output_that_is_an_input_is_refused_naming_both(tmp_path):
    text = tmp_path / "sents.txt"
    text.write_text("a b\n")
    with pytest.raises(ElmoError, match=f"output_file {text} is the same file as input_file {text}"):
        refuse_overwriting_inputs({"input_file": text}, {"output_file": text})
    same = tmp_path / "sub" / ".." / "sents.txt"  # another spelling of the same path
    with pytest.raises(ElmoError, match="is the same file as input_file"):
        refuse_overwriting_inputs({"input_file": str(text)}, {"output_file": str(same)})
    link = tmp_path / "link.txt"
    link.symlink_to(text)
    with pytest.raises(ElmoError, match=f"output_file {text} is the same file as input_file {link}"):
        refuse_overwriting_inputs({"input_file": link}, {"output_file": text})  # the input behind a symlink
    hard = tmp_path / "hard.txt"
    os.link(text, hard)
    with pytest.raises(ElmoError, match=f"--weight-file {hard} is the same file as input_file {text}"):
        refuse_overwriting_inputs({"input_file": text, "--options-file": None}, {"--weight-file": hard})
    refuse_overwriting_inputs({"input_file": text, "--bilm": None}, {"output_file": tmp_path / "out.hdf5", "x": None})
    assert text.read_text() == "a b\n"


def test_remove_file_also_removes_what_a_killed_atomic_write_left(tmp_path):
    """A process killed inside an atomic write leaves its temporary file beside the target: removing the target
    (a finished run's checkpoint, a child's result file) removes that too, and nothing else."""
    import signal
    import subprocess
    import sys
    import time

    from elmo.artifacts import remove_file

    target = tmp_path / "x.pt"
    code = ("import sys, time; from elmo.artifacts import atomic_write; "
            "atomic_write(sys.argv[1], lambda h: (h.write(b'half'), h.flush(), time.sleep(60)))")
    writer = subprocess.Popen([sys.executable, "-c", code, str(target)])
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".x.pt.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert len(list(tmp_path.glob(".x.pt.*.tmp"))) == 1 and not target.exists()
    target.write_bytes(b"old")
    others = [tmp_path / ".y.pt.0123abcd.tmp", tmp_path / ".x.pt.not-hex.tmp", tmp_path / "x.pt.log"]
    for other in others:
        other.write_bytes(b"")
    remove_file(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in others)
    remove_file(tmp_path / "absent" / "z.pt")  # nothing there: nothing to do


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path, umask):
    """``atomic_folder``: the new folder takes the old one's place only once it is complete (the old one's files
    gone with it); an error while writing leaves the old folder as it was; no temporary folder is left either way,
    and a new folder gets 0o777 less the umask."""
    folder = tmp_path / "models" / "bilm"
    previous = os.umask(umask)
    try:
        with atomic_folder(folder) as new:
            (new / "config.json").write_text("first")
            assert not folder.exists()  # nothing visible before the block ends
        assert mode(folder) == 0o777 & ~umask and (folder / "config.json").read_text() == "first"
        (folder / "notes.txt").write_text("left by hand")
        with pytest.raises(RuntimeError), atomic_folder(folder) as new:
            (new / "config.json").write_text("second")
            raise RuntimeError("killed mid-write")
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "notes.txt"]
        assert (folder / "config.json").read_text() == "first"
        (folder.parent / ".bilm.0123abcd.tmp").mkdir()  # what a run killed mid-write left
        with atomic_folder(folder) as new:
            (new / "config.json").write_text("second")
        assert [p.name for p in folder.iterdir()] == ["config.json"] and (folder / "config.json").read_text() == "second"
    finally:
        os.umask(previous)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["bilm"]  # no .bilm.*.tmp left
    (tmp_path / "file").write_text("x")
    with pytest.raises(ElmoError, match="file is a file, not a folder"), atomic_folder(tmp_path / "file" / "bilm"):
        pass
