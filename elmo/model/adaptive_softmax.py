"""The adaptive softmax of the language models (Grave et al. 2017, "Efficient softmax approximation for GPUs").

:class:`AdaptiveSoftmax` is ``nn.AdaptiveLogSoftmaxWithLoss`` (same parameters and state-dict keys) with a training
loss that reads the device once per call, not once per cluster plus once for the padding: :meth:`loss` sorts the rows
by cluster on the device, reads only the clusters' sizes, and scores each tail on one contiguous slice of them.
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
    """An adaptive softmax over ``vocab_size`` (V) words, frequent words first (word id = frequency rank): a head
    scores the ``cutoffs[0]`` most frequent words and one logit per tail cluster; tail cluster i scores its words
    through ``input_dim (D) → D / div_value^(i+1) → cluster size``, with ``cutoffs`` as :func:`adaptive_cutoffs` fits
    them. The projections compute in the autocast dtype and return fp32 logits (forward hooks), so log-probabilities
    are computed in fp32. PyTorch's ``log_prob(states (n, D)) → (n, V)`` gives the exact log-probabilities of every
    word, for evaluation."""

    def __init__(self, input_dim: int, vocab_size: int, cutoffs: Sequence[int], div_value: float):
        super().__init__(input_dim, vocab_size, adaptive_cutoffs(cutoffs, vocab_size, input_dim, div_value),
                         div_value=div_value)
        for linear in (self.head, *(cluster[-1] for cluster in self.tail)):
            linear.register_forward_hook(_fp32_output)
        # bucketize boundaries: cluster 0 = the head's words, i = tail i - 1, len(cutoffs) = ids >= vocab_size
        self.register_buffer("bounds", torch.tensor(self.cutoffs), persistent=False)

    def loss(self, states: torch.Tensor, targets: torch.Tensor,
             cluster_counts: list[int] | None = None) -> tuple[torch.Tensor, int]:
        """Mean negative log-likelihood of ``targets (N,)`` (int64 word ids in ``[0, V)``; :data:`IGNORE_INDEX` is
        skipped) given ``states (N, D)`` in any float dtype (bf16 under autocast is scored without a copy to fp32).
        ``cluster_counts``: the scored targets per cluster (head first) from the host (:func:`cluster_counts`), so
        that nothing is read back from the device. Returns ``(loss, n)``: the mean over the ``n`` scored positions in
        nats per word (0-d fp32 tensor, 0 when ``n == 0``) and ``n`` as an int, without ``cluster_counts`` the only
        value read back from the device. Raises ElmoError on a target outside ``[0, V)`` other than
        :data:`IGNORE_INDEX` (checked without ``cluster_counts``)."""
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
        ends = np.cumsum(counts[:clusters]).tolist()  # each cluster's rows end there
        for i, tail in enumerate(self.tail):
            if counts[i + 1]:
                part = slice(ends[i], ends[i + 1])
                nll = nll + F.cross_entropy(tail(x[part]), words[part] - self.cutoffs[i], reduction="sum")
        return nll / max(n, 1), n


def outside_message(count: int, size: int) -> str:
    """The error of :meth:`AdaptiveSoftmax.loss` for ``count`` targets outside ``[0, size)``."""
    return (f"AdaptiveSoftmax.loss: {count} target(s) outside [0, {size}) (the vocabulary size), other than "
            f"IGNORE_INDEX ({IGNORE_INDEX})")


def cluster_counts(ids: torch.Tensor, lengths: torch.Tensor, last: int, cutoffs: Sequence[int]) -> list[int]:
    """:meth:`AdaptiveSoftmax.loss`'s ``cluster_counts`` for one direction of a right-padded batch, on the host (numpy):
    the words per cluster (head first) among each row's first ``lengths[b]`` ids of ``ids (B, T)`` (both int64 on the
    CPU) and its boundary word ``last`` (``</S>`` forward, ``<S>`` backward; the reading order does not matter), by the
    softmax's ``cutoffs`` (:attr:`AdaptiveSoftmax.cutoffs`, the vocabulary size last). Raises ElmoError on a word
    outside ``[0, V)``, with :meth:`AdaptiveSoftmax.loss`'s message."""
    n = lengths.numpy()
    words = np.concatenate([ids.numpy()[np.arange(ids.shape[1])[None, :] < n[:, None]], np.full(len(n), last)])
    outside = int(((words < 0) | (words >= cutoffs[-1])).sum())
    if outside:
        raise ElmoError(outside_message(outside, cutoffs[-1]))
    return np.bincount(np.searchsorted(np.asarray(cutoffs), words, side="right"), minlength=len(cutoffs)).tolist()
