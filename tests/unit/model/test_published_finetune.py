"""The softmax a published biLM is fine-tuned with (elmo.model.published_finetune): the loaded biLM kept as it is, the
target counts and unigram biases, the token-layer rows, and the fitted scales that never do worse than the unigram
model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from published_reference import OPTIONS, WEIGHTS
from support import make_rows

from elmo.data.chars import batch_char_ids
from elmo.data.corpus import encode_corpus
from elmo.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabulary
from elmo.errors import ElmoError
from elmo.model.published_finetune import (
    init_softmax_from_token_layer,
    language_model_of,
    target_counts,
    unigram_log_probabilities,
    vocabulary_token_vectors,
)
from elmo.model.published_io import load_published_bilm


@pytest.fixture(scope="module")
def domain():
    docs = [row[2].split() for row in make_rows(120, seed=3)]
    return docs, Vocabulary.build(docs, min_freq=1)


def test_target_counts_count_each_word_once_per_direction_and_one_boundary_word_per_document():
    vocab = Vocabulary.build([["a", "b", "a"]], min_freq=1)
    counts = target_counts([["a", "b", "a"], ["a", "zzz"]], vocab)
    expected = np.zeros(len(vocab), dtype=np.int64)
    expected[vocab.stoi["a"]], expected[vocab.stoi["b"]], expected[UNK_ID] = 6, 2, 2
    expected[BOS_ID] = expected[EOS_ID] = 2
    assert counts.tolist() == expected.tolist()
    log_p = unigram_log_probabilities(counts)
    assert torch.allclose(log_p.exp().sum(), torch.tensor(1.0))  # add-one smoothed: a distribution over V
    assert math.isclose(float(log_p[PAD_ID]), math.log(1 / (counts.sum() + len(vocab))), rel_tol=1e-6)


def test_the_language_model_keeps_the_loaded_bilm_and_its_token_vectors_give_the_softmax_rows(domain):
    docs, vocab = domain
    bilm = load_published_bilm(OPTIONS, WEIGHTS)
    reference = {k: v.clone() for k, v in bilm.state_dict().items()}
    model = language_model_of(bilm, vocab_size=len(vocab), softmax="sampled", samples=20)
    assert model is bilm and all(torch.equal(v, reference[k]) for k, v in reference.items())
    assert all(p.is_contiguous() for p in model.parameters())
    vectors = vocabulary_token_vectors(bilm, vocab)
    assert vectors.shape == (len(vocab), bilm.config.output_size)
    words = vocab.itos[4:9]
    chars = batch_char_ids([words], 50, "bilm_tf")[0]
    assert torch.allclose(vectors[4:9], bilm.token_vectors(chars), atol=1e-6)
    assert not vectors[PAD_ID].any() and not vectors[UNK_ID].any() and vectors[BOS_ID].abs().sum() > 0


def test_token_layer_initialisation_is_at_least_as_good_as_the_unigram_model_on_its_sample(domain):
    docs, vocab = domain
    model = language_model_of(load_published_bilm(OPTIONS, WEIGHTS),
                              vocab_size=len(vocab), softmax="sampled", samples=20)
    sample = encode_corpus(docs[:40], vocab, max_chars=50, char_scheme="bilm_tf")
    info = init_softmax_from_token_layer(model, vocab, target_counts(docs, vocab), sample)
    assert info["method"] == "token-layer" and info["sample_positions"] == 2 * 256
    assert info["sample_perplexity"] <= info["unigram_sample_perplexity"]
    vectors = vocabulary_token_vectors(model, vocab)
    assert torch.allclose(model.softmax.weight, info["alpha"] * vectors)
    log_prior = unigram_log_probabilities(target_counts(docs, vocab))
    assert torch.allclose(model.softmax.bias, info["beta"] * log_prior)


def test_token_layer_initialisation_needs_a_softmax_with_per_word_rows_and_biases(domain):
    docs, vocab = domain
    model = language_model_of(load_published_bilm(OPTIONS, WEIGHTS), vocab_size=len(vocab),
                              softmax="adaptive", cutoffs=(20,))
    sample = encode_corpus(docs[:4], vocab, max_chars=50, char_scheme="bilm_tf")
    with pytest.raises(ElmoError, match="softmax_init") as error:
        init_softmax_from_token_layer(model, vocab, target_counts(docs, vocab), sample)
    assert error.value.field == "FinetuneArgs.softmax_init"
