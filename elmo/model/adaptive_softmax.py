"""The adaptive softmax of the language models (Grave et al. 2017, "Efficient softmax approximation for GPUs").

:class:`AdaptiveSoftmax` is ``nn.AdaptiveLogSoftmaxWithLoss`` (the same parameters and state-dict keys, so every saved
model loads as before) with a training loss that reads the host once per call. PyTorch's forward finds each
cluster's rows with a boolean mask, one host read per cluster plus the caller's own for the padding; :meth:`loss` sorts
the rows by cluster on the device and reads only the clusters' sizes, then computes the head over every row and each
tail over one contiguous slice of the sorted rows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ElmoError

#: the target of a position that predicts nothing (padding): skipped by :meth:`AdaptiveSoftmax.loss`
IGNORE_INDEX = -100


def adaptive_cutoffs(cutoffs: Sequence[int], vocab_size: int, input_dim: int, div_value: float) -> list[int]:
    """The adaptive-softmax cluster boundaries of ``cutoffs`` that fit ``vocab_size`` words and leave every tail
    projection (``input_dim / div_value^i`` wide) at least 1 wide; at least one (the adaptive softmax needs one)."""
    cut = [c for c in cutoffs if c < vocab_size - 1]
    cut = [c for i, c in enumerate(cut) if input_dim // (div_value ** (i + 1)) >= 1]
    return cut or [max(1, vocab_size // 2)]


def _fp32_output(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
    """Forward hook: return a layer's output in fp32 (used on the softmax's projections)."""
    return output.float()


class AdaptiveSoftmax(nn.AdaptiveLogSoftmaxWithLoss):
    """An adaptive softmax over ``vocab_size`` words, frequent words first (word id = frequency rank).

    A head scores the ``cutoffs[0]`` most frequent words and one logit per tail cluster; tail cluster i scores its
    words through a projection ``input_dim → input_dim / div_value^(i+1) → cluster size``. The projections compute in
    the autocast dtype, their logits return in fp32 (forward hooks), so log-probabilities are fp32 exact.

    Args:
        input_dim: width D of the states it scores; vocab_size: the number of words V (output classes).
        cutoffs: cluster boundaries, kept as :func:`adaptive_cutoffs` fits them to ``vocab_size`` and ``input_dim``.
        div_value: the factor by which each tail's projection narrows.

    ``log_prob(states (n, D)) → (n, V)`` is PyTorch's (exact log-probabilities of every word, for evaluation).
    """

    def __init__(self, input_dim: int, vocab_size: int, cutoffs: Sequence[int], div_value: float):
        super().__init__(input_dim, vocab_size, adaptive_cutoffs(cutoffs, vocab_size, input_dim, div_value),
                         div_value=div_value)
        for linear in (self.head, *(cluster[-1] for cluster in self.tail)):
            linear.register_forward_hook(_fp32_output)
        # bucketize boundaries: cluster 0 = the head's words, i = tail i - 1, len(cutoffs) = ids >= vocab_size
        self.register_buffer("bounds", torch.tensor(self.cutoffs), persistent=False)

    def loss(self, states: torch.Tensor, targets: torch.Tensor,
             cluster_counts: list[int] | None = None) -> tuple[torch.Tensor, int]:
        """Mean negative log-likelihood of the targets, skipping the positions whose target is :data:`IGNORE_INDEX`.

        Args:
            states: ``(N, D)`` in any float dtype (bf16 under autocast is scored without a copy to fp32).
            targets: ``(N,)`` int64 word ids in ``[0, V)``, or :data:`IGNORE_INDEX`.
            cluster_counts: the scored targets per cluster (head first), when the caller knows them from the host
                (:func:`cluster_counts`): nothing is read back from the device.

        Returns:
            ``(loss, n)``: the mean over the ``n`` scored positions, nats per word (a 0-d fp32 tensor; 0 when
            ``n == 0``), and ``n`` as an int: without ``cluster_counts``, the only value read back from the device.

        Raises:
            ElmoError: a target outside ``[0, V)`` other than :data:`IGNORE_INDEX` (without ``cluster_counts``).
        """
        clusters = len(self.cutoffs)  # head + tails
        cluster = torch.bucketize(targets, self.bounds, right=True)
        cluster = torch.where(targets == IGNORE_INDEX, clusters + 1, torch.where(targets < 0, clusters, cluster))
        counts = [*cluster_counts, 0, 0] if cluster_counts is not None else \
            torch.bincount(cluster, minlength=clusters + 2).tolist()  # the one host read
        if counts[clusters]:
            raise ElmoError(outside_message(counts[clusters], self.n_classes))
        n = sum(counts[:clusters])
        rows = torch.argsort(cluster, stable=True)[:n]  # scored rows grouped by cluster, head's first
        x = states.index_select(0, rows)
        if not torch.is_autocast_enabled(x.device.type):
            x = x.to(self.head.weight.dtype)
        words, cluster = targets.index_select(0, rows), cluster.index_select(0, rows)
        head_target = torch.where(cluster == 0, words, self.shortlist_size - 1 + cluster)
        nll = F.cross_entropy(self.head(x), head_target, reduction="sum")
        first = counts[0]
        for i, tail in enumerate(self.tail):
            size = counts[i + 1]
            if size:
                part = slice(first, first + size)
                nll = nll + F.cross_entropy(tail(x[part]), words[part] - self.cutoffs[i], reduction="sum")
                first += size
        return nll / max(n, 1), n


def outside_message(count: int, size: int) -> str:
    """The error of :meth:`AdaptiveSoftmax.loss` for ``count`` targets outside ``[0, size)``."""
    return (f"AdaptiveSoftmax.loss: {count} target(s) outside [0, {size}) (the vocabulary size), other than "
            f"IGNORE_INDEX ({IGNORE_INDEX})")


def cluster_counts(ids: torch.Tensor, lengths: torch.Tensor, last: int, cutoffs: Sequence[int]) -> list[int]:
    """The words per cluster (head first) that one direction predicts in a right-padded batch, worked out on the host
    (numpy) from its CPU tensors: each row's first ``n`` ids and its boundary word ``last`` (``</S>`` forward,
    ``<S>`` backward), the order of the reading not mattering: :meth:`AdaptiveSoftmax.loss`'s ``cluster_counts``.

    Args:
        ids: ``(B, T)`` int64; lengths: ``(B,)`` int64, both on the CPU; last: the boundary word's id; cutoffs: the
            softmax's (:attr:`AdaptiveSoftmax.cutoffs`, the vocabulary size last).

    Raises:
        ElmoError: a word outside ``[0, V)`` (named as :meth:`AdaptiveSoftmax.loss` names it).
    """
    n = lengths.numpy()
    words = np.concatenate([ids.numpy()[np.arange(ids.shape[1])[None, :] < n[:, None]], np.full(len(n), last)])
    outside = int(((words < 0) | (words >= cutoffs[-1])).sum())
    if outside:
        raise ElmoError(outside_message(outside, cutoffs[-1]))
    return np.bincount(np.searchsorted(np.asarray(cutoffs), words, side="right"), minlength=len(cutoffs)).tolist()
