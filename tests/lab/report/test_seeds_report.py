"""The report's view of the seeds study: sentences, targets, tables and figure follow seeds.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lab.report.analysis import _seeds, _seeds_mixes, _targets, best_over_seeds
from lab.report.figures import plot_seeds
from lab.report.tables import comparisons_table, seeds_table
from lab.significance import paired_over_seeds, summarize

ACC = {"trainable_lambda": [0.920, 0.924, 0.918], "frozen_lambda": [0.915, 0.917, 0.913],
       "learned_function": [0.921, 0.923, 0.920], "word2vec": [0.905, 0.907, 0.904], "svd": [0.890, 0.893, 0.888],
       "tfidf_logreg": [0.894, 0.894, 0.894]}


def study(acc=ACC, ppl=(88.0, 86.0)) -> dict:
    methods = {m: {"test_accuracy": v, "test_f1": v, "summary": {"test_accuracy": summarize(v), "test_f1": summarize(v)}}
               for m, v in acc.items()}
    pairs = [(a, b) for a in ("trainable_lambda", "frozen_lambda", "learned_function") for b in ("word2vec", "svd", "tfidf_logreg")]
    pairs += [("trainable_lambda", "frozen_lambda"), ("trainable_lambda", "learned_function"), ("frozen_lambda", "learned_function")]
    comparisons = [{"a": a, "b": b, "metric": "test_accuracy", **paired_over_seeds(acc[a], acc[b])} for a, b in pairs]
    bilm = {"summary": {"test_forward_perplexity": summarize([ppl[0]] * 3), "test_backward_perplexity": summarize([ppl[1]] * 3)}}
    return {"seeds": [0, 1, 2], "methods": methods, "comparisons": comparisons, "bilm": bilm,
            "tests": {"over_seeds": "paired t", "per_seed": "McNemar"}}


def test_headline_names_the_best_mix_and_says_what_is_significant():
    s = study()
    assert best_over_seeds(s) == "learned_function"
    text = " ".join(_seeds({"seeds": s}))
    assert "Over 3 seeds" in text and "ELMo, learned function − Word2Vec (same head): +1.60" in text
    assert "significant at 0.05" in text and "not significant" not in text.split("Word2Vec (same head):")[1].split(".")[0]
    settings = " ".join(_seeds_mixes({"seeds": s}))
    assert "ELMo, trainable λ − ELMo, learned function" in settings


def test_targets_are_met_or_not_from_the_numbers():
    met = " ".join(_targets({"seeds": study()}))
    assert "Word2Vec + 1.0 point with p < 0.05: met" in met and "TF-IDF + LR + 1.5 points: met" in met
    assert "within 1.0 point of the best: met" in met and "≤ 90 in both directions: met" in met
    weaker = dict(ACC, trainable_lambda=[0.906, 0.910, 0.903], learned_function=[0.905, 0.909, 0.905],
                  frozen_lambda=[0.890, 0.892, 0.889])
    missed = " ".join(_targets({"seeds": study(weaker, (95.0, 91.0))}))
    assert "Word2Vec + 1.0 point with p < 0.05: not met" in missed and "1.5 points: not met" in missed
    assert "within 1.0 point of the best: not met" in missed and "≤ 90 in both directions: not met" in missed
    assert _targets({"seeds": None}) == [] and _seeds({}) == []


def test_tables_and_figure(tmp_path):
    s = study()
    table = seeds_table(s)
    v = ACC["trainable_lambda"]
    assert table.count("\n") == 1 + len(ACC) and f"{np.mean(v):.4f} ± {np.std(v, ddof=1):.4f}" in table
    assert "| ELMo, trainable λ − Word2Vec (same head) | +1.53 |" in comparisons_table(s)
    plot_seeds(s, tmp_path / "seeds.png")
    assert (tmp_path / "seeds.png").stat().st_size > 10_000


def test_time_and_memory_targets_from_time_v_files(tmp_path):
    from elmo.errors import ElmoError
    from lab.report.results import load_timings

    def time_v(wall: str, kib: int) -> str:
        return (f"\tCommand being timed: \"python x.py\"\n\tElapsed (wall clock) time (h:mm:ss or m:ss): {wall}\n"
                f"\tMaximum resident set size (kbytes): {kib}\n")

    (tmp_path / "bf16_ELMO.py_time.txt").write_text(time_v("12:43.06", 2_035_024))
    (tmp_path / "bf16_classification.py_time.txt").write_text(time_v("6:00.00", 2_506_520))
    (tmp_path / "fp32_ELMO.py_time.txt").write_text(time_v("1:02:03", 2_000_000))
    (tmp_path / "fp32_classification.py_time.txt").write_text(time_v("9:00.50", 5_000_000))
    timing = load_timings(tmp_path)
    assert timing["bf16"]["ELMO.py"]["seconds"] == pytest.approx(763.06)
    assert timing["fp32"]["ELMO.py"]["seconds"] == pytest.approx(3723)  # h:mm:ss
    assert timing["bf16"]["classification.py"]["peak_gb"] == pytest.approx(2_506_520 * 1024 / 1e9)
    text = " ".join(_targets({"seeds": study(), "timing": timing}))
    assert "≤ 20 minutes in bf16: met (18.7 minutes: 12.7 + 6.0)" in text
    assert "≤ 25 minutes in fp32: not met (71.1 minutes" in text
    assert "peak memory ≤ 5 GB: not met (2.57 GB in bf16, 5.12 GB in fp32)" in text
    # ELMO.py with the directions side by side: time -v saw the largest process, lm.json has each process's own peak
    (tmp_path / "fp32_lm.json").write_text(json.dumps({"concurrent_directions": False}))
    assert load_timings(tmp_path)["fp32"]["ELMO.py"]["peak_gb"] == pytest.approx(2_000_000 * 1024 / 1e9)
    (tmp_path / "bf16_lm.json").write_text(json.dumps({"peak_rss_mb": {"forward": 900, "backward": 800, "main": 700}}))
    assert load_timings(tmp_path)["bf16"]["ELMO.py"]["peak_gb"] == pytest.approx(2400 * 2**20 / 1e9)
    assert load_timings(tmp_path / "absent") == {}
    (tmp_path / "fp16_ELMO.py_time.txt").write_text("Command exited with non-zero status 1\n")
    with pytest.raises(ElmoError, match="fp16_ELMO.py_time.txt"):
        load_timings(tmp_path)
