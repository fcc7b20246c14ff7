"""torchrun: two CPU processes (gloo) against one, one set of artefacts, --resume under DDP (how the ranks share
the batches is tested without processes in tests/unit/data/test_batching.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

pytestmark = pytest.mark.slow

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]  # what the torchrun command runs; always on hand
# fp32 and no dropout: the two runs then take mathematically the same steps (same global batches, each
# rank's loss weighted by its share of the batch's tokens), so only the order of floating-point sums
# differs; 1e-4 relative leaves room for that over an epoch of Adam steps and still catches any real
# difference (a wrong loss weighting or a rank skipping batches moves the perplexity by percents).
EXACT = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "1", "--dropout", "0",
         "--precision", "fp32", "--init-embeddings", "none", "--quiet"]
TOLERANCE = 1e-4
ARTEFACTS = {"models": ["backward.pt", "bilm", "bilstm.pt", "forward.pt", "word2idx.pkl"],
             "results": ["lm.json"], "images": ["lm_confusion_backward.png", "lm_confusion_forward.png", "lm_loss.png"]}


@pytest.fixture(scope="module")
def data(tiny_agnews_shared) -> Path:
    return tiny_agnews_shared


def launch(out: Path, data: Path, *extra: str, procs: int = 2, script: str | Path = ROOT / "ELMO.py"):
    """``torchrun --nproc_per_node=procs script`` (``procs=0``: plain ``python script``) writing under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    prefix = [*TORCHRUN, "--standalone", f"--nproc_per_node={procs}"] if procs else [sys.executable]
    args = [*prefix, str(script), "--data-dir", str(data), "--models-dir", str(out / "models"),
            "--results-dir", str(out / "results"), "--images-dir", str(out / "images"), *extra]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run(args, capture_output=True, text=True, cwd=out, env=env, timeout=600)


def val_perplexities(out: Path) -> list[float]:
    lm = json.loads((out / "results" / "lm.json").read_text())
    return [lm["directions"][d]["history"][0]["val_perplexity"] for d in ("forward", "backward")]


@pytest.fixture(scope="module")
def single(data, tmp_path_factory) -> Path:
    """``ELMO.py`` with the :data:`EXACT` flags in one process, one thread (read only: copy its models)."""
    out = tmp_path_factory.mktemp("single")
    done = launch(out, data, *EXACT, "--threads", "1", procs=0)
    assert done.returncode == 0, done.stderr
    return out


def test_two_processes_train_like_one_with_the_same_global_batch_and_write_one_set_of_artefacts(data, single, tmp_path):
    ddp = launch(tmp_path / "ddp", data, *EXACT[:-1])  # not quiet: rank 0 alone must print
    assert ddp.returncode == 0, ddp.stderr
    assert val_perplexities(tmp_path / "ddp") == pytest.approx(val_perplexities(single), rel=TOLERANCE)
    lm = json.loads((tmp_path / "ddp" / "results" / "lm.json").read_text())
    assert lm["processes"] == 2
    for folder, names in ARTEFACTS.items():  # exactly one set, nothing per rank, no checkpoints left
        assert sorted(p.name for p in (tmp_path / "ddp" / folder).iterdir()) == names
    assert ddp.stdout.count("direction   val ppl") == 1  # the final table, from rank 0 only
    assert ddp.stdout.count("forward LM epoch 1:") == 1


KILLER = """
import os, signal, sys
sys.path.insert(0, {root!r})
import elmo.model.bilm as target
original, calls = target.LanguageModel.forward, [0]
def forward(self, *args, **kwargs):
    calls[0] += 1
    if calls[0] == {at} and os.environ.get("RANK") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, *args, **kwargs)
target.LanguageModel.forward = forward
from elmo.cli import run
sys.exit(run("pretrain", sys.argv[1:]))
"""


def test_resume_under_torchrun_after_a_rank_is_killed_ends_like_the_uninterrupted_run(data, tmp_path):
    flags = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "2",
             "--precision", "fp32", "--init-embeddings", "none", "--quiet", "--checkpoint-every", "3"]  # dropout on
    reference = launch(tmp_path / "ref", data, *flags)
    assert reference.returncode == 0, reference.stderr
    killer = tmp_path / "killer.py"
    # 15 global steps an epoch + validation: forward call 20 of rank 1 is in epoch 2 of the forward LM
    killer.write_text(KILLER.format(root=str(ROOT), at=20))
    killed = launch(tmp_path / "run", data, *flags, script=killer)
    assert killed.returncode != 0
    assert (tmp_path / "run" / "models" / "checkpoints" / "forward_lm.pt").is_file()
    resumed = launch(tmp_path / "run", data, *flags, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    got = json.loads((tmp_path / "run" / "results" / "lm.json").read_text())
    want = json.loads((tmp_path / "ref" / "results" / "lm.json").read_text())
    # every rank's dropout stream is restored from the checkpoint: the same numbers as without the kill
    assert got["val"] == want["val"] and got["test"] == want["test"]
    assert not (tmp_path / "run" / "models" / "checkpoints").exists()


def test_classification_under_torchrun_matches_one_process(data, single, tmp_path):
    for run in ("one", "two"):
        shutil.copytree(single / "models", tmp_path / run / "models")
    flags = ["--epochs", "2", "--batch-size", "16", "--encoder-hidden", "8", "--lr", "0.01", "--dropout", "0",
             "--precision", "fp32", "--mixes", "trainable_lambda", "learned_function", "--quiet"]
    one = launch(tmp_path / "one", data, *flags, "--threads", "1", procs=0, script=ROOT / "classification.py")
    two = launch(tmp_path / "two", data, *flags, script=ROOT / "classification.py")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    a, b = (json.loads((tmp_path / r / "results" / "classification.json").read_text()) for r in ("one", "two"))
    for mix in ("trainable_lambda", "learned_function"):
        assert [r["train_loss"] for r in b[mix]["history"]] == pytest.approx(
            [r["train_loss"] for r in a[mix]["history"]], rel=TOLERANCE)
        assert b[mix]["lambdas"] == pytest.approx(a[mix]["lambdas"], rel=1e-3, abs=1e-4) \
            if a[mix]["lambdas"] else True
    assert (tmp_path / "two" / "models" / "classifier.pt").is_file()
