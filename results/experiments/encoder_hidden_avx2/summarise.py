"""Summarise the task encoder's width measured on the AVX2 CPU into summary.json (run from the repository root:
``python results/experiments/encoder_hidden_avx2/summarise.py``).

Every run is ``python classification.py --seed S --encoder-hidden H`` with the defaults otherwise (fp32, two
threads, up to 4 epochs) on one biLM, the fp32 biLM of ``python ELMO.py`` on the sample (fingerprint
``363ffc6716849aae``, the one of ``results/timing/avx2/``), so the two widths of a seed differ in nothing else.
``seed_<S>/hidden_<H>/`` holds its ``classification.json`` (per-document test predictions removed), its stdout
and ``/usr/bin/time -v``. Seed 0 with 128 units is the timed default run of ``results/timing/avx2/`` (same commit and host).

For each layer mix: test accuracy per seed, the paired difference 96 − 128 in points with its 95 % t-interval
and paired t-test p-value over the seeds, and the seeds study's mean (``results/seeds.json``, 128 units, bf16
biLMs, one per seed) for reference; then seconds per epoch and the wall time of each run.
"""

import json
from pathlib import Path

import numpy as np

from elmo.report.results import read_time_v
from elmo.training.significance import paired_over_seeds

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
MIXES = ("trainable_lambda", "frozen_lambda", "learned_function")
WIDTHS = (128, 96)


def run_dir(seed: int, width: int) -> Path:
    return HERE / f"seed_{seed}" / f"hidden_{width}"


def classification(seed: int, width: int) -> dict:
    if seed == 0 and width == 128:
        return json.loads((ROOT / "results" / "timing" / "avx2" / "fp32_classification.json").read_text())
    return json.loads((run_dir(seed, width) / "classification.json").read_text())


def wall_seconds(seed: int, width: int) -> float:
    if (seed, width) == (0, 128):
        return read_time_v(ROOT / "results" / "timing" / "avx2" / "fp32_classification.py_time.txt")["seconds"]
    return read_time_v(run_dir(seed, width) / "time.txt")["seconds"]


def paired(old: list[float], new: list[float]) -> dict:
    """Per-seed accuracies of both widths and :func:`paired_over_seeds` of 96 − 128, in points."""
    test = paired_over_seeds([100 * a for a in new], [100 * a for a in old])
    row = {"hidden_128": old, "hidden_96": new, "mean_128": float(np.mean(old)), "mean_96": float(np.mean(new)),
           "difference_points": test["mean_difference"]}
    if test["ci95"] is not None:
        row["ci95_points"], row["paired_t_p"] = test["ci95"], test["p_value"]
    return row


def main() -> None:
    seeds = [s for s in range(10) if all(run_dir(s, w).is_dir() or (s, w) == (0, 128) for w in WIDTHS)]
    seeds_96 = [s for s in range(10) if run_dir(s, 96).is_dir()]
    runs = {(s, w): classification(s, w) for s in seeds for w in WIDTHS}
    runs.update({(s, 96): classification(s, 96) for s in seeds_96})
    fingerprints = {r["meta"]["bilm_fingerprint"] for r in runs.values()}
    assert len(fingerprints) == 1, fingerprints
    study = json.loads((ROOT / "results" / "seeds.json").read_text())["methods"]
    out: dict = {"bilm_fingerprint": fingerprints.pop(), "seeds": seeds, "seeds_96": seeds_96, "test_accuracy": {}, "epoch_seconds": {},
                 "wall_seconds": {}}
    for mix in MIXES:
        row = paired([runs[s, 128][mix]["test"]["accuracy"] for s in seeds],
                     [runs[s, 96][mix]["test"]["accuracy"] for s in seeds])
        row["seeds_study_mean_128"] = study[mix]["summary"]["test_accuracy"]["mean"]
        row["seeds_96"] = seeds_96
        row["all_seeds_96"] = [runs[s, 96][mix]["test"]["accuracy"] for s in seeds_96]
        row["all_seeds_mean_96"] = float(np.mean(row["all_seeds_96"]))
        row["below_study_points"] = 100 * (row["seeds_study_mean_128"] - row["all_seeds_mean_96"])
        row["best_epoch_128"] = [runs[s, 128][mix]["best_epoch"] for s in seeds]
        row["best_epoch_96"] = [runs[s, 96][mix]["best_epoch"] for s in seeds]
        out["test_accuracy"][mix] = row
        out["epoch_seconds"][mix] = {str(w): [[round(e["seconds"], 1) for e in runs[s, w][mix]["history"]]
                                              for s in (seeds if w == 128 else seeds_96)] for w in WIDTHS}
    out["wall_seconds"] = {"128": [wall_seconds(s, 128) for s in seeds], "96": [wall_seconds(s, 96) for s in seeds_96]}
    (HERE / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"seeds {seeds}, biLM {out['bilm_fingerprint']}")
    for mix, row in out["test_accuracy"].items():
        ci = row.get("ci95_points")
        print(f"  {mix:18s} 128: {row['mean_128']:.4f}  96: {row['mean_96']:.4f}  {row['difference_points']:+.2f} points"
              + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}], p = {row['paired_t_p']:.2f}" if ci else "")
              + f"  (study, 128: {row['seeds_study_mean_128']:.4f}; 96 over seeds {seeds_96}: "
              f"{row['all_seeds_mean_96']:.4f}, {row['below_study_points']:.2f} points below)")
    for w in WIDTHS:
        print(f"  wall, {w} units: " + ", ".join(f"{t / 60:.1f} min" for t in out["wall_seconds"][str(w)]))


if __name__ == "__main__":
    main()
