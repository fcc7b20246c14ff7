"""Handing free heap pages back (elmo.runtime.device.trim_heap): a language model's training and the LM
evaluations call it every ``HEAP_TRIM_EVERY`` batches, a classifier's training never, it changes no result, and
it does nothing where the C library has no ``malloc_trim``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from elmo.data.corpus import EncodedCorpus
from elmo.model.bilm import BiLM, BiLMConfig
from elmo.runtime import device
from elmo.training import evaluation, trainer
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

V = 30


def corpus_of(n: int) -> EncodedCorpus:
    rng = np.random.default_rng(0)
    return EncodedCorpus([rng.integers(4, V, size=rng.integers(2, 12)).tolist() for _ in range(n)])


def make_lm():
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.0, cutoffs=(10, 20))).forward_lm


def train(corpus: EncodedCorpus, epochs: int = 2, heap_trim_every: int = device.HEAP_TRIM_EVERY):
    lm = make_lm()
    objective = Objective(lambda epoch: corpus.epoch_batches(4, 64, seed=epoch),
                          lambda model, batch: model(batch["ids"], batch["lengths"]),
                          lambda: {"loss": 1.0}, "loss", False, heap_trim_every=heap_trim_every)
    fit(lm, objective, TrainConfig(epochs=epochs, patience=5), torch.device("cpu"), progress=Progress(quiet=True))
    return lm


def counting(monkeypatch, module) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(module, "trim_heap", lambda: calls.append(1) or True)
    return calls


def test_training_trims_every_heap_trim_every_steps_of_each_epoch(monkeypatch):
    corpus = corpus_of(200)
    calls = counting(monkeypatch, trainer)
    train(corpus)
    steps = [len(corpus.batches(4, 64, shuffle=True, seed=e)) for e in (0, 1)]
    assert min(steps) > device.HEAP_TRIM_EVERY
    assert len(calls) == sum(s // device.HEAP_TRIM_EVERY for s in steps)


def test_training_never_trims_unless_the_objective_asks(monkeypatch):
    calls = counting(monkeypatch, trainer)
    train(corpus_of(200), heap_trim_every=0)
    assert calls == []
    assert Objective(list, len, dict, "loss", False).heap_trim_every == 0


def test_the_language_model_objective_trims_every_heap_trim_every_steps():
    from types import SimpleNamespace

    from elmo.pipelines.common import StartedRun
    from elmo.pipelines.pretraining import PretrainArgs, lm_objective
    from elmo.runtime.distributed import Context

    corpus = corpus_of(20)
    loaded = SimpleNamespace(data={"train": corpus, "val": corpus})
    run = StartedRun(Context(), torch.device("cpu"), None, 1, None, print)
    assert lm_objective(make_lm(), loaded, PretrainArgs(), run).heap_trim_every == device.HEAP_TRIM_EVERY


def test_evaluation_trims_every_heap_trim_every_batches(monkeypatch):
    corpus = corpus_of(600)
    calls = counting(monkeypatch, evaluation)
    lm = make_lm().eval()
    evaluation.evaluate_words(lm, corpus, torch.device("cpu"), max_tokens=32)
    words = len(list(corpus.eval_batches(64, 32)))
    evaluation.perplexity(lm, corpus, torch.device("cpu"), max_tokens=32)
    sentences = len(list(corpus.eval_batches(256, 32)))
    assert words > device.HEAP_TRIM_EVERY
    assert len(calls) == words // device.HEAP_TRIM_EVERY + sentences // device.HEAP_TRIM_EVERY


def test_trimming_changes_no_weight():
    corpus = corpus_of(200)
    trimmed = train(corpus).state_dict()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer, "trim_heap", lambda: False)
        untouched = train(corpus).state_dict()
    assert all(torch.equal(trimmed[k], untouched[k]) for k in trimmed)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_heap_calls_glibc_on_linux():
    assert device.trim_heap() is True


def test_trim_heap_is_a_no_op_without_malloc_trim(monkeypatch):
    monkeypatch.setattr(device, "_malloc_trim", lambda: None)
    assert device.trim_heap() is False
