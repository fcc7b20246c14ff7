"""Summarise the classifier-recipe measurements into summary.json (run from the repository root:
``python results/experiments/classifier_recipe/summarise.py``).

Baseline: the committed seeds study (``results/study/seed_<s>/``: ``--epochs 5 --encoder-hidden 128``, one thread
per part, on each seed's biLM). Two candidate recipes, on the same biLMs, seeds and flags otherwise:

* ``--epochs 4``: a run's first four epochs are those of the five-epoch run (the learning rate and the batches
  depend on the epoch, not on the number of epochs; the reruns below repeat the study's histories to the last
  digit), so a run whose best validation epoch was 1-4 gives the same model and test accuracy. The runs whose
  best epoch was 5 were run again with ``--epochs 4`` (``epochs_4/seed_2/``: frozen λ and Word2Vec).
* ``--epochs 4 --encoder-hidden 64``: the study's classify and baselines parts run again
  (``hidden_64/seed_<s>/``); stopped after seeds 0 and 1, which both fell short.

Also copies the per-epoch speed measurements (``speed/epoch_seconds.json``) into the summary.
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
SEEDS = (0, 1, 2)
METHODS = {"trainable_lambda": "classification", "frozen_lambda": "classification",
           "learned_function": "classification", "word2vec": "baselines", "svd": "baselines"}


def entry(folder: Path, method: str) -> dict:
    return json.loads((folder / f"{METHODS[method]}.json").read_text())[method]


def epochs_4(seed: int, method: str) -> tuple[float, str]:
    """Test accuracy with --epochs 4 and where it comes from."""
    study = entry(ROOT / "results" / "study" / f"seed_{seed}", method)
    if study["best_epoch"] <= 4:
        return study["test"]["accuracy"], f"study (best epoch {study['best_epoch']})"
    rerun = entry(HERE / "epochs_4" / f"seed_{seed}", method)
    assert [round(r["val_f1"], 10) for r in rerun["history"]] == [round(r["val_f1"], 10) for r in study["history"][:4]]
    return rerun["test"]["accuracy"], f"rerun (study's best epoch 5; now {rerun['best_epoch']})"


def compare(old: list[float], new: list[float]) -> dict:
    diff = 100 * np.subtract(new, old)
    row = {"study": old, "recipe": new, "study_mean": float(np.mean(old)), "recipe_mean": float(np.mean(new)),
           "difference_points": float(diff.mean())}
    if len(diff) > 1 and diff.std() > 0:
        half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
        row["ci95_points"] = [float(diff.mean() - half), float(diff.mean() + half)]
        row["paired_t_p"] = float(stats.ttest_rel(new, old).pvalue)
    return row


def main() -> None:
    out: dict = {"study": "results/study/ (--epochs 5 --encoder-hidden 128)", "recipes": {}}
    rows, sources = {}, {}
    for method in METHODS:
        found = [epochs_4(s, method) for s in SEEDS]
        rows[method] = compare([entry(ROOT / "results" / "study" / f"seed_{s}", method)["test"]["accuracy"]
                                for s in SEEDS], [a for a, _ in found])
        sources[method] = [w for _, w in found]
    out["recipes"]["--epochs 4"] = {"seeds": list(SEEDS), "test_accuracy": rows, "source": sources}
    seeds = [s for s in SEEDS if (HERE / "hidden_64" / f"seed_{s}").is_dir()]
    out["recipes"]["--epochs 4 --encoder-hidden 64"] = {"seeds": seeds, "test_accuracy": {
        m: compare([entry(ROOT / "results" / "study" / f"seed_{s}", m)["test"]["accuracy"] for s in seeds],
                   [entry(HERE / "hidden_64" / f"seed_{s}", m)["test"]["accuracy"] for s in seeds]) for m in METHODS}}
    out["epoch_seconds"] = json.loads((HERE / "speed" / "epoch_seconds.json").read_text())
    (HERE / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    for name, recipe in out["recipes"].items():
        print(f"{name} (seeds {recipe['seeds']})")
        for method, row in recipe["test_accuracy"].items():
            ci = row.get("ci95_points")
            print(f"  {method:18s} {row['study_mean']:.4f} -> {row['recipe_mean']:.4f}  {row['difference_points']:+.2f} points"
                  + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}], p = {row['paired_t_p']:.2f}" if ci else ""))


if __name__ == "__main__":
    main()
