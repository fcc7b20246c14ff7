"""End to end: both scripts on a corpus the test writes, every artefact, exact repeatability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT

from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError
from elmo.model.mix import MIX_SETTINGS

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
    result = run("ELMO.py", tmp_path, tmp_path / "nowhere", "--no-download")
    assert result.returncode == 2 and "--no-download" in result.stderr and "python -m elmo fetch" in result.stderr
    result = run("ELMO.py", tmp_path, tiny_agnews, "--max-docs", "0")
    assert result.returncode == 2 and "--max-docs" in result.stderr
    assert "Traceback" not in result.stderr
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = run("ELMO.py", tmp_path, tiny_agnews, "--results-dir", str(blocker / "results"))
    assert result.returncode == 2 and f"cannot write to output folder {blocker / 'results'}" in result.stderr
    assert not (tmp_path / "models" / "bilstm.pt").exists()  # stopped before training, not after


def test_text_classifier_reproduces_the_test_accuracy_of_classifier_pt(first_run):
    """classifier.pt loaded by the notebook API, on raw test.csv text, gives the accuracy classification.json reports."""
    from elmo import TextClassifier
    from elmo.data.agnews import CLASS_NAMES, read_agnews

    data, out, (_, cls) = first_run
    test = read_agnews(data / "test.csv")
    model = TextClassifier.from_pretrained(out / "models", device="cpu")
    probs = model.predict_proba(test.texts)
    assert probs.shape == (80, 4) and np.allclose(probs.sum(1), 1, atol=1e-5)
    labels = model.predict(test.texts)
    assert set(labels) <= set(CLASS_NAMES)
    accuracy = np.mean([CLASS_NAMES.index(label) == y for label, y in zip(labels, test.labels)])
    assert accuracy == pytest.approx(cls[cls["best_setting"]]["test"]["accuracy"])
    with pytest.raises(ElmoError, match="text 1 holds no word"):
        model.predict_proba(["the match", "  "])
    with pytest.raises(ElmoError, match="text 0: expected a str"):
        model.predict_proba([None])
    long_text = " ".join(["the match"] * 200)  # 400 tokens: the first 256 are classified, as in training
    with pytest.warns(UserWarning, match="text 0 has 400 tokens; classifying its first 256"):
        truncated = model.predict_proba([long_text])
    assert np.allclose(truncated, model.predict_proba([" ".join(["the match"] * 128)]), atol=1e-6)


def test_predict_cli_prints_label_and_probability_per_line(first_run, tmp_path):
    from elmo import TextClassifier
    from elmo.data.agnews import CLASS_NAMES

    _, out, _ = first_run
    texts = ["The striker scored a late goal in the championship match", "Shares and oil prices fell as investors sold"]
    expected = TextClassifier.from_pretrained(out / "models", device="cpu").predict_proba(texts)
    one = run("classification.py", out, tmp_path, "--predict", texts[0])
    assert one.returncode == 0, one.stderr
    label, prob, text = one.stdout.strip().split("\t")
    assert label == CLASS_NAMES[expected[0].argmax()] and float(prob) == pytest.approx(expected[0].max(), abs=1e-4)
    assert text == texts[0]
    (tmp_path / "texts.txt").write_text(f"{texts[0]}\n\n{texts[1]}\n", encoding="utf-8")
    many = run("classification.py", out, tmp_path, "--predict-file", str(tmp_path / "texts.txt"))
    assert many.returncode == 0, many.stderr
    lines = many.stdout.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == [CLASS_NAMES[i] for i in expected.argmax(1)]
    assert "skipped 1 blank line" in many.stderr
    (tmp_path / "bad.txt").write_text("the match\n<br>\n", encoding="utf-8")  # markup only: no word
    bad = run("classification.py", out, tmp_path, "--predict-file", str(tmp_path / "bad.txt"))
    assert bad.returncode == 2 and "bad.txt line 2" in bad.stderr and "Traceback" not in bad.stderr
    missing = run("classification.py", out, tmp_path, "--predict-file", str(tmp_path / "none.txt"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_classifier_from_another_bilm_is_refused(first_run, tmp_path):
    import shutil

    from elmo import TextClassifier

    data, out, _ = first_run
    other = tmp_path / "other"
    other.mkdir()
    lm = run("ELMO.py", other, data, *SMALL, "--embedding-dim", "8", "--hidden-size", "8")  # other sizes
    assert lm.returncode == 0, lm.stderr
    shutil.copy(out / "models" / "classifier.pt", other / "models" / "classifier.pt")
    with pytest.raises(ElmoError, match="different biLM"):
        TextClassifier.from_pretrained(other / "models", device="cpu")
    with pytest.raises(ElmoError, match="classifier_x.pt not found"):
        TextClassifier.from_pretrained(out / "models", classifier="classifier_x.pt")


def test_readme_library_example_runs_as_written(first_run):
    """The README's "Use it as a library" block, run verbatim in a fresh interpreter next to models/."""
    _, out, _ = first_run
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Use it as a library"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("\n```\n")]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=out, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(3, 10, 32)"  # 10 tokens, D = 2 × 16 in the small test run
    assert lines[1] == "torch.Size([1, 10, 32]) torch.Size([1, 10])"
    assert lines[2].startswith("[") and len(eval(lines[2])) == 2  # noqa: S307 - our own output
