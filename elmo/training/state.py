"""Training checkpoints (``format: elmo.training``): the whole state of an unfinished run, so ``--resume`` continues
it exactly (weights, optimiser and gradient-scaler state, every rank's random generators, the position in the epoch and
its running totals, history, early stopping), and the run's settings (:attr:`Checkpointing.meta`, compared on resume).
Ctrl-C during training (:func:`ctrl_c_requests_a_stop`) finishes the step, saves and raises :class:`Interrupted`.
"""

from __future__ import annotations

import ast
import contextlib
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch

from ..artifacts import environment_info, load_checkpoint, payload, save_checkpoint
from ..errors import ElmoError
from ..runtime import distributed


@dataclass
class Checkpointing:
    """Where and how often training saves its state, and whether it resumes from it: ``path``, the training-state
    file, written atomically (a crash at any moment leaves the previous good one); ``every``: also save after every this
    many optimiser steps (always at each epoch end); ``resume``: continue from ``path`` when it exists (start fresh
    otherwise); ``meta``: plain values stored with the state and compared on resume (the run's flags, a vocabulary
    hash): a difference raises instead of mixing two runs."""

    path: Path
    every: int = 500
    resume: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Position:
    """Where training stands: ``epoch`` (0-based, the one running), ``step`` within it and the running ``totals``
    ``(loss × units, units, seconds)`` of the steps done in it."""

    epoch: int = 0
    step: int = 0
    totals: tuple[float, int, float] = (0.0, 0, 0.0)


class Interrupted(ElmoError):
    """Ctrl-C stopped a command, and the message says what was kept: training after a checkpoint was saved
    (``--resume`` continues it), or ``embed`` with its output file not written (the scripts exit with status 130)."""


def rng_state() -> dict[str, Any]:
    """Every random generator training may draw from, as tensors and plain values (``weights_only``-safe)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": [torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
             "python": [version, torch.tensor(internal, dtype=torch.int64), gauss_next]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal.tolist()), gauss_next))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_training_state(checkpoint: Checkpointing, desc: str, position: Position, done: bool,
                        parts: dict[str, Any]) -> None:
    """Save the training state to ``checkpoint.path``; a collective under ``torchrun`` (every rank calls it, rank 0
    writes). ``desc``: the run's label (``forward LM``, ``trainable_lambda``), checked on resume; ``done``: training has
    finished (a resume then only restores); ``parts``: the ``model``, ``optimizer`` and ``scaler`` state dicts,
    ``history`` and the early-stopping state."""
    rng = distributed.gather_objects(rng_state())
    if distributed.context().is_main:
        save_checkpoint(payload("training", desc=desc, meta=checkpoint.meta, environment=environment_info(),
                                epoch=position.epoch, step=position.step, done=done,
                                epoch_totals=list(position.totals), rng=rng[0], rng_ranks=rng, **parts),
                        checkpoint.path)


def flags_meta(flags: Mapping[str, Any]) -> str:
    """A run's flags (field name → value) as :attr:`Checkpointing.meta` stores them: the sorted ``(name, value)``
    pairs as text, which :func:`setting_differences` compares flag by flag on resume."""
    return repr(sorted(flags.items()))


#: a setting one side of a comparison does not have (a flag added or removed since the checkpoint was written)
_ABSENT = object()


def _flag_values(value: Any) -> dict[str, Any] | None:
    """The flags of a :func:`flags_meta` text, or ``None`` when ``value`` is not one."""
    try:
        pairs = ast.literal_eval(value) if isinstance(value, str) else None
        return {k: v for k, v in pairs} if isinstance(pairs, list) and all(isinstance(k, str) for k, _ in pairs) else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def setting_differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """What differs between a checkpoint's :attr:`Checkpointing.meta` (``saved``) and this run's (``now``), as ``(name,
    saved value, current value)``: a :func:`flags_meta` entry flag by flag, named as on the command line
    (``--batch-size``), then the other entries (a vocabulary's hash) whole."""
    flags: list[tuple[str, Any, Any]] = []
    others: list[tuple[str, Any, Any]] = []
    for key in sorted(set(saved) | set(now)):
        then, current = saved.get(key, _ABSENT), now.get(key, _ABSENT)
        if then == current:
            continue
        old, new = _flag_values(then), _flag_values(current)
        by_flag = [] if old is None or new is None else [
            ("--" + name.replace("_", "-"), old.get(name, _ABSENT), new.get(name, _ABSENT))
            for name in sorted(set(old) | set(new)) if old.get(name, _ABSENT) != new.get(name, _ABSENT)]
        if by_flag:
            flags += by_flag
        else:
            others.append((key, then, current))
    return flags + others


def _shown(value: Any, width: int = 40) -> str:
    """A setting's value in an error message: its ``repr``, shortened to ``width`` characters."""
    text = "absent" if value is _ABSENT else repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def load_training_state(checkpoint: Checkpointing, desc: str) -> dict[str, Any]:
    """The saved state at ``checkpoint.path``, with this process's random generators restored. Under another number
    of processes than wrote it, batches continue exactly but dropout gets new streams (the caller says so on stdout).
    Raises ElmoError when the checkpoint is unreadable or belongs to a run with other settings (naming up to three)."""
    state = load_checkpoint(checkpoint.path, "elmo.training")
    differ = setting_differences(state.get("meta", {}), checkpoint.meta)
    if differ or state.get("desc") != desc:
        detail = "; ".join(f"{name} {_shown(then)} in the checkpoint, {_shown(now)} now" for name, then, now in differ[:3])
        detail += f"; {len(differ) - 3} more differ" if len(differ) > 3 else ""
        raise ElmoError(f"{checkpoint.path} belongs to a run with other settings "
                        f"({detail or 'it trained ' + repr(state.get('desc'))}): run without --resume to start over, "
                        "or with the original flags")
    ctx = distributed.context()
    ranks = state.get("rng_ranks", [state["rng"]])
    state["written_by"] = len(ranks)
    set_rng_state(ranks[ctx.rank] if len(ranks) == ctx.world_size else state["rng"])
    if len(ranks) != ctx.world_size:
        torch.manual_seed(torch.initial_seed() + 7919 * (state["step"] + 1) + ctx.rank)
    return state


@contextlib.contextmanager
def handling_sigint(handler: Callable[[int, Any], None] | None) -> Iterator[Any]:
    """SIGINT calls ``handler`` inside the block (on the main thread and not ``None``; else Ctrl-C acts as usual).
    Yields the handler it replaced (restored at the end)."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield previous
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def ctrl_c_requests_a_stop(active: bool) -> Iterator[dict[str, Any]]:
    """While ``active`` (and on the main thread), the first Ctrl-C only sets ``flag["stop"]``, which the
    trainer checks after every step; a second Ctrl-C a second or more later interrupts at once as usual
    (under ``torchrun`` a worker gets the terminal's SIGINT and then the agent's copy of it)."""
    flag = {"stop": False, "at": 0.0}

    def handler(signum, frame):
        if flag["stop"]:
            if time.monotonic() - flag["at"] < 1.0:
                return
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        flag["stop"], flag["at"] = True, time.monotonic()

    with handling_sigint(handler if active else None) as previous:
        yield flag
