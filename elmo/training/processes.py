"""Independent training runs side by side, each in a child process of its own (``ELMO.py``'s two LM directions on the
CPU; measurements: lab/performance.md).

Each child is a fresh interpreter with its own random generators, oneDNN caches and thread count, started with
``python -c`` (:data:`CHILD_CODE`): a forked child can hang, as GNU OpenMP keeps no thread pool across ``fork``, and
``multiprocessing``'s spawn runs the caller's main script again. It writes its outcome atomically to a result file
(``format: elmo.child_run``, read with ``torch.load(weights_only=True)``) and its stderr to a log kept on failure.
Ctrl-C, or the parent's death (Linux: SIGINT from the kernel), makes each child finish its step, save and stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

from ..artifacts import load_checkpoint, payload, remove_file, save_checkpoint
from ..errors import ElmoError
from ..runtime.device import configure_threads, peak_rss_mb
from .state import Interrupted, handling_sigint

#: ``prctl`` option: the signal a process gets when its parent dies (Linux, ``<linux/prctl.h>``).
PR_SET_PDEATHSIG = 1
#: what a child process runs: the parent's ``sys.path`` and then its :class:`ChildRun` come on its stdin
CHILD_CODE = ("import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); "
              "from elmo.training.processes import child_main; child_main(sys.stdin.buffer)")


@dataclass
class ChildRun:
    """One run in a child process: ``target(arg)``, where ``target`` is a module-level function (the child imports it
    by name) that returns a dict of tensors and plain values (what ``torch.load(weights_only=True)`` reads back) and
    ``arg`` is pickled to the child. ``label`` names the run in messages (``forward LM``); ``threads``: the child's
    intra-op CPU threads (>= 1); ``log``: its stderr (warnings, a traceback), deleted by the caller once the run
    succeeded; ``result``: where it writes its outcome (removed once read)."""

    label: str
    target: Callable[[Any], dict[str, Any]]
    arg: Any
    threads: int
    log: Path
    result: Path


@dataclass
class Finished:
    """A child run that ended: ``value`` is ``target(arg)``'s dict, ``seconds`` the wall time from the child's start
    to its result, ``startup_seconds`` the part before ``target`` was called (interpreter, imports, unpickling ``arg``)
    and ``peak_rss_mb`` the child's peak resident memory in MiB (:func:`~elmo.runtime.device.peak_rss_mb`)."""

    value: dict[str, Any]
    seconds: float
    startup_seconds: float
    peak_rss_mb: float = 0.0


def run_side_by_side(runs: Sequence[ChildRun]) -> list[Finished]:
    """Run every ``runs[i].target(runs[i].arg)`` at once, each in a child process of its own, and return one
    :class:`Finished` per run, in the order of ``runs``. When one child fails, the others get SIGINT (they save their
    training state and stop) before the error is raised: ElmoError when a child raised it (its message and ``field``),
    or died or raised another exception (the message names the run, its exit status or signal, its log file and the
    log's last line). Raises :class:`Interrupted` when Ctrl-C (or SIGINT) stopped children (the message is theirs: where
    each stopped, how to resume), KeyboardInterrupt when Ctrl-C reached the parent after every child had finished."""
    processes: list[subprocess.Popen] = []
    for run in runs:
        remove_file(run.result)  # maybe half written by a killed run's child
        run.log.parent.mkdir(parents=True, exist_ok=True)
    outcomes: list[dict[str, Any] | None] = [None] * len(runs)
    failed: dict[str, Any] | None = None  # the first failure: the others are stopped after it
    ctrl_c = {"stop": False}

    def pass_on(signum, frame):  # Ctrl-C while the children run (main thread only; else they get it from the terminal)
        ctrl_c["stop"] = True
        _interrupt(processes)

    with handling_sigint(pass_on):
        for run in runs:
            if ctrl_c["stop"]:
                break
            with open(run.log, "wb") as log:
                processes.append(subprocess.Popen([sys.executable, "-c", CHILD_CODE], stdin=subprocess.PIPE, stderr=log))
        for run, process in zip(runs, processes):  # every child imports while the first one's run is written
            with contextlib.suppress(OSError):  # a child that died already (Ctrl-C): its exit status tells
                pickle.dump(list(sys.path), process.stdin)
                pickle.dump((run, os.getpid(), time.time()), process.stdin)
            with contextlib.suppress(OSError):
                process.stdin.close()
        waiting = set(range(len(processes)))
        while waiting:
            time.sleep(0.1)
            for i in [i for i in waiting if processes[i].poll() is not None]:
                waiting.discard(i)
                outcomes[i] = _outcome(runs[i], processes[i].returncode)
                if outcomes[i]["outcome"] == "failed" and failed is None and not ctrl_c["stop"]:
                    failed = outcomes[i]
                    _interrupt(processes[j] for j in waiting)
    # after Ctrl-C, a child it reached before its training started dies with a traceback: stopped, not failed
    outcomes = [{"outcome": "interrupted", "message": _stopped(run.label)} if o is not None and o.get("crashed") else o
                for run, o in zip(runs, outcomes)]
    errors = [o for o in (failed, *outcomes) if o is not None and o["outcome"] == "failed"]
    if errors:  # the first failure, else an error a child raised while it stopped
        raise ElmoError(errors[0]["message"], field=errors[0].get("field"))
    stopped = [o["message"] for o in outcomes if o is not None and o["outcome"] == "interrupted"]
    if stopped or len(processes) < len(runs):
        raise Interrupted("; ".join(stopped) or "interrupted by Ctrl-C before every run had started")
    if ctrl_c["stop"]:
        raise KeyboardInterrupt
    return [Finished(o["value"], o["seconds"], o["startup_seconds"], o.get("peak_rss_mb", 0.0)) for o in outcomes]


def _outcome(run: ChildRun, exitcode: int | None) -> dict[str, Any]:
    """What the child of ``run`` left: its result file's content, or a failure naming its exit and its log's last
    non-blank line (a traceback's exception)."""
    if exitcode == 0 and run.result.is_file():
        outcome = load_checkpoint(run.result, "elmo.child_run")
        run.result.unlink()
        return outcome
    killed = exitcode is not None and exitcode < 0
    how = f"was killed by {signal.Signals(-exitcode).name}" if killed else f"failed with exit status {exitcode}"
    try:
        lines = [line.strip() for line in run.log.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        lines = ["(no log)"]
    last = next((line for line in reversed(lines) if line), "(empty)")
    return {"outcome": "failed", "crashed": True, "message": f"{run.label}: its process {how}; its log {run.log}: {last}"}


def _stopped(label: str) -> str:
    return (f"{label}: stopped by Ctrl-C; the training state it saved last is kept: run the same command with "
            "--resume to continue")


def _interrupt(processes: Iterator[subprocess.Popen] | Sequence[subprocess.Popen]) -> None:
    """SIGINT to every live process of ``processes`` (each finishes its step, saves and stops)."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)


def child_main(stream: BinaryIO) -> None:
    """The body of a child process (:data:`CHILD_CODE`): run ``target(arg)`` and write the outcome to the result file.
    An exception other than :class:`ElmoError` ends it with exit status 1 and its traceback in the log."""
    run, parent, started = pickle.load(stream)
    with contextlib.suppress(OSError, AttributeError):  # SIGINT when the parent dies (Linux prctl; elsewhere nothing)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
        if os.getppid() != parent:  # it has already: stop at once
            os.kill(os.getpid(), signal.SIGINT)
    configure_threads(run.threads)
    called = time.time()
    try:
        outcome: dict[str, Any] = {"outcome": "done", "value": run.target(run.arg)}
    except Interrupted as exc:
        outcome = {"outcome": "interrupted", "message": str(exc)}
    except KeyboardInterrupt:
        outcome = {"outcome": "interrupted", "message": _stopped(run.label)}
    except ElmoError as exc:
        outcome = {"outcome": "failed", "message": str(exc), "field": exc.field}
    save_checkpoint(payload("child_run", label=run.label, seconds=time.time() - started,
                            startup_seconds=called - started, peak_rss_mb=peak_rss_mb(), **outcome), run.result)
