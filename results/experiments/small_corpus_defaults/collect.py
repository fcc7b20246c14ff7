"""Summarise runs/small_corpus/<name>-s<seed>/results/{lm,classification}.json (run.sh) as JSON on stdout."""
import json
import sys
from pathlib import Path

out: dict = {}
for run in sorted(Path(sys.argv[1]).iterdir()):
    name, seed = run.name.rsplit("-s", 1)
    lm = json.loads((run / "results" / "lm.json").read_text())
    cls = json.loads((run / "results" / "classification.json").read_text())
    mixes = [m for m in ("trainable_lambda", "frozen_lambda", "learned_function") if m in cls]
    out.setdefault(name, {})[seed] = {
        "test_accuracy": {m: cls[m]["test"]["accuracy"] for m in mixes},
        "test_perplexity": {d: lm["test"][f"{d}_perplexity"] for d in ("forward", "backward")},
        "batch_size": {"ELMO.py": lm["config"]["batch_size"], "classification.py": cls["config"]["batch_size"]},
        "init_embeddings": {k: lm.get("init_embeddings", {}).get(k) for k in ("method", "copied", "common_direction_cosine")},
        "documents": lm["documents"],
    }
json.dump(out, sys.stdout, indent=1)
print()
