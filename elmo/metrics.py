"""Metrics (scikit-learn) and plots (matplotlib) for both tasks.

Classification: accuracy, macro precision / recall / F1 and the confusion matrix.
Language modelling: perplexity exp(mean NLL in nats), top-1 / top-5 word accuracy and micro/macro
precision, recall and F1 of the top-1 predicted word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support  # noqa: E402

from .checkpoint import atomic_write_bytes  # noqa: E402


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> dict:
    """Accuracy, macro precision/recall/F1 and the confusion matrix.

    Args:
        y_true, y_pred: 0-based class ids of equal length.
        num_classes: C; the confusion matrix is ``C x C`` (rows = true class, columns = predicted).

    Returns:
        ``{"accuracy", "precision", "recall", "f1", "confusion_matrix"}`` (floats; a nested list).
    """
    labels = list(range(num_classes))
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, labels=labels, average="macro", zero_division=0)
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "precision": float(p),
        "recall": float(r),
        "f1": float(f),
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
    }


def word_prediction_metrics(targets: np.ndarray, top5: np.ndarray) -> dict:
    """Next/previous-word prediction quality.

    Args:
        targets: ``(n,)`` true word ids; top5: ``(n, 5)`` the five most probable ids, best first.

    Returns:
        ``top1_accuracy``, ``top5_accuracy``, and ``micro_``/``macro_`` ``precision``, ``recall``,
        ``f1`` of the top-1 prediction, macro-averaged over the words that occur as a target or a
        prediction.
    """
    pred = top5[:, 0]
    out = {"top1_accuracy": float((pred == targets).mean()),
           "top5_accuracy": float((top5 == targets[:, None]).any(1).mean())}
    labels = np.union1d(targets, pred)
    for avg in ("micro", "macro"):
        p, r, f, _ = precision_recall_fscore_support(targets, pred, labels=labels, average=avg, zero_division=0)
        out.update({f"{avg}_precision": float(p), f"{avg}_recall": float(r), f"{avg}_f1": float(f)})
    return out


def top_words_confusion(targets: np.ndarray, pred: np.ndarray, word_ids: Sequence[int]) -> np.ndarray:
    """Confusion matrix restricted to positions whose true word is in ``word_ids``.

    Returns:
        ``(K, K + 1)`` counts; rows = true word, columns = predicted word, last column = any other.
    """
    word_ids = list(word_ids)
    col = {w: i for i, w in enumerate(word_ids)}
    cm = np.zeros((len(word_ids), len(word_ids) + 1), dtype=np.int64)
    for t, p in zip(targets, pred):
        if t in col:
            cm[col[t], col.get(p, len(word_ids))] += 1
    return cm


def _save_figure(fig, path: str | os.PathLike) -> None:
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def plot_confusion(cm: Sequence[Sequence[int]], row_labels: Sequence[str], col_labels: Sequence[str],
                   path: str | os.PathLike, title: str) -> None:
    """Save a confusion-matrix heat map with counts in the cells (rows true, columns predicted)."""
    cm = np.asarray(cm)
    size = max(4.5, 0.45 * len(col_labels) + 2)
    fig, ax = plt.subplots(figsize=(size, size * len(row_labels) / len(col_labels) + 0.8))
    ax.imshow(cm / np.maximum(cm.sum(1, keepdims=True), 1), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=60 if len(col_labels) > 6 else 0, ha="right" if len(col_labels) > 6 else "center")
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    small = len(col_labels) > 8
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            share = cm[i, j] / max(cm[i].sum(), 1)
            ax.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=6 if small else 10,
                    color="white" if share > 0.5 else "black")
    _save_figure(fig, path)


def plot_curves(series: dict[str, Sequence[float]], path: str | os.PathLike, title: str, ylabel: str) -> None:
    """Save a line plot of per-epoch values, one line per named series."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in series.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    _save_figure(fig, path)
