"""Never lose a run (elmo.training.state, elmo.training.trainer.fit): resuming after a crash, NaN stops, foreign
checkpoints. The scripts killed for real are in tests/integration/test_resume_scripts.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from elmo.artifacts import load_checkpoint
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.pipelines.common import checkpointing
from elmo.pipelines.pretraining import PretrainArgs
from elmo.training.state import Checkpointing
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

V = 30


class Crash(Exception):
    """Stands in for a process dying in the middle of a step."""


def lm_and_data(seed: int = 0):
    """A small LM with dropout (so the RNG state matters) initialised from ``seed``, and a fixed corpus."""
    torch.manual_seed(seed)
    lm = BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.3, cutoffs=(10, 20))).forward_lm
    rng = np.random.default_rng(0)
    corpus = EncodedCorpus([rng.integers(4, V, size=rng.integers(2, 9)).tolist() for _ in range(40)])
    return lm, corpus


def train(lm, corpus, checkpoint=None, crash_at=None, nan_at=None, epochs=3):
    calls = {"n": 0}

    def loss_fn(model, batch):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise Crash
        loss, n = model(batch["ids"], batch["lengths"])
        return (loss * float("nan") if calls["n"] == nan_at else loss), n

    def validate():
        with torch.no_grad():
            b = corpus.collate(np.arange(len(corpus)))
            return {"loss": float(lm(b["ids"], b["lengths"])[0])}

    torch.manual_seed(0)
    objective = Objective(lambda epoch: (corpus.collate(i) for i in corpus.batches(8, shuffle=True, seed=epoch)),
                          loss_fn, validate, "loss", False)
    return fit(lm, objective, TrainConfig(epochs=epochs, patience=5), torch.device("cpu"), checkpoint=checkpoint,
               progress=Progress(quiet=True))


def test_resuming_after_a_crash_between_checkpoints_ends_exactly_like_an_uninterrupted_run(tmp_path):
    lm, corpus = lm_and_data()
    reference = train(lm, corpus)
    expected = {k: v.clone() for k, v in lm.state_dict().items()}
    steps_per_epoch = len(corpus.batches(8))
    for crash_at in (3, steps_per_epoch + 2, 2 * steps_per_epoch + 1):  # mid-epoch 1, 2 and 3
        lm, corpus = lm_and_data()
        ckpt = Checkpointing(tmp_path / f"lm{crash_at}.pt", every=2, resume=True, meta={"run": "a"})
        with pytest.raises(Crash):
            train(lm, corpus, ckpt, crash_at=crash_at)
        saved = load_checkpoint(ckpt.path, "elmo.training")
        assert not saved["done"] and (saved["epoch"], saved["step"]) < (3, 0)
        lm, corpus = lm_and_data(seed=1)  # other initial weights: everything must come from the checkpoint
        resumed = train(lm, corpus, ckpt)
        assert [r["val_loss"] for r in resumed.history] == [r["val_loss"] for r in reference.history]
        assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in reference.history]
        assert resumed.best_epoch == reference.best_epoch
        for k, v in lm.state_dict().items():
            assert torch.equal(v, expected[k]), k


def test_a_finished_checkpoint_returns_without_training_again(tmp_path):
    lm, corpus = lm_and_data()
    ckpt = Checkpointing(tmp_path / "lm.pt", every=100, resume=True)
    first = train(lm, corpus, ckpt)
    assert load_checkpoint(ckpt.path, "elmo.training")["done"]
    lm, corpus = lm_and_data(seed=1)
    again = train(lm, corpus, ckpt, crash_at=1)  # would raise if it trained a single step
    assert again.history == first.history and again.best_epoch == first.best_epoch


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    lm, corpus = lm_and_data()
    ckpt = Checkpointing(tmp_path / "lm.pt", every=2)
    with pytest.raises(ElmoError, match=r"loss became nan .* step 5; .* last good training state is .*lm\.pt"):
        train(lm, corpus, ckpt, nan_at=5)
    saved = load_checkpoint(ckpt.path, "elmo.training")
    assert (saved["epoch"], saved["step"]) == (0, 4)
    assert all(torch.isfinite(v).all() for v in saved["model"].values())


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    lm, corpus = lm_and_data()
    with pytest.raises(Crash):
        train(lm, corpus, Checkpointing(tmp_path / "lm.pt", every=1, meta={"flags": "lr=0.001"}), crash_at=3)
    with pytest.raises(ElmoError, match="belongs to a run with other settings .*flags.*--resume"):
        train(lm, corpus, Checkpointing(tmp_path / "lm.pt", every=1, resume=True, meta={"flags": "lr=0.01"}))
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ElmoError, match="bad.pt: not a loadable"):
        train(lm, corpus, Checkpointing(tmp_path / "bad.pt", resume=True))


def test_a_refused_resume_names_three_of_the_flags_that_differ_with_both_values_in_one_short_line(tmp_path):
    """The checkpoint of a command (its flags: elmo.pipelines.common.checkpointing) resumed with five flags changed:
    the message names the first three as on the command line, the checkpoint's value and this run's, and counts
    the rest; one flag changed: that flag alone."""
    lm, corpus = lm_and_data()
    first = PretrainArgs(models_dir=str(tmp_path), checkpoint_every=1, lr=0.001, epochs=5, batch_size=16)
    with pytest.raises(Crash):
        train(lm, corpus, checkpointing(first, "lm"), crash_at=3)
    changed = dataclasses.replace(first, resume=True, lr=0.01, batch_size=8, seed=3, epochs=9, max_length=100)
    with pytest.raises(ElmoError) as refused:
        train(lm, corpus, checkpointing(changed, "lm"))
    message = str(refused.value)
    assert "\n" not in message and len(message) < 300 + len(str(tmp_path)), message
    assert "(--batch-size 16 in the checkpoint, 8 now; --epochs 5 in the checkpoint, 9 now; --lr 0.001 in the " \
           "checkpoint, 0.01 now; 2 more differ): run without --resume" in message, message
    assert "--max-length" not in message and "--seed" not in message
    with pytest.raises(ElmoError) as refused:
        train(lm, corpus, checkpointing(dataclasses.replace(first, resume=True, lr=0.01), "lm"))
    assert "(--lr 0.001 in the checkpoint, 0.01 now): run without --resume" in str(refused.value)
