"""Resuming the published architecture's training (elmo.training.trainer.fit with a
elmo.model.language_model.PublishedLM): the sampled softmax's candidates and dropout come from the generators
the checkpoint saves, so a run interrupted between checkpoints ends exactly like an uninterrupted one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import published_lm

from elmo.data.corpus import encode_corpus
from elmo.data.vocab import Vocabulary
from elmo.model.bilm_config import BiLMConfig
from elmo.training.evaluation import perplexity
from elmo.training.state import Checkpointing
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=8, projection_dim=4)


class Crash(Exception):
    """Stands in for a process dying in the middle of a step."""


def model_and_data(seed: int = 0):
    rng = np.random.default_rng(0)
    words = ["Alpha", "beta", "Gamma", "delta", "eps", "zeta", "Eta", "theta"]
    docs = [list(rng.choice(words, size=rng.integers(2, 7))) for _ in range(24)]
    vocab = Vocabulary.build(docs, min_freq=1)
    corpus = encode_corpus(docs, vocab, max_chars=50, char_scheme="bilm_tf")
    model = published_lm(TINY, len(vocab), seed=seed, softmax="sampled", samples=5, dropout=0.3)
    return model, corpus


def train(model, corpus, checkpoint=None, crash_at=None):
    calls = {"n": 0}

    def loss_fn(m, batch):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise Crash
        return m(batch["ids"], batch["lengths"], batch["chars"])

    torch.manual_seed(0)
    objective = Objective(lambda epoch: corpus.epoch_batches(6, None, epoch), loss_fn,
                          lambda: {"perplexity": perplexity(model, corpus, torch.device("cpu"))}, "perplexity", False)
    return fit(model, objective, TrainConfig(epochs=2, patience=5, lr=0.01), torch.device("cpu"),
               checkpoint=checkpoint, progress=Progress(quiet=True))


def test_an_interrupted_run_resumed_ends_exactly_like_an_uninterrupted_one(tmp_path):
    model, corpus = model_and_data()
    reference = train(model, corpus)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    model, corpus = model_and_data()
    checkpoint = Checkpointing(tmp_path / "published_lm.pt", every=2, resume=True, meta={"run": "a"})
    with pytest.raises(Crash):
        train(model, corpus, checkpoint, crash_at=7)  # mid-epoch 2, after the checkpoint of step 2
    model, corpus = model_and_data(seed=1)  # other initial weights: everything must come from the checkpoint
    resumed = train(model, corpus, checkpoint)
    assert [r["val_perplexity"] for r in resumed.history] == [r["val_perplexity"] for r in reference.history]
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in reference.history]
    for k, v in model.state_dict().items():
        assert torch.equal(v, expected[k]), k
