"""Resident memory of the exact full-vocabulary evaluation of one LM on AG News' test split, in one process on one
thread, with glibc's heap left alone or trimmed: the measurement behind elmo.runtime.device.trim_heap.

    python ELMO.py --max-docs 12000 --epochs 1 --models-dir /tmp/m12/models ...   # the LM evaluated
    TRIM=0  python evaluation_memory.py /tmp/m12/models/bilstm.pt    # the heap left alone
    TRIM=20 python evaluation_memory.py /tmp/m12/models/bilstm.pt    # malloc_trim(0) every 20 batches
    MMAP_THRESHOLD=131072 TRIM=0 python evaluation_memory.py ...      # mallopt(M_MMAP_THRESHOLD) instead

Run from the repository root (it reads data/ag_news with ELMO.py's --max-docs 12000 split).
"""

import ctypes
import os
import resource
import sys
import time

import torch

from elmo.model.serialization import load_bilm
from elmo.pipelines.common import start
from elmo.pipelines.pretraining import PretrainArgs, load_data
from elmo.runtime.device import peak_rss_mb
from elmo.training import evaluation

libc = ctypes.CDLL("libc.so.6")
if int(os.environ.get("MMAP_THRESHOLD", "0")):
    libc.mallopt(-3, int(os.environ["MMAP_THRESHOLD"]))  # M_MMAP_THRESHOLD (fixed: no dynamic adjustment)
torch.set_num_threads(1)


def rss_mib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    return 0


every = int(os.environ.get("TRIM", "0"))
# the library's own trimming off, so that only this script's choice acts
evaluation.trim_heap = (lambda: bool(libc.malloc_trim(0))) if every else (lambda: False)
evaluation.HEAP_TRIM_EVERY = every or 1
bilm, _, _ = load_bilm(sys.argv[1])
config = PretrainArgs(max_docs=12000, seed=0, quiet=True, models_dir="/tmp/unused", results_dir="/tmp/unused",
                      images_dir="/tmp/unused")
loaded = load_data(config, start(config, kernel_cache_entries=32))
print("before the evaluation: RSS", rss_mib(), "MiB, peak", round(peak_rss_mb()), "MiB", flush=True)
began, before = time.time(), resource.getrusage(resource.RUSAGE_SELF)
metrics, _, _ = evaluation.evaluate_words(bilm.forward_lm, loaded.data["test"], torch.device("cpu"))
after = resource.getrusage(resource.RUSAGE_SELF)
print(f"after: RSS {rss_mib()} MiB, peak {peak_rss_mb():.0f} MiB, {time.time() - began:.0f} s wall, CPU user "
      f"{after.ru_utime - before.ru_utime:.0f} s sys {after.ru_stime - before.ru_stime:.0f} s, test perplexity "
      f"{metrics['perplexity']:.4f}", flush=True)
