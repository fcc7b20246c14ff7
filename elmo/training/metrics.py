"""Metrics for both tasks (scikit-learn): :func:`classification_metrics` and, for language modelling, perplexity
exp(mean NLL in nats) and :func:`word_prediction_metrics`. Their plots are :mod:`elmo.pipelines.plots`."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    log_loss,
    precision_recall_fscore_support,
)


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int,
                           probabilities: np.ndarray | None = None) -> dict:
    """``{"accuracy", "precision", "recall", "f1", "confusion_matrix"}`` of the 0-based class ids ``y_pred`` against
    ``y_true`` (equal length N; ``num_classes`` C): floats (macro precision/recall/F1) and a ``C x C`` nested list (rows
    = true class, columns = predicted); plus ``"loss"``, the mean cross-entropy in nats (``sklearn.metrics.log_loss``),
    when ``probabilities`` ``(N, C)`` (predicted class probabilities, rows sum to 1) is given."""
    labels = list(range(num_classes))
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, labels=labels, average="macro", zero_division=0)
    out = {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "precision": float(p),
        "recall": float(r),
        "f1": float(f),
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
    }
    if probabilities is not None:
        out["loss"] = float(log_loss(y_true, probabilities, labels=labels))
    return out


def word_prediction_metrics(targets: np.ndarray, top5: np.ndarray) -> dict:
    """Next/previous-word prediction quality of ``top5 (n, 5)``, the five most probable word ids (best first), against
    the true ids ``targets (n,)``: ``top1_accuracy``, ``top5_accuracy``, and ``micro_``/``macro_`` ``precision``,
    ``recall``, ``f1`` of the top-1 prediction, macro-averaged over the words that occur as a target or a prediction."""
    pred = top5[:, 0]
    out = {"top1_accuracy": float((pred == targets).mean()),
           "top5_accuracy": float((top5 == targets[:, None]).any(1).mean())}
    labels = np.union1d(targets, pred)
    for avg in ("micro", "macro"):
        p, r, f, _ = precision_recall_fscore_support(targets, pred, labels=labels, average=avg, zero_division=0)
        out.update({f"{avg}_precision": float(p), f"{avg}_recall": float(r), f"{avg}_f1": float(f)})
    return out


def top_words_confusion(targets: np.ndarray, pred: np.ndarray, word_ids: Sequence[int]) -> np.ndarray:
    """Confusion matrix restricted to positions whose true word is in ``word_ids``: ``(K, K + 1)`` counts; rows = true
    word, columns = predicted word, last column = any other."""
    word_ids = list(word_ids)
    col = {w: i for i, w in enumerate(word_ids)}
    cm = np.zeros((len(word_ids), len(word_ids) + 1), dtype=np.int64)
    for t, p in zip(targets, pred):
        if t in col:
            cm[col[t], col.get(p, len(word_ids))] += 1
    return cm
