"""The scripts stop with exit status 2 and one clear line, before training, on bad input (in process, through
elmo.cli.run: the same code path as ``python ELMO.py``; one real subprocess run is in tests/integration)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from support import make_rows

from elmo.cli import run
from lab.study import merge_flags


def flags(out: Path, data: Path, *extra: str) -> list[str]:
    return merge_flags(["--data-dir", str(data), "--models-dir", str(out / "models"), "--results-dir",
                        str(out / "results"), "--images-dir", str(out / "images"), "--quiet"], extra)


def error_of(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_missing_inputs_exit_2_with_a_clear_message(tmp_path, tiny_agnews, capsys):
    assert run("classify", flags(tmp_path, tiny_agnews)) == 2
    assert "holds no biLM (no such file or folder): looked for bilstm.pt" in error_of(capsys)  # models/ not made
    assert run("pretrain", flags(tmp_path, tmp_path / "nowhere", "--no-download")) == 2
    err = error_of(capsys)
    assert "--no-download" in err and "python -m elmo fetch" in err
    assert run("pretrain", flags(tmp_path, tiny_agnews, "--max-docs", "0")) == 2
    assert "--max-docs" in error_of(capsys)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert run("pretrain", flags(tmp_path, tiny_agnews, "--results-dir", str(blocker / "results"))) == 2
    assert f"{blocker} is a file, not a folder (in --results-dir {blocker / 'results'})" in error_of(capsys)
    assert not (tmp_path / "models" / "bilstm.pt").exists()  # stopped before training, not after


@pytest.mark.parametrize("argv, message", [
    (["--epochs", "0"], "--epochs"),
    (["--val-fraction", "1.5"], "--val-fraction must be in (0, 1)"),
    (["--embedding-dim", "16", "--hidden-size", "32"], "embedding-dim"),
    (["--char-filters", "3x64"], "--char-filters expects width:count pairs"),
])
def test_bad_pretraining_flags_exit_2_naming_the_flag(tmp_path, tiny_agnews, capsys, argv, message):
    assert run("pretrain", flags(tmp_path, tiny_agnews, *argv)) == 2
    assert message in error_of(capsys)
    assert not (tmp_path / "models" / "bilstm.pt").exists()


@pytest.fixture
def corpus_files(tmp_path) -> Path:
    root = tmp_path / "own"
    root.mkdir()
    lines = [r[2] for r in make_rows(30, seed=3)]
    (root / "val.txt").write_text("\n".join(lines[20:]) + "\n", encoding="utf-8")
    with open(root / "corpus.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "body"])
        writer.writerows([i, t] for i, t in enumerate(lines[:20]))
    return root


def test_own_corpus_flags_are_checked(corpus_files, tmp_path, capsys):
    assert run("pretrain", flags(tmp_path, corpus_files, "--val-file", str(corpus_files / "val.txt"))) == 2
    assert "--val-file goes with --train-file" in error_of(capsys)
    assert run("pretrain", flags(tmp_path, corpus_files, "--train-file", str(tmp_path / "nope.txt"))) == 2
    assert "nope.txt: file not found" in error_of(capsys)
    assert run("pretrain", flags(tmp_path, corpus_files, "--train-file", str(corpus_files / "corpus.csv"))) == 2
    assert "name the column holding the text with --text-column" in error_of(capsys)
    assert run("pretrain", flags(tmp_path, corpus_files, "--train-file", str(corpus_files / "corpus.csv"),
                                 "--text-column", "text")) == 2
    assert "no column 'text' (--text-column); its header has ['id', 'body']" in error_of(capsys)
