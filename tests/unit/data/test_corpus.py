"""Encoded corpora (elmo.data.corpus): flat storage, right-padded batches, the spelling of OOV words."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.data.chars import word_char_ids
from elmo.data.corpus import EncodedCorpus, encode_corpus
from elmo.data.vocab import SPECIALS, UNK_ID, Vocabulary
from elmo.errors import ElmoError

WORDS = list(SPECIALS) + [f"w{i}" for i in range(10)]


def test_collate_pads_right_with_zero():
    corpus = EncodedCorpus([[5, 6, 7], [8]], labels=np.array([1, 3]))
    batch = corpus.collate([1, 0])
    assert batch["ids"].tolist() == [[8, 0, 0], [5, 6, 7]]
    assert batch["lengths"].tolist() == [1, 3] and batch["labels"].tolist() == [3, 1]
    assert corpus.num_tokens == 4 and len(corpus) == 2


def test_max_length_truncates_and_empty_documents_are_refused():
    corpus = EncodedCorpus([[5, 6, 7, 8], [9]], max_length=2)
    assert corpus.lengths.tolist() == [2, 1] and corpus.collate([0])["ids"].tolist() == [[5, 6]]
    with pytest.raises(ElmoError, match="empty document"):
        EncodedCorpus([[5], []])


def test_encoded_corpus_keeps_the_spelling_of_oov_words():
    docs = [["w1", "zebra", "w2"], ["quokka"]]
    vocab = Vocabulary(WORDS)
    corpus = EncodedCorpus((vocab.encode(d) for d in docs), max_length=2).attach_chars(docs, 6)
    batch = corpus.collate([0, 1])
    assert batch["ids"].tolist() == [[5, UNK_ID], [UNK_ID, 0]]
    assert batch["chars"].shape == (2, 2, 6)
    assert batch["chars"][0, 1].tolist() == word_char_ids("zebra", 6)
    assert batch["chars"][1, 0].tolist() == word_char_ids("quokka", 6)
    assert batch["chars"][1, 1].tolist() == [0] * 6
    with pytest.raises(ElmoError, match="does not match"):
        EncodedCorpus([[5, 6]]).attach_chars([["w1"]], 6)
    assert encode_corpus(docs, vocab, max_length=2, max_chars=6).collate([0, 1])["chars"].tolist() == batch["chars"].tolist()


def test_attached_layers_come_back_per_token_with_zero_padding():
    corpus = EncodedCorpus([[5, 6, 7], [8]])
    layers = torch.arange(4 * 2 * 3, dtype=torch.float32).reshape(4, 2, 3) + 1  # (tokens, L, D)
    batch = corpus.attach_layers(layers).collate([1, 0])
    assert batch["layers"].shape == (2, 2, 3, 3)  # (L, B, T, D)
    torch.testing.assert_close(batch["layers"][:, 0, 0], layers[3])  # document 1's only token
    torch.testing.assert_close(batch["layers"][:, 1].permute(1, 0, 2), layers[:3])
    assert not batch["layers"][:, 0, 1:].any()
    with pytest.raises(ElmoError, match="attach_layers"):
        EncodedCorpus([[5, 6, 7], [8]]).attach_layers(layers[:3])
