"""Long documents through ElmoEmbedder (docs/published_elmo.md, "Long documents"): a sentence longer than
``chunk_size`` is computed in chunks with the LSTM states carried across, and gets the vectors of one pass, on the
published biLM (tests/fixtures/bilm_tf; stateless and stateful) and on our own (word and character biLM)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from published_reference import FIXTURES, OPTIONS, TOLERANCE, WEIGHTS, reference_batches, reference_top

from elmo import ElmoEmbedder, ElmoError
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import CHUNK_SIZE, BiLM
from elmo.model.bilm_config import BiLMConfig

#: chunked and one-pass vectors agree to float rounding (the products of a chunk have fewer rows, which BLAS may
#: round differently by an ulp or two)
EXACT = 1e-6


def fixture_words() -> list[str]:
    return (FIXTURES / "vocab_test.txt").read_text(encoding="utf-8").strip().split("\n")


def long_sentence(words: list[str], length: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [words[i] for i in rng.integers(0, len(words), length)]


def test_a_long_sentence_on_the_published_biLM_gets_the_vectors_of_one_pass():
    whole = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", chunk_size=None)
    chunked = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", chunk_size=37)
    assert chunked.bilm.chunk_size == 37 and whole.bilm.chunk_size is None
    sentence = long_sentence(fixture_words(), 250)  # 252 LSTM steps: 7 chunks, the last a partial one
    a, b = whole.embed_sentence(sentence), chunked.embed_sentence(sentence)
    assert a.shape == b.shape == (3, 250, 32)
    assert np.abs(a - b).max() <= EXACT
    short = reference_batches()[0][0]  # 50 words, 52 steps: shorter than a chunk of 64, so the one-pass path
    roomy = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", chunk_size=64)
    assert np.array_equal(whole.embed_sentence(short), roomy.embed_sentence(short))
    batch = [sentence[:100], short, sentence[:60]]  # several rows, each cut at the same steps
    for x, y in zip(whole.embed_batch(batch), chunked.embed_batch(batch)):
        assert np.abs(x - y).max() <= EXACT


def test_stateful_in_chunks_still_reproduces_the_reference_batches():
    stateful = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", stateful=True, chunk_size=4)
    for i, batch in enumerate(reference_batches()):  # rows of up to 14 + 2 steps: chunks of 1 step (3 rows, 4 positions)
        assert np.abs(stateful.embed_batch(batch)[0][2] - reference_top(i)).max() < TOLERANCE, f"batch {i}"


@pytest.mark.parametrize("variant", ["word", "char"])
def test_a_long_sentence_on_our_biLM_gets_the_vectors_of_one_pass(variant):
    words = list(SPECIALS) + sorted({w.lower() for w in fixture_words() if w.isalpha()})[:60]
    options = {"token_encoder": "char", "char_filters": ((1, 4), (2, 4)), "max_chars": 8} if variant == "char" else {}
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=8, hidden_size=8, cutoffs=(20,), dropout=0.0, **options))
    vocab = Vocabulary(words)
    sentence = long_sentence(words[4:] + ["unseen", "words"], 301)
    whole = ElmoEmbedder(bilm=bilm, vocab=vocab, device="cpu", chunk_size=None).embed_sentence(sentence)
    chunked = ElmoEmbedder(bilm=bilm, vocab=vocab, device="cpu", chunk_size=50).embed_sentence(sentence)
    assert whole.shape == chunked.shape == (3, 301, 16)
    assert np.abs(whole - chunked).max() <= EXACT


def test_the_default_chunk_size_and_bad_values():
    embedder = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu")
    assert embedder.bilm.chunk_size == CHUNK_SIZE
    for bad in (0, -1, 2.5, True, "64"):
        with pytest.raises(ElmoError, match="chunk_size must be a positive number of tokens or None"):
            ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", chunk_size=bad)
