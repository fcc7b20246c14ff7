"""End to end: both scripts on a corpus the test writes, every artefact, exact repeatability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT

from elmo.mix import MIX_SETTINGS
from elmo.vocab import Vocabulary

SMALL = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "2", "--quiet"]


def run(script: str, out: Path, data: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, str(ROOT / script), "--data-dir", str(data), "--models-dir", str(out / "models"),
            "--results-dir", str(out / "results"), "--images-dir", str(out / "images"), *extra]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(args, capture_output=True, text=True, cwd=out, env=env, timeout=600)


def pipeline(out: Path, data: Path) -> tuple[dict, dict]:
    lm = run("ELMO.py", out, data, *SMALL)
    assert lm.returncode == 0, lm.stderr
    cls = run("classification.py", out, data, "--epochs", "3", "--batch-size", "16", "--encoder-hidden", "8",
              "--lr", "0.01", "--quiet")
    assert cls.returncode == 0, cls.stderr
    return (json.loads((out / "results" / "lm.json").read_text()),
            json.loads((out / "results" / "classification.json").read_text()))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    from conftest import make_rows, write_csv

    root = tmp_path_factory.mktemp("pipeline")
    data = root / "data"
    write_csv(data / "train.csv", make_rows(240, seed=1))
    write_csv(data / "test.csv", make_rows(80, seed=2))
    out = root / "run1"
    out.mkdir()
    return data, out, pipeline(out, data)


def test_every_artefact_is_written_and_loads_with_weights_only(first_run):
    _, out, (lm, cls) = first_run
    models = out / "models"
    for name in ("word2idx.pkl", "forward.pt", "backward.pt", "bilstm.pt", "classifier.pt",
                 *(f"classifier_{s}.pt" for s in MIX_SETTINGS)):
        assert (models / name).is_file(), name
    for name in ("forward.pt", "backward.pt", "bilstm.pt", "classifier.pt"):
        assert isinstance(torch.load(models / name, weights_only=True), dict)
    vocab = Vocabulary.load_pickle(models / "word2idx.pkl")
    assert torch.load(models / "bilstm.pt", weights_only=True)["vocab"] == vocab.itos
    for name in ("lm_confusion_forward.png", "lm_confusion_backward.png", "lm_loss.png", "classifier_val_f1.png",
                 *(f"confusion_{s}.png" for s in MIX_SETTINGS)):
        assert (out / "images" / name).read_bytes()[:4] == b"\x89PNG", name
    assert not list(models.glob(".*tmp"))  # no temporary files left behind


def test_lm_json_layout(first_run):
    _, _, (lm, _) = first_run
    for split in ("val", "test"):
        for d in ("forward", "backward"):
            assert 1.0 < lm[split][f"{d}_perplexity"] < lm["vocab_size"] * 2
    words = lm["test"]["forward_words"]
    assert 0 <= words["top1_accuracy"] <= words["top5_accuracy"] <= 1
    assert {"micro_f1", "macro_f1", "macro_precision", "macro_recall"} <= words.keys()
    assert lm["train_tokens"] > 0 and lm["tokens_per_second"]["forward"] > 0 and lm["config"]["seed"] == 0


def test_classification_json_layout_and_learning(first_run):
    _, out, (_, cls) = first_run
    assert cls["best_setting"] in MIX_SETTINGS
    for s in MIX_SETTINGS:
        for split in ("train", "test"):
            m = cls[s][split]
            assert {"accuracy", "precision", "recall", "f1", "confusion_matrix"} <= m.keys()
            assert sum(map(sum, m["confusion_matrix"])) == (80 if split == "test" else 228)
        assert cls[s]["test"]["accuracy"] > 0.5  # the toy topics are easy; chance is 0.25
    assert cls["trainable_lambda"]["lambdas"] is not None and cls["learned_function"]["lambdas"] is None
    assert cls["frozen_lambda"]["gamma"] == 1.0
    best = torch.load(out / "models" / "classifier.pt", weights_only=True)
    assert best["config"]["setting"] == cls["best_setting"]


def test_same_seed_repeats_the_metrics_exactly(first_run, tmp_path):
    data, _, (lm, cls) = first_run
    lm2, cls2 = pipeline(tmp_path, data)
    assert lm2["test"] == lm["test"] and lm2["val"] == lm["val"]
    for s in MIX_SETTINGS:
        assert cls2[s]["test"] == cls[s]["test"] and cls2[s]["lambdas"] == cls[s]["lambdas"]


def test_missing_inputs_exit_2_with_a_clear_message(tmp_path, tiny_agnews):
    result = run("classification.py", tmp_path, tiny_agnews)
    assert result.returncode == 2 and "bilstm.pt not found: run `python ELMO.py" in result.stderr
    result = run("ELMO.py", tmp_path, tmp_path / "nowhere")
    assert result.returncode == 2 and "python -m elmo.data fetch" in result.stderr
    result = run("ELMO.py", tmp_path, tiny_agnews, "--max-docs", "0")
    assert result.returncode == 2 and "--max-docs" in result.stderr
    assert "Traceback" not in result.stderr
