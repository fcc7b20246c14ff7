"""Your own corpus: streamed text and CSV sources, bounded buffers, no lost tokens, ELMO.py --train-file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import make_rows
from test_pipeline import run

from elmo.data.stream import StreamedCorpus, TextSource
from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError


def write_text(path: Path, lines: list[str], newline: str = "\n", bom: bool = False) -> Path:
    path.write_bytes(((b"\xef\xbb\xbf" if bom else b"") + newline.join(lines).encode("utf-8") + newline.encode()))
    return path


def corpus_lines(n: int = 300, seed: int = 3) -> list[str]:
    return [r[2] for r in make_rows(n, seed)]


def test_text_source_skips_blank_lines_reads_bom_and_crlf_and_names_a_bad_line(tmp_path):
    path = write_text(tmp_path / "c.txt", ["First line.", "", "   ", "Second <br> line"], "\r\n", bom=True)
    source = TextSource(path)
    assert [n for n, _ in source.texts()] == [1, 4]
    assert list(source.documents()) == [["first", "line", "."], ["second", "line"]]
    (tmp_path / "bad.txt").write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(ElmoError, match=r"bad\.txt line 3: not UTF-8"):
        list(TextSource(tmp_path / "bad.txt").documents())
    with pytest.raises(ElmoError, match="file not found"):
        TextSource(tmp_path / "missing.txt")


def test_csv_source_reads_the_named_column_and_refuses_a_missing_one(tmp_path):
    path = tmp_path / "c.csv"
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([["id", "body"], [1, "Hello, world"], [2, 'A "quoted"\nmulti-line text']])
    assert list(TextSource(path, "body").documents()) == [tokenize("Hello, world"), tokenize('A "quoted"\nmulti-line text')]
    with pytest.raises(ElmoError, match=r"no column 'text' \(--text-column\); its header has \['id', 'body'\]"):
        TextSource(path, "text")


def test_held_out_lines_and_training_lines_partition_the_file(tmp_path):
    lines = [f"line number {i}" for i in range(500)]
    source = TextSource(write_text(tmp_path / "c.txt", lines))
    train = [" ".join(d) for d in source.documents("train", 0.1, seed=1)]
    val = [" ".join(d) for d in source.documents("val", 0.1, seed=1)]
    assert sorted(train + val) == sorted(lines) and not set(train) & set(val)
    assert 25 <= len(val) <= 75  # about 10%
    capped = [" ".join(d) for d in source.documents("val", 0.1, seed=1, max_val_docs=7)]
    assert capped == val[:7]  # the cap keeps the first held-out lines; the rest go back to training
    assert len(list(source.documents("train", 0.1, seed=1, max_val_docs=7))) == 500 - 7
    assert [" ".join(d) for d in source.documents("val", 0.1, seed=2)] != val  # the seed picks the lines


def test_an_epoch_streams_every_token_once_in_bounded_shuffled_buffers(tmp_path):
    lines = corpus_lines(400) + [" ".join(["word"] * 70)]  # one document longer than max_length
    source = TextSource(write_text(tmp_path / "c.txt", lines))
    vocab = Vocabulary.build(source.documents(), min_freq=1)
    stream = StreamedCorpus(source, vocab, max_length=32, buffer_tokens=500)
    buffers = list(stream.buffers())
    assert len(buffers) > 5 and all(b.num_tokens < 500 + 32 for b in buffers)  # bounded by the buffer size
    expected = sorted(t for d in source.documents() for t in vocab.encode(d))
    epochs = []
    for seed in (0, 1):
        batches = list(stream.epoch_batches(batch_size=8, max_tokens=128, seed=seed))
        assert all(b["ids"].numel() <= 128 and b["lengths"].max() <= 32 for b in batches)
        ids = [int(t) for b in batches for row, n in zip(b["ids"], b["lengths"]) for t in row[:n]]
        assert sorted(ids) == expected  # nothing lost, nothing repeated; the long document is split, not cut
        epochs.append([b["lengths"].tolist() for b in batches])
    assert epochs[0] != epochs[1]  # reshuffled every epoch
    assert sum(1 for _ in stream.eval_batches(64, 256)) > 0


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("own")
    lines = corpus_lines(300)
    write_text(root / "corpus.txt", lines[:260] + ["", "  "])
    write_text(root / "val.txt", lines[260:])
    with open(root / "corpus.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "body"])
        writer.writerows([i, t] for i, t in enumerate(lines[:260]))
    return root


OWN = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "2", "--quiet",
       "--stream-buffer", "800", "--precision", "fp32"]


def test_elmo_py_trains_on_a_text_file_and_on_the_same_text_as_a_csv_column(corpus_files, tmp_path):
    (tmp_path / "text").mkdir()
    text = run("ELMO.py", tmp_path / "text", corpus_files, "--train-file", str(corpus_files / "corpus.txt"),
               "--val-file", str(corpus_files / "val.txt"), *OWN)
    assert text.returncode == 0, text.stderr
    (tmp_path / "csv").mkdir()
    table = run("ELMO.py", tmp_path / "csv", corpus_files, "--train-file", str(corpus_files / "corpus.csv"),
                "--text-column", "body", "--val-file", str(corpus_files / "val.txt"), *OWN)
    assert table.returncode == 0, table.stderr
    a, b = (json.loads((tmp_path / r / "results" / "lm.json").read_text()) for r in ("text", "csv"))
    assert a["documents"]["train"] == 260 and a["train_tokens"] == sum(len(tokenize(t)) for t in corpus_lines(300)[:260])
    assert a["val"] == b["val"] and np.isfinite(a["val"]["forward_perplexity"])  # same text, same model
    assert a["test"] == {}  # no --test-file: val only
    for name in ("word2idx.pkl", "forward.pt", "backward.pt", "bilstm.pt"):
        assert (tmp_path / "text" / "models" / name).is_file()
    vocab = Vocabulary.load_pickle(tmp_path / "text" / "models" / "word2idx.pkl")
    assert "striker" in vocab.stoi  # built from the file, not from AG News


def test_own_corpus_flags_are_checked(corpus_files, tmp_path):
    bad = run("ELMO.py", tmp_path, corpus_files, "--val-file", str(corpus_files / "val.txt"), *OWN)
    assert bad.returncode == 2 and "--val-file goes with --train-file" in bad.stderr
    missing = run("ELMO.py", tmp_path, corpus_files, "--train-file", str(tmp_path / "nope.txt"), *OWN)
    assert missing.returncode == 2 and "nope.txt: file not found" in missing.stderr
    unnamed = run("ELMO.py", tmp_path, corpus_files, "--train-file", str(corpus_files / "corpus.csv"), *OWN)
    assert unnamed.returncode == 2 and "name the column holding the text with --text-column" in unnamed.stderr
