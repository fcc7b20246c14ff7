"""``python -m elmo finetune`` killed by SIGKILL mid-epoch, then ``--resume``: the same perplexities (before and
after), training history and fine-tuned weights as an uninterrupted run in another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from integration.test_resume_scripts import KILLER
from published_reference import OPTIONS, WEIGHTS
from safetensors.torch import load_file
from support import ROOT, make_rows, run_script

from elmo.artifacts import load_checkpoint

pytestmark = pytest.mark.slow

#: 380 training lines (20 held out) in batches of 32: 12 steps an epoch, checkpoints every 5 steps
FLAGS = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS), "--threads", "1", "--precision", "fp32",
         "--quiet", "--epochs", "2", "--batch-size", "32", "--softmax-samples", "40", "--checkpoint-every", "5"]


def test_finetune_killed_mid_epoch_then_resumed_ends_exactly_like_an_uninterrupted_run(tmp_path):
    text = tmp_path / "domain.txt"
    text.write_text("\n".join(r[2] for r in make_rows(400, seed=5)) + "\n", encoding="utf-8")
    flags = [*FLAGS, "--train-file", str(text)]
    reference = run_script("-m elmo finetune", tmp_path / "reference", tmp_path / "absent", *flags)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "killed"
    out.mkdir()
    # forward calls: 2 before training (one held-out batch per direction), 12 steps + 1 validation in epoch 1, then
    # step 8 of epoch 2, after the checkpoint of step 5
    code = KILLER.format(root=str(ROOT), module="elmo.model.language_model", cls="PublishedLM", at=23,
                         sig="SIGKILL", command="finetune")
    killed = subprocess.run([sys.executable, "-c", code, "--data-dir", str(tmp_path / "absent"), "--models-dir",
                             str(out / "models"), "--results-dir", str(out / "results"), "--images-dir",
                             str(out / "images"), *flags], capture_output=True, text=True, cwd=out, timeout=600,
                            env={**os.environ, "PYTHONHASHSEED": "0"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    saved = load_checkpoint(out / "models" / "checkpoints" / "published_lm.pt", "elmo.training")
    assert not saved["done"] and saved["epoch"] == 1 and saved["step"] == 5
    resumed = run_script("-m elmo finetune", out, tmp_path / "absent", *flags, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    expected, got = (json.loads((d / "results" / "lm.json").read_text()) for d in (tmp_path / "reference", out))
    assert got["before"] == expected["before"] and got["val"] == expected["val"]
    assert got["finetune"]["softmax_init"] == expected["finetune"]["softmax_init"]
    for key in ("train_loss", "val_perplexity"):
        assert [r[key] for r in got["directions"]["forward"]["history"]] == \
               [r[key] for r in expected["directions"]["forward"]["history"]], key
    weights = [load_file(d / "models" / "bilm" / "model.safetensors") for d in (tmp_path / "reference", out)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
