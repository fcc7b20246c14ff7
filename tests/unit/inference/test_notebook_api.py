"""The notebook API ElmoEmbedder on our biLM (elmo.inference.embedder): shapes, padding invariance, order, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo import ElmoEmbedder, ElmoError
from elmo.data.text import tokenize
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.serialization import save_bilm

WORDS = list(SPECIALS) + ["the", "market", "rallied", "on", "friday", "team", "won", "match", "."]


def tiny_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": len(WORDS), "embedding_dim": 8, "hidden_size": 8, "cutoffs": (6,), "dropout": 0.0}
    return BiLM(BiLMConfig(**(sizes | options))).eval()


@pytest.fixture(params=["word", "char"])
def embedder(request, tmp_path) -> ElmoEmbedder:
    options = {"token_encoder": "char", "char_filters": ((1, 4), (2, 4)), "max_chars": 8} if request.param == "char" else {}
    save_bilm(tiny_bilm(**options), Vocabulary(WORDS), tmp_path / "bilstm.pt", {})
    return ElmoEmbedder.from_pretrained(tmp_path, device="cpu")


def test_embed_sentence_gives_every_layer_for_every_token(embedder):
    tokens = embedder.tokenize("The market rallied on Friday.")
    assert tokens == tokenize("The market rallied on Friday.") == ["the", "market", "rallied", "on", "friday", "."]
    vectors = embedder.embed_sentence(tokens)
    assert vectors.shape == (3, 6, 16) and vectors.dtype == np.float32
    assert embedder.num_layers == 3 and embedder.dim == 16
    # upper-case tokens are lower-cased as in training
    assert np.array_equal(embedder.embed_sentence(["The", "MARKET"]), embedder.embed_sentence(["the", "market"]))


def test_vectors_do_not_depend_on_the_rest_of_the_batch(embedder):
    short = ["the", "team", "won"]
    others = [["the", "market", "rallied", "on", "friday", "and", "the", "team", "won", "the", "match"], ["."]]
    alone = embedder.embed_sentence(short)
    batched = embedder.embed_batch([others[0], short, others[1]])
    assert [b.shape[1] for b in batched] == [11, 3, 1]
    np.testing.assert_allclose(batched[1], alone, atol=1e-5)


def test_embed_sentences_is_lazy_ordered_and_equals_one_at_a_time(embedder):
    sentences = [["the"] * n + ["match"] for n in (5, 1, 3, 0, 2, 7)]
    sentences[3] = []
    iterator = embedder.embed_sentences(iter(sentences), batch_size=2)
    assert not isinstance(iterator, list)
    got = list(iterator)
    assert [g.shape[1] for g in got] == [len(s) for s in sentences]
    for g, s in zip(got, sentences):
        np.testing.assert_allclose(g, embedder.embed_sentence(s), atol=1e-5)
    assert got[3].shape == (3, 0, 16)  # an empty sentence gives an empty array, not an error


def test_embedder_rejects_bad_input_with_a_clear_error(embedder, tmp_path):
    with pytest.raises(ElmoError, match="tokenize it first"):
        embedder.embed_batch("the market")
    with pytest.raises(ElmoError, match="sentence 1"):
        embedder.embed_batch([["the"], ["market", 3]])
    with pytest.raises(ElmoError, match="batch_size"):
        next(embedder.embed_sentences([["the"]], batch_size=0))
    with pytest.raises(ElmoError, match="python ELMO.py"):
        ElmoEmbedder.from_pretrained(tmp_path / "nowhere")


def test_char_embedder_tells_oov_words_apart(tmp_path):
    save_bilm(tiny_bilm(token_encoder="char", char_filters=((1, 4), (2, 4)), max_chars=8), Vocabulary(WORDS),
              tmp_path / "bilstm.pt", {})
    e = ElmoEmbedder.from_pretrained(tmp_path / "bilstm.pt", device="cpu")
    a, b = e.embed_sentence(["the", "zebra"]), e.embed_sentence(["the", "quokka"])
    assert not np.allclose(a[:, 1], b[:, 1])  # both OOV, different spellings, different vectors
    np.testing.assert_allclose(a[:, 0, :8], b[:, 0, :8], atol=1e-6)  # forward state of "the" cannot see them


def test_a_very_long_sentence_is_embedded_whole(embedder):
    vectors = embedder.embed_sentence(["the", "market", "rallied"] * 1000)
    assert vectors.shape == (3, 3000, embedder.dim) and np.isfinite(vectors).all()
