"""Uncertainty of a result and significance of a difference between two methods (scipy.stats).

Two views, both used by the seeds study (:mod:`lab.study`, ``results/seeds.json``):

* **over seeds** — each method's metric once per seed (the biLM, the splits' shuffling, the head's
  initialisation and dropout all follow the seed): mean, sample standard deviation and a 95%
  Student-t confidence interval of the mean (:func:`summarize`), and for two methods run with the
  same seeds a *paired t-test* on the per-seed differences (:func:`paired_over_seeds`). With n seeds
  the test has n - 1 degrees of freedom, so with 3 seeds only a large, consistent difference is
  significant.
* **over test documents, per seed** — *McNemar's exact test* (:func:`mcnemar`): of the documents
  exactly one of the two classifiers gets right, is the split different from 50/50 (a two-sided
  binomial test on the discordant pairs)? It asks whether the two trained classifiers differ on this
  test set, not whether the methods would differ over retraining; the over-seeds test answers that.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from elmo.errors import ElmoError

#: names of the tests, as results files and the report cite them
PAIRED_T = "paired t-test over seeds (scipy.stats.ttest_rel), 95% CI of the mean difference from Student's t"
MCNEMAR = "McNemar's exact test on the test documents (two-sided binomial test on the discordant pairs)"


def _t_interval(values: np.ndarray) -> list[float] | None:
    """95% Student-t interval of the mean of ``values`` (``None`` for fewer than 2 values)."""
    n = len(values)
    if n < 2:
        return None
    half = stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n)
    return [float(values.mean() - half), float(values.mean() + half)]


def summarize(values: Sequence[float]) -> dict:
    """Mean, sample std (ddof 1), 95% t-interval of the mean, min, max and n of one metric over seeds.

    Raises:
        ElmoError: no values.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ElmoError("summarize: no values")
    return {"n": int(v.size), "mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else None,
            "ci95": _t_interval(v), "min": float(v.min()), "max": float(v.max())}


def paired_over_seeds(a: Sequence[float], b: Sequence[float]) -> dict:
    """Paired comparison of methods ``a`` and ``b`` measured with the same seeds (same order).

    Returns:
        ``{"n", "mean_difference" (a - b), "std_difference", "ci95" (of the mean difference), "p_value"
        (two-sided paired t-test; ``None`` with fewer than 2 seeds, 1.0 when every difference is 0),
        "wins" (seeds where a > b), "test"}``.

    Raises:
        ElmoError: different numbers of values, or none.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ElmoError(f"paired_over_seeds needs two equally long, non-empty lists, got {x.size} and {y.size}")
    d = x - y
    if d.size < 2:
        p = None
    elif np.allclose(d, d[0]):
        p = 1.0 if d[0] == 0 else 0.0  # no spread: the t statistic is infinite (or undefined at 0)
    else:
        p = float(stats.ttest_rel(x, y).pvalue)
    return {"n": int(d.size), "mean_difference": float(d.mean()),
            "std_difference": float(d.std(ddof=1)) if d.size > 1 else None, "ci95": _t_interval(d),
            "p_value": p, "wins": int((d > 0).sum()), "test": PAIRED_T}


def mcnemar(labels: Sequence[int], predicted_a: Sequence[int], predicted_b: Sequence[int]) -> dict:
    """McNemar's exact test of two classifiers on the same documents.

    Returns:
        ``{"a_only": documents only a gets right, "b_only": only b, "p_value": two-sided exact binomial
        p of the discordant split (1.0 when there are none), "test"}``.

    Raises:
        ElmoError: the three sequences differ in length.
    """
    y, p, q = (np.asarray(v) for v in (labels, predicted_a, predicted_b))
    if not (y.shape == p.shape == q.shape):
        raise ElmoError(f"mcnemar: {y.size} labels, {p.size} and {q.size} predictions")
    a_only = int(((p == y) & (q != y)).sum())
    b_only = int(((q == y) & (p != y)).sum())
    pval = 1.0 if a_only + b_only == 0 else float(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue)
    return {"a_only": a_only, "b_only": b_only, "p_value": pval, "test": MCNEMAR}
