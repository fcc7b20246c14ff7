"""Model-selection noise: which epoch each rule picks, and the test accuracy of that epoch, over seeds.

Reads ``seed_<s>_val_<v>/classification.json`` next to this file (trainable λ trained for all 5 epochs with
``--patience 5 --track-test``, so every epoch's validation F1, validation loss and test accuracy are in
the history) and replays early stopping with the default patience (2) for each rule. Writes summary.json
and prints a table. Usage: python results/experiments/model_selection/analyze.py
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATIENCE = 2


def replay(history: list[dict], key: str, maximize: bool) -> int:
    """0-based epoch fit() keeps when monitoring ``key`` with early stopping after PATIENCE epochs."""
    best, since = 0, 0
    for e in range(1, len(history)):
        better = history[e][key] > history[best][key] if maximize else history[e][key] < history[best][key]
        best, since = (e, 0) if better else (best, since + 1)
        if since >= PATIENCE:
            break
    return best


RULES = {
    "val_f1": lambda h: replay(h, "val_f1", True),
    "val_loss": lambda h: replay(h, "val_loss", False),
    "last_epoch": lambda h: len(h) - 1,
    "oracle_test": lambda h: max(range(len(h)), key=lambda e: h[e]["test_accuracy"]),
}

runs: dict[str, dict[int, list[dict]]] = {}
for path in sorted(HERE.glob("seed_*_val_*/classification.json")):
    _, seed, _, val = path.parent.name.split("_")
    runs.setdefault(val, {})[int(seed)] = json.loads(path.read_text())["trainable_lambda"]["history"]

summary = {}
for val, by_seed in sorted(runs.items()):
    rows = {}
    for rule, pick in RULES.items():
        chosen = {s: pick(h) for s, h in by_seed.items()}
        acc = [by_seed[s][e]["test_accuracy"] for s, e in chosen.items()]
        oracle = [max(r["test_accuracy"] for r in by_seed[s]) for s in chosen]
        rows[rule] = {"epochs": {s: e + 1 for s, e in chosen.items()}, "test_accuracy": acc,
                      "mean": statistics.mean(acc), "std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                      "mean_regret_points": 100 * statistics.mean(o - a for o, a in zip(oracle, acc))}
    summary[f"val_fraction_{val}"] = {"seeds": sorted(by_seed), "rules": rows,
                                      "per_epoch": {s: [{k: r[k] for k in ("epoch", "val_f1", "val_loss", "test_accuracy")}
                                                        for r in h] for s, h in by_seed.items()}}
(HERE / "summary.json").write_text(json.dumps(summary, indent=1))
for name, block in summary.items():
    print(f"{name} (seeds {block['seeds']})")
    print(f"  {'rule':<12}{'epochs':>14}{'test acc mean':>15}{'std':>9}{'regret':>9}")
    for rule, r in block["rules"].items():
        print(f"  {rule:<12}{str(list(r['epochs'].values())):>14}{r['mean']:>15.4f}{r['std']:>9.4f}{r['mean_regret_points']:>9.2f}")
