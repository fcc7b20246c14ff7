"""The exact full-vocabulary evaluation of one LM direction (``evaluate_words`` on the validation split, as a
direction's process runs it after training) on one thread: time, page faults and peak resident memory, with
``malloc_trim(0)`` every ``TRIM`` batches (0 = never) and optionally glibc's ``M_MMAP_THRESHOLD`` fixed at
``MMAP_THRESHOLD`` bytes and ``M_TRIM_THRESHOLD`` at twice it (what ``elmo.runtime.device.steady_heap`` sets).
The LM is freshly initialised (seed 0): memory and time do not depend on its weights. Runs against this checkout's
``evaluate_words`` or an older one's (commit 2baf0d8 scored each batch whole and trimmed every 20 batches: TRIM=20).

    TRIM=20 python eval_memory.py DATA_DIR                          # 2baf0d8's evaluation, as it ran
    MMAP_THRESHOLD=67108864 python eval_memory.py DATA_DIR          # this checkout's, as ELMO.py runs it
    ROWS=128 MAX_TOKENS=256 python eval_memory.py DATA_DIR          # evaluate_words' rows and max_tokens

Run from the repository root. Prints one JSON line.
"""

import ctypes
import json
import os
import resource
import sys
import time

import torch

from elmo.model.bilm import BiLM
from elmo.pipelines import pretraining
from elmo.pipelines.common import start
from elmo.pipelines.pretraining import PretrainArgs, load_data
from elmo.runtime.device import peak_rss_mb
from elmo.training import evaluation

libc = ctypes.CDLL("libc.so.6")
threshold = int(os.environ.get("MMAP_THRESHOLD", "0"))
if threshold:
    libc.mallopt(-3, threshold)  # M_MMAP_THRESHOLD, fixed (no dynamic adjustment)
    libc.mallopt(-1, 2 * threshold)  # M_TRIM_THRESHOLD: free memory at the heap's top kept up to twice that
every = int(os.environ.get("TRIM", "0"))
torch.set_num_threads(1)
config = PretrainArgs(data_dir=sys.argv[1], seed=0, quiet=True, threads=1, models_dir="/tmp/lm_heap_trim/models",
                      results_dir="/tmp/lm_heap_trim/results", images_dir="/tmp/lm_heap_trim/images")
loaded = load_data(config, start(config, kernel_cache_entries=32))
pretraining.set_seed(0)
lm = BiLM(config.bilm_config(len(loaded.vocab))).forward_lm
val = loaded.data["val"]
if hasattr(evaluation, "trim_heap"):  # a checkout before steady_heap: only this script's TRIM acts
    evaluation.trim_heap = lambda: False


def trimmed(batches):
    """``batches`` with ``malloc_trim(0)`` before every ``TRIM``-th, as the evaluations of commit 2baf0d8 did."""
    for i, batch in enumerate(batches, 1):
        if every and i % every == 0:
            libc.malloc_trim(0)
        yield batch


eval_batches = val.eval_batches
val.eval_batches = lambda *args, **kwargs: trimmed(eval_batches(*args, **kwargs))
before_peak = peak_rss_mb()
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
sizes = {key.lower(): int(os.environ[key]) for key in ("MAX_TOKENS", "ROWS") if key in os.environ}
metrics, targets, _ = evaluation.evaluate_words(lm, val, torch.device("cpu"), **sizes)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"trim_every": every, "mmap_threshold": threshold, **sizes, "vocab": len(loaded.vocab),
                  "predicted_words": len(targets), "peak_before_mib": round(before_peak),
                  "peak_mib": round(peak_rss_mb()), "seconds": round(time.perf_counter() - t0, 1),
                  "user": round(r1.ru_utime - r0.ru_utime, 1), "sys": round(r1.ru_stime - r0.ru_stime, 1),
                  "minflt": r1.ru_minflt - r0.ru_minflt, "perplexity": metrics["perplexity"]}), flush=True)
