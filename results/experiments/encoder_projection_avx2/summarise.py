"""Summarise ``--encoder-projection 128`` against no projection on the AVX2 CPU into summary.json (run from the
repository root: ``python results/experiments/encoder_projection_avx2/summarise.py``).

The projected runs are ``python classification.py --seed S --encoder-projection 128`` with the defaults otherwise
(fp32, two threads, up to 4 epochs, the 128-unit BiLSTM) on the fp32 biLM of ``results/timing/avx2/`` (fingerprint
``363ffc6716849aae``); ``seed_<S>/`` holds each run's ``classification.json`` (per-document test predictions
removed), its stdout and its ``/usr/bin/time -v``. The unprojected runs of the same seeds on the same biLM, host
and defaults are the 128-unit runs of ``../encoder_hidden_avx2/`` (read from its ``summary.json``), so each seed's
pair differs in the projection only.

For each layer mix: test accuracy per seed, the paired difference (projected − unprojected) in points with its
95 % t-interval and paired t-test p-value, and the distance to the seeds study's mean (``results/seeds.json``);
then seconds per epoch and the wall time of each run.
"""

import json
from pathlib import Path

import numpy as np

from elmo.report.results import read_time_v
from elmo.training.significance import paired_over_seeds

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
MIXES = ("trainable_lambda", "frozen_lambda", "learned_function")
PROJECTION = 128


def untimed(history: list[dict]) -> list[dict]:
    """Epoch rows without their seconds and rates, which differ from run to run."""
    return [{k: v for k, v in row.items() if k not in ("seconds", "units_per_second")} for row in history]


def epochs_5(runs: dict, study: dict, base: dict) -> dict:
    """The same runs with ``--epochs 5`` (``epochs_5/seed_<S>/``): whether their first four epochs repeat the
    4-epoch runs to the last digit, which epoch was selected, and the test accuracy against the study."""
    seeds = [s for s in runs if (HERE / "epochs_5" / f"seed_{s}" / "classification.json").is_file()]
    longer = {s: json.loads((HERE / "epochs_5" / f"seed_{s}" / "classification.json").read_text()) for s in seeds}
    out: dict = {"seeds": seeds}
    for mix in MIXES:
        accuracy = [longer[s][mix]["test"]["accuracy"] for s in seeds]
        unprojected = [base["test_accuracy"][mix]["hidden_128"][base["seeds"].index(s)] for s in seeds]
        test = paired_over_seeds([100 * a for a in accuracy], [100 * a for a in unprojected]) if seeds else {}
        out[mix] = {"first_four_epochs_repeat": all(untimed(longer[s][mix]["history"][:4]) == untimed(runs[s][mix]["history"])
                                                    for s in seeds),
                    "best_epoch": [longer[s][mix]["best_epoch"] for s in seeds], "test_accuracy": accuracy,
                    "mean": float(np.mean(accuracy)) if seeds else None,
                    "minus_unprojected_points": test.get("mean_difference"), "ci95_points": test.get("ci95"),
                    "paired_t_p": test.get("p_value"),
                    "below_study_points": 100 * (study[mix]["summary"]["test_accuracy"]["mean"] - float(np.mean(accuracy)))
                    if seeds else None}
    return out


def main() -> None:
    base = json.loads((HERE.parent / "encoder_hidden_avx2" / "summary.json").read_text())
    seeds = [s for s in base["seeds"] if (HERE / f"seed_{s}" / "classification.json").is_file()]
    runs = {s: json.loads((HERE / f"seed_{s}" / "classification.json").read_text()) for s in seeds}
    fingerprints = {r["meta"]["bilm_fingerprint"] for r in runs.values()} | {base["bilm_fingerprint"]}
    assert len(fingerprints) == 1, fingerprints
    assert all(r["config"]["encoder_projection"] == PROJECTION and r["config"]["encoder_hidden"] == 128
               for r in runs.values())
    study = json.loads((ROOT / "results" / "seeds.json").read_text())["methods"]
    at = [base["seeds"].index(s) for s in seeds]
    out: dict = {"bilm_fingerprint": fingerprints.pop(), "seeds": seeds, "projection": PROJECTION,
                 "test_accuracy": {}, "epoch_seconds": {}}
    for mix in MIXES:
        old = [base["test_accuracy"][mix]["hidden_128"][i] for i in at]
        new = [runs[s][mix]["test"]["accuracy"] for s in seeds]
        test = paired_over_seeds([100 * a for a in new], [100 * a for a in old])
        mean_study = study[mix]["summary"]["test_accuracy"]["mean"]
        out["test_accuracy"][mix] = {
            "unprojected": old, "projected": new, "mean_unprojected": float(np.mean(old)),
            "mean_projected": float(np.mean(new)), "difference_points": test["mean_difference"],
            "ci95_points": test["ci95"], "paired_t_p": test["p_value"], "seeds_study_mean": mean_study,
            "below_study_points": 100 * (mean_study - float(np.mean(new))),
            "best_epoch_projected": [runs[s][mix]["best_epoch"] for s in seeds]}
        out["epoch_seconds"][mix] = {"unprojected": [base["epoch_seconds"][mix]["128"][i] for i in at],
                                     "projected": [[round(e["seconds"], 1) for e in runs[s][mix]["history"]]
                                                   for s in seeds]}
    out["wall_seconds"] = {"unprojected": [base["wall_seconds"]["128"][i] for i in at],
                           "projected": [read_time_v(HERE / f"seed_{s}" / "time.txt")["seconds"] for s in seeds]}
    out["epochs_5"] = epochs_5(runs, study, base)
    epochs = {k: sum(sum(sum(r) for r in out["epoch_seconds"][m][k]) for m in MIXES) for k in ("unprojected", "projected")}
    out["epochs_total_seconds"] = epochs
    (HERE / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"seeds {seeds}, biLM {out['bilm_fingerprint']}")
    for mix, row in out["test_accuracy"].items():
        ci = row["ci95_points"]
        print(f"  {mix:18s} none: {row['mean_unprojected']:.4f}  {PROJECTION}: {row['mean_projected']:.4f}  "
              f"{row['difference_points']:+.2f} points" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}], p = {row['paired_t_p']:.2f}"
                                                         if ci else "")
              + f"  (study {row['seeds_study_mean']:.4f}: {row['below_study_points']:+.2f} points below)")
    print(f"  epochs: {epochs['unprojected']:.0f} s against {epochs['projected']:.0f} s "
          f"({epochs['unprojected'] / epochs['projected']:.2f}x)")
    for mix in MIXES:
        row = out["epochs_5"][mix]
        print(f"  --epochs 5, {mix:18s} seeds {out['epochs_5']['seeds']}: best epochs {row['best_epoch']}, "
              f"first four repeat: {row['first_four_epochs_repeat']}, mean {row['mean']:.4f}, "
              f"{row['minus_unprojected_points']:+.2f} points against none (p = {row['paired_t_p']:.2f}), "
              f"{row['below_study_points']:+.2f} below the study")
    for k, walls in out["wall_seconds"].items():
        print(f"  wall, {k}: " + ", ".join(f"{t / 60:.1f} min" for t in walls))


if __name__ == "__main__":
    main()
