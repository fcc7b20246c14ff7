"""Measurements in child processes, so each has its own peak memory and no state leaks between them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from elmo.errors import ElmoError
from elmo.runtime.device import maxrss_mb, peak_rss_mb  # noqa: F401 (peak_rss_mb: the benchmarks' import)


def in_child(function: Callable[..., dict], *args: Any) -> dict[str, Any]:
    """``function(*args)`` in a fresh spawned process (its own peak RSS, no state shared between measurements)."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def run_script(args: list[str]) -> tuple[float, float]:
    """``(wall seconds, peak RSS MiB)`` of ``python args...`` (its own rusage, from ``os.wait4``).

    Raises:
        ElmoError: the run failed (the end of its stderr is quoted).
    """
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise ElmoError(f"benchmark run failed: python {' '.join(args)}: {err.read().decode(errors='replace')[-500:]}")
    return seconds, maxrss_mb(usage.ru_maxrss)
