"""Evaluating a language model: held-out perplexity (sharded under ``torchrun``) and the exact
full-vocabulary word-prediction metrics ``ELMO.py`` reports."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.corpus import EncodedCorpus
from ..errors import ElmoError
from ..model.bilm import Direction
from ..runtime import distributed
from ..runtime.device import to_device
from .metrics import word_prediction_metrics


def perplexity(lm: torch.nn.Module, corpus: EncodedCorpus, device: torch.device, max_tokens: int = 8192) -> float:
    """Held-out perplexity exp(mean NLL per predicted word), boundary words included, of ``lm(ids, lengths, chars) ->
    (mean NLL, n)`` (a :class:`~elmo.model.bilm.Direction`, or both directions of a
    :class:`~elmo.model.published_lm.PublishedBiLMWithSoftmax`): exact, as the adaptive softmax
    is a normalised distribution over the whole vocabulary. Works on an :class:`~elmo.data.corpus.EncodedCorpus` or a
    :class:`~elmo.data.stream.StreamedCorpus`; under ``torchrun`` each rank evaluates its share of the batches and the
    sums are all-reduced. Raises ElmoError on an empty corpus."""
    total, count = 0.0, 0
    lm.eval()
    with torch.no_grad():
        for _, batch in corpus.eval_batches(256, max_tokens, distributed.context().shard):
            batch = to_device(batch, device)
            loss, n = lm(batch["ids"], batch["lengths"], batch.get("chars"))
            total += float(loss) * n
            count += n
    total, count = distributed.all_reduce_sum([total, count])
    if count == 0:
        raise ElmoError("perplexity of an empty corpus")
    return math.exp(total / count)


#: rows :func:`evaluate_words` scores against the whole vocabulary at once: equal ``(SCORED_ROWS, V)`` batches let the
#: C heap reuse the same blocks
SCORED_ROWS = 128


def evaluate_words(lm: Direction, corpus: EncodedCorpus, device: torch.device,
                   max_tokens: int = 256, rows: int = SCORED_ROWS) -> tuple[dict, np.ndarray, np.ndarray]:
    """Exact full-softmax perplexity and next/previous-word prediction metrics, as ``(metrics, targets, top5)``:
    ``metrics`` holds ``perplexity`` and the keys of :func:`~elmo.training.metrics.word_prediction_metrics`;
    ``targets (n,)`` and ``top5 (n, 5)`` are word ids.

    The LM reads batches of at most ``max_tokens`` padded tokens; the predicted positions' states, carried over from
    batch to batch, are scored ``rows`` at a time against the whole vocabulary (``(rows, V)`` float32
    log-probabilities), so every full-vocabulary matrix but the last has the same size. Raises ElmoError on an empty
    corpus or ``rows`` < 1.
    """
    if rows < 1:
        raise ElmoError(f"evaluate_words: rows must be >= 1, got {rows}")
    words = _WordRows()
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def drain(final: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Score the pending rows ``rows`` at a time (all of them when ``final``); return what is left over."""
        states, target = (torch.cat(parts) for parts in zip(*pending))
        full = len(target) if final else len(target) // rows * rows
        for first in range(0, full, rows):
            words.score(lm.vocabulary_log_probs(states[first:first + rows]), target[first:first + rows])
        return [(states[full:].clone(), target[full:].clone())]

    lm.eval()
    with torch.no_grad():
        waiting = 0
        for _, batch in corpus.eval_batches(64, max_tokens):
            batch = to_device(batch, device)
            pending.append(lm.predicted_states(batch["ids"], batch["lengths"], batch.get("chars")))
            waiting += len(pending[-1][1])
            if waiting >= rows:
                pending, waiting = drain(final=False), waiting % rows
        if waiting:
            drain(final=True)
    if not words.count:
        raise ElmoError("word-prediction metrics of an empty corpus")
    targets_np, top5_np = words.targets[:words.count].copy(), words.top5[:words.count].copy()
    metrics = {"perplexity": math.exp(words.nll / words.count), **word_prediction_metrics(targets_np, top5_np)}
    return metrics, targets_np, top5_np


class _WordRows:
    """What :func:`evaluate_words` keeps of each scored row (the summed NLL, the target and the top-5 word ids), in
    arrays that double when full: small pieces kept per batch would pin the freed log-probability matrices' heap
    blocks, and the heap would grow by a matrix per batch."""

    def __init__(self, capacity: int = 1 << 16):
        self.nll, self.count = 0.0, 0
        self.targets = np.empty(capacity, dtype=np.int64)
        self.top5 = np.empty((capacity, 5), dtype=np.int64)

    def score(self, log_probs: torch.Tensor, target: torch.Tensor) -> None:
        """Add ``log_probs (n, V)`` of the words ``target (n,)``."""
        end = self.count + len(target)
        if end > len(self.targets):
            size = max(end, 2 * len(self.targets))
            self.targets = np.concatenate([self.targets[:self.count], np.empty(size - self.count, np.int64)])
            self.top5 = np.concatenate([self.top5[:self.count], np.empty((size - self.count, 5), np.int64)])
        self.nll -= float(log_probs.gather(1, target.unsqueeze(1)).sum())
        self.targets[self.count:end] = target.cpu().numpy()
        self.top5[self.count:end] = log_probs.topk(5, dim=1).indices.cpu().numpy()
        self.count = end
