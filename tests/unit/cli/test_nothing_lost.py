"""Nothing is ever lost, through the command line in process (elmo.cli.main, and lab.cli.main for the lab's
commands): no command writes over one of its own inputs (same path, a symbolic or hard link to it), an output under
a file says so, binary input to ``embed`` names its line (counted from 1), Ctrl-C during ``embed`` says what
happened to the output, not training's checkpoints, and Ctrl-C during the study that its finished parts are kept. Each refusal: exit status 2 (130 for Ctrl-C), one line, no traceback, the inputs byte-identical."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from published_reference import OPTIONS, WEIGHTS

import elmo.pipelines.embedding as embedding
import lab.study
from elmo.cli import ctrl_c_message, main
from lab import cli as lab_cli

PUBLISHED = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS)]


@pytest.fixture(autouse=True)
def keep_threads():
    """``embed`` sets torch's thread count for the process; put it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def refused(capsys, argv: list[str], *inputs: Path, code: int = 2, program=main) -> str:
    """Run ``python -m elmo argv`` (``program=lab_cli.main``: ``python -m lab argv``); check the exit status, one
    message line and no traceback, and that every file of ``inputs`` is byte-identical afterwards; returns stderr."""
    before = {p: p.read_bytes() for p in inputs}
    assert program(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for p in inputs} == before
    return err


@pytest.fixture
def sentences(tmp_path) -> Path:
    path = tmp_path / "sents.txt"
    path.write_text("the cat sat\na dog ran\n", encoding="utf-8")
    return path


def test_embed_refuses_to_write_over_its_input_text(capsys, sentences):
    err = refused(capsys, ["embed", str(sentences), str(sentences), "--top", *PUBLISHED], sentences)
    assert f"out {sentences} is the same file as input_file {sentences}" in err


def test_embed_refuses_to_write_over_its_weights(capsys, sentences, tmp_path):
    weights = tmp_path / "w.hdf5"
    shutil.copy(WEIGHTS, weights)
    err = refused(capsys, ["embed", str(sentences), str(weights), "--all", "--options-file", str(OPTIONS),
                           "--weight-file", str(weights)], weights, sentences)
    assert f"out {weights} is the same file as --weight-file {weights}" in err


def test_embed_catches_a_symbolic_or_hard_link_to_its_input(capsys, sentences, tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(sentences)
    err = refused(capsys, ["embed", str(link), str(sentences), "--top", *PUBLISHED], sentences)
    assert f"is the same file as input_file {link}" in err
    hard = tmp_path / "hard.txt"
    os.link(sentences, hard)
    err = refused(capsys, ["embed", str(sentences), str(hard), "--top", *PUBLISHED], sentences)
    assert f"out {hard} is the same file as input_file {sentences}" in err
    err = refused(capsys, ["embed", str(sentences), str(tmp_path / "sub" / ".." / "sents.txt"), "--top", *PUBLISHED],
                  sentences)
    assert "is the same file as input_file" in err


def test_training_commands_refuse_an_input_among_their_outputs(capsys, tmp_path, tiny_agnews):
    models = tmp_path / "models"
    models.mkdir()
    text = models / "bilstm.pt"  # a corpus the user keeps where pretrain writes the biLM
    text.write_text("a line of text\n", encoding="utf-8")
    folders = ["--models-dir", str(models), "--results-dir", str(tmp_path / "results"), "--images-dir",
               str(tmp_path / "images")]
    err = refused(capsys, ["pretrain", "--train-file", str(text), *folders], text)
    assert f"--models-dir (bilstm.pt) {text} is the same file as --train-file {text}" in err
    data_copy = tmp_path / "results" / "lm.json"  # AG News read from where lm.json goes
    data_copy.parent.mkdir()
    os.link(tiny_agnews / "train.csv", data_copy)
    err = refused(capsys, ["pretrain", "--data-dir", str(tiny_agnews), *folders], tiny_agnews / "train.csv")
    assert f"--results-dir (lm.json) {data_copy} is the same file as --data-dir (train.csv)" in err
    weights = models / "classifier.pt"
    shutil.copy(WEIGHTS, weights)
    err = refused(capsys, ["classify", "--data-dir", str(tiny_agnews), "--options-file", str(OPTIONS),
                           "--weight-file", str(weights), *folders], weights)
    assert f"--models-dir (classifier.pt) {weights} is the same file as --weight-file {weights}" in err
    assert not (tmp_path / "images").exists()  # refused before any folder was made


def test_report_and_study_refuse_an_output_that_is_an_input(capsys, tmp_path, tiny_agnews):
    results = tmp_path / "results"
    results.mkdir()
    for name in ("lm", "classification", "baselines"):
        (results / f"{name}.json").write_text("{}")
    err = refused(capsys, ["report", "--results-dir", str(results), "--images-dir", str(tmp_path / "images"),
                           "--out", str(results / "lm.json")], results / "lm.json", program=lab_cli.main)
    assert f"--out {results / 'lm.json'} is the same file as --results-dir (lm.json)" in err
    test_csv = tiny_agnews / "test.csv"
    err = refused(capsys, ["study", "--data-dir", str(tiny_agnews), "--runs-dir", str(tmp_path / "study"),
                           "--out", str(test_csv)], test_csv, program=lab_cli.main)
    assert f"--out {test_csv} is the same file as --data-dir (test.csv)" in err


def test_an_output_under_a_file_names_the_file_and_the_flag(capsys, sentences, tmp_path, tiny_agnews):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    err = refused(capsys, ["embed", str(sentences), str(blocker / "out.hdf5"), "--top", *PUBLISHED, "--quiet",
                           "--threads", "1"], blocker)
    assert f"{blocker} is a file, not a folder (in out {blocker / 'out.hdf5'})" in err
    assert "File exists" not in err and "Not a directory" not in err
    err = refused(capsys, ["pretrain", "--data-dir", str(tiny_agnews), "--models-dir", str(blocker / "models"),
                           "--results-dir", str(tmp_path / "r"), "--images-dir", str(tmp_path / "i"), "--threads",
                           "1"], blocker)
    assert f"{blocker} is a file, not a folder (in --models-dir {blocker / 'models'})" in err


@pytest.mark.parametrize("content, line", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8", 1),
    ("a fine sentence number {}\n" * 2000 + "caf\xe9 latin-1\n", 2001),  # past text mode's first read-ahead
])
def test_binary_input_to_embed_names_its_line_counted_from_1(capsys, tmp_path, content, line):
    path = tmp_path / "in.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("latin-1"))
    err = refused(capsys, ["embed", str(path), str(tmp_path / "out.hdf5"), "--top", *PUBLISHED, "--threads", "1"],
                  path)
    assert f"{path} line {line} is not UTF-8 text" in err and "line 0" not in err
    assert not (tmp_path / "out.hdf5").exists()


@pytest.mark.parametrize("existed", [False, True])
def test_ctrl_c_during_embed_says_the_output_was_not_written(capsys, monkeypatch, sentences, tmp_path, existed):
    out = tmp_path / "out.hdf5"
    if existed:
        out.write_bytes(b"an earlier output")

    def interrupted(embedder, config, total, handle):
        handle.create_dataset("0", data=[1.0])  # half-way
        raise KeyboardInterrupt

    monkeypatch.setattr(embedding, "write_embeddings", interrupted)
    err = refused(capsys, ["embed", str(sentences), str(out), "--top", *PUBLISHED, "--threads", "1"], sentences,
                  *([out] if existed else []), code=130)
    kept = "left as it was" if existed else "not written"
    assert f"embedding {sentences} was interrupted by Ctrl-C; {out} was {kept}" in err
    assert "--resume" not in err and "checkpoint" not in err
    assert out.exists() == existed and not list(tmp_path.glob(".*.tmp"))


def test_ctrl_c_messages_speak_of_the_command_that_ran():
    assert "--resume" in ctrl_c_message("pretrain") and "checkpoints" in ctrl_c_message("classify")
    for command in ("embed", "predict", "fetch"):
        assert "--resume" not in ctrl_c_message(command) and command in ctrl_c_message(command)
    for command in ("report", "bench", "bench-scale"):  # the lab's commands other than the study write nothing half
        assert lab_cli.ctrl_c_message(command) == ctrl_c_message(command) and "--resume" not in ctrl_c_message(command)
    assert "finished parts are kept" in lab_cli.ctrl_c_message("study")


def test_ctrl_c_during_the_study_says_its_finished_parts_are_kept(capsys, monkeypatch, tmp_path, tiny_agnews):
    def interrupted(config, parts, say=print):
        raise KeyboardInterrupt

    monkeypatch.setattr(lab.study, "run_parts", interrupted)
    err = refused(capsys, ["study", "--data-dir", str(tiny_agnews), "--runs-dir", str(tmp_path / "study"),
                           "--out", str(tmp_path / "seeds.json")], tiny_agnews / "train.csv", code=130,
                  program=lab_cli.main)
    assert err.strip() == ("stopped: study interrupted by Ctrl-C; its finished parts are kept: run the same command "
                           "to do the rest")
    assert not (tmp_path / "seeds.json").exists()
