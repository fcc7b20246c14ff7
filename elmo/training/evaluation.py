"""Evaluating a language model: held-out perplexity (sharded under ``torchrun``) and the exact
full-vocabulary word-prediction metrics ``ELMO.py`` reports."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.corpus import EncodedCorpus
from ..errors import ElmoError
from ..model.language_model import Direction
from ..runtime import distributed
from ..runtime.device import to_device
from .metrics import word_prediction_metrics


def perplexity(lm: torch.nn.Module, corpus: EncodedCorpus, device: torch.device, max_tokens: int = 8192) -> float:
    """Held-out perplexity exp(mean NLL per predicted word), boundary words included, of ``lm(ids, lengths, chars) ->
    (mean NLL, n)`` (a :class:`~elmo.model.language_model.Direction`, or both directions of a
    :class:`~elmo.model.language_model.PublishedLM`): exact, as the adaptive softmax is a normalised distribution over
    the whole vocabulary. On an :class:`~elmo.data.corpus.EncodedCorpus` or :class:`~elmo.data.stream.StreamedCorpus`;
    under ``torchrun`` each rank evaluates its share of the batches and the sums are all-reduced. ElmoError if empty."""
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
#: :func:`evaluate_words` on a GPU, where each batch and each scored block costs launches: batches of this many padded
#: tokens, blocks of at most ``GPU_SCORED_ROWS`` rows and ``GPU_SCORED_ELEMENTS`` log-probabilities (1 GiB in
#: float32: 4,096 rows of a 65,536-word vocabulary, 335 of 800,000 words)
GPU_EVALUATION_TOKENS = 8192
GPU_SCORED_ROWS = 4096
GPU_SCORED_ELEMENTS = 2**28


def gpu_scored_rows(vocab_size: int) -> int:
    """Rows :func:`evaluate_words` scores at a time on a GPU against a ``vocab_size``-word vocabulary: as many as
    :data:`GPU_SCORED_ROWS` and :data:`GPU_SCORED_ELEMENTS` allow, at least :data:`SCORED_ROWS`."""
    return min(GPU_SCORED_ROWS, max(SCORED_ROWS, GPU_SCORED_ELEMENTS // vocab_size))


def evaluate_words(lm: Direction, corpus: EncodedCorpus, device: torch.device,
                   max_tokens: int | None = None, rows: int | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Exact full-softmax perplexity and next/previous-word prediction metrics, as ``(metrics, targets, top5)``:
    ``metrics`` holds ``perplexity`` and the keys of :func:`~elmo.training.metrics.word_prediction_metrics`;
    ``targets (n,)`` and ``top5 (n, 5)`` are word ids. The LM reads batches of at most ``max_tokens`` padded tokens
    (default 256, on a GPU :data:`GPU_EVALUATION_TOKENS`); the predicted positions' states, carried over from batch to
    batch, are scored ``rows`` at a time (default :data:`SCORED_ROWS`, on a GPU :func:`gpu_scored_rows`) against the
    whole vocabulary (``(rows, V)`` float32 log-probabilities), so every full-vocabulary matrix but the last has the
    same size. On a GPU the scores stay there until the end (:class:`_DeviceWordRows`): nothing is read back per block.
    Raises ElmoError on an empty corpus or ``rows`` < 1."""
    gpu = device.type == "cuda"
    if max_tokens is None:
        max_tokens = GPU_EVALUATION_TOKENS if gpu else 256
    if rows is None:
        rows = gpu_scored_rows(lm.vocab_size) if gpu else SCORED_ROWS
    if rows < 1:
        raise ElmoError(f"evaluate_words: rows must be >= 1, got {rows}")
    words = _DeviceWordRows() if gpu else _WordRows()
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
    nll, targets_np, top5_np = words.result()
    if not len(targets_np):
        raise ElmoError("word-prediction metrics of an empty corpus")
    metrics = {"perplexity": math.exp(nll / len(targets_np)), **word_prediction_metrics(targets_np, top5_np)}
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

    def result(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(summed NLL, targets (n,), top5 (n, 5))`` of the rows scored so far."""
        return self.nll, self.targets[:self.count].copy(), self.top5[:self.count].copy()


class _DeviceWordRows:
    """:class:`_WordRows` kept on the scores' device (a GPU): the summed NLL in float64 there and each block's
    targets and top-5 ids, read back once by :meth:`result` instead of at every block."""

    def __init__(self):
        self.nll: torch.Tensor | float = 0.0
        self.targets: list[torch.Tensor] = []
        self.top5: list[torch.Tensor] = []

    def score(self, log_probs: torch.Tensor, target: torch.Tensor) -> None:
        self.nll = self.nll - log_probs.gather(1, target.unsqueeze(1)).sum(dtype=torch.float64)
        self.targets.append(target)
        self.top5.append(log_probs.topk(5, dim=1).indices)

    def result(self) -> tuple[float, np.ndarray, np.ndarray]:
        if not self.targets:
            return 0.0, np.empty(0, dtype=np.int64), np.empty((0, 5), dtype=np.int64)
        return (float(self.nll), torch.cat(self.targets).cpu().numpy().astype(np.int64),
                torch.cat(self.top5).cpu().numpy().astype(np.int64))
