"""The text representations are learnt from (elmo.data.pretraining_text; --text-fraction, --extra-text): the draw,
the extra files' layouts, and what is dropped from them (held-out descriptions, repeats)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import SMALL, run_in_process, write_csv, write_tiny_agnews

from elmo.data.corpus import Corpus
from elmo.data.pretraining_text import pretraining_text, read_extra_text
from elmo.data.text import tokenize
from elmo.errors import ElmoError


def corpus(texts: list[str], labels: list[int] | None = None) -> Corpus:
    return Corpus(texts, [tokenize(t) for t in texts], np.asarray(labels or [0] * len(texts), dtype=np.int64))


def test_the_draw_is_a_seeded_share():
    train = corpus([f"document {i}" for i in range(1000)], list(range(1000)))  # label = index

    def text_draw(documents: Corpus, fraction: float, seed: int) -> np.ndarray:
        return pretraining_text(documents, [], fraction, seed)[0].labels

    drawn = text_draw(train, 0.25, seed=3)
    assert len(drawn) == 250 and np.array_equal(drawn, np.sort(drawn)) and len(set(drawn.tolist())) == 250
    assert np.array_equal(drawn, text_draw(train, 0.25, 3)) and not np.array_equal(drawn, text_draw(train, 0.25, 4))
    five = corpus(["a b"] * 5, list(range(5)))
    assert np.array_equal(text_draw(five, 1.0, 0), np.arange(5)) and len(text_draw(five, 0.01, 0)) == 1
    with pytest.raises(ElmoError, match="text_fraction"):
        text_draw(five, 0.0, 0)


def test_extra_files_in_either_layout_and_a_bad_one_named(tmp_path):
    joined = write_csv(tmp_path / "joined.csv", [("3", "Title one body text here", "zy")], ["class", "text", "format"])
    pairs = write_csv(tmp_path / "pairs.csv", [("A title", "a description")], ["title", "description"])
    assert read_extra_text(joined) == ["Title one body text here"]
    assert read_extra_text(pairs) == ["A title a description"]
    bad = write_csv(tmp_path / "bad.csv", [("x", "y")], ["a", "b"])
    with pytest.raises(ElmoError, match="bad.csv: expected a 'text' column"):
        read_extra_text(bad)
    with pytest.raises(ElmoError, match="missing.csv: file not found"):
        read_extra_text(tmp_path / "missing.csv")


def test_extra_rows_that_hold_a_held_out_description_or_repeat_are_dropped(tmp_path):
    train = corpus(["stocks rose sharply on monday after the report", "the team won its third straight game"], [2, 1])
    val = corpus(["rebels attacked the capital city overnight killing several"])
    test = corpus(["a new chip doubles the speed of laptops and phones"])
    rows = [("1", "Unrest grows Rebels attacked the capital city overnight killing several"),  # val, after a title
            ("4", "Chip newsA new chip doubles the speed of laptops and phones"),  # test, first word glued on
            ("2", "Victory The team won its third straight game"),  # a training description again
            ("3", "Markets calm investors waited for the central bank decision"),  # new
            ("3", "Markets calm investors waited for the central bank decision"),  # repeated
            ("1", "   ")]
    extra = write_csv(tmp_path / "extra.csv", [(label, text, "f") for label, text in rows], ["class", "text", "format"])
    text, stats = pretraining_text(train, [val, test], 1.0, 0, [extra])
    assert text.tokens[:2] == train.tokens and text.tokens[2] == tokenize(rows[3][1]) and len(text) == 3
    assert text.labels.tolist() == [2, 1, -1]  # extra text has no label
    assert stats == {"train_documents": 2, "extra": {str(extra): {"rows": 6, "kept": 1, "held_out": 2, "repeats": 2,
                                                                   "empty": 1}}}
    half, stats = pretraining_text(train, [val, test], 0.5, 0)
    assert len(half) == 1 and stats == {"train_documents": 1, "extra": {}}


def test_elmo_py_learns_from_a_share_plus_extra_text_and_records_it(tmp_path, capsys):
    data = write_tiny_agnews(tmp_path / "data")
    extra = write_csv(tmp_path / "extra.csv", [(f"Headline {i}", f"markets and teams said word{i} today")
                                               for i in range(30)], ["title", "description"])
    flags = [*SMALL, "--epochs", "1", "--max-docs", "120"]
    assert run_in_process("pretrain", tmp_path / "base", data, *flags) == 0
    assert run_in_process("pretrain", tmp_path / "more", data, *flags, "--text-fraction", "0.5",  # a lab flag
                          "--extra-text", str(extra), lab=True) == 0
    base, more = (json.loads((tmp_path / d / "results" / "lm.json").read_text()) for d in ("base", "more"))
    assert "pretraining_text" not in base or base["pretraining_text"]["extra"] == {}
    assert more["pretraining_text"]["train_documents"] == round(0.5 * base["documents"]["train"])
    assert more["pretraining_text"]["extra"][str(extra)]["kept"] == 30
    assert more["documents"]["train"] == more["pretraining_text"]["train_documents"] + 30
    assert more["documents"]["val"] == base["documents"]["val"] and more["documents"]["test"] == base["documents"]["test"]
    capsys.readouterr()
    assert run_in_process("pretrain", tmp_path / "bad", data, "--train-file", str(extra), "--text-fraction", "0.5",
                          lab=True) == 2
    assert "--text-fraction and --extra-text" in capsys.readouterr().err
