"""The learning curve over labelled data (lab.learning_curve, --labelled-fraction): the class-balanced
draw, the plan of parts, and the statistics written to learning_curve.json, on fabricated per-seed results."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from support import make_rows, write_csv

from elmo.data.agnews import labelled_draw
from elmo.errors import ElmoError
from lab.learning_curve import CURVE_METHODS, aggregate_curve, format_curve, plan_curve
from lab.study import StudyArgs, check_files


def test_the_draw_keeps_each_class_share_is_part_of_the_seed_and_sorted():
    labels = np.repeat([0, 1, 2, 3], [400, 300, 200, 100])
    drawn = labelled_draw(labels, 0.1, seed=5)
    assert np.bincount(labels[drawn]).tolist() == [40, 30, 20, 10]
    assert np.array_equal(drawn, np.sort(drawn)) and len(set(drawn.tolist())) == len(drawn)
    assert np.array_equal(drawn, labelled_draw(labels, 0.1, seed=5))
    assert not np.array_equal(drawn, labelled_draw(labels, 0.1, seed=6))
    assert np.bincount(labels[labelled_draw(labels, 0.001, seed=0)]).tolist() == [1, 1, 1, 1]  # at least one a class
    assert np.array_equal(labelled_draw(labels, 1.0, seed=3), np.arange(len(labels)))
    smaller, larger = set(labelled_draw(labels, 0.1, 2).tolist()), set(labelled_draw(labels, 0.3, 2).tolist())
    assert len(smaller) < len(larger)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ElmoError, match="labelled_fraction"):
            labelled_draw(labels, bad, seed=0)


def test_the_flag_is_checked():
    from elmo.pipelines.classification import ClassifyArgs

    with pytest.raises(ElmoError, match="--labelled-fraction"):
        ClassifyArgs(labelled_fraction=0.0).check()
    with pytest.raises(ElmoError, match="--labelled-fractions"):
        StudyArgs(labelled_fractions=(0.1, 0.1)).check()
    with pytest.raises(ElmoError, match="--labelled-fractions"):
        StudyArgs(labelled_fractions=(0.1, 2.0)).check()
    with pytest.raises(ElmoError, match="--extra-flags"):
        StudyArgs(labelled_fractions=(0.1,), extra_flags="--labelled-fraction 0.5").check()


def test_the_plan_reuses_the_study_parts_for_all_labels_and_adds_the_smaller_shares(tmp_path):
    config = StudyArgs(seeds=(0, 1), runs_dir=str(tmp_path), labelled_fractions=(0.03, 1.0, 0.3), extra_flags="--epochs 1")
    parts = plan_curve(config)
    keys = [p.key for p in parts]
    assert keys[:2] == ["seed_0/pretrain", "seed_1/pretrain"] and "seed_0/mlp" not in keys
    assert {"seed_0/classify", "seed_0/baselines"} <= set(keys)  # share 1: the study's own parts
    assert keys.index("seed_0/classify_labelled_0.3") < keys.index("seed_0/classify_labelled_0.03")
    part = parts[keys.index("seed_1/classify_labelled_0.03")]
    argv = " ".join(part.argv)
    assert "--labelled-fraction 0.03" in argv and "--seed 1" in argv and "--mixes trainable_lambda learned_function" in argv
    assert argv.endswith("--epochs 1") and part.needs == ["pretrain"]
    assert part.models == tmp_path / "seed_1" / "labelled_0.03" / "models"
    assert part.done_file == tmp_path / "seed_1" / "labelled_0.03" / "results" / "classification.json"
    no_full = plan_curve(StudyArgs(seeds=(0,), runs_dir=str(tmp_path), labelled_fractions=(0.1,)))
    assert [p.name for p in no_full] == ["pretrain", "classify_labelled_0.1", "baselines_labelled_0.1"]
    assert StudyArgs(labelled_fractions=(0.1,)).out_path == "results/learning_curve.json"
    with pytest.raises(ElmoError, match="--out"):  # never written over one of its inputs
        check_files(StudyArgs(seeds=(0,), runs_dir=str(tmp_path), labelled_fractions=(0.1,),
                              out=str(tmp_path / "seed_0" / "labelled_0.1" / "results" / "baselines.json")))


def write_share(root: Path, seed: int, fraction: float, accuracy: dict[str, float], labels: list[int],
                rng: np.random.Generator, docs: int) -> None:
    """One seed's result files at one share, each method right on about ``accuracy[method]`` of the test set."""
    def entry(acc: float) -> dict:
        right = rng.random(len(labels)) < acc
        return {"test": {"accuracy": float(right.mean()), "f1": float(right.mean()) - 0.01}, "best_epoch": 3,
                "val": {"f1": acc},
                "test_predictions": [y if r else (y + 1) % 4 for y, r in zip(labels, right)]}
    d = root / f"seed_{seed}" / ("" if fraction == 1.0 else f"labelled_{fraction:g}") / "results"
    d.mkdir(parents=True, exist_ok=True)
    cls = {m: entry(accuracy[m]) for m in ("trainable_lambda", "learned_function")}
    base = {m: entry(accuracy[m]) for m in ("word2vec", "svd", "tfidf_logreg")}
    (d / "classification.json").write_text(json.dumps({**cls, "labelled_documents": docs}))
    (d / "baselines.json").write_text(json.dumps({**base, "labelled_documents": docs}))


def test_aggregate_writes_each_share_with_paired_tests_and_the_comparison_across_shares(tmp_path):
    rows = make_rows(300, seed=3)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(0)
    for seed in (0, 1, 2):
        write_share(tmp_path / "runs", seed, 0.1, {"trainable_lambda": 0.80 + 0.01 * seed, "learned_function": 0.75,
                                                   "word2vec": 0.70, "svd": 0.65, "tfidf_logreg": 0.72}, labels, rng, 37)
        write_share(tmp_path / "runs", seed, 1.0, {"trainable_lambda": 0.90, "learned_function": 0.91,
                                                   "word2vec": 0.89, "svd": 0.88, "tfidf_logreg": 0.90}, labels, rng, 370)
    (tmp_path / "runs" / "seed_2" / "results" / "baselines.json").unlink()  # seed 2 unfinished at share 1
    config = StudyArgs(seeds=(0, 1, 2), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                       labelled_fractions=(0.1, 1.0, 0.01), out=str(tmp_path / "curve.json"))
    out = aggregate_curve(config)
    assert json.loads((tmp_path / "curve.json").read_text()) == json.loads(json.dumps(out))
    assert list(out["sizes"]) == ["0.1", "1"] and out["fractions"] == [0.1, 1.0]  # 0.01 has no finished seed
    small, full = out["sizes"]["0.1"], out["sizes"]["1"]
    assert small["seeds"] == [0, 1, 2] and full["seeds"] == [0, 1]
    assert small["labelled_documents"] == [37, 37, 37] and set(small["methods"]) == set(CURVE_METHODS)
    assert small["best_elmo"] == "trainable_lambda" and full["best_elmo"] == "learned_function"
    t, w = small["methods"]["trainable_lambda"]["test_accuracy"], small["methods"]["word2vec"]["test_accuracy"]
    c = next(c for c in small["comparisons"] if c["b"] == "word2vec")
    assert c["a"] == "trainable_lambda" and c["mean_difference"] == pytest.approx(np.mean(np.subtract(t, w)))
    assert c["p_value"] == pytest.approx(stats.ttest_rel(t, w).pvalue) and len(c["mcnemar_per_seed"]) == 3
    assert small["methods"]["word2vec"]["summary"]["test_accuracy"]["mean"] == pytest.approx(np.mean(w))
    across = {(c["a"], c["b"]): c for c in out["across_sizes"]}
    assert across[("trainable_lambda@0.1", "word2vec@1")]["seeds"] == [0, 1]  # the seeds both shares have
    assert across[("trainable_lambda@0.1", "word2vec@1")]["mean_difference"] < 0
    assert "0.1" in format_curve(out) and "p =" in format_curve(out)
    with pytest.raises(ElmoError, match="no share"):
        aggregate_curve(StudyArgs(seeds=(5,), runs_dir=str(tmp_path / "runs"), labelled_fractions=(0.1,),
                                  out=str(tmp_path / "none.json")))


def test_the_report_says_where_the_lead_is_largest_and_which_goals_are_met(tmp_path):
    from lab.report.analysis import _learning_curve
    from lab.report.figures import plot_learning_curve
    from lab.report.tables import curve_comparisons_table, curve_table

    rows = make_rows(400, seed=5)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(1)
    shares = {0.01: (372, 0.80, 0.70, 0.74), 0.3: (11150, 0.88, 0.87, 0.875), 1.0: (37166, 0.90, 0.89, 0.89)}
    for seed in (0, 1, 2):
        for fraction, (docs, elmo, w2v, tfidf) in shares.items():
            write_share(tmp_path / "runs", seed, fraction, {"trainable_lambda": elmo, "learned_function": elmo - 0.02,
                                                            "word2vec": w2v, "svd": w2v - 0.02, "tfidf_logreg": tfidf},
                        labels, rng, docs)
    curve = aggregate_curve(StudyArgs(seeds=(0, 1, 2), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                      labelled_fractions=tuple(shares), out=str(tmp_path / "curve.json")))
    text = " ".join(_learning_curve({"learning_curve": curve}))
    largest = text.split("Best ELMo layer mix − Word2Vec (same head) per share")[1].split("The lead is largest at ")[1]
    assert largest.startswith("372 labelled documents (1%)")
    w2v_lead = curve["sizes"]["0.01"]["comparisons"][0]
    goal = "Goal at 372 labelled documents (1%), best ELMo ≥ Word2Vec (same head) + 3 points with p < 0.05: "
    assert goal + ("met" if w2v_lead["p_value"] < 0.05 else "not met") in text  # about +10 points a seed
    assert "30% of the labels ≥ Word2Vec with all of them: not met" in text  # 0.88 < 0.89
    assert "Highest mean test accuracy per share: 372 labelled documents (1%): ELMo, trainable λ" in text
    assert _learning_curve({}) == []
    table = curve_table(curve)
    assert table.count("\n") == 1 + len(shares) and "372 (1%, 3 seeds)" in table
    assert curve_comparisons_table(curve).count("\n") == 1 + 3 * len(shares)
    plot_learning_curve(curve, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_the_text_curve_plans_one_study_per_pre_training_text(tmp_path):
    from lab.learning_curve import plan_text_curve

    config = StudyArgs(seeds=(0,), runs_dir=str(tmp_path), data_dir="d", labelled_fractions=(0.1, 1.0),
                       pretraining_texts=("0.25", "1", "extra"), parts=("pretrain", "classify", "baselines"))
    config.check()
    parts = {p.key: p for p in plan_text_curve(config)}
    assert list(parts)[0] == "seed_0/text_1/pretrain"
    quarter = parts["seed_0/text_0.25/classify_labelled_0.1"]
    assert quarter.needs == ["text_0.25/pretrain"] and str(quarter.done_file).startswith(str(tmp_path / "text_0.25"))
    assert " ".join(quarter.argv).endswith("--labelled-fraction 0.1 --text-fraction 0.25")
    extra = " ".join(parts["seed_0/text_extra/pretrain"].argv)
    assert extra.endswith("--extra-text d/extra/train_joined_unsplit.csv d/extra/train_nolabel.csv")
    assert "--text-fraction" not in " ".join(parts["seed_0/text_1/pretrain"].argv)
    assert parts["seed_0/text_1/pretrain"].done_file == tmp_path / "seed_0" / "results" / "lm.json"
    quarter_all = parts["seed_0/text_0.25/classify"].argv
    assert quarter_all[quarter_all.index("--mixes") + 1:][:3] == ["trainable_lambda", "learned_function", "--seed"]
    assert "--mixes" not in parts["seed_0/text_1/classify"].argv  # the seeds study's part: every mix
    without_bilms = replace(config, parts=("classify", "baselines"))
    with pytest.raises(ElmoError, match="needs each seed's biLM; missing for text_0.25/seed_0, seed_0, text_extra/seed_0"):
        without_bilms.check()
    for root in ("seed_0", "text_0.25/seed_0", "text_extra/seed_0"):
        (tmp_path / root / "models").mkdir(parents=True)
        (tmp_path / root / "models" / "bilstm.pt").touch()
    without_bilms.check()
    for bad in (("0",), ("more",)):
        with pytest.raises(ElmoError, match="--pretraining-texts"):
            StudyArgs(pretraining_texts=bad).check()
    with pytest.raises(ElmoError, match="--extra-flags must not set --text-fraction"):
        StudyArgs(pretraining_texts=("0.5",), extra_flags="--text-fraction 0.5").check()


def test_the_text_curve_reports_the_accuracy_per_doubling(tmp_path):
    from lab.learning_curve import aggregate_text_curve, format_text_curve

    rows = make_rows(300, seed=6)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(2)
    tokens = {"0.25": 250_000, "0.5": 500_000, "1": 1_000_000}
    for variant, n in tokens.items():
        root = tmp_path / "runs" if variant == "1" else tmp_path / "runs" / f"text_{variant}"
        step = np.log2(n / 250_000)  # 0, 1, 2 doublings: +2 points each for ELMo, +1 for Word2Vec
        for seed in (0, 1, 2):
            write_share(root, seed, 1.0, {"trainable_lambda": 0.84 + 0.02 * step, "learned_function": 0.80,
                                          "word2vec": 0.83 + 0.01 * step, "svd": 0.8, "tfidf_logreg": 0.85},
                        labels, rng, 300)
            (root / f"seed_{seed}" / "results" / "lm.json").write_text(json.dumps({"train_tokens": n}))
    config = StudyArgs(seeds=(0, 1, 2), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                       labelled_fractions=(1.0,), pretraining_texts=("0.25", "0.5", "1", "extra"),
                       out=str(tmp_path / "text.json"))
    out = aggregate_text_curve(config)
    assert set(out["texts"]) == {"0.25", "0.5", "1"}  # no extra-text run: left out
    assert out["texts"]["0.5"]["train_tokens"] == [500_000] * 3
    per_doubling = out["accuracy_per_doubling"]["1"]
    assert per_doubling["trainable_lambda"]["summary"]["mean"] == pytest.approx(0.02, abs=0.012)  # sampled predictions
    assert per_doubling["word2vec"]["summary"]["mean"] == pytest.approx(0.01, abs=0.012)
    assert per_doubling["trainable_lambda"]["seeds"] == [0, 1, 2] and len(per_doubling["svd"]["per_seed"]) == 3
    quarter = next(c for c in out["versus_full_text"] if c["a"] == "text 0.25" and c["method"] == "trainable_lambda")
    assert quarter["mean_difference"] < 0 and quarter["n"] == 3
    assert json.loads((tmp_path / "text.json").read_text())["texts"]["1"]["curve"]["sizes"]["1"]["seeds"] == [0, 1, 2]
    assert "per doubling" in format_text_curve(out)
    from lab.report.tables import text_curve_rows, texts_without_share

    assert texts_without_share(out, "1") == ""
    del out["texts"]["0.5"]["curve"]["sizes"]["1"]  # a text whose full-labels parts have not finished
    assert texts_without_share(out, "1") == "Not measured with 100% of the labels: 50% of the descriptions."
    assert [r[0].split(" (")[0] for r in text_curve_rows(out, "1")[1:]] == ["25% of the descriptions",
                                                                          "all the descriptions"]


def test_the_report_states_the_effect_of_more_text_and_whether_the_extra_text_belongs_in_the_default(tmp_path):
    from lab.learning_curve import aggregate_text_curve
    from lab.report.analysis import _text_curve
    from lab.report.figures import plot_text_curve
    from lab.report.tables import text_curve_table, text_effect_table

    rows = make_rows(2000, seed=7)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(3)
    # ELMo +3 points a doubling up to all the descriptions, +6 more with the extra text; Word2Vec flat
    texts = {"0.25": (250_000, 0.80, 64, False), "0.5": (500_000, 0.83, 64, True), "1": (1_000_000, 0.86, 64, True),
             "extra": (1_600_000, 0.92, 64, True)}
    for variant, (n, elmo, batch, init) in texts.items():
        root = tmp_path / "runs" if variant == "1" else tmp_path / "runs" / f"text_{variant}"
        for seed in (0, 1, 2):
            for fraction in (0.1, 1.0):
                write_share(root, seed, fraction, {"trainable_lambda": elmo, "learned_function": elmo - 0.05,
                                                   "word2vec": 0.84, "svd": 0.8, "tfidf_logreg": 0.85},
                            labels, rng, 200 if fraction == 0.1 else 2000)
            lm = {"train_tokens": n, "config": {"batch_size": batch if variant != "0.25" else 37},
                  "init_embeddings": {"copied": init}, "test": {"forward_perplexity": 90.0, "backward_perplexity": 89.0}}
            (root / f"seed_{seed}" / "results" / "lm.json").write_text(json.dumps(lm))
    config = StudyArgs(seeds=(0, 1, 2), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                       labelled_fractions=(0.1, 1.0), pretraining_texts=("0.25", "0.5", "1", "extra"),
                       out=str(tmp_path / "text.json"))
    out = aggregate_text_curve(config)
    assert out["texts"]["0.25"]["bilm"][0] == {"batch_size": 37, "word2vec_init": False, "test_perplexity": [90.0, 89.0]}
    text = "\n".join(_text_curve({"pretraining_text_curve": out}))
    assert "re-learnt from 25% of the descriptions (0.25M tokens), 50% of the descriptions (0.50M tokens), all the " \
           "descriptions (1.00M tokens), all + extra AG News text (1.60M tokens)" in text
    assert "25% of the descriptions: batches of 37, random embeddings" in text  # the defaults' set-up is named
    # between consecutive texts: 0.83 - 0.80 over one doubling; 0.92 - 0.86 over log2(1.6) doublings
    step = re.search(r"ELMo, trainable λ: .*?all the descriptions → all \+ extra AG News text ([+-]\d+\.\d+)", text)
    assert step and float(step.group(1)) == pytest.approx(6 / np.log2(1.6), abs=2)  # sampled predictions
    assert "beyond the noise at every labelled share measured (" in text  # +6 points
    assert "pass --extra-text when the files are present" in text
    table = text_curve_table(out, "0.1")
    assert table.count("\n") == 1 + 4 and table.index("25% of the descriptions") < table.index("all + extra")
    effect = text_effect_table(out)
    assert effect.count("\n") == 1 + 2 * 5 and "all + extra AG News text − all, points (p)" in effect.split("\n")[0]
    # Word2Vec gains nothing from the extra text: the verdict follows the ELMo mix, and flips when ELMo gains nothing
    for seed in (0, 1, 2):
        write_share(tmp_path / "runs" / "text_extra", seed, 0.1, {"trainable_lambda": 0.86, "learned_function": 0.81,
                                                                  "word2vec": 0.84, "svd": 0.8, "tfidf_logreg": 0.85},
                    labels, rng, 200)
    flat = "\n".join(_text_curve({"pretraining_text_curve": aggregate_text_curve(config)}))
    assert "beyond the noise at only some of the labelled shares measured (10%: " in flat and "ELMO.py keeps" in flat
    for seed in (0, 1, 2):
        write_share(tmp_path / "runs" / "text_extra", seed, 1.0, {"trainable_lambda": 0.86, "learned_function": 0.81,
                                                                  "word2vec": 0.84, "svd": 0.8, "tfidf_logreg": 0.85},
                    labels, rng, 2000)
    none = "\n".join(_text_curve({"pretraining_text_curve": aggregate_text_curve(config)}))
    assert "beyond the noise at none of the labelled shares measured" in none
    assert _text_curve({}) == []
    plot_text_curve(out, tmp_path / "text.png")
    assert (tmp_path / "text.png").stat().st_size > 10_000
