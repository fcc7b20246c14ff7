"""One LM direction of ``ELMO.py`` trained for a fixed number of steps on one thread, then evaluated exactly as a
direction's process does (``measure_direction``): the time, the page faults and the resident memory of each phase,
with ``malloc_trim(0)`` every ``TRIM`` training steps (0 = never) and optionally glibc's ``M_MMAP_THRESHOLD`` fixed
at ``MMAP_THRESHOLD`` bytes and ``M_TRIM_THRESHOLD`` at twice it (what ``elmo.runtime.device.steady_heap`` sets).
The LM starts from its random initialisation (no Word2Vec: it does not change the time or the memory).

    TRIM=20 python train_memory.py DATA_DIR STEPS [forward|backward]   # the LM training of commit 2baf0d8
    MMAP_THRESHOLD=67108864 TRIM=0 python train_memory.py ...          # as ELMO.py's processes train now

At commit 2baf0d8 the evaluation also trimmed every 20 batches by itself. Run from the repository root; prints one
JSON line.
"""

import ctypes
import dataclasses
import itertools
import json
import os
import resource
import sys
import time

import torch

from elmo.model.bilm import BiLM
from elmo.pipelines import pretraining
from elmo.pipelines.common import start
from elmo.pipelines.pretraining import PretrainArgs, fit_direction, lm_objective, load_data, measure_direction
from elmo.runtime.device import peak_rss_mb


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def usage() -> dict:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": time.perf_counter(), "user": r.ru_utime, "sys": r.ru_stime, "minflt": r.ru_minflt}


def delta(a: dict, b: dict) -> dict:
    return {k: round(b[k] - a[k], 2) for k in a}


data_dir, steps = sys.argv[1], int(sys.argv[2])
direction = sys.argv[3] if len(sys.argv) > 3 else "forward"
every = int(os.environ["TRIM"])
threshold = int(os.environ.get("MMAP_THRESHOLD", "0"))
libc = ctypes.CDLL("libc.so.6")
if threshold:
    libc.mallopt(-3, threshold)  # M_MMAP_THRESHOLD, fixed (no dynamic adjustment)
    libc.mallopt(-1, 2 * threshold)  # M_TRIM_THRESHOLD
torch.set_num_threads(1)
config = PretrainArgs(data_dir=data_dir, seed=0, quiet=True, threads=1, epochs=1, init_embeddings="none",
                      models_dir="/tmp/lm_heap_trim/models", results_dir="/tmp/lm_heap_trim/results",
                      images_dir="/tmp/lm_heap_trim/images", checkpoint_every=10**9)
run = start(config, kernel_cache_entries=32)
loaded = load_data(config, run)
pretraining.resolve_batch_size(config, len(loaded.data["train"]), lambda *a: None)
pretraining.set_seed(config.seed)
bilm = BiLM(config.bilm_config(len(loaded.vocab)))
lm = bilm.forward_lm if direction == "forward" else bilm.backward_lm


def trimmed(batches):
    """``batches`` with ``malloc_trim(0)`` after every ``TRIM``-th training step, as commit 2baf0d8's trainer did."""
    for i, batch in enumerate(batches):
        if every and i and i % every == 0:
            libc.malloc_trim(0)
        yield batch


def objective(lm, loaded, config, run):
    """The LM objective cut to ``steps`` training batches, no validation, trimming every ``TRIM`` steps."""
    full = lm_objective(lm, loaded, config, run)
    changes = {"heap_trim_every": 0} if hasattr(full, "heap_trim_every") else {}  # only this script trims
    return dataclasses.replace(full, batches=lambda epoch: trimmed(list(itertools.islice(full.batches(epoch), steps))),
                               validate=lambda: {"perplexity": 1.0}, **changes)


pretraining.lm_objective = objective
out = {"trim_every": every, "mmap_threshold": threshold, "steps": steps, "direction": direction, "vocab": len(loaded.vocab),
       "rss_before_mib": round(rss_mib())}
a = usage()
fitted = fit_direction(lm, loaded, config, run, bar=False)
b = usage()
out.update(train=delta(a, b), train_peak_mib=round(peak_rss_mb()), rss_after_train_mib=round(rss_mib()),
           tokens_per_second=round(fitted.history[0]["units_per_second"]), train_loss=fitted.history[0]["train_loss"])
measured = measure_direction(lm, loaded.data, run.device)
c = usage()
out.update(evaluation=delta(b, c), peak_mib=round(peak_rss_mb()), rss_end_mib=round(rss_mib()),
           test_perplexity=measured["test"]["perplexity"])
print(json.dumps(out), flush=True)
