"""Baselines ELMo is compared with (what ``python baselines.py`` runs; ``docs/method.md``, "The baselines"), on the
same data and split: Word2Vec and SVD static embeddings (:mod:`elmo.model.static`), each frozen under exactly ELMo's
classifier head (:func:`elmo.pipelines.task.train_and_evaluate`), TF-IDF + logistic regression (:func:`tfidf_logreg`)
and a context-sensitivity check (:func:`context_sensitivity`). Run after ``python ELMO.py`` (the vocabulary and the
biLM come from ``models/bilstm.pt``); writes the files ``docs/artifacts.md`` lists for ``baselines.py``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from ..artifacts import environment_info
from ..data.agnews import CLASS_NAMES, NUM_CLASSES
from ..data.corpus import Corpus, encode_corpus
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..model.classifier import StaticClassifierConfig, StaticEmbeddingClassifier
from ..model.serialization import save_static_vectors
from ..model.static import STATIC_METHODS, svd_vectors, word2vec_vectors
from ..runtime.device import set_seed, to_device
from ..training.metrics import classification_metrics
from .common import (
    at_least,
    checkpointing,
    format_results_table,
    option,
    refuse_overwriting,
    write_results,
)
from .task import HeadArgs, TaskData, prepare, report_test, train_and_evaluate

BASELINE_METHODS = (*STATIC_METHODS, "tfidf_logreg")
#: Words whose meaning changes with the AG News topic; the first two that occur in two topics are demonstrated.
CONTEXT_WORDS = ("strike", "race", "record", "court", "crash", "shares", "apple")
#: Head settings that must match classification.py's for the comparison to be fair.
HEAD_KEYS = ("encoder_hidden", "encoder_projection", "token_embedding_dim", "token_embedding_init", "dropout",
             "weight_decay", "epochs", "batch_size", "labelled_fraction", "max_tokens", "lr", "clip_norm", "patience",
             "seed", "val_fraction", "max_docs", "max_length", "concat_token_embedding")


@dataclass
class BaselinesArgs(HeadArgs):
    """Flags of ``baselines.py`` (see ``python baselines.py --help``); the head flags equal ``classification.py``'s."""

    methods: tuple[str, ...] = option(BASELINE_METHODS, "baselines to run, in turn", choices=BASELINE_METHODS)
    static_dim: int = option(300, "width of the Word2Vec and SVD vectors")
    w2v_window: int = option(5, "Word2Vec context window (words on each side)")
    w2v_epochs: int = option(10, "Word2Vec passes over the training text")
    svd_window: int = option(5, "co-occurrence window of the SVD baseline (words on each side)")
    svd_alpha: float = option(0.75, "PPMI context-distribution smoothing exponent")
    context_words: tuple[str, ...] = option(CONTEXT_WORDS, "candidate words for the context-sensitivity check")

    def check(self) -> None:
        super().check()
        if not self.methods:
            raise ElmoError("--methods needs at least one method")
        at_least(self, 1, "static_dim", "w2v_window", "w2v_epochs", "svd_window")


def tfidf_logreg(train: Corpus, val: Corpus, test: Corpus, seed: int = 0, text: Corpus | None = None) -> dict:
    """Fit TF-IDF (1-2 grams, sublinear tf, min_df 2) + logistic regression; metrics on every split. Documents are the
    project's tokens joined by spaces (the biLM's cleaned, lower-cased text, with no vocabulary cut-off); TF-IDF is
    fitted on ``text`` (all the training text, labelled or not; default ``train``), the regression on the labelled
    ``train`` documents only. Returns ``{"train", "val", "test": metrics (as
    :func:`~elmo.training.metrics.classification_metrics`), "train_seconds": float, "features": int,
    "test_predictions": [class per test document]}``."""
    started = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, token_pattern=r"\S+")
    if text is None or text is train:
        x_train = vectorizer.fit_transform(" ".join(t) for t in train.tokens)
    else:
        vectorizer.fit(" ".join(t) for t in text.tokens)
        x_train = vectorizer.transform(" ".join(t) for t in train.tokens)
    model = LogisticRegression(C=10.0, max_iter=2000, random_state=seed)
    model.fit(x_train, train.labels)
    out: dict[str, Any] = {}
    for name, corpus in (("train", train), ("val", val), ("test", test)):
        x = x_train if name == "train" else vectorizer.transform(" ".join(t) for t in corpus.tokens)
        predicted = model.predict(x)
        probs = np.zeros((x.shape[0], NUM_CLASSES))
        probs[:, model.classes_] = model.predict_proba(x)  # a class absent from training keeps probability 0
        out[name] = classification_metrics(corpus.labels, predicted, NUM_CLASSES, probabilities=probs)
    out["test_predictions"] = np.asarray(predicted).tolist()
    out["train_seconds"] = time.perf_counter() - started
    out["features"] = len(vectorizer.vocabulary_)
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (0 when either is zero)."""
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0 else 0.0


def context_sensitivity(bilm: BiLM, vocab: Vocabulary, corpus: Corpus, words: Sequence[str],
                        lambdas: Sequence[float] | None = None, max_words: int = 2, per_topic: int = 20,
                        max_length: int = 256) -> list[dict]:
    """The same word in sentences of two topics: ELMo vectors differ, a static vector cannot.

    For each candidate word (in order, until ``max_words`` qualify): the two topics a, b with the most documents
    containing it, up to ``per_topic`` documents of each (at least 2 of a, 1 of b), and the word's vector at its first
    position in each, from every biLM layer h_0..h_L (eq. 1) and from the scalar mix ``Σ_j λ_j h_j`` (eq. 1; γ omitted,
    it does not change a cosine; ``lambdas`` uniform when ``None``). Per representation: ``example_same = cos(A, A')``
    and ``example_cross = cos(A, B)`` for the first two documents A, A' of topic a and the first document B of topic b
    (shown in the report); ``same_topic`` / ``cross_topic``, the mean cosine over all pairs of occurrences from the
    same topic / from different topics. A static embedding gives 1.0 everywhere by construction, and so does the
    context-free h_0. Returns one dict per word: ``word``, ``sentences`` (topic and text of A, A', B),
    ``occurrences`` (``{topic: count}``), ``cosine`` (``{"h0": {...}, ..., "mix": {...}}`` with the four keys above).
    """
    out = []
    bilm.eval()
    device = next(bilm.parameters()).device
    for word in words:
        if word not in vocab.stoi:
            continue
        by_class: dict[int, list[int]] = {}
        for i, (tokens, label) in enumerate(zip(corpus.tokens, corpus.labels)):
            if word in tokens[:max_length]:
                by_class.setdefault(int(label), []).append(i)
        ranked = sorted(by_class, key=lambda c: (-len(by_class[c]), c))
        if len(ranked) < 2 or len(by_class[ranked[0]]) < 2:
            continue
        a, b = ranked[0], ranked[1]
        docs = by_class[a][:per_topic] + by_class[b][:per_topic]
        topic = np.array([a] * len(by_class[a][:per_topic]) + [b] * len(by_class[b][:per_topic]))
        chosen = corpus.subset(docs)
        batch = encode_corpus(chosen.tokens, vocab, chosen.labels, max_length,
                              bilm.config.chars_per_token).collate(np.arange(len(docs)))
        with torch.no_grad():
            batch = to_device(batch, device)
            layers = bilm(batch["ids"], batch["lengths"], batch.get("chars")).float().cpu().numpy()  # (L+1, n, T, D)
        vecs = np.stack([layers[:, row, corpus.tokens[i].index(word)] for row, i in enumerate(docs)], axis=1)  # (L+1, n, 2H)
        weights = np.full(len(layers), 1.0 / len(layers)) if lambdas is None else np.asarray(lambdas)
        named = {f"h{j}": vecs[j] for j in range(len(layers))} | {"mix": np.tensordot(weights, vecs, axes=1)}
        same = (topic[:, None] == topic[None, :]) & ~np.eye(len(docs), dtype=bool)
        cross = topic[:, None] != topic[None, :]
        example_b = len(by_class[a][:per_topic])  # row of B
        cos: dict[str, dict[str, float]] = {}
        for name, v in named.items():
            unit = v / np.linalg.norm(v, axis=1, keepdims=True).clip(1e-12)
            sim = unit @ unit.T
            cos[name] = {"example_same": cosine(v[0], v[1]), "example_cross": cosine(v[0], v[example_b]),
                         "same_topic": float(sim[same].mean()), "cross_topic": float(sim[cross].mean())}
        out.append({
            "word": word,
            "sentences": [{"topic": CLASS_NAMES[c], "text": corpus.texts[i]}
                          for c, i in zip((a, a, b), (docs[0], docs[1], docs[example_b]))],
            "occurrences": {CLASS_NAMES[a]: int((topic == a).sum()), CLASS_NAMES[b]: int((topic == b).sum())},
            "cosine": cos,
        })
        if len(out) == max_words:
            break
    return out


def static_baseline(task: TaskData, config: BaselinesArgs, method: str) -> dict:
    """Train ``method``'s vectors on all the training text, save them as ``<method>.pt``, and train and evaluate the
    shared head on them, frozen, on the labelled documents."""
    vocab, run = task.vocab, task.run
    if method == "word2vec":
        vectors, info = word2vec_vectors(task.text.tokens, vocab, config.static_dim, config.w2v_window,
                                         config.w2v_epochs, seed=config.seed)
    else:
        vectors, info = svd_vectors(task.text_data, len(vocab), config.static_dim, config.svd_window,
                                    config.svd_alpha, seed=config.seed)
    run.say(f"{method}: {len(vocab):,} x {vectors.shape[1]} vectors in {info['seconds']:.0f} s")
    save_static_vectors(vectors, vocab, info, config.seed, run.outputs.static(method))
    set_seed(config.seed)
    head = StaticClassifierConfig(vectors=method, **config.head_sizes())
    model = task.to_device(StaticEmbeddingClassifier(torch.from_numpy(vectors), head))
    checkpoint = checkpointing(config, f"baseline_{method}", vocab=vocab.fingerprint())
    return {**train_and_evaluate(model, task.data, config, run, checkpoint), "embedding": info}


def baselines(config: BaselinesArgs) -> dict:
    """Run every baseline in ``config.methods``; returns the ``baselines.json`` content (one entry per method,
    ``context``, ``head_mismatch``, ``labelled_documents``, ``config``, ``meta``). Raises :class:`ElmoError` on a
    missing ``bilstm.pt`` (run ``python ELMO.py`` first: the baselines use its vocabulary), bad data or flags, or an
    output that is an input (``bilstm.pt``, ``classification.json``, AG News), naming both before anything is written."""
    files = config.outputs
    written = [files.result("baselines")]
    for method in config.methods:
        written += [files.image(f"confusion_{method}")]
        if method != "tfidf_logreg":
            written += [files.static(method), files.checkpoint(f"baseline_{method}")]
    refuse_overwriting(config, {"--models-dir (bilstm.pt)": files.bilm,
                                "--results-dir (classification.json)": files.result("classification")}, written)
    task = prepare(config)
    outputs, say = task.run.outputs, task.run.say
    train, val, test = task.corpora["train"], task.corpora["val"], task.corpora["test"]
    classification_json = outputs.result("classification")
    elmo_run = json.loads(classification_json.read_text(encoding="utf-8")) if classification_json.is_file() else {}
    elmo_config = elmo_run.get("config", {})  # the head and training flags of HEAD_KEYS that differ from it
    mismatch = [k for k in HEAD_KEYS if k in elmo_config and elmo_config[k] != getattr(config, k)]
    if mismatch:
        print(f"warning: these flags differ from the classification.py run in {classification_json}: "
              f"{', '.join(mismatch)}; the comparison is not like for like", file=sys.stderr)
    out: dict[str, Any] = {}
    for method in config.methods:
        out[method] = tfidf_logreg(train, val, test, config.seed, task.text) if method == "tfidf_logreg" else \
            static_baseline(task, config, method)
        report_test(task.run, method, out[method])
    out["context"] = context_sensitivity(task.bilm, task.vocab, test, config.context_words,  # trainable λ's weights
                                        elmo_run.get("trainable_lambda", {}).get("lambdas"), max_length=config.max_length)
    for item in out["context"]:
        cos = item["cosine"]
        say(f"'{item['word']}' ({' vs '.join(f'{n} {t}' for t, n in item['occurrences'].items())} occurrences): "
            f"mean cosine of ELMo h2 within a topic {cos['h2']['same_topic']:.3f}, across topics "
            f"{cos['h2']['cross_topic']:.3f}; a static embedding: 1.000 for both")
    out["head_mismatch"] = mismatch
    out["labelled_documents"] = len(train)
    write_results(config, "baselines", out, environment_info(config.seed), [f"baseline_{m}" for m in config.methods],
                  format_results_table(out, config.methods, header="method"), say)
    return out
