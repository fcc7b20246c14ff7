"""The TF-IDF + logistic regression reference on a corpus the test writes."""

from __future__ import annotations

import json

from elmo.baselines import main, tfidf_logreg
from elmo.data import load_agnews


def test_tfidf_logreg_learns_the_toy_topics(tiny_agnews):
    train, _, test = load_agnews(tiny_agnews)
    result = tfidf_logreg(train, test)
    assert result["test"]["accuracy"] > 0.8
    assert sum(map(sum, result["test"]["confusion_matrix"])) == len(test)


def test_cli_writes_baselines_json(tiny_agnews, tmp_path):
    assert main(["--data-dir", str(tiny_agnews), "--results-dir", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "baselines.json").read_text())
    assert out["tfidf_logreg"]["train_documents"] == 228
    assert main(["--data-dir", str(tmp_path / "none"), "--results-dir", str(tmp_path)]) == 2
