"""Uncertainty over seeds and paired tests (lab.significance), checked against direct computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from elmo.errors import ElmoError
from lab.significance import mcnemar, paired_over_seeds, summarize


def test_summary_is_mean_sample_std_and_student_t_interval():
    v = [0.90, 0.91, 0.93, 0.92]
    s = summarize(v)
    assert s["mean"] == pytest.approx(np.mean(v)) and s["std"] == pytest.approx(np.std(v, ddof=1))
    half = stats.t.ppf(0.975, 3) * np.std(v, ddof=1) / 2
    assert s["ci95"] == pytest.approx([np.mean(v) - half, np.mean(v) + half])
    assert (s["n"], s["min"], s["max"]) == (4, 0.90, 0.93)
    one = summarize([0.5])
    assert one["std"] is None and one["ci95"] is None
    with pytest.raises(ElmoError):
        summarize([])


def test_paired_test_uses_the_per_seed_differences():
    a, b = [0.91, 0.92, 0.90, 0.93], [0.90, 0.90, 0.89, 0.90]
    r = paired_over_seeds(a, b)
    d = np.subtract(a, b)
    assert r["mean_difference"] == pytest.approx(d.mean()) and r["wins"] == 4 and r["n"] == 4
    assert r["p_value"] == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
    assert r["ci95"][0] < d.mean() < r["ci95"][1]
    # an unpaired view of the same numbers would be far less certain: the pairing matters
    assert r["p_value"] < stats.ttest_ind(a, b).pvalue
    swapped = paired_over_seeds(b, a)
    assert swapped["mean_difference"] == pytest.approx(-d.mean()) and swapped["p_value"] == pytest.approx(r["p_value"])


def test_paired_test_edge_cases():
    assert paired_over_seeds([0.9], [0.8])["p_value"] is None
    assert paired_over_seeds([0.9, 0.8], [0.9, 0.8])["p_value"] == 1.0
    assert paired_over_seeds([0.9, 0.8], [0.8, 0.7])["p_value"] == 0.0  # the same gain every seed
    with pytest.raises(ElmoError, match="equally long"):
        paired_over_seeds([0.9, 0.8], [0.9])


def test_mcnemar_counts_discordant_documents_and_tests_them_against_a_fair_coin():
    labels = [0] * 100
    a = [0] * 90 + [1] * 10          # a right on 90
    b = [0] * 70 + [1] * 30          # b right on 70: every document b gets right, a does too
    r = mcnemar(labels, a, b)
    assert (r["a_only"], r["b_only"]) == (20, 0)
    assert r["p_value"] == pytest.approx(2 * 0.5 ** 20)
    same = mcnemar(labels, a, a)
    assert same["p_value"] == 1.0 and same["a_only"] == same["b_only"] == 0
    balanced = mcnemar([0, 0, 0, 0], [0, 0, 1, 1], [1, 1, 0, 0])
    assert balanced["p_value"] == pytest.approx(1.0) and not math.isnan(balanced["p_value"])
    with pytest.raises(ElmoError):
        mcnemar([0, 1], [0], [0, 1])
