"""Data-parallel training over several processes (``torch.distributed``): ``torchrun --nproc_per_node=N ELMO.py ...``
starts N copies of a script and :func:`init` joins them into one process group; without ``WORLD_SIZE`` every helper
here is a no-op. How the global batch is shared out (:func:`elmo.data.batching.rank_share`, :func:`step_totals`) and
what each rank does: ``docs/own_corpus_and_scaling.md``'s "Scaling out".
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..errors import ElmoError


@dataclass(frozen=True)
class Context:
    """Where this process stands in the job: its global ``rank`` in ``[0, world_size)`` (0 is the main process) of
    ``world_size`` processes (1: a plain single-process run), its ``local_rank`` on this node (the GPU index on CUDA)
    of ``local_world_size`` (they share the node's cores and memory), and the ``backend``: ``"gloo"``, ``"nccl"`` or
    ``""`` (no process group)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    backend: str = ""

    @property
    def enabled(self) -> bool:
        """Whether several processes train together."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: prints and writes files."""
        return self.rank == 0

    @property
    def shard(self) -> tuple[int, int]:
        """``(rank, world_size)``: which share of the batches this process takes (:mod:`elmo.data.batching`)."""
        return self.rank, self.world_size


_CONTEXT = Context()


def context() -> Context:
    """This process's :class:`Context` (single-process until :func:`init` joined a group)."""
    return _CONTEXT


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise ElmoError(f"environment variable {name}={os.environ[name]!r} is not an integer") from None


def init(device: str = "auto") -> Context:
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1; idempotent) and return the
    :class:`Context` (``world_size == 1`` without ``torchrun``). ``device`` is the ``--device`` flag: ``auto``/``cuda``
    with CUDA present → NCCL, one GPU per local rank (``torch.cuda.set_device(LOCAL_RANK)``); otherwise gloo on CPU.
    Raises ElmoError on more local processes than GPUs on a CUDA run, or a group that cannot be formed."""
    global _CONTEXT
    world = _env_int("WORLD_SIZE", 1)
    if world <= 1 or _CONTEXT.enabled:
        return _CONTEXT
    rank, local_rank = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", world)
    use_cuda = device in ("auto", "cuda") and torch.cuda.is_available()
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise ElmoError(f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} visible): start at "
                            "most one process per GPU (--nproc_per_node)")
        torch.cuda.set_device(local_rank)
    backend = "nccl" if use_cuda else "gloo"
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=60))
    except (RuntimeError, ValueError) as exc:
        raise ElmoError(f"could not join the torchrun process group ({backend}): {exc}") from None
    _CONTEXT = Context(rank, world, local_rank, local_world, backend)
    return _CONTEXT


def shutdown() -> None:
    """Leave the process group (if any); the scripts call it when they end, error or not."""
    global _CONTEXT
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _CONTEXT = Context()


def wrap(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel` when several processes train, else itself.
    Built over the parameters that require grad *now* (call again after unfreezing); the constructor broadcasts rank
    0's weights, so every rank starts identical. ``find_unused_parameters`` (an extra graph traversal per step) only
    when a trainable adaptive softmax is inside: it skips the tail clusters no target of a batch falls in."""
    if not _CONTEXT.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    unused = any(isinstance(m, nn.AdaptiveLogSoftmaxWithLoss) and any(p.requires_grad for p in m.parameters())
                 for m in model.modules())
    return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=unused)


def all_reduce_sum(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """Element-wise sum over ranks of a NumPy array of any shape, as float64 (a copy in a single process); float64
    on the wire keeps counts up to 2**53 exact."""
    array = np.asarray(values, dtype=np.float64)
    if not _CONTEXT.enabled:
        return array.copy()
    tensor = torch.from_numpy(array.copy()).to(_collective_device())
    dist.all_reduce(tensor)
    return tensor.cpu().numpy()


def _collective_device() -> torch.device:
    """Where collectives' tensors live: the current GPU under NCCL, else the CPU."""
    return torch.device("cuda") if _CONTEXT.backend == "nccl" else torch.device("cpu")


def broadcast_words(words: list[str] | None) -> list[str]:
    """Rank 0's ``words`` on every rank (the vocabulary every rank must share); ``words`` is ignored (may be ``None``)
    on the other ranks."""
    if not _CONTEXT.enabled:
        assert words is not None
        return words
    sent = [words if _CONTEXT.is_main else None]
    dist.broadcast_object_list(sent, src=0, device=_collective_device())
    return sent[0]


def gather_objects(obj: Any) -> list[Any]:
    """``obj`` of every rank, in rank order (``[obj]`` in a single process); small objects only (RNG states)."""
    if not _CONTEXT.enabled:
        return [obj]
    out: list[Any] = [None] * _CONTEXT.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if _CONTEXT.enabled:
        dist.barrier()


def step_totals(loss: torch.Tensor, units: int, stop: bool) -> tuple[float, int, bool]:
    """``(loss × units, units, stop)`` of one training step summed over every rank (one all-reduce; this process's
    values without ``torchrun``), so that each rank's mean loss is weighted by its share of the global batch. ``loss``:
    this rank's mean loss (scalar tensor); ``units``: the tokens or documents it covers (0 for a ghost share); ``stop``:
    this rank's Ctrl-C flag (any rank's stop stops every rank)."""
    if not _CONTEXT.enabled:
        return loss.item() * units, units, stop
    totals = torch.stack([loss.detach().double() * units,
                          torch.tensor(float(units), dtype=torch.float64, device=loss.device),
                          torch.tensor(float(stop), dtype=torch.float64, device=loss.device)])
    dist.all_reduce(totals)
    loss_sum, global_units, stops = totals.tolist()
    return loss_sum, int(round(global_units)), stops > 0
