"""Never lose a run, for real: the scripts killed by SIGKILL or stopped by Ctrl-C mid-epoch, then ``--resume``
(the in-process resume of elmo.training is in tests/unit/training/test_checkpointing.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import CLASSIFY, ROOT, SMALL, run_script, without_timings

from elmo.artifacts import load_checkpoint
from elmo.model.mix import LAYER_MIXES
from lab.study import merge_flags

pytestmark = pytest.mark.slow

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


def test_sigkill_mid_epoch_then_resume_gives_the_uninterrupted_metrics_bit_for_bit(small_pipeline, tmp_path):
    """Both scripts killed mid-epoch in new processes, then resumed, end with exactly the numbers of the shared
    uninterrupted run (another process): so a run also repeats itself exactly with the same seed (the state at the
    kill must equal the uninterrupted run's, the rest is restored from it). A resume with other flags is refused."""
    data, lm_ref, cls_ref = small_pipeline.data, small_pipeline.lm, small_pipeline.cls
    # 228 training documents in batches of 16: 15 steps an epoch; the kill lands in epoch 2 of the
    # forward LM, between the checkpoints written every 4 steps
    killed = run_killed(tmp_path, data, "ELMO.py", "SIGKILL", 23, *SMALL, "--checkpoint-every", "4")
    assert killed.returncode == -signal.SIGKILL
    saved = load_checkpoint(tmp_path / "models" / "checkpoints" / "forward_lm.pt", "elmo.training")
    assert not saved["done"] and saved["step"] > 0  # a mid-epoch checkpoint is what the resume starts from
    assert not (tmp_path / "models" / "bilstm.pt").exists()  # killed before the end
    other = [a if a != "16" else "8" for a in SMALL]  # --embedding-dim/--hidden-size/--batch-size changed
    refused = run_script("ELMO.py", tmp_path, data, *other, "--checkpoint-every", "4", "--resume")
    assert refused.returncode == 2 and "belongs to a run with other settings" in refused.stderr
    resumed = run_script("ELMO.py", tmp_path, data, *SMALL, "--checkpoint-every", "4", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert lm["test"] == lm_ref["test"] and lm["val"] == lm_ref["val"]
    for d in ("forward", "backward"):
        assert lm["directions"][d]["history"] == [{**row, "seconds": got["seconds"], "units_per_second": got["units_per_second"]}
                                                  for row, got in zip(lm_ref["directions"][d]["history"],
                                                                      lm["directions"][d]["history"])]
    assert not (tmp_path / "models" / "checkpoints").exists()  # removed once the script finished

    # call 40: step 8 of epoch 3 of trainable_lambda (15 steps + 1 validation call an epoch)
    killed = run_killed(tmp_path, data, "classification.py", "SIGKILL", 40, *CLASSIFY, "--checkpoint-every", "5")
    assert killed.returncode == -signal.SIGKILL
    resumed = run_script("classification.py", tmp_path, data, *CLASSIFY, "--checkpoint-every", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    cls = json.loads((tmp_path / "results" / "classification.json").read_text())
    assert cls["best_mix"] == cls_ref["best_mix"]
    for mix in LAYER_MIXES:
        assert cls[mix]["test"] == cls_ref[mix]["test"], mix
        assert cls[mix]["lambdas"] == cls_ref[mix]["lambdas"] and cls[mix]["gamma"] == cls_ref[mix]["gamma"]
        for key in ("train_loss", "val_f1"):
            assert [r[key] for r in cls[mix]["history"]] == [r[key] for r in cls_ref[mix]["history"]], key


#: the forward LM's process (elmo.pipelines.pretraining.train_direction) kills the whole run (every process of its
#: group: the script and both directions) at its {at}-th forward call, once the backward LM has finished
DIRECTION_KILLER = """
import os, signal, time
from elmo.artifacts import load_checkpoint
from elmo.model.language_model import LanguageModel
from elmo.pipelines import pretraining

train = pretraining.train_direction


def train_direction(job):
    if job.lm.direction == "forward":
        original, calls = LanguageModel.forward, [0]
        backward = job.config.outputs.checkpoint("backward_lm")

        def forward(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == {at}:
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline and not (backward.is_file()
                                                            and load_checkpoint(backward, "elmo.training")["done"]):
                    time.sleep(0.05)
                os.killpg(0, signal.SIGKILL)
            return original(self, *args, **kwargs)
        LanguageModel.forward = forward
    return train(job)
"""

LAUNCH_SIDE_BY_SIDE = """
import sys
sys.path[:0] = [{root!r}, {hook!r}]
import direction_killer
from elmo.pipelines import pretraining
pretraining.train_direction = direction_killer.train_direction
from elmo.cli import run
sys.exit(run("pretrain", sys.argv[1:]))
"""

#: both directions at once, one thread each
SIDE_BY_SIDE = ["--threads", "2", "--concurrent-directions", "on", "--checkpoint-every", "4"]


def test_a_killed_side_by_side_run_resumes_each_direction_from_its_own_checkpoint(small_pipeline, tmp_path):
    """``ELMO.py`` with the directions in two processes, all killed by SIGKILL when the backward LM has finished and
    the forward LM is in epoch 2, then resumed: the backward LM is not trained again, the forward LM continues from
    its mid-epoch checkpoint, and both end with the numbers of the one-thread run, one direction after the other."""
    data, ref = small_pipeline.data, small_pipeline.lm
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "direction_killer.py").write_text(DIRECTION_KILLER.replace("{at}", "23"))
    code = LAUNCH_SIDE_BY_SIDE.format(root=str(ROOT), hook=str(hook))
    killed = subprocess.run([sys.executable, "-c", code, "--data-dir", str(data), "--models-dir", str(tmp_path / "models"),
                             "--results-dir", str(tmp_path / "results"), "--images-dir", str(tmp_path / "images"),
                             *merge_flags(SMALL, SIDE_BY_SIDE)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                            env={**os.environ, "PYTHONHASHSEED": "0"}, start_new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    checkpoints = tmp_path / "models" / "checkpoints"
    forward, backward = (load_checkpoint(checkpoints / f"{d}_lm.pt", "elmo.training") for d in ("forward", "backward"))
    assert not forward["done"] and forward["epoch"] == 1 and forward["step"] > 0 and backward["done"]
    assert not (tmp_path / "models" / "bilstm.pt").exists()
    resumed = run_script("ELMO.py", tmp_path, data, *SMALL, *SIDE_BY_SIDE, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert lm["concurrent_directions"] and lm["val"] == ref["val"] and lm["test"] == ref["test"]
    assert lm["directions"]["backward"]["history"] == backward["history"]  # its timings too: restored, not retrained
    for d in ("forward", "backward"):
        assert without_timings(lm["directions"][d]["history"]) == without_timings(ref["directions"][d]["history"]), d
    assert not checkpoints.exists()


def test_ctrl_c_saves_says_how_to_resume_and_the_resume_finishes_the_run(small_pipeline, tmp_path):
    data, cls_ref = small_pipeline.data, small_pipeline.cls
    models = tmp_path / "models"
    models.mkdir()
    for name in ("word2idx.pkl", "forward.pt", "backward.pt", "bilstm.pt"):  # what ELMO.py with these flags writes
        shutil.copy(small_pipeline.out / "models" / name, models / name)
    # 15 steps + 1 validation call an epoch and 3 final predictions: call 75 is in epoch 2 of frozen_lambda
    stopped = run_killed(tmp_path, data, "classification.py", "SIGINT", 75, *CLASSIFY)
    assert stopped.returncode == 130, stopped.stderr
    assert "interrupted" in stopped.stderr and "--resume" in stopped.stderr and "Traceback" not in stopped.stderr
    assert (models / "checkpoints").is_dir() and not (tmp_path / "results" / "classification.json").exists()
    resumed = run_script("classification.py", tmp_path, data, *CLASSIFY, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    cls = json.loads((tmp_path / "results" / "classification.json").read_text())
    assert all(cls[s]["test"] == cls_ref[s]["test"] for s in LAYER_MIXES)
