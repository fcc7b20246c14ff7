"""A/B of the classifier's training with and without ``trim_heap`` every 20 steps, alternating the two in fresh
processes on the same biLM, flags and seed; writes ``measurements.json`` beside this file.

    python results/experiments/classifier_heap_trim/ab.py --pairs 3 -- --models-dir MODELS --max-docs 16000 \
        --epochs 2 --threads 2 --quiet

``trim`` is the behaviour before the change (the classifier's objective trims every ``HEAP_TRIM_EVERY`` steps, as
the language models' does); ``no_trim`` is the default. Each run's per-epoch seconds and test accuracy come from its
``classification.json``; its CPU time and page faults from the child's ``getrusage``.
"""

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import functools, sys
from elmo.pipelines import task
from elmo.runtime.device import HEAP_TRIM_EVERY
if sys.argv[1] == "trim":
    task.Objective = functools.partial(task.Objective, heap_trim_every=HEAP_TRIM_EVERY)
from elmo.cli import run
sys.exit(run("classify", sys.argv[2:]))
"""


def one(mode: str, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        clock = time.perf_counter()
        subprocess.run([sys.executable, "-c", CHILD, mode, *flags, "--results-dir", out, "--images-dir", out],
                       check=True)
        wall = time.perf_counter() - clock
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = json.loads((Path(out) / "classification.json").read_text())
    mixes = {m: {"epoch_seconds": [round(h["seconds"], 2) for h in v["history"]], "test_accuracy": v["test"]["accuracy"]}
             for m, v in result.items() if isinstance(v, dict) and "history" in v}
    return {"mode": mode, "wall_seconds": round(wall, 1), "user_seconds": round(after.ru_utime - before.ru_utime, 1),
            "system_seconds": round(after.ru_stime - before.ru_stime, 1),
            "minor_page_faults": after.ru_minflt - before.ru_minflt, "mixes": mixes}


if __name__ == "__main__":
    args = sys.argv[1:]
    pairs = int(args[args.index("--pairs") + 1]) if "--pairs" in args else 2
    flags = args[args.index("--") + 1:]
    runs = []
    for i in range(pairs):
        for mode in (("trim", "no_trim") if i % 2 == 0 else ("no_trim", "trim")):
            runs.append(one(mode, flags))
            print(json.dumps(runs[-1]), flush=True)
    (HERE / "measurements.json").write_text(json.dumps({"flags": flags, "runs": runs}, indent=1) + "\n")
