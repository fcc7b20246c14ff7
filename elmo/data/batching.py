"""Which documents form a batch: length bucketing, shuffling and the share of each ``torchrun`` rank.

Pure index arithmetic on document lengths (no tensors, no process group): the caller passes its ``(rank, world_size)``
(:attr:`elmo.runtime.distributed.Context.shard`), so the data layer need not know how processes are launched.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

import numpy as np

from ..errors import ElmoError

#: ``(rank, world_size)`` of a process among those sharing the batches.
Shard = tuple[int, int]
SINGLE: Shard = (0, 1)
T = TypeVar("T")


def bucket_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None, shuffle: bool = False,
                   seed: int = 0) -> list[np.ndarray]:
    """Length-bucketed batches of the documents whose token counts are ``lengths`` (``(N,)`` int): int64 index arrays
    that together cover ``range(N)`` once: documents (optionally shuffled, then) grouped in pools of ``50 * batch_size``,
    sorted by length inside each pool, cut into batches of at most ``batch_size`` documents and ``max_tokens`` padded
    tokens; with ``shuffle`` the batch order is shuffled too. Padding stays small while the order is random per epoch
    (pass ``seed + epoch``). Raises ElmoError when ``batch_size`` or ``max_tokens`` is not positive."""
    if batch_size <= 0 or (max_tokens is not None and max_tokens <= 0):
        raise ElmoError(f"batch size and token budget must be positive, got {batch_size}, {max_tokens}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths)) if shuffle else np.arange(len(lengths))
    pool = 50 * batch_size
    out: list[np.ndarray] = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        out.extend(_cut(chunk[np.argsort(lengths[chunk], kind="stable")], lengths, batch_size, max_tokens))
    if shuffle:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


def _cut(sorted_index: np.ndarray, lengths: np.ndarray, batch_size: int, max_tokens: int | None) -> list[np.ndarray]:
    """Consecutive batches of length-sorted documents under the size and padded-token limits."""
    out, current, longest = [], [], 0
    for i in sorted_index:
        n = int(lengths[i])
        too_many = max_tokens is not None and current and max(longest, n) * (len(current) + 1) > max_tokens
        if len(current) == batch_size or too_many:
            out.append(np.array(current, dtype=np.int64))
            current, longest = [], 0
        current.append(int(i))
        longest = max(longest, n)
    if current:
        out.append(np.array(current, dtype=np.int64))
    return out


def rank_share(index: np.ndarray, shard: Shard = SINGLE) -> tuple[np.ndarray, bool]:
    """``(part, ghost)``: this rank's documents of a global batch ``index`` (``(B,)``, length-sorted, so the shares get
    similar lengths), every ``world_size``-th from ``rank``. ``part`` is never empty: when the batch has fewer documents
    than ranks, a rank left without one gets the first document with ``ghost=True`` and must weight its loss by zero (it
    still runs forward/backward, as every DDP rank must in every step)."""
    rank, world_size = shard
    part = index[rank::world_size]
    return (part, False) if len(part) else (index[:1], True)


class CountedBatches(Generic[T]):
    """The ``count`` batches of one epoch, made as iterated (``make()`` returns a fresh iterator over them): ``len()``
    is the number of steps (under ``torchrun`` each rank's, one share per global batch), the progress bar's total
    (:func:`elmo.training.trainer.fit`). A streamed corpus, whose count is unknown, gives a plain iterator."""

    def __init__(self, count: int, make: Callable[[], Iterator[T]]):
        self.count, self.make = count, make

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[T]:
        return self.make()
