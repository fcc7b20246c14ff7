"""Your own corpus (elmo.data.stream): streamed text and CSV sources, bounded buffers, no lost tokens."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from support import make_rows

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
    with pytest.raises(ElmoError, match=r"no column 'text' \(text_column\); its header has \['id', 'body'\]"):
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
