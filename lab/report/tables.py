"""The report's comparison tables as Markdown (``python -m lab report --markdown``, for README.md).

Owns :func:`markdown_table` (every method), :func:`seeds_table` and :func:`comparisons_table` (the seeds
study), :func:`experiments_table` (every diagnostic run), the rows of the PDF's tables (``*_rows``: the seeds
study's summary, per-seed values and layer weights, the comparisons, the learning curves), and
:func:`perplexities`, the biLM test-perplexity cell they share with the PDF's tables.
"""

from __future__ import annotations

import numpy as np

from .results import LABELS, experiment_changes, methods, reference_run


def perplexities(lm: dict | None, missing: str = "–") -> str:
    """``"fwd / bwd"``: the forward and backward test perplexities of an ``lm.json`` to one decimal
    (``missing`` when ``lm`` is ``None`` or empty)."""
    return " / ".join(f"{lm['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward")) if lm else missing


def markdown_table(res: dict) -> str:
    """The all-methods comparison of ``res`` (:func:`~lab.report.results.load_results`) as a Markdown table.

    Returns:
        One row per method (:func:`~lab.report.results.methods`): train and test accuracy, test macro
        precision / recall / F1, λ and γ; the layer mix chosen on validation is marked. The diagnostic runs
        are in :func:`experiments_table`.
    """
    lines = ["| method | train acc | test acc | test precision | test recall | test macro-F1 | λ (h0, h1, h2) | γ |",
             "|---|---|---|---|---|---|---|---|"]
    best = res["classification"].get("best_mix")
    for name, entry in methods(res).items():
        tr, te = entry["train"], entry["test"]
        lam = ", ".join(f"{w:.3f}" for w in entry["lambdas"]) if entry.get("lambdas") else "–"
        gamma = f"{entry['gamma']:.3f}" if entry.get("gamma") is not None else "–"
        label = LABELS.get(name, name) + (" (best on val)" if name == best else "")
        lines.append(f"| {label} | {tr['accuracy']:.4f} | {te['accuracy']:.4f} | {te['precision']:.4f} | "
                     f"{te['recall']:.4f} | {te['f1']:.4f} | {lam} | {gamma} |")
    return "\n".join(lines)


def experiments_table(res: dict) -> str:
    """Every diagnostic run of ``res`` (:func:`~lab.report.results.load_results`) next to the main run,
    as a Markdown table.

    Returns:
        A row per run: its change, biLM test perplexities and trainable-λ test accuracy / macro-F1 with the
        difference from its :func:`~lab.report.results.reference_run`; ``""`` when the main run has no
        trainable-λ mix.
    """
    main = res["classification"].get("trainable_lambda")
    if not main:
        return ""
    lines = ["| run | change from the default | biLM test perplexity fwd / bwd | test acc | test macro-F1 | "
             "Δ acc (vs the same precision's reference) |",
             "|---|---|---|---|---|---|",
             f"| main (default) | – | {perplexities(res['lm'], '(reference biLM)')} | {main['test']['accuracy']:.4f} | "
             f"{main['test']['f1']:.4f} | – |"]
    for name, exp in res.get("experiments", {}).items():
        m = exp["classification"].get("trainable_lambda")
        if m:
            ref = reference_run(res, exp["classification"])[1]["trainable_lambda"]
            delta = "–" if ref is m else f"{(m['test']['accuracy'] - ref['test']['accuracy']) * 100:+.2f}"
            lines.append(f"| `{name}` | {', '.join(experiment_changes(res, name)) or '–'} | "
                         f"{perplexities(exp.get('lm'), '(reference biLM)')} | "
                         f"{m['test']['accuracy']:.4f} | {m['test']['f1']:.4f} | {delta} |")
    return "\n".join(lines)


def seeds_rows(study: dict) -> list[list[str]]:
    """Header and one row per method of ``seeds.json``: test accuracy mean ± std, its 95% CI, every seed's
    value, test macro-F1 mean ± std (shared by the Markdown table and the PDF)."""
    rows = [["method", "test accuracy, mean ± std", "95% CI", "per seed (" + ", ".join(map(str, study["seeds"])) + ")",
             "test macro-F1, mean ± std"]]
    for name, entry in study["methods"].items():
        acc, f1 = entry["summary"]["test_accuracy"], entry["summary"]["test_f1"]
        ci = "–" if acc["ci95"] is None else f"{acc['ci95'][0]:.4f} – {acc['ci95'][1]:.4f}"
        values = ", ".join(f"{v:.4f}" for v in entry["test_accuracy"])
        if entry.get("seeds", study["seeds"]) != study["seeds"]:
            values = f"seeds {', '.join(map(str, entry['seeds']))}: {values}"
        rows.append([LABELS.get(name, name), f"{acc['mean']:.4f} ± {acc['std']:.4f}" if acc["std"] is not None
                     else f"{acc['mean']:.4f} (one seed)", ci, values,
                     f"{f1['mean']:.4f} ± {f1['std']:.4f}" if f1["std"] is not None else f"{f1['mean']:.4f}"])
    return rows


def _mean_std(summary: dict, digits: int = 4) -> str:
    """``0.9074 ± 0.0020`` (``0.9074 (one seed)`` without a spread) of a ``summarize`` entry."""
    mean = f"{summary['mean']:.{digits}f}"
    return mean + (f" ± {summary['std']:.{digits}f}" if summary.get("std") is not None else " (one seed)")


def seeds_summary_rows(study: dict) -> list[list[str]]:
    """Header and one row per method of ``seeds.json``: test accuracy mean ± std and the 95% CI of its mean, test
    macro-F1 mean ± std (the report's headline table; the per-seed values are :func:`per_seed_rows`)."""
    rows = [["method", "test accuracy, mean ± std", "95% CI of the mean", "test macro-F1, mean ± std"]]
    for name, entry in study["methods"].items():
        acc, f1 = entry["summary"]["test_accuracy"], entry["summary"]["test_f1"]
        ci = "–" if acc["ci95"] is None else f"{acc['ci95'][0]:.4f} – {acc['ci95'][1]:.4f}"
        rows.append([LABELS.get(name, name), _mean_std(acc), ci, _mean_std(f1)])
    return rows


def per_seed_rows(study: dict) -> list[list[str]]:
    """Header and one row per method of ``seeds.json``: every seed's test accuracy / test macro-F1 ("–" for a seed
    the method did not run), then the biLM's test perplexity forward / backward per seed."""
    seeds = study["seeds"]
    rows = [["test accuracy / macro-F1"] + [f"seed {s}" for s in seeds]]
    for name, entry in study["methods"].items():
        values = dict(zip(entry.get("seeds", seeds), zip(entry["test_accuracy"], entry["test_f1"])))
        rows.append([LABELS.get(name, name)] + [f"{values[s][0]:.4f} / {values[s][1]:.4f}" if s in values else "–"
                                               for s in seeds])
    bilm = study.get("bilm", {})
    if bilm.get("test_forward_perplexity"):
        rows.append(["biLM test perplexity, forward / backward"]
                    + [f"{f:.1f} / {b:.1f}" for f, b in zip(bilm["test_forward_perplexity"], bilm["test_backward_perplexity"])])
    return rows


def lambda_seed_rows(study: dict) -> list[list[str]]:
    """Header and one row per layer mix of ``seeds.json`` that records its weights: each layer's weight, mean ± std
    over seeds, and the mix's test accuracy mean ± std (empty without such a mix)."""
    mixes = {m: np.array(e["lambdas"]) for m, e in study["methods"].items() if e.get("lambdas")}
    if not mixes:
        return []
    layers = max(w.shape[1] for w in mixes.values())
    rows = [["layer mix"] + [f"weight of h{j}, mean ± std" for j in range(layers)] + ["test accuracy, mean ± std"]]
    for name, weights in mixes.items():
        rows.append([LABELS.get(name, name)] + [f"{weights[:, j].mean():.3f} ± {weights[:, j].std(ddof=1):.3f}"
                                                if len(weights) > 1 else f"{weights[0, j]:.3f}" for j in range(layers)]
                    + [_mean_std(study["methods"][name]["summary"]["test_accuracy"])])
    return rows


def lambda_per_seed_rows(study: dict) -> list[list[str]]:
    """Header and one row per seed of ``seeds.json``: the layer weights (h0, h1, …) of each mix that records them."""
    mixes = [m for m, e in study["methods"].items() if e.get("lambdas")]
    rows = [["seed"] + [f"{LABELS.get(m, m)}: (h0, h1, …)" for m in mixes]]
    for s in study["seeds"]:
        row = [str(s)]
        for m in mixes:
            entry = study["methods"][m]
            weights = dict(zip(entry.get("seeds", study["seeds"]), entry["lambdas"])).get(s)
            row.append("–" if not weights else ", ".join(f"{w:.3f}" for w in weights))
        rows.append(row)
    return rows


def comparison_rows(study: dict) -> list[list[str]]:
    """Header and one row per test-accuracy comparison of ``seeds.json``: a − b in points, 95% CI, paired
    t-test p, seeds where a is ahead, and in how many seeds McNemar's test has p < 0.05."""
    rows = [["a − b (test accuracy)", "mean, points", "95% CI, points", "p (paired t)", "a ahead", "McNemar p < 0.05"]]
    for c in study["comparisons"]:
        if c["metric"] != "test_accuracy":
            continue
        ci = "–" if c["ci95"] is None else f"{c['ci95'][0] * 100:+.2f} – {c['ci95'][1] * 100:+.2f}"
        per_seed = c.get("mcnemar_per_seed") or []
        mc = f"{sum(m['p_value'] < 0.05 for m in per_seed)} of {len(per_seed)} seeds" if per_seed else "–"
        p = "–" if c["p_value"] is None else f"{c['p_value']:.3g}"
        rows.append([f"{LABELS.get(c['a'], c['a'])} − {LABELS.get(c['b'], c['b'])}", f"{c['mean_difference'] * 100:+.2f}",
                     ci, p, f"{c['wins']} of {c['n']}", mc])
    return rows


def curve_rows(curve: dict, ci_digits: int = 4) -> list[list[str]]:
    """Header and one row per share of ``learning_curve.json``: labelled documents, then per method the test
    accuracy mean ± std over seeds and its 95% CI, the CI's bounds to ``ci_digits`` decimals (shared by the
    Markdown table and the PDF)."""
    names = list(next(iter(curve["sizes"].values()))["methods"])
    rows = [["labelled documents (share)"] + [LABELS.get(m, m).replace(" (same head)", "") for m in names]]
    for key, size in curve["sizes"].items():
        docs = sorted({d for d in size["labelled_documents"] if d is not None})
        n = len(size["seeds"])
        row = [f"{'/'.join(f'{d:,}' for d in docs)} ({float(key):.0%}, {n} seed{'s' if n != 1 else ''})"]
        for m in names:
            s = size["methods"][m]["summary"]["test_accuracy"]
            ci = "" if s["ci95"] is None else f" [{s['ci95'][0]:.{ci_digits}f}, {s['ci95'][1]:.{ci_digits}f}]"
            row.append(f"{s['mean']:.4f}" + (f" ± {s['std']:.4f}" if s["std"] is not None else " (1 seed)") + ci)
        rows.append(row)
    return rows


def curve_comparison_rows(curve: dict) -> list[list[str]]:
    """Header and one row per share and baseline: the best ELMo layer mix at that share minus the baseline, in
    test accuracy points, with its 95% CI, paired t-test p, seeds ahead and McNemar's count."""
    rows = [["share", "best ELMo − baseline", "mean, points", "95% CI, points", "p (paired t)", "ahead",
             "McNemar p < 0.05"]]
    for key, size in curve["sizes"].items():
        for c in size["comparisons"]:
            ci = "–" if c["ci95"] is None else f"{c['ci95'][0] * 100:+.2f} – {c['ci95'][1] * 100:+.2f}"
            per_seed = c.get("mcnemar_per_seed") or []
            mc = f"{sum(m['p_value'] < 0.05 for m in per_seed)} of {len(per_seed)}" if per_seed else "–"
            p = "–" if c["p_value"] is None else f"{c['p_value']:.3g}"
            rows.append([f"{float(key):.0%}", f"{LABELS.get(c['a'], c['a'])} − {LABELS.get(c['b'], c['b'])}",
                         f"{c['mean_difference'] * 100:+.2f}", ci, p, f"{c['wins']} of {c['n']}", mc])
    return rows


def text_label(variant: str) -> str:
    """How a pre-training text of ``pretraining_text_curve.json`` is named in the report: ``0.25`` → "25% of the
    descriptions", ``1`` → "all the descriptions", ``extra`` → "all + extra AG News text"."""
    if variant == "extra":
        return "all + extra AG News text"
    return "all the descriptions" if float(variant) == 1.0 else f"{float(variant):.0%} of the descriptions"


def text_order(text_curve: dict) -> list[str]:
    """The pre-training texts of ``pretraining_text_curve.json`` from the least text to the most (mean tokens)."""
    def tokens(v: str) -> float:
        counts = [t for t in text_curve["texts"][v]["train_tokens"] if t]
        return float(sum(counts) / len(counts)) if counts else float("inf")
    return sorted(text_curve["texts"], key=tokens)


def texts_without_share(text_curve: dict, share: str) -> str:
    """A sentence naming the pre-training texts of ``pretraining_text_curve.json`` with no finished seed at the
    labelled ``share`` (left out of :func:`text_curve_rows`), or ``""`` when every text has it."""
    missing = [text_label(v) for v in text_order(text_curve) if share not in text_curve["texts"][v]["curve"]["sizes"]]
    return f"Not measured with {float(share):.0%} of the labels: {', '.join(missing)}." if missing else ""


def text_curve_rows(text_curve: dict, share: str) -> list[list[str]]:
    """Header and one row per pre-training text of ``pretraining_text_curve.json`` at the labelled ``share``
    (a key of its ``sizes``, e.g. ``"0.1"``): the text, its training tokens (mean over seeds), then per method the
    test accuracy mean ± std over seeds (shared by the Markdown table and the PDF)."""
    rows: list[list[str]] = []
    for variant in text_order(text_curve):
        t = text_curve["texts"][variant]
        size = t["curve"]["sizes"].get(share)
        if size is None:
            continue
        if not rows:
            rows.append(["pre-training text", "tokens"] + [LABELS.get(m, m).replace(" (same head)", "")
                                                          for m in size["methods"]])
        counts = [c for c in t["train_tokens"] if c]
        n = len(size["seeds"])
        row = [f"{text_label(variant)} ({n} seed{'s' if n != 1 else ''})",
               f"{sum(counts) / len(counts):,.0f}" if counts else "–"]
        for s in (size["methods"][m]["summary"]["test_accuracy"] for m in size["methods"]):
            row.append(f"{s['mean']:.4f}" + (f" ± {s['std']:.4f}" if s["std"] is not None else " (1 seed)"))
        rows.append(row)
    return rows


def text_effect_rows(text_curve: dict) -> list[list[str]]:
    """Header and one row per labelled share and method of ``pretraining_text_curve.json``: test accuracy points
    per doubling of the pre-training text (mean and 95% CI over seeds), then each text minus all the descriptions
    (paired over seeds, points and p) for the methods the JSON compares (the best ELMo mix and Word2Vec)."""
    others = [v for v in text_order(text_curve) if v != "1"]
    rows = [["share", "method", "points per doubling [95% CI]"] + [f"{text_label(v)} − all, points (p)"
                                                                 for v in others]]
    for share, per_method in text_curve["accuracy_per_doubling"].items():
        for m, d in per_method.items():
            s = d["summary"]
            ci = "" if s["ci95"] is None else f" [{s['ci95'][0] * 100:+.2f}, {s['ci95'][1] * 100:+.2f}]"
            row = [f"{float(share):.0%}", LABELS.get(m, m).replace(" (same head)", ""), f"{s['mean'] * 100:+.2f}{ci}"]
            for v in others:
                c = next((c for c in text_curve["versus_full_text"] if c["share"] == share and c["method"] == m
                          and c["a"] == f"text {v}"), None)
                row.append("–" if c is None else f"{c['mean_difference'] * 100:+.2f} ("
                           + ("–" if c["p_value"] is None else f"{c['p_value']:.3g}") + ")")
            rows.append(row)
    return rows


def text_curve_table(text_curve: dict, share: str) -> str:
    """:func:`text_curve_rows` as a Markdown table."""
    return _markdown(text_curve_rows(text_curve, share))


def text_effect_table(text_curve: dict) -> str:
    """:func:`text_effect_rows` as a Markdown table."""
    return _markdown(text_effect_rows(text_curve))


def curve_table(curve: dict) -> str:
    """:func:`curve_rows` as a Markdown table, the CIs to 3 decimals so that a row of five methods stays within
    200 characters."""
    return _markdown(curve_rows(curve, ci_digits=3))


def curve_comparisons_table(curve: dict) -> str:
    """:func:`curve_comparison_rows` as a Markdown table."""
    return _markdown(curve_comparison_rows(curve))


def _markdown(rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                     + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def seeds_table(study: dict) -> str:
    """:func:`seeds_rows` as a Markdown table."""
    return _markdown(seeds_rows(study))


def comparisons_table(study: dict) -> str:
    """:func:`comparison_rows` as a Markdown table."""
    return _markdown(comparison_rows(study))
