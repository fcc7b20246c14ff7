"""The TF-IDF + logistic regression reference and the baselines CLI's errors, on corpora the tests write."""

from __future__ import annotations

from elmo.cli import run
from elmo.data.agnews import load_agnews
from elmo.pipelines.baselines import tfidf_logreg


def test_tfidf_logreg_learns_the_toy_topics(tiny_agnews):
    train, val, test = load_agnews(tiny_agnews)
    result = tfidf_logreg(train, val, test)
    assert result["test"]["accuracy"] > 0.8
    assert sum(map(sum, result["test"]["confusion_matrix"])) == len(test)
    assert sum(map(sum, result["val"]["confusion_matrix"])) == len(val)
    assert result["features"] > 0


def test_cli_needs_the_trained_bilm_and_valid_flags(tiny_agnews, tmp_path, capsys):
    args = ["--data-dir", str(tiny_agnews), "--results-dir", str(tmp_path), "--models-dir", str(tmp_path / "m")]
    assert run("baselines", args) == 2
    assert "holds no biLM (no such file or folder): looked for bilstm.pt" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()  # the failed run made no folder
    assert run("baselines", [*args, "--static-dim", "0"]) == 2
    assert "--static-dim must be >= 1" in capsys.readouterr().err
