"""The report's summary figures, drawn from the results JSON into ``images/``.

Owns :func:`plot_method_comparison`, :func:`plot_lambdas`, :func:`plot_validation_curves`,
:func:`plot_seeds` and :func:`plot_lambda_seeds` (``seeds.json``), the learning curves, and :func:`draw_figures`
(all of them, under the names the PDF layout places). The per-method confusion
matrices and the LM loss curves are not drawn here: they are the PNGs the training pipelines wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from elmo.errors import ElmoError  # noqa: E402
from elmo.pipelines.plots import save_figure  # noqa: E402

from .results import LABELS, methods  # noqa: E402
from .tables import text_order  # noqa: E402

#: The file each summary figure is written to, inside the images folder.
FIGURES = {"method_comparison": "method_comparison.png", "lambdas": "lambda_weights.png",
           "lambda_seeds": "lambda_weights_seeds.png",
           "validation_curves": "validation_curves.png", "seeds": "seeds.png", "learning_curve": "learning_curve.png",
           "pretraining_text_curve": "pretraining_text_curve.png"}


def plot_method_comparison(res: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) a bar chart of test accuracy and macro-F1 for every method of ``res``
    (:func:`~lab.report.results.methods`: ELMo layer mixes and baselines)."""
    all_methods = methods(res)
    names = list(all_methods)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, (metric, label) in enumerate((("accuracy", "test accuracy"), ("f1", "test macro-F1"))):
        values = [all_methods[m]["test"][metric] for m in names]
        bars = ax.bar(x + (k - 0.5) * 0.38, values, 0.38, label=label)
        ax.bar_label(bars, fmt="%.3f", fontsize=7, rotation=90, padding=2)
    low = min(all_methods[m]["test"][k] for m in names for k in ("accuracy", "f1"))
    ax.set_ylim(max(0.0, low - 0.05), 1.0)
    short = {"svd": "SVD\n(PPMI)", "tfidf_logreg": "TF-IDF\n+ log. reg."}
    ax.set_xticks(x, [short.get(m, LABELS.get(m, m).replace(" (same head)", "").replace(", ", "\n")) for m in names],
                  fontsize=8)
    ax.set_title("AG News test set: every method")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    save_figure(fig, path)


def plot_lambdas(res: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) a bar chart of the softmax-normalised layer weights λ_j of each scalar mix
    in ``res["classification"]``, γ in the legend.

    Raises:
        ElmoError: neither ``trainable_lambda`` nor ``frozen_lambda`` holds λ weights.
    """
    cls = res["classification"]
    mixes = [m for m in ("trainable_lambda", "frozen_lambda") if cls.get(m, {}).get("lambdas")]
    if not mixes:
        raise ElmoError("classification.json holds no λ weights (run the trainable_lambda or frozen_lambda mix)")
    layers = len(cls[mixes[0]]["lambdas"])
    x = np.arange(layers)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.8 / len(mixes)
    for k, s in enumerate(mixes):
        bars = ax.bar(x + (k - (len(mixes) - 1) / 2) * width, cls[s]["lambdas"], width,
                      label=f"{LABELS[s]} (γ = {cls[s]['gamma']:.2f})")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(1 / layers, color="grey", linestyle="--", linewidth=1, label="uniform")
    ax.set_xticks(x, [f"h{j}" + (" (token)" if j == 0 else "") for j in range(layers)])
    ax.set_ylabel("softmax weight λ")
    ax.set_ylim(0, 1)
    ax.set_title("ELMo layer weights")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_lambda_seeds(study: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) the layer weights of every mix of ``seeds.json`` that records them: per layer, the mean
    over seeds as a bar with ± one standard deviation, and every seed's weight as a point.

    Raises:
        ElmoError: no method of ``study`` records its layer weights.
    """
    mixes = [m for m, e in study["methods"].items() if e.get("lambdas")]
    if not mixes:
        raise ElmoError("seeds.json holds no layer weights (λ) of any layer mix")
    layers = max(len(w) for m in mixes for w in study["methods"][m]["lambdas"])
    x = np.arange(layers)
    width = 0.8 / len(mixes)
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for k, m in enumerate(mixes):
        weights = np.array(study["methods"][m]["lambdas"])
        at = x + (k - (len(mixes) - 1) / 2) * width
        spread = weights.std(axis=0, ddof=1) if len(weights) > 1 else None
        ax.bar(at, weights.mean(axis=0), width, yerr=spread, capsize=3, color=f"C{k}", alpha=0.75,
               label=LABELS.get(m, m))
        for row in weights:
            ax.scatter(at, row, s=10, color="black", zorder=3)
    ax.axhline(1 / layers, color="grey", linestyle="--", linewidth=1, label="uniform")
    ax.set_xticks(x, [f"h{j}" + (" (token)" if j == 0 else "") for j in range(layers)])
    ax.set_ylabel("layer weight")
    ax.set_ylim(0, 1)
    ax.set_title(f"Layer weights over {len(study['seeds'])} seeds: mean ± std, points: each seed")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def plot_validation_curves(res: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) the validation macro-F1 per epoch of every method of ``res`` that records
    a training history (the classifiers trained with the shared head)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, entry in methods(res).items():
        history = entry.get("history")
        if history:
            ax.plot(range(1, len(history) + 1), [row["val_f1"] for row in history], marker="o",
                    label=LABELS.get(name, name))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation macro-F1")
    ax.set_title("Classifier validation curves (same head)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_seeds(study: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) every seed's test accuracy per method of ``seeds.json`` (one point per seed,
    labelled by the seed) with the mean and its 95% confidence interval."""
    names = list(study["methods"])
    fig, ax = plt.subplots(figsize=(8, 4))
    markers = "osD^v<>p*h"
    for i, name in enumerate(names):
        entry = study["methods"][name]
        summary = entry["summary"]["test_accuracy"]
        if summary["ci95"] is not None:
            lo, hi = summary["ci95"]
            ax.errorbar(i, summary["mean"], yerr=[[summary["mean"] - lo], [hi - summary["mean"]]], fmt="_",
                        color="black", markersize=18, capsize=4, linewidth=1, zorder=1)
        else:
            ax.plot(i, summary["mean"], "_", color="black", markersize=18)
        for seed, value in zip(entry.get("seeds", study["seeds"]), entry["test_accuracy"]):
            k = study["seeds"].index(seed)
            ax.scatter(i + (k - (len(study["seeds"]) - 1) / 2) * 0.08, value, marker=markers[k % len(markers)],
                       s=22, color=f"C{k}", label=f"seed {seed}" if i == 0 else None, zorder=2)
    short = {"svd": "SVD\n(PPMI)", "tfidf_logreg": "TF-IDF\n+ log. reg.", "learned_function": "ELMo\nlearned (gate)",
             "learned_function_mlp": "ELMo\nlearned (MLP)"}
    ax.set_xticks(range(len(names)), [short.get(m, LABELS.get(m, m).replace(" (same head)", "").replace(", ", "\n"))
                                      for m in names], fontsize=7)
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Every seed's test accuracy; bar: mean and 95% CI ({len(study['seeds'])} seeds)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    save_figure(fig, path)


def _mean_and_band(ax: plt.Axes, k: int, name: str, xs: list[float], summaries: list[dict]) -> None:
    """Draw method ``name`` (the ``k``-th) on ``ax``: its mean over seeds at ``xs`` as a line (solid for ELMo),
    its 95% CI as a band (none with one seed); ``summaries`` are the ``summarize`` entries at ``xs``."""
    means = [s["mean"] for s in summaries]
    style = "-" if name in ("trainable_lambda", "learned_function") else "--"
    ax.plot(xs, means, style, marker="os^Dv"[k % 5], markersize=4, color=f"C{k}", label=LABELS.get(name, name))
    ax.fill_between(xs, [s["ci95"][0] if s["ci95"] else s["mean"] for s in summaries],
                    [s["ci95"][1] if s["ci95"] else s["mean"] for s in summaries], color=f"C{k}", alpha=0.15,
                    linewidth=0)


def plot_learning_curve(curve: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) test accuracy against the number of labelled documents (log scale) per method of
    ``learning_curve.json``: the mean over seeds with its 95% CI as a band (:mod:`lab.learning_curve`)."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    sizes = list(curve["sizes"].values())
    for k, name in enumerate(sizes[0]["methods"]):
        _mean_and_band(ax, k, name, [float(np.mean([d for d in size["labelled_documents"] if d is not None] or [np.nan]))
                                     for size in sizes],
                       [size["methods"][name]["summary"]["test_accuracy"] for size in sizes])
    ax.set_xscale("log")
    ax.set_xlabel("labelled training documents (log scale)")
    ax.set_ylabel("test accuracy")
    seeds = sorted({s for size in sizes for s in size["seeds"]})
    ax.set_title(f"Learning curve: mean over seeds {', '.join(map(str, seeds))}, band: 95% CI")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    save_figure(fig, path)


def plot_text_curve(text_curve: dict, path: str | os.PathLike) -> None:
    """Save to ``path`` (PNG) test accuracy against the pre-training text's tokens (log2 scale, mean over seeds) per
    method of ``pretraining_text_curve.json``, one panel per labelled share: the mean over seeds with its 95% CI
    as a band (:func:`~lab.learning_curve.aggregate_text_curve`)."""
    order = text_order(text_curve)
    shares = sorted({k for t in text_curve["texts"].values() for k in t["curve"]["sizes"]}, key=float)
    fig, axes = plt.subplots(1, len(shares), figsize=(5.6 * len(shares), 4.2), squeeze=False)
    for ax, share in zip(axes[0], shares):
        have = [v for v in order if share in text_curve["texts"][v]["curve"]["sizes"]]
        names = list(text_curve["texts"][have[0]]["curve"]["sizes"][share]["methods"])
        texts = [text_curve["texts"][v] for v in have]
        for k, name in enumerate(names):
            _mean_and_band(ax, k, name, [float(np.mean([c for c in t["train_tokens"] if c] or [np.nan])) for t in texts],
                           [t["curve"]["sizes"][share]["methods"][name]["summary"]["test_accuracy"] for t in texts])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("pre-training tokens (log2 scale)")
        ax.set_ylabel("test accuracy")
        docs = sorted({d for v in have for d in text_curve["texts"][v]["curve"]["sizes"][share]["labelled_documents"]
                       if d is not None})
        ax.set_title(f"{float(share):.0%} of the labels ({'/'.join(f'{d:,}' for d in docs)} documents)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    seeds = sorted({s for t in text_curve["texts"].values() for z in t["curve"]["sizes"].values() for s in z["seeds"]})
    fig.suptitle(f"Pre-training text: mean over seeds {', '.join(map(str, seeds))}, band: 95% CI", fontsize=10)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    save_figure(fig, path)


def draw_figures(res: dict, images_dir: str | os.PathLike) -> None:
    """Draw the summary figures of ``res`` (:func:`~lab.report.results.load_results`) into
    ``images_dir``, under the names in :data:`FIGURES` (the seeds figures only when ``res["seeds"]``, the layer
    weights over seeds only when it records them, each curve only when its JSON exists).

    Raises:
        ElmoError: ``res`` holds no λ weights (:func:`plot_lambdas`).
        KeyError: ``res`` lacks a key a figure needs.
    """
    images = Path(images_dir)
    plot_method_comparison(res, images / FIGURES["method_comparison"])
    plot_lambdas(res, images / FIGURES["lambdas"])
    plot_validation_curves(res, images / FIGURES["validation_curves"])
    if res.get("seeds"):
        plot_seeds(res["seeds"], images / FIGURES["seeds"])
        if any(e.get("lambdas") for e in res["seeds"]["methods"].values()):
            plot_lambda_seeds(res["seeds"], images / FIGURES["lambda_seeds"])
    if res.get("learning_curve"):
        plot_learning_curve(res["learning_curve"], images / FIGURES["learning_curve"])
    if res.get("pretraining_text_curve"):
        plot_text_curve(res["pretraining_text_curve"], images / FIGURES["pretraining_text_curve"])
