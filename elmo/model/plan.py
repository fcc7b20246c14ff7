"""Host plans: what a biLM's training step must know of its batch, computed with numpy from the batch's CPU copies
(``Objective.host_keys``) so that the step reads nothing back from the device (:class:`PlannedLM`, :func:`step_loss`;
lab/performance.md): the rows running at each recurrence step (else the lengths' ``.tolist()``), the CNN's distinct
spellings and their columns (``torch.unique``, ``nonzero``, ``int(max)``), the predicted positions (``nonzero``),
the adaptive softmax's cluster sizes (``bincount().tolist()``) and the predicted word count (``int(sum)``),
each read otherwise waiting for all queued kernels, idling host and device in turn on a GPU. The forward that takes the
plan (:meth:`~elmo.model.bilm.BiLM.host_plan`'s, all of them) gives the same results bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
import torch
from torch import nn

from ..data.chars import TF_PAD_CHAR
from ..errors import ElmoError
from ..runtime.device import move


@dataclass
class WordPlan:
    """The distinct spellings of a batch and how its tokens map onto them: the character CNN's input, as
    :meth:`~elmo.model.char_cnn.CharEncoder.forward` computes it with ``torch.unique``.

    Attributes:
        distinct: ``(U, C)`` int64, the distinct rows of the flattened ``chars`` in ``torch.unique``'s order, then
            stably sorted by their count of real characters: the order they are encoded in.
        passes: ``(rows, width)`` per CNN pass: its slice of ``distinct`` and the columns it keeps (the last real
            character's column + 1 + the widest filter, at most ``C``).
        gather: ``(N,)`` int64: token ``i``'s row in the encoded ``distinct``.
    """

    distinct: torch.Tensor
    passes: list[tuple[slice, int]]
    gather: torch.Tensor

    def to(self, device: torch.device) -> "WordPlan":
        """The plan with its tensors on ``device`` (copied without waiting, from pinned memory on CUDA)."""
        return WordPlan(move(self.distinct, device), self.passes, move(self.gather, device))


@dataclass
class HostPlan:
    """One batch's plan, its tensors on the host until :meth:`to`. Our biLM's plan has ``units`` and ``cluster_counts``
    (adaptive softmax) or ``kept`` (sampled) (:meth:`~elmo.model.language_model.LanguageModel.host_plan`); the published
    architecture's (:meth:`~elmo.model.bilm.BiLM.host_plan`) has every field.

    Attributes:
        units: ``sum(lengths + 1)``, the words each direction predicts.
        cluster_counts: :func:`~elmo.model.adaptive_softmax.cluster_counts` by direction (0 forward, 1 backward);
            ``None`` without cutoffs.
        order, restore, active: :func:`device_reading_plan` of ``lengths + 1``.
        kept: ``(units,)`` int64, the predicted positions as flat indices into ``(B, T + 1)``, row-major.
        words: :class:`WordPlan` of the tokens; boundaries: that of the ``<S>``, ``</S>`` spellings.
    """

    units: int
    cluster_counts: dict[int, list[int]] | None
    order: torch.Tensor | None = None
    restore: torch.Tensor | None = None
    active: list[int] | None = None
    kept: torch.Tensor | None = None
    words: WordPlan | None = None
    boundaries: WordPlan | None = None

    def to(self, device: torch.device) -> "HostPlan":
        """The plan with its index tensors on ``device``, as :meth:`WordPlan.to`."""
        def moved(x):
            return None if x is None else x.to(device) if isinstance(x, WordPlan) else move(x, device)
        return HostPlan(self.units, self.cluster_counts, moved(self.order), moved(self.restore), self.active,
                        moved(self.kept), moved(self.words), moved(self.boundaries))


class PlannedLM(Protocol):
    """A language model whose step takes a :class:`HostPlan`: ``host_plan`` makes it from the entries ``host_keys``."""

    host_keys: tuple[str, ...]

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan: ...


def step_loss(lm: PlannedLM, trained: nn.Module, batch: dict) -> tuple[torch.Tensor, int]:
    """The training loss ``(loss, n)`` of a device batch: ``trained`` (``lm`` or its DDP / compiled wrapper) with the
    batch's ``plan`` (:func:`plan_batch`, made before the step) or else ``lm.host_plan`` of its host copies
    (``host_<key>`` per ``lm.host_keys``), moved to the batch's device. Nothing is read back from the device
    (adaptive softmax; the sampled one draws its candidates there). Raises ElmoError: no plan and a host copy missing
    (an ``Objective`` without ``lm.host_keys``)."""
    plan = batch.get("plan") or plan_batch(lm, "host_")(batch)["plan"]
    return trained(batch["ids"], batch["lengths"], batch.get("chars"), plan=plan.to(batch["ids"].device))


def plan_batch(lm: PlannedLM, prefix: str = "") -> Callable[[dict], dict]:
    """``batch -> batch`` with ``plan``, ``lm.host_plan`` of the CPU batch (its entries ``prefix + key``): an
    :attr:`~elmo.training.trainer.Objective.prepare`, which the trainer runs one batch ahead on a GPU, so that the host
    plans the next batch while the device computes this one. Raises ElmoError: an entry of ``lm.host_keys`` missing."""
    def prepare(batch: dict) -> dict:
        if missing := [k for k in lm.host_keys if prefix + k not in batch]:
            raise ElmoError(f"{type(lm).__name__}.host_plan: the batch's host copy has no {', '.join(missing)}")
        return {**batch, "plan": lm.host_plan({k: batch[prefix + k] for k in lm.host_keys})}
    return prepare


def device_reading_plan(read: torch.Tensor | np.ndarray,
                        device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """``(order, restore, active)`` of rows reading ``read[b]`` steps, ``read`` an array or a tensor (on a device: the
    one read back): the rows sorted longest first (stable) and the inverse permutation, int64 tensors on ``device``
    (default: ``read``'s), and the rows running at each step."""
    if isinstance(read, torch.Tensor):
        device = read.device if device is None else device
        read = read.cpu().numpy().astype(np.int64)
    order = np.argsort(-read, kind="stable")
    restore = np.argsort(order, kind="stable")
    longest = int(read.max()) if len(read) else 0
    active = (read[:, None] > np.arange(longest)[None, :]).sum(0).tolist()
    return move(torch.from_numpy(order), device), move(torch.from_numpy(restore), device), active


#: odd multipliers of :func:`unique_rows`' row hash, drawn once (any fixed draw works: collisions are checked)
_ROW_HASH = np.random.default_rng(0).integers(1, 2**63, size=1024, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` of ``rows (N, C)`` non-negative ints, the same arrays, about ten
    times faster on a training batch (1,024 windows of 20 words: 7 ms against 90): the rows are told apart by a 64-bit
    hash, one 1-D sort, and only the distinct ones are sorted lexicographically. A hash collision (checked) falls back
    to ``np.unique``. Raises ValueError: ``C`` above 1,024 (the hash's multipliers)."""
    if rows.ndim != 2 or rows.shape[1] > len(_ROW_HASH):
        raise ValueError(f"unique_rows takes (N, C <= {len(_ROW_HASH)}) rows, got {rows.shape}")
    with np.errstate(over="ignore"):
        hashes = (rows.astype(np.uint64) * _ROW_HASH[:rows.shape[1]]).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    kept = rows[first]
    if not np.array_equal(kept[inverse], rows):
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)
    order = np.lexsort(kept.T[::-1])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return kept[order], rank[inverse.reshape(-1)]


def word_plan(chars: np.ndarray, per_pass: int, max_width: int) -> WordPlan:
    """:class:`WordPlan` of ``chars (N, C)`` (bilm-tf ids) in passes of at most ``per_pass`` spellings, for a CNN
    whose widest filter is ``max_width``."""
    distinct, inverse = unique_rows(chars)
    real = (distinct != TF_PAD_CHAR) & (distinct != 0)
    order = np.argsort(real.sum(1), kind="stable")
    full, passes = chars.shape[1], []
    for start in range(0, len(order), max(1, per_pass)):
        rows = slice(start, min(start + max(1, per_pass), len(order)))
        used = np.flatnonzero(real[order[rows]].any(0))
        passes.append((rows, min(full, (int(used.max()) + 1 if len(used) else 0) + max_width)))
    gather = np.argsort(order, kind="stable")[inverse.reshape(-1)]
    return WordPlan(torch.from_numpy(distinct[order]), passes, torch.from_numpy(gather))


def predicted_positions(lengths: torch.Tensor, longest: int) -> torch.Tensor:
    """:attr:`HostPlan.kept` (on the host, ``n + 1`` per row) of ``lengths (B,)`` on the CPU, padded to ``longest``."""
    n = lengths.numpy().astype(np.int64)
    return torch.from_numpy(np.flatnonzero(np.arange(longest + 1)[None, :] < (n + 1)[:, None]))

