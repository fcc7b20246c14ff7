"""The pre-training pipeline's pieces (elmo.pipelines.pretraining), in process."""

from __future__ import annotations

import pytest
import torch
from support import TOPIC_WORDS, make_rows

from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary
from elmo.model.bilm import BiLM, BiLMConfig
from elmo.model.static import word2vec_vectors
from elmo.pipelines.pretraining import PretrainArgs, init_embeddings


@pytest.fixture(scope="module")
def toy():
    """Tokenised toy topics: words of one topic share contexts, words of different topics do not."""
    tokens = [tokenize(r[2]) for r in make_rows(800, seed=3)]
    vocab = Vocabulary.build(tokens, min_freq=2)
    return tokens, vocab


def test_init_embeddings_copies_word2vec_into_both_language_models(toy):
    tokens, vocab = toy
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    bos_before = bilm.forward_lm.embedding.weight[2].clone()
    config = PretrainArgs(init_embeddings="word2vec", embedding_dim=8, hidden_size=8)
    info = init_embeddings(bilm, vocab, tokens, config, say=lambda *a: None)
    expected, _ = word2vec_vectors(tokens, vocab, dim=8, seed=0)
    word = vocab.stoi[TOPIC_WORDS[0][0]]
    for lm in (bilm.forward_lm, bilm.backward_lm):
        torch.testing.assert_close(lm.embedding.weight[word], torch.from_numpy(expected[word]))
        assert not lm.embedding.weight[0].any()  # <pad> stays zero
    torch.testing.assert_close(bilm.forward_lm.embedding.weight[2], bos_before)  # <bos> never occurs: kept
    assert info["method"] == "word2vec" and info["dim"] == 8
    untouched = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    none = PretrainArgs(init_embeddings="none")
    assert init_embeddings(untouched, vocab, tokens, none, say=lambda *a: None) == {"method": "none"}


def test_centered_word2vec_init_removes_the_shared_direction(toy):
    import numpy as np

    from elmo.model.static import center_vectors, common_direction_cosine

    tokens, vocab = toy
    raw, _ = word2vec_vectors(tokens, vocab, dim=8, seed=0)
    centered = center_vectors(raw)
    seen = np.abs(raw).sum(1) > 0
    assert np.array_equal(np.abs(centered).sum(1) > 0, seen)  # <pad> and unseen words stay zero
    assert np.allclose(centered[seen].mean(0), 0, atol=1e-5) and centered[seen].std() == pytest.approx(1, rel=0.1)  # standardize() counts the zero rows too
    assert common_direction_cosine(centered) < 0.05 < common_direction_cosine(raw + 3)  # a shared offset dominates
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    config = PretrainArgs(init_embeddings="word2vec-centered", embedding_dim=8, hidden_size=8)
    info = init_embeddings(bilm, vocab, tokens, config, say=lambda *a: None)
    assert info["centered"] and info["common_direction_cosine"] == pytest.approx(common_direction_cosine(raw))
    word = vocab.stoi[TOPIC_WORDS[0][0]]
    torch.testing.assert_close(bilm.backward_lm.embedding.weight[word], torch.from_numpy(centered[word]))
