"""Never lose a run: training checkpoints, --resume after SIGKILL or Ctrl-C, NaN stops, foreign checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from test_pipeline import SMALL, first_run, run  # noqa: F401  (first_run is a fixture)

from elmo.artifacts import load_checkpoint
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM, BiLMConfig
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


# ------------------------------------------------------------------ the scripts, killed for real

KILLER = """
import os, signal, sys
sys.path.insert(0, {root!r})
import {module} as target
original, calls = target.{cls}.forward, [0]
def forward(self, *args, **kwargs):
    calls[0] += 1
    if calls[0] == {at}:
        os.kill(os.getpid(), signal.{sig})
    return original(self, *args, **kwargs)
target.{cls}.forward = forward
from elmo.cli import run
sys.exit(run({command!r}, sys.argv[1:]))
"""


def run_killed(out: Path, data: Path, script: str, sig: str, at: int, *extra: str) -> subprocess.CompletedProcess:
    """Run ``script``'s pipeline in a process that sends itself ``sig`` at the ``at``-th model forward call."""
    module, cls, command = {
        "ELMO.py": ("elmo.model.bilm", "LanguageModel", "pretrain"),
        "classification.py": ("elmo.model.classifier", "SequenceClassifier", "classify"),
    }[script]
    code = KILLER.format(root=str(ROOT), module=module, cls=cls, at=at, sig=sig, command=command)
    args = [sys.executable, "-c", code, "--data-dir", str(data), "--models-dir", str(out / "models"),
            "--results-dir", str(out / "results"), "--images-dir", str(out / "images"), *extra]
    return subprocess.run(args, capture_output=True, text=True, cwd=out, timeout=600,
                          env={**os.environ, "PYTHONHASHSEED": "0"})


CLASSIFY = ["--epochs", "3", "--batch-size", "16", "--encoder-hidden", "8", "--lr", "0.01", "--quiet"]


def test_sigkill_mid_epoch_then_resume_gives_the_uninterrupted_metrics(first_run, tmp_path):  # noqa: F811
    data, _, (lm_ref, cls_ref) = first_run
    # 228 training documents in batches of 16: 15 steps an epoch; the kill lands in epoch 2 of the
    # forward LM, between the checkpoints written every 4 steps
    killed = run_killed(tmp_path, data, "ELMO.py", "SIGKILL", 23, *SMALL, "--checkpoint-every", "4")
    assert killed.returncode == -signal.SIGKILL
    saved = load_checkpoint(tmp_path / "models" / "checkpoints" / "forward_lm.pt", "elmo.training")
    assert not saved["done"] and saved["step"] > 0  # a mid-epoch checkpoint is what the resume starts from
    resumed = run("ELMO.py", tmp_path, data, *SMALL, "--checkpoint-every", "4", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert lm["test"] == lm_ref["test"] and lm["val"] == lm_ref["val"]
    assert not (tmp_path / "models" / "checkpoints").exists()  # removed once the script finished

    # call 40: step 8 of epoch 3 of trainable_lambda (15 steps + 1 validation call an epoch)
    killed = run_killed(tmp_path, data, "classification.py", "SIGKILL", 40, *CLASSIFY, "--checkpoint-every", "5")
    assert killed.returncode == -signal.SIGKILL
    resumed = run("classification.py", tmp_path, data, *CLASSIFY, "--checkpoint-every", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    cls = json.loads((tmp_path / "results" / "classification.json").read_text())
    for setting in ("trainable_lambda", "frozen_lambda", "learned_function"):
        assert cls[setting]["test"] == cls_ref[setting]["test"], setting
        assert [r["val_f1"] for r in cls[setting]["history"]] == [r["val_f1"] for r in cls_ref[setting]["history"]]


def test_ctrl_c_saves_says_how_to_resume_and_the_resume_finishes_the_run(first_run, tmp_path):  # noqa: F811
    data, _, (lm_ref, cls_ref) = first_run
    assert run("ELMO.py", tmp_path, data, *SMALL).returncode == 0
    # 15 steps + 1 validation call an epoch and 3 final predictions: call 75 is in epoch 2 of frozen_lambda
    stopped = run_killed(tmp_path, data, "classification.py", "SIGINT", 75, *CLASSIFY)
    assert stopped.returncode == 130, stopped.stderr
    assert "interrupted" in stopped.stderr and "--resume" in stopped.stderr and "Traceback" not in stopped.stderr
    resumed = run("classification.py", tmp_path, data, *CLASSIFY, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    cls = json.loads((tmp_path / "results" / "classification.json").read_text())
    assert all(cls[s]["test"] == cls_ref[s]["test"] for s in ("trainable_lambda", "frozen_lambda", "learned_function"))


def test_resume_with_other_flags_is_refused(first_run, tmp_path):  # noqa: F811
    data = first_run[0]
    killed = run_killed(tmp_path, data, "ELMO.py", "SIGKILL", 10, *SMALL, "--checkpoint-every", "2")
    assert killed.returncode == -signal.SIGKILL
    other = [a if a != "16" else "8" for a in SMALL]  # --embedding-dim/--hidden-size/--batch-size changed
    refused = run("ELMO.py", tmp_path, data, *other, "--resume")
    assert refused.returncode == 2 and "belongs to a run with other settings" in refused.stderr
