"""Static (context-free) word embeddings the report compares ELMo with (docs/method.md): Word2Vec (Mikolov et al.
2013, :func:`word2vec_vectors`) and PPMI + SVD (Levy, Goldberg & Dagan 2015, :func:`svd_vectors`; no dense V×V matrix
is ever built), trained on exactly the biLM's training descriptions, tokeniser and
:class:`~elmo.data.vocab.Vocabulary`, so that static matrix row ``i`` and biLM input id ``i`` name the same word.
Every matrix returned here is ``(V, D)`` float32, row 0 (``<pad>``) zero, scaled to a global standard deviation of 1.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from ..data.corpus import EncodedCorpus
from ..data.vocab import PAD_ID, Vocabulary
from ..errors import ElmoError

STATIC_METHODS = ("word2vec", "svd")


def standardize(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (V, D) divided by their global standard deviation, with the ``<pad>`` row zeroed."""
    vectors = np.asarray(vectors, dtype=np.float32).copy()
    vectors[PAD_ID] = 0.0
    std = float(vectors[PAD_ID + 1:].std())
    return vectors / std if std > 0 else vectors


def _seen(vectors: np.ndarray) -> np.ndarray:
    """``(V,)`` bool: the rows of ``vectors`` that are not all zero (words the embedding method saw)."""
    return np.abs(vectors).sum(1) > 0


def common_direction_cosine(vectors: np.ndarray) -> float:
    """Mean cosine between each non-zero row of ``vectors`` (V, D) and the mean of those rows: near 0 for
    isotropic vectors, near 1 when one shared direction dominates every row."""
    rows = np.asarray(vectors, dtype=np.float64)[_seen(vectors)]
    mean = rows.mean(0)
    norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(mean)
    return float((rows @ mean / np.where(norms > 0, norms, 1.0)).mean())


def center_vectors(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (V, D) minus the mean of their non-zero rows, then :func:`standardize`d; all-zero rows
    (``<pad>``, unseen words) stay zero, so :func:`copy_vectors` still skips them."""
    vectors = np.asarray(vectors, dtype=np.float32).copy()
    seen = _seen(vectors)
    vectors[seen] -= vectors[seen].mean(0)
    return standardize(vectors)


def copy_vectors(embedding, vectors: np.ndarray) -> int:
    """Overwrite the rows of ``embedding`` (an ``nn.Embedding``, V × D) whose vector in ``vectors`` (V, D) is non-zero;
    zero rows (``<pad>``, unseen words) keep their values and the embedding stays trainable. Returns the rows copied."""
    import torch

    seen = torch.from_numpy(_seen(vectors))
    with torch.no_grad():
        embedding.weight[seen] = torch.from_numpy(vectors[seen.numpy()]).to(embedding.weight)
    return int(seen.sum())


def word2vec_vectors(sentences: Iterable[Sequence[str]], vocab: Vocabulary, dim: int = 300, window: int = 5,
                     epochs: int = 10, negative: int = 5, subsample: float = 1e-4,
                     seed: int = 0, workers: int = 1) -> tuple[np.ndarray, dict]:
    """Train skip-gram Word2Vec with negative sampling (gensim) and return one vector per vocabulary word: ``sentences``:
    token lists (the training descriptions, tokenised by :func:`elmo.data.text.tokenize`); ``vocab``: the biLM vocabulary
    (tokens outside it become ``<unk>`` before training); ``dim``: vector width D; ``window``: context words on each
    side; ``epochs``: passes over the corpus; ``negative``: negative samples per positive pair; ``subsample``: gensim's
    ``sample``, the frequency above which words are randomly down-sampled (0 = off); ``seed``: gensim's seed;
    ``workers``: gensim's threads (exactly repeatable only with 1). Returns ``(vectors (V, D) float32, info)``: specials
    absent from the corpus (``<pad>``, ``<bos>``, ``<eos>``) get a zero vector; ``info`` holds the settings and seconds.
    Raises ElmoError for a non-positive size or no tokens."""
    from gensim.models import (
        Word2Vec,  # imported here: only the baselines and --init-embeddings need it
    )

    if min(dim, window, epochs, negative) < 1:
        raise ElmoError(f"Word2Vec sizes must be positive, got dim={dim} window={window} epochs={epochs} "
                        f"negative={negative}")
    mapped = [vocab.decode(vocab.encode(tokens)) for tokens in sentences]
    mapped = [s for s in mapped if s]
    if not mapped:
        raise ElmoError("Word2Vec needs at least one non-empty training sentence")
    started = time.perf_counter()
    model = Word2Vec(sentences=mapped, vector_size=dim, window=window, min_count=1, sg=1, negative=negative,
                     epochs=epochs, workers=workers, seed=seed, sample=subsample)
    vectors = np.zeros((len(vocab), dim), dtype=np.float32)
    vectors[[vocab.stoi[word] for word in model.wv.index_to_key]] = model.wv.vectors
    info = {"method": "word2vec", "algorithm": "skip-gram, negative sampling (gensim)", "dim": dim, "workers": workers,
            "window": window, "epochs": epochs, "negative": negative, "subsample": subsample,
            "words_trained": len(model.wv.key_to_index), "seconds": time.perf_counter() - started}
    return standardize(vectors), info


def cooccurrence_matrix(corpus: EncodedCorpus, vocab_size: int, window: int = 5) -> sp.csr_matrix:
    """Symmetric word–context co-occurrence counts of ``corpus`` (encoded documents: flat ids + offsets) as a float64
    ``scipy.sparse.csr_matrix`` ``(V, V)`` (V = ``vocab_size``): tokens ``i`` and ``j`` of the same document co-occur
    when ``0 < |i - j| <= window``, each such pair adding 1 to ``C[w_i, w_j]`` and to ``C[w_j, w_i]``; documents never
    see each other. Raises ElmoError for ``window < 1``."""
    if window < 1:
        raise ElmoError(f"window must be >= 1, got {window}", field="window")
    ids = corpus.ids.astype(np.int64)
    doc = np.repeat(np.arange(len(corpus)), corpus.lengths)  # document of each flat position
    rows, cols = [], []
    for k in range(1, window + 1):
        same = doc[k:] == doc[:-k]
        rows.append(ids[:-k][same])
        cols.append(ids[k:][same])
    pairs = np.concatenate(rows + cols), np.concatenate(cols + rows)  # each pair both ways (window >= 1: not empty)
    return sp.coo_matrix((np.ones(len(pairs[0])), pairs), shape=(vocab_size, vocab_size)).tocsr()  # duplicates summed


def ppmi(counts: sp.spmatrix, alpha: float = 0.75) -> sp.csr_matrix:
    """Positive pointwise mutual information with context-distribution smoothing (Levy et al. 2015) of ``counts``
    ``(V, V)`` sparse: ``PPMI(w, c) = max(0, log P(w, c) / (P(w) P_α(c)))`` with ``P(w, c) = n_wc / N``, ``P(w) = n_w /
    N`` (row sums) and ``P_α(c) = n_c^α / Σ_c' n_c'^α`` (column sums; ``alpha`` α in (0, 1]), computed on the non-zero
    entries only. Returns a ``(V, V)`` ``csr_matrix`` without non-positive entries. Raises ElmoError for ``alpha``
    outside (0, 1] or an all-zero matrix."""
    if not 0.0 < alpha <= 1.0:
        raise ElmoError(f"PPMI smoothing alpha must be in (0, 1], got {alpha}")
    counts = sp.csr_matrix(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        raise ElmoError("the co-occurrence matrix is empty: no document has two tokens")
    word = np.asarray(counts.sum(axis=1)).ravel() / total
    context = np.asarray(counts.sum(axis=0)).ravel() ** alpha
    context /= context.sum()
    coo = counts.tocoo()
    pmi = np.log(coo.data / total) - np.log(word[coo.row]) - np.log(context[coo.col])
    keep = pmi > 0
    return sp.csr_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=counts.shape)


def svd_vectors(corpus: EncodedCorpus, vocab_size: int, dim: int = 300, window: int = 5, alpha: float = 0.75,
                seed: int = 0) -> tuple[np.ndarray, dict]:
    """Word vectors ``U Σ^½`` of width ``dim`` (D < V): scikit-learn's ``TruncatedSVD`` (randomized, seeded by
    ``seed``) of the sparse :func:`ppmi` (``alpha``) of :func:`cooccurrence_matrix` (``corpus``, ``vocab_size``,
    ``window``). Returns ``(vectors (V, D) float32, info)``; ``info`` records the settings, the share of non-zero PPMI
    cells and the seconds taken. Raises ElmoError for ``dim`` not in [1, V), or as those two do."""
    from sklearn.decomposition import TruncatedSVD

    if not 1 <= dim < vocab_size:
        raise ElmoError(f"SVD dimension must be in [1, {vocab_size}) for this vocabulary, got {dim}")
    started = time.perf_counter()
    matrix = ppmi(cooccurrence_matrix(corpus, vocab_size, window), alpha)
    svd = TruncatedSVD(n_components=dim, algorithm="randomized", n_iter=7, random_state=seed)
    u_sigma = svd.fit_transform(matrix)  # U Σ
    vectors = u_sigma / np.sqrt(np.maximum(svd.singular_values_, 1e-12))  # U Σ^½
    info = {"method": "svd", "algorithm": "PPMI (alpha-smoothed) + TruncatedSVD, U Sigma^0.5", "dim": dim,
            "window": window, "alpha": alpha, "ppmi_nonzero_share": matrix.nnz / float(vocab_size) ** 2,
            "explained_variance_ratio": float(svd.explained_variance_ratio_.sum()),
            "seconds": time.perf_counter() - started}
    return standardize(vectors), info
