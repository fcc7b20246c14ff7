"""Measurements in child processes, so each has its own peak memory and no state leaks between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from elmo.errors import ElmoError
from elmo.runtime.device import maxrss_mb, peak_rss_mb  # noqa: F401 (peak_rss_mb: the benchmarks' import)


def in_child(function: Callable[..., dict], *args: Any, timeout: float | None = None) -> dict[str, Any]:
    """``function(*args)`` in a fresh spawned process (its own peak RSS, no state shared between measurements).

    Raises:
        multiprocessing.TimeoutError: no result within ``timeout`` seconds (the process is then ended).
    """
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply_async(function, args).get(timeout)


def run_script(args: list[str], cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None,
               timeout: float | None = None, log: str | os.PathLike | None = None) -> tuple[float, float]:
    """``(wall seconds, peak RSS MiB)`` of ``python args...`` (its own rusage, from ``os.wait4``), run in ``cwd`` with
    ``env``; its stdout goes to the file ``log`` (else nowhere). After ``timeout`` seconds it is ended, with the
    processes it started (its own session), and so it is on Ctrl-C.

    Raises:
        ElmoError: the run failed or ran out of time (the end of its stderr is quoted).
    """
    with tempfile.TemporaryFile() as err, open(log if log is not None else os.devnull, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], stdout=out, stderr=err, cwd=cwd, env=env,
                                start_new_session=timeout is not None)
        late: list[bool] = []

        def end(timed_out: bool = False) -> None:
            late.append(timed_out)
            try:
                os.killpg(proc.pid, signal.SIGKILL) if timeout is not None else proc.kill()
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, end, (True,)) if timeout is not None else None
        if timer is not None:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            end()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            why = f"ran out of its {timeout:.0f} s" if any(late) else "failed"
            raise ElmoError(f"benchmark run {why}: python {' '.join(args)}: "
                            f"{err.read().decode(errors='replace')[-500:]}")
    return seconds, maxrss_mb(usage.ru_maxrss)
