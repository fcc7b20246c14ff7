"""Evaluating a language model: held-out perplexity (sharded under ``torchrun``) and the exact
full-vocabulary word-prediction metrics ``ELMO.py`` reports."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.corpus import EncodedCorpus
from ..errors import ElmoError
from ..model.bilm import LanguageModel
from ..runtime import distributed
from ..runtime.device import HEAP_TRIM_EVERY, to_device, trim_heap
from .metrics import word_prediction_metrics


def perplexity(lm: LanguageModel, corpus: EncodedCorpus, device: torch.device, max_tokens: int = 8192) -> float:
    """Held-out perplexity exp(mean NLL per predicted word), boundary words included.

    The adaptive softmax defines a normalised distribution over the whole vocabulary, so its loss is
    the exact NLL (equal to :func:`evaluate_words`' full ``log_prob`` figure, tested).
    Works on an :class:`~elmo.data.corpus.EncodedCorpus` or a streamed :class:`~elmo.data.stream.StreamedCorpus`;
    under ``torchrun`` each rank evaluates its share of the batches and the sums are all-reduced.

    Raises:
        ElmoError: an empty corpus.
    """
    total, count = 0.0, 0
    lm.eval()
    with torch.no_grad():
        for i, (_, batch) in enumerate(corpus.eval_batches(256, max_tokens, distributed.context().shard), 1):
            batch = to_device(batch, device)
            if i % HEAP_TRIM_EVERY == 0:
                trim_heap()
            loss, n = lm(batch["ids"], batch["lengths"], batch.get("chars"))
            total += float(loss) * n
            count += n
    total, count = distributed.all_reduce_sum([total, count])
    if count == 0:
        raise ElmoError("perplexity of an empty corpus")
    return math.exp(total / count)


def evaluate_words(lm: LanguageModel, corpus: EncodedCorpus, device: torch.device,
                   max_tokens: int = 256) -> tuple[dict, np.ndarray, np.ndarray]:
    """Exact full-softmax evaluation: perplexity and next/previous-word prediction metrics.

    Small batches (``max_tokens`` padded tokens): the ``(n, V)`` log-probabilities of a 2,048-token
    batch pushed ``ELMO.py``'s peak RSS up by 1.4 GB and were slower (AG News test split, V = 24,574:
    39.5 s and +1,360 MB at 2,048 tokens, 17.6 s and +560 MB at 256).

    Returns:
        ``(metrics, targets, top5)``: metrics holds ``perplexity`` and the keys of
        :func:`~elmo.training.metrics.word_prediction_metrics`; ``targets (n,)`` and ``top5 (n, 5)`` word ids.
    """
    nll, targets, top5 = 0.0, [], []
    lm.eval()
    with torch.no_grad():
        for i, (_, batch) in enumerate(corpus.eval_batches(64, max_tokens), 1):
            batch = to_device(batch, device)
            if i % HEAP_TRIM_EVERY == 0:
                trim_heap()
            log_probs, target = lm.log_probs(batch["ids"], batch["lengths"], batch.get("chars"))
            nll -= float(log_probs.gather(1, target.unsqueeze(1)).sum())
            targets.append(target.cpu().numpy())
            top5.append(log_probs.topk(5, dim=1).indices.cpu().numpy())
    targets_np, top5_np = np.concatenate(targets), np.concatenate(top5)
    metrics = {"perplexity": math.exp(nll / len(targets_np)), **word_prediction_metrics(targets_np, top5_np)}
    return metrics, targets_np, top5_np
