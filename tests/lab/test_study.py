"""The seeds study (lab.study): its plan, its scheduler (resume, failures, records) and the
statistics it writes to seeds.json, on stand-in parts and fabricated per-seed results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from support import make_rows, write_csv

from elmo.errors import ElmoError
from lab.study import Part, StudyArgs, aggregate, plan, run_parts


def test_plan_runs_every_biLM_first_and_gives_each_part_its_seed_and_folders(tmp_path):
    config = StudyArgs(seeds=(3, 4), runs_dir=str(tmp_path), threads=1, extra_flags="--max-docs 50 --epochs 1")
    parts = plan(config)
    assert [(p.seed, p.name) for p in parts[:2]] == [(3, "pretrain"), (4, "pretrain")]
    assert {(p.seed, p.name) for p in parts} == {(s, n) for s in (3, 4) for n in ("pretrain", "classify", "mlp", "baselines")}
    for p in parts:
        argv = " ".join(p.argv)
        assert f"--seed {p.seed}" in argv and f"seed_{p.seed}" in argv and argv.endswith("--max-docs 50 --epochs 1")
        assert p.needs == ([] if p.name == "pretrain" else ["pretrain"])
    mlp = next(p for p in parts if p.name == "mlp")
    assert "--learned-function mlp" in " ".join(mlp.argv) and "results_mlp" in str(mlp.done_file)
    only = plan(StudyArgs(seeds=(0,), runs_dir=str(tmp_path), parts=("pretrain", "classify")))
    assert [p.name for p in only] == ["pretrain", "classify"]


def test_head_extra_reaches_the_classifier_parts_and_never_the_biLM(tmp_path):
    from lab.learning_curve import plan_curve

    config = StudyArgs(seeds=(0,), runs_dir=str(tmp_path), extra_flags="--max-docs 50", head_extra_flags="--epochs 5",
                       labelled_fractions=(0.1, 1.0))
    parts = {p.name: " ".join(p.argv) for p in plan_curve(config)}
    assert set(parts) == {"pretrain", "classify", "baselines", "classify_labelled_0.1", "baselines_labelled_0.1"}
    assert parts.pop("pretrain").endswith("--max-docs 50")  # the biLM keeps its own --epochs
    for argv in parts.values():
        assert argv.endswith("--max-docs 50 --epochs 5")
    with pytest.raises(ElmoError, match="--head-extra-flags must not set --labelled-fraction"):
        StudyArgs(head_extra_flags="--labelled-fraction 0.5").check()


def fake_part(tmp_path: Path, name: str, seed: int, needs=(), code: str = "") -> Part:
    done = tmp_path / f"seed_{seed}" / f"{name}.json"
    script = f"import pathlib\n{code}\npathlib.Path({str(done)!r}).parent.mkdir(parents=True, exist_ok=True); " \
             f"pathlib.Path({str(done)!r}).write_text('{{}}')"
    return Part(name, seed, [sys.executable, "-c", script], done, tmp_path / f"seed_{seed}" / "logs" / f"{name}.log",
                list(needs))


def test_scheduler_runs_dependencies_first_resumes_and_records_time_and_memory(tmp_path):
    config = StudyArgs(seeds=(0, 1), runs_dir=str(tmp_path), jobs=2)
    parts = [fake_part(tmp_path, "pretrain", s) for s in (0, 1)]
    parts += [fake_part(tmp_path, "classify", s, ["pretrain"], "import time\ntime.sleep(0.2)") for s in (0, 1)]
    lines: list[str] = []
    record = run_parts(config, parts, lines.append)
    assert set(record) == {f"seed_{s}/{n}" for s in (0, 1) for n in ("pretrain", "classify")}
    assert all(r["returncode"] == 0 and isinstance(r["seconds"], float) and isinstance(r["peak_rss_mb"], float)
               for r in record.values()), record
    assert all(record[f"seed_{s}/classify"]["seconds"] >= 0.2 for s in (0, 1))  # the part sleeps 0.2 s
    assert json.loads((tmp_path / "parts.json").read_text()) == record
    started = [line.split()[1] for line in lines if line.endswith(".log)")]
    assert started.index("seed_0/classify:") > started.index("seed_0/pretrain:")
    again: list[str] = []
    run_parts(config, parts, again.append)  # everything done: nothing runs again
    assert all("done before" in line for line in again) and len(again) == 4


def test_studies_sharing_an_out_dir_keep_each_others_part_records(tmp_path):
    config = StudyArgs(seeds=(0,), runs_dir=str(tmp_path), jobs=1)
    other = {"seed_0/text_0.5/pretrain": {"seconds": 1.0}}
    # the other study writes its record while this one's part runs
    writes = f"import json, pathlib\npathlib.Path({str(tmp_path / 'parts.json')!r}).write_text(json.dumps({other!r}))"
    record = run_parts(config, [fake_part(tmp_path, "pretrain", 0, code=writes)], lambda line: None)
    assert set(record) == {"seed_0/text_0.5/pretrain", "seed_0/pretrain"}
    assert json.loads((tmp_path / "parts.json").read_text()) == record


def test_a_failed_part_skips_its_dependents_finishes_the_rest_and_names_the_log(tmp_path):
    config = StudyArgs(seeds=(0, 1), runs_dir=str(tmp_path), jobs=1)
    parts = [fake_part(tmp_path, "pretrain", 0, code="raise SystemExit(3)"), fake_part(tmp_path, "pretrain", 1),
             fake_part(tmp_path, "classify", 0, ["pretrain"]), fake_part(tmp_path, "classify", 1, ["pretrain"])]
    with pytest.raises(ElmoError, match=r"seed_0/classify, seed_0/pretrain .*logs"):
        run_parts(config, parts, lambda line: None)
    assert parts[3].done_file.is_file() and not parts[2].done_file.is_file()
    assert json.loads((tmp_path / "parts.json").read_text())["seed_0/pretrain"]["returncode"] == 3


@pytest.mark.parametrize("native_bf16", [True, False])
def test_a_study_resumed_at_another_precision_refuses_before_any_part_runs(tmp_path, monkeypatch, native_bf16):
    from elmo.runtime import device

    monkeypatch.setattr(device, "cpu_has_bf16", lambda: native_bf16)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    here, other = ("bf16", "fp32") if native_bf16 else ("fp32", "bf16")
    config = StudyArgs(seeds=(0,), runs_dir=str(tmp_path), jobs=1)
    pretrain, classify = fake_part(tmp_path, "pretrain", 0), fake_part(tmp_path, "classify", 0, ["pretrain"])
    pretrain.done_file.parent.mkdir(parents=True)
    pretrain.done_file.write_text(json.dumps({"precision": other}))
    with pytest.raises(ElmoError, match=f"{pretrain.done_file} was trained in {other} but this machine runs the "
                                        f"remaining parts in {here}"):
        run_parts(config, [pretrain, classify], lambda line: None)
    assert not classify.done_file.exists() and not (tmp_path / "parts.json").exists()
    pretrain.done_file.write_text(json.dumps({"precision": here}))  # the same precision: the study goes on
    run_parts(config, [pretrain, classify], lambda line: None)
    assert classify.done_file.is_file()
    pretrain.done_file.write_text(json.dumps({"precision": other}))  # nothing left to run: aggregating is fine
    run_parts(config, [pretrain, classify], lambda line: None)


def write_seed(root: Path, seed: int, accuracy: dict[str, float], labels: list[int], rng: np.random.Generator) -> None:
    """Per-seed result files with the given test accuracies (predictions right on that share of documents)."""
    def entry(acc: float) -> dict:
        right = rng.random(len(labels)) < acc
        predictions = [y if r else (y + 1) % 4 for y, r in zip(labels, right)]
        return {"test": {"accuracy": float(right.mean()), "f1": float(right.mean()) - 0.01},
                "val": {"accuracy": acc, "f1": acc - 0.02}, "best_epoch": 2, "test_predictions": predictions,
                "lambdas": [0.3, 0.3, 0.4]}
    d = root / f"seed_{seed}"
    cls = {m: entry(accuracy[m]) for m in ("trainable_lambda", "frozen_lambda", "learned_function")}
    base = {m: entry(accuracy[m]) for m in ("word2vec", "svd", "tfidf_logreg")}
    lm = {s: {"forward_perplexity": 95.0 + seed, "backward_perplexity": 94.0 + seed} for s in ("val", "test")}
    for path, content in ((d / "results/classification.json", cls), (d / "results/baselines.json", base),
                          (d / "results_mlp/classification.json", {"learned_function": entry(accuracy["mlp"])}),
                          (d / "results/lm.json", {**lm, "seconds": 400.0})):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))


def test_aggregate_writes_the_seeds_schema_with_paired_tests(tmp_path):
    rows = make_rows(400, seed=3)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(0)
    accuracies = {0: 0.92, 1: 0.90, 2: 0.93}
    for seed, top in accuracies.items():
        write_seed(tmp_path / "runs", seed, {"trainable_lambda": top, "frozen_lambda": top - 0.01,
                                             "learned_function": top, "mlp": top - 0.02, "word2vec": top - 0.05,
                                             "svd": top - 0.08, "tfidf_logreg": 0.85}, labels, rng)
    config = StudyArgs(seeds=(0, 1, 2, 7), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                         out=str(tmp_path / "seeds.json"))
    out = aggregate(config)
    saved = json.loads((tmp_path / "seeds.json").read_text())
    assert saved["seeds"] == [0, 1, 2]  # seed 7 has not run: left out
    methods = saved["methods"]
    assert set(methods) == {"trainable_lambda", "frozen_lambda", "learned_function", "learned_function_mlp",
                            "word2vec", "svd", "tfidf_logreg"}
    t, w = methods["trainable_lambda"]["test_accuracy"], methods["word2vec"]["test_accuracy"]
    assert len(t) == 3 and methods["trainable_lambda"]["summary"]["test_accuracy"]["mean"] == pytest.approx(np.mean(t))
    c = next(c for c in saved["comparisons"] if (c["a"], c["b"], c["metric"]) == ("trainable_lambda", "word2vec", "test_accuracy"))
    assert c["mean_difference"] == pytest.approx(np.mean(np.subtract(t, w)))
    assert c["p_value"] == pytest.approx(stats.ttest_rel(t, w).pvalue) and len(c["ci95"]) == 2 and "t-test" in c["test"]
    assert [m["seed"] for m in c["mcnemar_per_seed"]] == [0, 1, 2] and all(m["p_value"] < 0.05 for m in c["mcnemar_per_seed"])
    pairs = {(c["a"], c["b"]) for c in saved["comparisons"]}
    assert ("learned_function", "learned_function_mlp") in pairs and ("trainable_lambda", "frozen_lambda") in pairs
    assert saved["bilm"]["test_forward_perplexity"] == [95.0, 96.0, 97.0]
    assert out["tests"]["per_seed"].startswith("McNemar")


def test_aggregate_without_a_finished_seed_is_an_error(tmp_path):
    with pytest.raises(ElmoError, match="no seed"):
        aggregate(StudyArgs(seeds=(0,), runs_dir=str(tmp_path), out=str(tmp_path / "s.json")))
    with pytest.raises(ElmoError, match="--seeds"):
        StudyArgs(seeds=(1, 1)).check()


def test_a_seed_without_the_mlp_part_still_counts_for_everything_else(tmp_path):
    rows = make_rows(200, seed=4)
    write_csv(tmp_path / "data" / "test.csv", rows)
    labels = [r[0] - 1 for r in rows]
    rng = np.random.default_rng(1)
    for seed in (0, 1, 2):
        write_seed(tmp_path / "runs", seed, {"trainable_lambda": 0.9, "frozen_lambda": 0.89, "learned_function": 0.9,
                                             "mlp": 0.88, "word2vec": 0.87, "svd": 0.86, "tfidf_logreg": 0.85},
                   labels, rng)
    (tmp_path / "runs" / "seed_2" / "results_mlp" / "classification.json").unlink()
    out = aggregate(StudyArgs(seeds=(0, 1, 2), runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                out=str(tmp_path / "seeds.json")))
    assert out["seeds"] == [0, 1, 2] and out["methods"]["word2vec"]["seeds"] == [0, 1, 2]
    assert out["methods"]["learned_function_mlp"]["seeds"] == [0, 1]
    mlp = next(c for c in out["comparisons"] if c["b"] == "learned_function_mlp" and c["metric"] == "test_accuracy")
    assert mlp["seeds"] == [0, 1] and mlp["n"] == 2 and len(mlp["mcnemar_per_seed"]) == 2
