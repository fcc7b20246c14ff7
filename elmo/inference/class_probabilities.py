"""Batched class probabilities of a classifier over an encoded corpus (:func:`class_probabilities`); the command that
classifies texts from the command line is :mod:`elmo.pipelines.predict_command`."""

from __future__ import annotations

import numpy as np
import torch

from ..data.corpus import EncodedCorpus
from ..model.classifier import SequenceClassifier
from ..runtime import distributed
from ..runtime.device import autocast, to_device

#: batch shape used both to fill the layer cache and by :func:`class_probabilities`, so a cached run and an
#: uncached one (e.g. :class:`~elmo.inference.text_classifier.TextClassifier`) see the same biLM outputs
PREDICT_BATCH, PREDICT_MAX_TOKENS = 256, 16384


def class_probabilities(model: SequenceClassifier, corpus: EncodedCorpus, device: torch.device,
                        amp_dtype: torch.dtype | None = None) -> np.ndarray:
    """Class probabilities ``(N, C)`` float32 for every document of ``corpus``, in corpus order, in batches of
    :data:`PREDICT_BATCH` documents / :data:`PREDICT_MAX_TOKENS` padded tokens under ``amp_dtype`` autocast
    (:func:`elmo.runtime.device.resolve_precision`), with the corpus's cached biLM layers when it has them. Under
    ``torchrun`` each rank predicts its share of the batches and the rows are all-reduced."""
    probs = np.zeros((len(corpus), model.config.num_classes), dtype=np.float32)
    model.eval()
    with torch.no_grad():
        for index, batch in corpus.eval_batches(PREDICT_BATCH, PREDICT_MAX_TOKENS, distributed.context().shard):
            batch = to_device(batch, device)
            with autocast(device, amp_dtype):
                logits = model(batch["ids"], batch["lengths"], batch.get("chars"), batch.get("layers"))
            probs[index] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return distributed.all_reduce_sum(probs).astype(np.float32)  # each row is filled on one rank only
