"""Same seed, same numbers: two identical ``pretrain --architecture`` runs on two threads give the same metrics to
the last digit (the gradients they add up: tests/unit/model/test_repeatable_gradients.py)."""

from __future__ import annotations

import json

from support import run_in_process

#: large enough that the token layer's and the sampled softmax's gradients are shared out between two threads
OPTIONS = {"lstm": {"dim": 64, "projection_dim": 64, "n_layers": 1, "cell_clip": 3, "proj_clip": 3,
                    "use_skip_connections": False},
           "char_cnn": {"embedding": {"dim": 8}, "filters": [[1, 16], [2, 16], [3, 32]], "n_highway": 1,
                        "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}}


def metrics(out) -> dict:
    lm = json.loads((out / "results" / "lm.json").read_text())
    return {"val": lm["val"], "test": lm["test"],
            "train_loss": [row["train_loss"] for row in lm["directions"]["forward"]["history"]]}


def test_two_identical_two_thread_runs_give_identical_metrics(tmp_path, tiny_agnews_shared):
    options = tmp_path / "options.json"
    options.write_text(json.dumps(OPTIONS))
    for run in ("a", "b"):
        assert run_in_process("pretrain", tmp_path / run, tiny_agnews_shared, "--architecture", str(options),
                              "--softmax", "sampled", "--softmax-samples", "20", "--max-docs", "136", "--epochs", "1",
                              "--batch-size", "64", "--threads", "2", "--quiet") == 0  # two steps
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")
