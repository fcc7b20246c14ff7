"""The training loss stays on the device between reads (elmo.training.trainer.fit): read every step on a CPU, every
``CUDA_READ_EVERY`` steps, before each checkpoint and at each epoch's end on CUDA (imitated here on the CPU by
reading every 3 steps); and ``TrainConfig.compile``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from elmo.artifacts import load_checkpoint
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.training import trainer
from elmo.training.state import Checkpointing
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

V = 30


def train(checkpoint=None, nan_at=None, config=TrainConfig(epochs=2, patience=5)):
    """A small LM (with dropout) trained on a fixed corpus of 40 sentences, 10 batches an epoch; the loss of call
    ``nan_at`` made NaN."""
    torch.manual_seed(0)
    lm = BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.3, cutoffs=(10, 20))).forward_lm
    rng = np.random.default_rng(0)
    corpus = EncodedCorpus([rng.integers(4, V, size=rng.integers(2, 9)).tolist() for _ in range(40)])
    calls = {"n": 0}

    def loss_fn(model, batch):
        calls["n"] += 1
        loss, n = model(batch["ids"], batch["lengths"])
        return (loss * float("nan") if calls["n"] == nan_at else loss), n

    def validate():
        b = corpus.collate(np.arange(len(corpus)))
        return {"loss": float(lm(b["ids"], b["lengths"])[0])}

    objective = Objective(lambda epoch: (corpus.collate(i) for i in corpus.batches(4, shuffle=True, seed=epoch)),
                          loss_fn, validate, "loss", False)
    return fit(lm, objective, config, torch.device("cpu"), checkpoint=checkpoint, progress=Progress(quiet=True))


@pytest.fixture
def read_every_3(monkeypatch):
    """fit reading the loss every 3 steps, as it does on CUDA every ``CUDA_READ_EVERY``."""
    run = trainer._Run
    monkeypatch.setattr(trainer, "_Run", lambda *args: replace(run(*args), read_every=3))


def losses(result):
    return [(row["train_loss"], row["val_loss"]) for row in result.history]


def test_reading_the_loss_less_often_changes_no_number(monkeypatch):
    every_step = train()
    run = trainer._Run
    monkeypatch.setattr(trainer, "_Run", lambda *args: replace(run(*args), read_every=3))
    assert losses(train()) == losses(every_step)  # exactly: the same float64 sums, read later


def test_a_nan_is_found_at_the_next_read_and_no_checkpoint_after_it_is_saved(tmp_path, read_every_3):
    ckpt = Checkpointing(tmp_path / "lm.pt", every=4)
    with pytest.raises(ElmoError, match=r"loss became nan in epoch 1 by step 6; .* last good training state is .*lm\.pt"):
        train(ckpt, nan_at=5)  # read at steps 3, 4 (the checkpoint) and 6
    saved = load_checkpoint(ckpt.path, "elmo.training")
    assert (saved["epoch"], saved["step"]) == (0, 4)
    assert all(torch.isfinite(v).all() for v in saved["model"].values())


def test_a_nan_in_an_epochs_last_steps_is_found_at_its_end(read_every_3):
    with pytest.raises(ElmoError, match=r"loss became nan in epoch 1 by step 10"):
        train(nan_at=10)  # 10 steps an epoch, read at steps 3, 6 and 9: step 10 at the epoch's end


def test_compile_trains_through_torch_compile(monkeypatch):
    reference = train()
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda module: compiled.append(module) or module)
    result = train(config=TrainConfig(epochs=2, patience=5, compile=True))
    assert len(compiled) == 2 and all(isinstance(m, torch.nn.Module) for m in compiled)  # once an epoch
    assert losses(result) == losses(reference)
