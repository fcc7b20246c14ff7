"""Static embeddings (PPMI + SVD, Word2Vec), the static-embedding classifier and --init-embeddings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from support import TOPIC_WORDS, make_rows

from elmo.data.corpus import EncodedCorpus
from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError
from elmo.model.classifier import StaticClassifierConfig, StaticEmbeddingClassifier
from elmo.model.static import cooccurrence_matrix, ppmi, svd_vectors, word2vec_vectors


def brute_force_counts(docs: list[list[int]], vocab_size: int, window: int) -> np.ndarray:
    counts = np.zeros((vocab_size, vocab_size))
    for doc in docs:
        for i, j in itertools.permutations(range(len(doc)), 2):
            if abs(i - j) <= window:
                counts[doc[i], doc[j]] += 1
    return counts


@pytest.mark.parametrize("window", [1, 2, 4])
def test_cooccurrence_counts_match_brute_force_and_stay_inside_documents(window):
    docs = [[4, 5, 6, 4], [6, 7], [5], [7, 4, 4, 5, 6]]
    counts = cooccurrence_matrix(EncodedCorpus(docs), 8, window)
    assert counts.format == "csr"
    np.testing.assert_array_equal(counts.toarray(), brute_force_counts(docs, 8, window))
    assert (counts.toarray() == counts.toarray().T).all()


def test_no_pair_crosses_a_document_boundary():
    counts = cooccurrence_matrix(EncodedCorpus([[4, 5], [6, 7]]), 8, window=3).toarray()
    assert counts[5, 6] == 0 and counts[4, 7] == 0 and counts[4, 5] == 1


def test_ppmi_matches_the_formula_on_a_dense_copy():
    docs = [[4, 5, 6, 4, 7], [6, 7, 5, 5], [4, 6, 6, 7, 4, 5]]
    counts = cooccurrence_matrix(EncodedCorpus(docs), 8, 2)
    dense = counts.toarray()
    total = dense.sum()
    p_w = dense.sum(1) / total
    p_c = dense.sum(0) ** 0.75 / (dense.sum(0) ** 0.75).sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.maximum(np.log((dense / total) / (p_w[:, None] * p_c[None, :])), 0)
    expected = np.nan_to_num(expected, nan=0.0, posinf=0.0, neginf=0.0)
    result = ppmi(counts, alpha=0.75)
    np.testing.assert_allclose(result.toarray(), expected, rtol=1e-12, atol=1e-12)
    assert (result.data > 0).all()  # only positive cells are stored


def test_bad_sizes_raise_the_project_error():
    corpus = EncodedCorpus([[4, 5, 6]])
    with pytest.raises(ElmoError, match="window must be >= 1"):
        cooccurrence_matrix(corpus, 8, window=0)
    with pytest.raises(ElmoError, match="alpha"):
        ppmi(cooccurrence_matrix(corpus, 8), alpha=0.0)
    with pytest.raises(ElmoError, match="empty"):
        ppmi(cooccurrence_matrix(EncodedCorpus([[4], [5]]), 8))
    with pytest.raises(ElmoError, match="SVD dimension"):
        svd_vectors(corpus, 8, dim=8)


@pytest.fixture(scope="module")
def toy():
    """Tokenised toy topics: words of one topic share contexts, words of different topics do not."""
    tokens = [tokenize(r[2]) for r in make_rows(800, seed=3)]
    vocab = Vocabulary.build(tokens, min_freq=2)
    return tokens, vocab


def topic_cosines(vectors: np.ndarray, vocab: Vocabulary) -> tuple[float, float]:
    """Mean cosine between words of the same topic and between words of different topics."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)
    ids = [[vocab.stoi[w] for w in words] for words in TOPIC_WORDS]
    same = [unit[a] @ unit[b] for group in ids for a, b in itertools.combinations(group, 2)]
    cross = [unit[a] @ unit[b] for g1, g2 in itertools.combinations(ids, 2) for a in g1 for b in g2]
    return float(np.mean(same)), float(np.mean(cross))


@pytest.mark.parametrize("method", ["svd", "word2vec"])
def test_static_vectors_separate_the_topics_and_repeat_with_a_seed(toy, method):
    tokens, vocab = toy
    if method == "svd":
        make = lambda: svd_vectors(EncodedCorpus(vocab.encode(t) for t in tokens), len(vocab), dim=8, seed=0)  # noqa: E731
    else:
        make = lambda: word2vec_vectors(tokens, vocab, dim=16, window=5, epochs=10, subsample=0, seed=0)  # noqa: E731
    vectors, info = make()
    assert vectors.shape[0] == len(vocab) and vectors.dtype == np.float32
    assert not vectors[0].any()  # <pad>
    assert vectors[1:].std() == pytest.approx(1.0, rel=1e-4)
    same, cross = topic_cosines(vectors, vocab)
    assert same > cross + 0.1, (same, cross)
    np.testing.assert_array_equal(make()[0], vectors)
    assert info["method"] == method and isinstance(info["seconds"], float)  # measured, not compared


def test_static_classifier_trains_its_head_but_never_its_embedding():
    vectors = torch.randn(12, 5)
    vectors[0] = 0
    model = StaticEmbeddingClassifier(vectors, StaticClassifierConfig(vectors="word2vec", encoder_hidden=4,
                                                                      token_embedding_dim=3))
    ids = torch.tensor([[4, 5, 6], [7, 8, 0]])
    logits = model(ids, torch.tensor([3, 2]))
    assert logits.shape == (2, 4)
    logits.sum().backward()
    assert model.embedding.weight.grad is None and not model.embedding.weight.requires_grad
    assert model.token_embedding.weight.grad is not None and model.head.weight.grad is not None
    torch.testing.assert_close(model.embedding.weight, vectors)


def test_word2vec_on_several_workers_still_separates_the_topics(toy):
    """What a GPU run trains its initial vectors with (StartedRun.word2vec_workers): all cores, same quality."""
    tokens, vocab = toy
    vectors, info = word2vec_vectors(tokens, vocab, dim=16, window=5, epochs=10, subsample=0, seed=0, workers=2)
    same, cross = topic_cosines(vectors, vocab)
    assert same > cross + 0.1 and info["workers"] == 2


def test_word2vec_trains_on_one_worker_on_a_cpu_and_on_every_thread_on_a_gpu():
    from elmo.pipelines.common import StartedRun

    def run(device: str) -> StartedRun:
        return StartedRun(ctx=None, device=torch.device(device), amp_dtype=None, threads=6, outputs=None, say=print)
    assert run("cpu").word2vec_workers == 1 and run("cuda").word2vec_workers == 6
