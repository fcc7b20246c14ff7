"""Plots the pipelines write to ``images/`` (matplotlib, headless): confusion matrices and per-epoch curves."""

from __future__ import annotations

import io
import os
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..artifacts import atomic_write_bytes  # noqa: E402


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write a matplotlib figure as a 120-dpi PNG, atomically, and close it."""
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
    shares = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=60 if len(col_labels) > 6 else 0, ha="right" if len(col_labels) > 6 else "center")
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set(xlabel="predicted", ylabel="true", title=title)
    small = len(col_labels) > 8
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            ax.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=6 if small else 10,
                    color="white" if shares[i, j] > 0.5 else "black")
    save_figure(fig, path)


def plot_curves(series: dict[str, Sequence[float]], path: str | os.PathLike, title: str, ylabel: str) -> None:
    """Save a line plot of per-epoch values, one line per named series."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in series.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
    ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)
