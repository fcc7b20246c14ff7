"""One training loop for the language models and every classifier: :func:`fit` runs epochs of mini-batch steps (fused
Adam, gradient clipping, mixed precision), validates after each epoch, keeps the best epoch's weights and stops early on
a monitored validation metric (:class:`~elmo.training.early_stopping.EarlyStopping`); tasks differ only in their
:class:`Objective`. Saving and resuming: :mod:`elmo.training.state`; the ``torchrun`` reduction:
:func:`elmo.runtime.distributed.step_totals`.
"""

from __future__ import annotations

import itertools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sized

import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import ElmoError, check_fields
from ..model.lstm import lstm_compute_dtypes, summary_dtype
from ..runtime import distributed
from ..runtime.device import Batch, autocast, to_device
from .early_stopping import EarlyStopping
from .state import (
    Checkpointing,
    Interrupted,
    Position,
    ctrl_c_requests_a_stop,
    load_training_state,
    save_training_state,
)


@dataclass
class TrainConfig:
    """Optimisation settings shared by every task: ``epochs``, the maximum (>= 1); ``lr``, Adam's learning rate;
    ``weight_decay``, Adam's (L2); ``clip_norm``, the gradient-norm clipping threshold; ``patience``: stop after this
    many epochs without improvement; ``lr_gamma`` multiplies the learning rate after every epoch (epoch e trains at
    ``lr · lr_gamma^e``; 1 = constant); ``warmup_steps``: the first epoch's first N steps raise the learning rate
    linearly from ``lr / N``; ``compile``: train through ``torch.compile`` of the model (its training forward;
    validation runs uncompiled). A value out of range raises ElmoError naming the field (``TrainConfig.lr must be
    positive, got 0.0``)."""

    epochs: int = 5
    lr: float = 1e-3
    clip_norm: float = 1.0
    patience: int = 2
    weight_decay: float = 0.0
    lr_gamma: float = 1.0
    warmup_steps: int = 0
    compile: bool = False

    def __post_init__(self):
        check_fields(self, ("epochs", self.epochs >= 1, ">= 1"), ("lr", self.lr > 0, "positive"),
                     ("clip_norm", self.clip_norm > 0, "positive"), ("patience", self.patience >= 1, ">= 1"),
                     ("lr_gamma", 0 < self.lr_gamma <= 1, "in (0, 1]"), ("warmup_steps", self.warmup_steps >= 0, ">= 0"))

    def lr_factor(self, epoch: int, step: int) -> float:
        """The learning-rate multiplier at 0-based ``step`` of 0-based ``epoch`` (a function of the
        position only, so a resumed run follows the same schedule)."""
        warm = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps and epoch == 0 else 1.0
        return self.lr_gamma ** epoch * warm


#: on CUDA, the steps between two reads of the running loss (its NaN/inf check and the progress bar's figures): a read
#: waits for the device, so the steps in between are queued without waiting for the host; on other devices every step
CUDA_READ_EVERY = 50


@dataclass
class Objective:
    """What a task trains on and how it is judged: ``batches(epoch)`` yields CPU batches (dicts of tensors) for a 0-based
    epoch, the same ones for the same epoch (seeded by epoch) so a resumed run repeats; a ``len()`` gives the progress
    bar a total and the time left. ``loss_fn(model, batch)`` → ``(mean loss, number of units)``;
    units (tokens or documents) weight the epoch's mean loss and the throughput figure. ``validate()`` returns
    validation metrics (the model is put in eval mode around the call); ``monitor``: the key of the one that selects
    the model and stops early; ``maximize``: whether a larger value of it is better. ``host_keys``: batch entries
    ``loss_fn`` also gets as on the host, as ``host_<key>`` (the same CPU tensors, no copy), to work out what depends on
    the batch's shape without reading the device (:mod:`elmo.model.plan`). ``prepare``: ``batch -> batch`` on each CPU
    batch before its step (the host plan: :func:`~elmo.model.plan.plan_batch`; ``None``: nothing); on CUDA run one
    batch ahead in a thread (:func:`prepared`), so the host makes the next batch while the device computes this one."""

    batches: Callable[[int], Iterable[Batch]]
    loss_fn: Callable[[nn.Module, Batch], tuple[torch.Tensor, int]]
    validate: Callable[[], dict[str, float]]
    monitor: str
    maximize: bool
    host_keys: tuple[str, ...] = ()
    prepare: Callable[[Batch], Batch] | None = None


def prepared(batches: Iterable[Batch], prepare: Callable[[Batch], Batch] | None, ahead: bool) -> Iterable[Batch]:
    """``prepare(batch)`` of each of ``batches``, in order; with ``ahead`` the next batch is made and prepared in a
    worker thread while the caller works on this one (one batch ahead, no more). The same batches either way."""
    if prepare is None:
        return batches
    if not ahead:
        return map(prepare, batches)
    return _one_ahead(iter(batches), prepare)


def _one_ahead(batches: Iterable[Batch], prepare: Callable[[Batch], Batch]) -> Iterable[Batch]:
    """:func:`prepared` with ``ahead``: a generator whose worker thread makes batch i + 1 while batch i is used."""
    done = object()

    def make() -> Any:
        batch = next(batches, done)
        return batch if batch is done else prepare(batch)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-batches") as worker:
        pending = worker.submit(make)
        while (batch := pending.result()) is not done:
            pending = worker.submit(make)
            yield batch


@dataclass
class Progress:
    """How training reports itself: ``desc`` labels the bar and lines (``forward LM``), ``unit`` its throughput
    (``tok``, ``doc``); ``quiet``: no progress bar and no per-epoch line (always on ranks other than 0; rank 0 still
    says where a run resumed from); ``bar=False``: per-epoch lines, no bar (runs side by side would mix their bars)."""

    desc: str = "train"
    unit: str = "tok"
    quiet: bool = False
    bar: bool = True


@dataclass
class Unfreezing:
    """Per-group learning rates and a hook run before each epoch (gradual unfreezing when fine-tuning): Adam
    ``param_groups`` (``{"params": [...], "lr": ...}``) whose parameters may start frozen (``requires_grad=False``),
    and ``on_epoch_start``, called with the 0-based epoch before it starts (where it may unfreeze them)."""

    param_groups: list[dict[str, Any]]
    on_epoch_start: Callable[[int], None]


@dataclass
class FitResult:
    """What :func:`fit` returns: ``history``, one dict per epoch (``epoch``, ``train_loss``, ``seconds``,
    ``units_per_second``, the validation metrics prefixed ``val_``, and ``lstm_dtype``: the dtype the model's LSTMs
    computed in at the epoch's last training step, read from their tensors by :func:`~elmo.model.lstm.summary_dtype`,
    ``None`` for a model without one or an epoch without a step); ``best_epoch``, the 1-based epoch whose weights were
    restored into the model; ``best_value``, the monitored validation metric at that epoch."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_value: float = float("nan")


@dataclass
class _Run:
    """The moving parts of one :func:`fit` call, passed to its steps."""

    model: nn.Module
    objective: Objective
    config: TrainConfig
    device: torch.device
    amp_dtype: torch.dtype | None
    progress: Progress
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    params: list[nn.Parameter]
    stopping: EarlyStopping
    history: list[dict[str, Any]]
    checkpoint: Checkpointing | None
    read_every: int = 1

    def save(self, position: Position, done: bool = False) -> None:
        """Save the training state at ``position`` when checkpointing is on (every rank calls it)."""
        if self.checkpoint is not None:
            save_training_state(self.checkpoint, self.progress.desc, position, done, {
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict(), "history": self.history, **self.stopping.state()})

    def interrupted(self, position: Position) -> Interrupted:
        """The exception Ctrl-C ends training with, saying where and how to resume."""
        where = (f"in epoch {position.epoch + 1} after step {position.step}" if position.step
                 else f"at the end of epoch {position.epoch}")
        return Interrupted(f"{self.progress.desc}: interrupted {where}; training state saved to {self.checkpoint.path}: "
                           "run the same command with --resume to continue")


def fit(model: nn.Module, objective: Objective, config: TrainConfig, device: torch.device,
        amp_dtype: torch.dtype | None = None, checkpoint: Checkpointing | None = None,
        progress: Progress | None = None, unfreezing: Unfreezing | None = None) -> FitResult:
    """Train ``model`` in place and restore the weights of its best validation epoch (returns a :class:`FitResult`):
    only parameters with ``requires_grad`` are optimised (or ``unfreezing``'s groups, the fine-tuning schedule
    :class:`Unfreezing`), on ``device``, as ``config`` (:class:`TrainConfig`) and ``objective`` (batches, loss,
    validation: :class:`Objective`) say; ``amp_dtype``: autocast dtype of the forward pass
    (:func:`elmo.runtime.device.resolve_precision`; ``None`` = fp32), fp16 with a gradient scaler (bf16 has fp32's range
    and needs none); ``progress``: labels and verbosity (:class:`Progress`). ``checkpoint``: save the whole training
    state every ``checkpoint.every`` steps and at each epoch end, and with ``checkpoint.resume`` continue from it
    exactly (:mod:`elmo.training.state`); Ctrl-C then finishes the current step, saves and raises :class:`Interrupted`.

    Under ``torchrun`` (:mod:`elmo.runtime.distributed`) each process passes its share of every global batch (a
    ``"ghost"`` batch counts zero units) and trains in DistributedDataParallel; every step all-reduces the loss sum,
    units and Ctrl-C flag (:func:`~elmo.runtime.distributed.step_totals`). ``validate`` must return whole-split metrics
    on every rank. Rank 0 alone prints and writes the checkpoint (with every rank's RNG state).

    Raises ElmoError on a NaN or infinite loss (on CUDA found at the next read, :data:`CUDA_READ_EVERY`; the last
    checkpoint on disk is the last good state), no ``monitor`` in ``validate()``, or a checkpoint from another run.
    """
    progress = progress or Progress()
    quiet = progress.quiet or not distributed.context().is_main
    groups = unfreezing.param_groups if unfreezing is not None else [{"params": [p for p in model.parameters()
                                                                                  if p.requires_grad]}]
    optimizer = torch.optim.Adam(groups, lr=config.lr, weight_decay=config.weight_decay, fused=True)
    for group in optimizer.param_groups:  # the schedule (TrainConfig.lr_factor) scales each group's own rate
        group["base_lr"] = group["lr"]
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)  # fp16's only
    run = _Run(model, objective, config, device, amp_dtype, replace(progress, quiet=quiet), optimizer, scaler,
               [p for group in groups for p in group["params"]], EarlyStopping(config.patience, objective.maximize),
               [], checkpoint, CUDA_READ_EVERY if device.type == "cuda" else 1)
    position = Position()
    if checkpoint is not None and checkpoint.resume and Path(checkpoint.path).is_file():  # the saved state, into run
        state = load_training_state(checkpoint, progress.desc)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        run.history[:] = state["history"]
        run.stopping.load(state)
        position = Position(config.epochs) if state["done"] else \
            Position(state["epoch"], state["step"], tuple(state["epoch_totals"]))
        if distributed.context().is_main:
            if state["written_by"] != distributed.context().world_size:
                print(f"{progress.desc}: the checkpoint was written by {state['written_by']} process(es), this run has "
                      f"{distributed.context().world_size}: batches continue exactly, dropout masks do not", flush=True)
            print(f"{progress.desc}: resumed from {checkpoint.path} (epoch {state['epoch'] + 1}, step {state['step']}"
                  + (", already finished)" if state["done"] else ")"), flush=True)
    with ctrl_c_requests_a_stop(checkpoint is not None) as ctrl_c:
        for epoch in range(position.epoch, config.epochs):
            if unfreezing is not None:
                unfreezing.on_epoch_start(epoch)
            start = position if epoch == position.epoch else Position(epoch)
            seconds, totals = _train_epoch(run, start, ctrl_c)
            finished = _end_epoch(run, epoch, seconds, totals)
            run.save(Position(epoch + 1), done=finished)
            if finished:
                break
            if ctrl_c["stop"]:
                raise run.interrupted(Position(epoch + 1))
    run.stopping.restore_best(model)
    model.eval()
    return FitResult(run.history, run.stopping.best_epoch, run.stopping.best_value)


def _train_epoch(run: _Run, start: Position, ctrl_c: dict[str, Any]) -> tuple[float, tuple[float, int]]:
    """Train one epoch from ``start`` (mid-epoch when resuming): ``(seconds, (loss × units, units))`` of the whole
    epoch, resumed part included. Raises ElmoError (a non-finite loss) or Interrupted (Ctrl-C, after saving)."""
    run.model.train()
    trained = distributed.wrap(run.model, run.device)  # after on_epoch_start: DDP covers what is trainable now
    trained = torch.compile(trained) if run.config.compile else trained
    total_loss, total_units, before = start.totals if start.step else (0.0, 0, 0.0)
    loss_sum = torch.tensor(total_loss, dtype=torch.float64, device=run.device)  # Σ loss × units, read now and then
    clock, step = time.perf_counter() - before, start.step
    epochs, desc, unit = run.config.epochs, run.progress.desc, run.progress.unit
    batches = run.objective.batches(start.epoch)
    source = prepared(itertools.islice(batches, step, None), run.objective.prepare, ahead=run.device.type == "cuda")
    bar = tqdm(source, total=len(batches) if isinstance(batches, Sized) else None,
               desc=f"{desc} epoch {start.epoch + 1}/{epochs}", disable=run.progress.quiet or not run.progress.bar, leave=False,
               dynamic_ncols=True, initial=step)
    for batch in bar:
        saving = run.checkpoint is not None and (step + 1) % run.checkpoint.every == 0
        read = saving or (step + 1) % run.read_every == 0
        loss_sum, total_units, read_loss = _step(run, trained, batch, ctrl_c, start.epoch, step, (loss_sum, total_units), read)
        step += 1
        if read or ctrl_c["stop"]:
            total_loss = read_loss if read else _read(run, loss_sum, total_units, start.epoch, step)
            elapsed = time.perf_counter() - clock
            bar.set_postfix(loss=f"{total_loss / int(total_units):.3f}", **{f"{unit}/s": f"{int(total_units) / elapsed:,.0f}"})
            if run.checkpoint is not None and (ctrl_c["stop"] or saving):
                run.save(Position(start.epoch, step, (total_loss, int(total_units), elapsed)))
        if ctrl_c["stop"]:
            raise run.interrupted(Position(start.epoch, step))
    total_loss = _read(run, loss_sum, total_units, start.epoch, step)
    return time.perf_counter() - clock, (total_loss, int(total_units))


def _read(run: _Run, loss_sum: torch.Tensor, units: int | torch.Tensor, epoch: int, step: int) -> float:
    """The running ``Σ loss × units`` as a float (on CUDA this waits for the device); ElmoError if NaN or infinite."""
    total = float(loss_sum)
    if not math.isfinite(total):
        kept = f"; the last good training state is {run.checkpoint.path}" if run.checkpoint is not None else ""
        when = "at" if run.read_every == 1 else "by"
        raise ElmoError(f"{run.progress.desc}: loss became {total / max(int(units), 1)} in epoch {epoch + 1} {when} "
                        f"step {step}; lower TrainConfig.lr or check the data{kept}", field="TrainConfig.lr")
    return total


def _step(run: _Run, trained: nn.Module, batch: Batch, ctrl_c: dict[str, Any], epoch: int, step: int,
          totals: tuple[torch.Tensor, int], read: bool) -> tuple[torch.Tensor, int, float | None]:
    """One optimiser step: the running global totals (``Σ loss × units`` on the device, units) with this step's added
    and, when ``read``, their sum checked by :func:`_read` before the backward pass, else ``None``. Sets
    ``ctrl_c["stop"]`` when Ctrl-C reached any rank (read after the forward pass, where a signal lands)."""
    ghost = batch.pop("ghost", None) is not None
    host = {f"host_{k}": batch[k] for k in run.objective.host_keys if k in batch}
    batch = to_device(batch, run.device) | host
    with autocast(run.device, run.amp_dtype):
        loss, units = run.objective.loss_fn(trained, batch)
    units = 0 if ghost else units
    ctx = distributed.context()
    if ctx.enabled:
        loss_sum, global_units, ctrl_c["stop"] = distributed.step_totals(loss, units, ctrl_c["stop"])
    else:  # stays on the device, in float64 like a Python float
        loss_sum, global_units = loss.detach().double() * units, units
    totals = (totals[0] + loss_sum, totals[1] + global_units)
    read_loss = _read(run, *totals, epoch, step + 1) if read else None
    if ctx.enabled:  # DDP averages over ranks: weight each by its share of the global batch
        loss = loss * (ctx.world_size * units / global_units)
    run.optimizer.zero_grad(set_to_none=True)
    factor = run.config.lr_factor(epoch, step)
    for group in run.optimizer.param_groups:
        group["lr"] = group["base_lr"] * factor
    run.scaler.scale(loss).backward()
    run.scaler.unscale_(run.optimizer)
    nn.utils.clip_grad_norm_(run.params, run.config.clip_norm)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    return *totals, read_loss


def _end_epoch(run: _Run, epoch: int, seconds: float, totals: tuple[float, int]) -> bool:
    """Validate after 0-based ``epoch``, log it, update early stopping; returns whether training is over. Raises
    ElmoError when ``validate()`` has no ``monitor`` key."""
    lstm_dtype = summary_dtype(lstm_compute_dtypes(run.model))  # the last training step's, before validation runs
    run.model.eval()
    with torch.no_grad():
        metrics = {k: float(v) for k, v in run.objective.validate().items()}  # plain floats: weights_only loads
    monitor = run.objective.monitor
    if monitor not in metrics:
        raise ElmoError(f"validation returned no {monitor!r}")
    total_loss, total_units = totals
    row = {"epoch": epoch + 1, "train_loss": total_loss / max(total_units, 1), "seconds": seconds,
           "units_per_second": total_units / max(seconds, 1e-9), **{f"val_{k}": v for k, v in metrics.items()},
           "lstm_dtype": lstm_dtype}
    run.history.append(row)
    improved = run.stopping.update(epoch + 1, metrics[monitor], run.model)
    if not run.progress.quiet:
        shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        print(f"{run.progress.desc} epoch {epoch + 1}: train loss {row['train_loss']:.4f}, {shown}, "
              f"{row['units_per_second']:,.0f} {run.progress.unit}/s, {seconds:.0f}s" + (" *" if improved else ""),
              flush=True)
    return run.stopping.should_stop or epoch + 1 == run.config.epochs
