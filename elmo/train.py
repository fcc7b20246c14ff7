"""One training loop for both the language models and the classifier.

:func:`fit` runs epochs of mini-batch steps (fused Adam, gradient clipping, mixed precision: bf16 on
CPUs that have it, bf16 or fp16 on CUDA; :func:`resolve_precision`),
validates after each epoch, keeps the weights of the best epoch on a monitored validation metric and
stops early when it has not improved for ``patience`` epochs. What differs between tasks is passed
in: how to make batches, how to compute a batch loss and how to validate.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from . import distributed
from .checkpoint import FORMAT_VERSION, environment_info, save_checkpoint
from .errors import ElmoError

Batch = dict[str, torch.Tensor]


def resolve_device(name: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; otherwise ``torch.device(name)``. A bare ``cuda``
    means the current GPU (under ``torchrun``, the local rank's: :func:`elmo.distributed.init`).

    Raises:
        ElmoError: an unknown device name, or CUDA asked for but absent.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ElmoError(f"--device: unknown device {name!r} (use auto, cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError("--device cuda was asked for but no CUDA device is available")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (CPU and CUDA) so a CPU run repeats exactly."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def cap_kernel_caches(entries: int) -> None:
    """Bound oneDNN's shape-keyed kernel caches (``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` and ideep's
    ``LRU_CACHE_CAPACITY``, 1024 entries each by default) unless the environment already sets them.

    With length-bucketed batches nearly every batch has a new shape and a bf16 LSTM primitive holds
    several MB, so with the defaults the caches alone grew past 3 GB in a classification run (peak RSS
    9.5 GB). Measured: the LM trains as fast with 32 entries (peak RSS 1.0 GB instead of 1.8 GB after
    an epoch); the classifier needs about 256 to keep its epoch-to-epoch hits (14% slower with 64).
    Takes effect only before the process creates its first oneDNN kernel, so the scripts call it first.
    """
    for variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        os.environ.setdefault(variable, str(entries))


def configure_threads(threads: int | None = None) -> int:
    """Use ``threads`` intra-op threads (default: all cores, shared out among the processes ``torchrun``
    started on this node: :func:`elmo.distributed.default_threads`); returns the number set."""
    threads = threads or distributed.default_threads()
    torch.set_num_threads(threads)
    return threads


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def cpu_has_bf16() -> bool:
    """Whether this CPU has native bfloat16 dot products (AVX512-BF16 or AMX-BF16), read from ``/proc/cpuinfo``.

    Without them oneDNN emulates bf16 and mixed precision is slower than fp32, so ``--precision auto``
    keeps fp32 there (and on any system without ``/proc/cpuinfo``).
    """
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``--precision`` on ``device``; ``None`` means plain fp32.

    ``auto``: on CUDA bf16 where the GPU supports it, else fp16 (with a gradient scaler in :func:`fit`);
    on a CPU bf16 when :func:`cpu_has_bf16`, else fp32. Weights, optimiser state, the LM softmax's
    log-probabilities and every loss stay fp32 either way; only matrix products and the LSTM kernels
    run in the lower precision.

    Raises:
        ElmoError: an unknown name, or fp16 asked for on a CPU (no fast fp16 kernels there).
    """
    if name not in PRECISIONS:
        raise ElmoError(f"--precision: unknown precision {name!r} (use {', '.join(PRECISIONS)})")
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" and cpu_has_bf16() else None
    if name == "fp16" and device.type != "cuda":
        raise ElmoError("--precision fp16 needs a CUDA device; use bf16 or fp32 on a CPU")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def precision_name(dtype: torch.dtype | None) -> str:
    """``"fp32"``, ``"bf16"`` or ``"fp16"`` for an autocast dtype from :func:`resolve_precision`."""
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype`` on ``device`` (mixed precision); a no-op when ``dtype`` is ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move every tensor of a batch (pinned first on CUDA, for asynchronous copies)."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return {k: v.to(device) for k, v in batch.items()}


@dataclass
class TrainConfig:
    """Optimisation settings shared by every task.

    Attributes:
        epochs: maximum number of epochs (>= 1).
        lr: Adam learning rate.
        clip_norm: gradient-norm clipping threshold.
        patience: stop after this many epochs without improvement of the monitored metric.
        weight_decay: Adam (L2) weight decay.
    """

    epochs: int = 5
    lr: float = 1e-3
    clip_norm: float = 1.0
    patience: int = 2
    weight_decay: float = 0.0

    def __post_init__(self):
        if self.epochs < 1:
            raise ElmoError(f"--epochs must be >= 1, got {self.epochs}")
        if self.lr <= 0 or self.clip_norm <= 0 or self.patience < 1:
            raise ElmoError("--lr and clipping norm must be positive and patience >= 1")


@dataclass
class FitResult:
    """What :func:`fit` returns.

    Attributes:
        history: one dict per epoch: ``epoch``, ``train_loss``, ``seconds``, ``units_per_second``
            and the validation metrics prefixed ``val_``.
        best_epoch: 1-based epoch whose weights were restored into the model.
        best_value: the monitored validation metric at that epoch.
    """

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_value: float = float("nan")


@dataclass
class Checkpointing:
    """Where and how often :func:`fit` saves its training state, and whether it resumes from it.

    Attributes:
        path: the training-state file (``format: elmo.training``; written atomically, so a crash at any
            moment leaves the previous good one).
        every: also save after every this many optimiser steps (always at each epoch end).
        resume: continue from ``path`` when it exists (start fresh otherwise).
        meta: plain values stored with the state and compared on resume (the run's flags, a vocabulary
            hash): a difference raises instead of mixing two runs.
    """

    path: Path
    every: int = 500
    resume: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


class Interrupted(ElmoError):
    """Ctrl-C stopped training after a checkpoint was saved (the scripts exit with status 130)."""


def _rng_state() -> dict[str, Any]:
    """Every random generator training may draw from, as tensors and plain values (``weights_only``-safe)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": [torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
             "python": [version, torch.tensor(internal, dtype=torch.int64), gauss_next]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`_rng_state`."""
    torch.set_rng_state(state["torch"])
    keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal.tolist()), gauss_next))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def _ctrl_c_requests_a_stop(active: bool):
    """While ``active`` (and on the main thread), the first Ctrl-C only sets ``flag["stop"]``, which
    :func:`fit` checks after every step; a second Ctrl-C a second or more later interrupts at once as
    usual (under ``torchrun`` a worker gets the terminal's SIGINT and then the agent's copy of it)."""
    flag = {"stop": False, "at": 0.0}
    if not active or threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        if flag["stop"]:
            if time.monotonic() - flag["at"] < 1.0:
                return
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        flag["stop"], flag["at"] = True, time.monotonic()

    signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _load_training_state(checkpoint: Checkpointing, desc: str) -> dict[str, Any]:
    """The saved state at ``checkpoint.path``. Raises :class:`ElmoError` if it belongs to another run."""
    from .checkpoint import load_checkpoint

    state = load_checkpoint(checkpoint.path, "elmo.training")
    saved, now = state.get("meta", {}), checkpoint.meta
    differ = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
    if differ or state.get("desc") != desc:
        detail = "; ".join(f"{k}: {saved.get(k)!r} then, {now.get(k)!r} now" for k in differ[:3]) or f"it trained {state.get('desc')!r}"
        raise ElmoError(f"{checkpoint.path} belongs to a run with other settings ({detail}): run without "
                        "--resume to start over, or with the original flags")
    return state


def _step_totals(loss: torch.Tensor, units: int, stop: bool) -> tuple[float, int, bool]:
    """``(loss × units, units, Ctrl-C)`` of one step summed over every rank (one all-reduce under
    ``torchrun``; just this process's values otherwise)."""
    if not distributed.context().enabled:
        return loss.item() * units, units, stop
    totals = torch.stack([loss.detach().double() * units,
                          torch.tensor(float(units), dtype=torch.float64, device=loss.device),
                          torch.tensor(float(stop), dtype=torch.float64, device=loss.device)])
    torch.distributed.all_reduce(totals)
    loss_sum, global_units, stops = totals.tolist()
    return loss_sum, int(round(global_units)), stops > 0


def fit(
    model: nn.Module,
    batches: Callable[[int], Iterable[Batch]],
    loss_fn: Callable[[nn.Module, Batch], tuple[torch.Tensor, int]],
    validate: Callable[[], dict[str, float]],
    monitor: str,
    maximize: bool,
    config: TrainConfig,
    device: torch.device,
    desc: str = "train",
    unit: str = "tok",
    quiet: bool = False,
    param_groups: list[dict[str, Any]] | None = None,
    on_epoch_start: Callable[[int], None] | None = None,
    amp_dtype: torch.dtype | None = None,
    checkpoint: Checkpointing | None = None,
) -> FitResult:
    """Train ``model`` in place and restore the weights of its best validation epoch.

    Args:
        model: the module; only parameters with ``requires_grad`` are optimised.
        batches: ``batches(epoch)`` yields CPU batches (dicts of tensors) for a 0-based epoch.
        loss_fn: ``loss_fn(model, batch)`` → ``(mean loss, number of units)``; units (tokens or
            documents) weight the epoch's mean loss and the throughput figure.
        validate: returns validation metrics (model is put in eval mode around the call).
        monitor: key of ``validate()``'s result used for model selection and early stopping.
        maximize: whether a larger monitored value is better.
        config: :class:`TrainConfig`; device: where to train; desc/unit: progress-bar labels.
        param_groups: optional Adam parameter groups (``{"params": [...], "lr": ...}``) for
            per-group learning rates; parameters in them may start frozen (``requires_grad=False``)
            and be unfrozen later. Default: one group of every parameter that requires grad.
        on_epoch_start: called with the 0-based epoch before it starts (e.g. gradual unfreezing).
        amp_dtype: autocast dtype of the forward pass (:func:`resolve_precision`); ``None`` = fp32.
            fp16 gets a gradient scaler; bf16 has fp32's range and needs none.
        checkpoint: save the whole training state (weights, optimiser, gradient scaler, every RNG,
            epoch and position in it, history, best weights) every ``checkpoint.every`` steps and at
            each epoch end, and with ``checkpoint.resume`` continue from it: ``batches(epoch)`` must
            give the same batches again (they are seeded by epoch), so a resumed CPU run with the same
            seed and thread count ends with exactly the metrics of an uninterrupted one. Ctrl-C then
            finishes the current step, saves and raises :class:`Interrupted`.

    Under ``torchrun`` (:mod:`elmo.distributed`) each process passes its share of every global batch
    (``batches``; a batch holding ``"ghost"`` counts zero units), the model trains wrapped in
    DistributedDataParallel, and every step all-reduces the loss sum, the unit count and the Ctrl-C
    flag: each rank's loss is weighted by ``world_size × its units / global units`` so the averaged
    gradient is the global batch's, the NaN check and the stop are the same on every rank, and the
    reported loss and throughput are global. ``validate`` must return whole-split metrics on every
    rank. Rank 0 alone prints and writes the checkpoint, which holds every rank's RNG state.

    Returns:
        :class:`FitResult`.

    Raises:
        ElmoError: the loss becomes NaN or infinite (the last checkpoint on disk is the last good
            state), ``monitor`` is missing from ``validate()``, or a checkpoint from another run.
        Interrupted: Ctrl-C during training with ``checkpoint`` set.
    """
    ctx = distributed.context()
    quiet = quiet or not ctx.is_main
    if param_groups is None:
        param_groups = [{"params": [p for p in model.parameters() if p.requires_grad]}]
    params = [p for group in param_groups for p in group["params"]]
    # fused=True: one kernel updates every parameter (CPU and CUDA); on the LM, whose 6.3M-weight
    # embedding gets a dense gradient every step, the optimiser step went from 7.1 to 2.2 ms (profiled).
    optimizer = torch.optim.Adam(param_groups, lr=config.lr, weight_decay=config.weight_decay, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    result, best_state, stale = FitResult(), None, 0
    start_epoch, start_step, carried = 0, 0, (0.0, 0, 0.0)
    if checkpoint is not None and checkpoint.resume and Path(checkpoint.path).is_file():
        state = _load_training_state(checkpoint, desc)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        result = FitResult(state["history"], state["best_epoch"], state["best_value"])
        best_state, stale = state["best_state"], state["stale"]
        start_epoch, start_step, carried = state["epoch"], state["step"], tuple(state["epoch_totals"])
        ranks = state.get("rng_ranks", [state["rng"]])
        _set_rng_state(ranks[ctx.rank] if len(ranks) == ctx.world_size else state["rng"])
        if len(ranks) != ctx.world_size:  # another number of processes: same batches, new dropout streams
            torch.manual_seed(torch.initial_seed() + 7919 * (start_step + 1) + ctx.rank)
            if not quiet:
                print(f"{desc}: the checkpoint was written by {len(ranks)} process(es), this run has "
                      f"{ctx.world_size}: batches continue exactly, dropout masks do not", flush=True)
        if not quiet:
            print(f"{desc}: resumed from {checkpoint.path} (epoch {start_epoch + 1}, step {start_step}"
                  + (", already finished)" if state["done"] else ")"), flush=True)
        if state["done"]:
            start_epoch = config.epochs

    def save(epoch: int, step: int, totals: tuple, done: bool = False) -> None:
        if checkpoint is None:
            return
        rng = distributed.gather_objects(_rng_state())  # a collective: every rank calls save()
        if ctx.is_main:
            save_checkpoint({"format": "elmo.training", "version": FORMAT_VERSION, "desc": desc, "meta": checkpoint.meta,
                             "environment": environment_info(),
                             "epoch": epoch, "step": step, "done": done, "epoch_totals": list(totals),
                             "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "scaler": scaler.state_dict(), "rng": rng[0], "rng_ranks": rng, "history": result.history,
                             "best_epoch": result.best_epoch, "best_value": result.best_value,
                             "best_state": best_state, "stale": stale}, checkpoint.path)

    def stopped(epoch: int, step: int) -> Interrupted:
        where = f"in epoch {epoch + 1} after step {step}" if step else f"at the end of epoch {epoch}"
        return Interrupted(f"{desc}: interrupted {where}; training state saved to {checkpoint.path}: run the same "
                           "command with --resume to continue")

    with _ctrl_c_requests_a_stop(checkpoint is not None) as ctrl_c:
        for epoch in range(start_epoch, config.epochs):
            if on_epoch_start is not None:
                on_epoch_start(epoch)
            model.train()
            trained = distributed.wrap(model, device)  # after on_epoch_start: DDP covers what is trainable now
            skip = start_step if epoch == start_epoch else 0
            total_loss, total_units, before = carried if skip else (0.0, 0, 0.0)
            start, step = time.perf_counter() - before, skip
            bar = tqdm(itertools.islice(batches(epoch), skip, None), desc=f"{desc} epoch {epoch + 1}/{config.epochs}",
                       disable=quiet, leave=False, dynamic_ncols=True, initial=skip)
            for batch in bar:
                ghost = batch.pop("ghost", None) is not None
                batch = to_device(batch, device)
                with autocast(device, amp_dtype):
                    loss, units = loss_fn(trained, batch)
                units = 0 if ghost else units
                loss_sum, global_units, stop = _step_totals(loss, units, ctrl_c["stop"])
                if not math.isfinite(loss_sum):
                    kept = f"; the last good training state is {checkpoint.path}" if checkpoint is not None else ""
                    raise ElmoError(f"{desc}: loss became {loss_sum / max(global_units, 1)} in epoch {epoch + 1} at "
                                    f"step {step + 1}; lower --lr or check the data{kept}")
                ctrl_c["stop"] = stop
                if ctx.enabled:  # DDP averages over ranks: weight each by its share of the global batch
                    loss = loss * (ctx.world_size * units / global_units)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(params, config.clip_norm)
                scaler.step(optimizer)
                scaler.update()
                total_loss += loss_sum
                total_units += global_units
                step += 1
                elapsed = time.perf_counter() - start
                bar.set_postfix(loss=f"{total_loss / total_units:.3f}", **{f"{unit}/s": f"{total_units / elapsed:,.0f}"})
                if checkpoint is not None and (ctrl_c["stop"] or step % checkpoint.every == 0):
                    save(epoch, step, (total_loss, total_units, elapsed))
                if ctrl_c["stop"]:
                    raise stopped(epoch, step)
            seconds = time.perf_counter() - start
            model.eval()
            with torch.no_grad():
                metrics = {k: float(v) for k, v in validate().items()}  # plain floats: the checkpoint loads weights_only
            if monitor not in metrics:
                raise ElmoError(f"validation returned no {monitor!r}")
            row = {"epoch": epoch + 1, "train_loss": total_loss / max(total_units, 1), "seconds": seconds,
                   "units_per_second": total_units / max(seconds, 1e-9), **{f"val_{k}": v for k, v in metrics.items()}}
            result.history.append(row)
            value = metrics[monitor]
            improved = math.isnan(result.best_value) or (value > result.best_value if maximize else value < result.best_value)
            if not quiet:
                shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
                print(f"{desc} epoch {epoch + 1}: train loss {row['train_loss']:.4f}, {shown}, "
                      f"{row['units_per_second']:,.0f} {unit}/s, {seconds:.0f}s" + (" *" if improved else ""), flush=True)
            if improved:
                result.best_epoch, result.best_value, stale = epoch + 1, value, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                stale += 1
            finished = stale >= config.patience or epoch + 1 == config.epochs
            save(epoch + 1, 0, (0.0, 0, 0.0), done=finished)
            if finished:
                break
            if ctrl_c["stop"]:
                raise stopped(epoch + 1, 0)
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return result
