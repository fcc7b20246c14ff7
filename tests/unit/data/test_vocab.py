"""Vocabulary building, encoding and safe pickle loading."""

from __future__ import annotations

import os
import pickle

import pytest

from elmo.data.vocab import SPECIALS, UNK_ID, Vocabulary
from elmo.errors import ElmoError

DOCS = [["b", "a", "b"], ["c", "b", "a"], ["d"]]


def test_build_orders_by_frequency_after_specials_with_min_freq_and_max_size():
    vocab = Vocabulary.build(DOCS, min_freq=1)
    assert vocab.itos == list(SPECIALS) + ["b", "a", "c", "d"]
    assert Vocabulary.build(DOCS, min_freq=2).itos == list(SPECIALS) + ["b", "a"]
    assert Vocabulary.build(DOCS, min_freq=1, max_size=1).itos == list(SPECIALS) + ["b"]
    assert vocab.stoi["<pad>"] == 0


def test_encode_maps_oov_to_unk_and_oov_rate():
    vocab = Vocabulary.build(DOCS, min_freq=2)
    assert vocab.encode(["a", "zebra", "b"]) == [vocab.stoi["a"], UNK_ID, vocab.stoi["b"]]
    assert vocab.decode(vocab.encode(["a", "b"])) == ["a", "b"]
    assert vocab.oov_rate([["a", "zebra"], ["q", "b"]]) == pytest.approx(0.5)


def test_bad_sizes_are_refused():
    with pytest.raises(ElmoError, match="min_freq"):
        Vocabulary.build(DOCS, min_freq=0)
    with pytest.raises(ElmoError, match="max_size"):
        Vocabulary.build(DOCS, max_size=0)


def test_pickle_round_trip_is_a_plain_dict(tmp_path):
    vocab = Vocabulary.build(DOCS, min_freq=1)
    vocab.save_pickle(tmp_path / "word2idx.pkl")
    with open(tmp_path / "word2idx.pkl", "rb") as handle:
        raw = pickle.load(handle)
    assert type(raw) is dict and raw == vocab.stoi
    assert Vocabulary.load_pickle(tmp_path / "word2idx.pkl") == vocab


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_crafted_pickle_is_refused_without_running_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"<pad>": 0, "x": _Exploit()}))
    with pytest.raises(ElmoError, match="refusing to unpickle"):
        Vocabulary.load_pickle(tmp_path / "evil.pkl")
    assert not (tmp_path / "pwned").exists()


def test_pickle_of_wrong_shape_or_missing_file(tmp_path):
    (tmp_path / "list.pkl").write_bytes(pickle.dumps(["<pad>", "<unk>"]))
    with pytest.raises(ElmoError, match="dict of str -> int"):
        Vocabulary.load_pickle(tmp_path / "list.pkl")
    with pytest.raises(ElmoError, match="not found"):
        Vocabulary.load_pickle(tmp_path / "missing.pkl")
