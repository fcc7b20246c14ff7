"""End to end: both scripts on a corpus the test writes, every artefact, learning, the notebook API and the command
line on what they wrote (exact repeatability across processes: tests/integration/test_resume_scripts.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from support import ROOT, run_script, unigram_perplexity

from elmo.cli import run as cli_run
from elmo.data.agnews import load_agnews
from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.classifier import bilm_fingerprint
from elmo.model.mix import LAYER_MIXES
from elmo.model.serialization import load_bilm

pytestmark = pytest.mark.slow

#: A biLM must reach at most this share of the unigram model's perplexity. The small run reaches about 0.55
#: (test perplexity about 20 against 37); a model that learnt nothing from context sits at 1 or above (the uniform
#: guess over the 51 words is 51).
UNIGRAM_SHARE = 0.75


def test_every_artefact_is_written_and_loads_with_weights_only(small_pipeline):
    out = small_pipeline.out
    models = out / "models"
    for name in ("word2idx.pkl", "forward.pt", "backward.pt", "bilstm.pt", "classifier.pt",
                 *(f"classifier_{s}.pt" for s in LAYER_MIXES)):
        assert (models / name).is_file(), name
    for name in ("forward.pt", "backward.pt", "bilstm.pt", "classifier.pt"):
        assert isinstance(torch.load(models / name, weights_only=True), dict)
    vocab = Vocabulary.load_pickle(models / "word2idx.pkl")
    assert torch.load(models / "bilstm.pt", weights_only=True)["vocab"] == vocab.itos
    saved, (loaded, _, _) = BiLM.from_pretrained(models / "bilm"), load_bilm(models / "bilstm.pt")  # one biLM, twice
    assert sorted(p.name for p in (models / "bilm").iterdir()) == ["README.md", "config.json", "model.safetensors",
                                                                   "vocab.txt"]
    assert saved.vocab.itos == vocab.itos and bilm_fingerprint(saved, saved.vocab) == bilm_fingerprint(loaded, vocab)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in saved.state_dict().items())
    for name in ("lm_confusion_forward.png", "lm_confusion_backward.png", "lm_loss.png", "classifier_val_f1.png",
                 *(f"confusion_{s}.png" for s in LAYER_MIXES)):
        assert (out / "images" / name).read_bytes()[:4] == b"\x89PNG", name
    assert not list(models.glob(".*tmp"))  # no temporary files left behind
    assert not (models / "checkpoints").exists()  # removed once the scripts finished


def test_lm_json_layout_and_both_directions_beat_the_unigram_model(small_pipeline):
    lm, data = small_pipeline.lm, small_pipeline.data
    vocab = Vocabulary.load_pickle(small_pipeline.out / "models" / "word2idx.pkl")
    assert lm["vocab_size"] == len(vocab)
    train, val, test = load_agnews(data, download=False)  # the split ELMO.py made (seed 0, 5% validation)
    assert lm["documents"] == {"train": len(train), "val": len(val), "test": len(test)}
    for split, docs in (("val", val), ("test", test)):
        unigram = unigram_perplexity(train.tokens, docs.tokens, vocab)
        assert 25 < unigram < len(vocab)  # the toy corpus: far from uniform, far from predictable
        for d in ("forward", "backward"):
            assert 1.0 < lm[split][f"{d}_perplexity"] < UNIGRAM_SHARE * unigram, (split, d, unigram)
    words = lm["test"]["forward_words"]
    assert words["perplexity"] == lm["test"]["forward_perplexity"]
    assert 0 <= words["top1_accuracy"] <= words["top5_accuracy"] <= 1
    assert {"micro_f1", "macro_f1", "macro_precision", "macro_recall"} <= words.keys()
    assert lm["train_tokens"] > 0 and set(lm["tokens_per_second"]) == {"forward", "backward"} and lm["config"]["seed"] == 0
    assert set(lm["phase_seconds"]) == {"data", "word2vec", "training", "evaluation", "plots", "saving"}
    assert lm["phase_seconds"]["training"] == lm["train_seconds"]  # the same record; no timing is compared
    computed = {"bf16": "bfloat16", "fp32": "float32"}[lm["precision"]]  # the LSTM kernels' dtype, read from them
    assert lm["lstm_dtype"] == {"forward": computed, "backward": computed}
    assert all(row["lstm_dtype"] == computed for d in ("forward", "backward") for row in lm["directions"][d]["history"])


def test_classification_json_layout_and_learning(small_pipeline):
    out, cls = small_pipeline.out, small_pipeline.cls
    assert cls["best_mix"] in LAYER_MIXES
    for s in LAYER_MIXES:
        for split in ("train", "test"):
            m = cls[s][split]
            assert {"accuracy", "precision", "recall", "f1", "confusion_matrix"} <= m.keys()
            assert sum(map(sum, m["confusion_matrix"])) == (80 if split == "test" else 228)
        assert cls[s]["test"]["accuracy"] > 0.5  # the toy topics are easy; chance is 0.25
        assert len(cls[s]["history"]) == 3
    assert cls["trainable_lambda"]["lambdas"] is not None and len(cls["learned_function"]["lambdas"]) == 3
    assert sum(cls["trainable_lambda"]["lambdas"]) == pytest.approx(1.0)
    assert cls["frozen_lambda"]["gamma"] == 1.0
    computed = {"bf16": "bfloat16", "fp32": "float32"}[cls["precision"]]
    assert cls["lstm_dtype"] == {"bilm": computed, **{s: computed for s in LAYER_MIXES}}
    best = torch.load(out / "models" / "classifier.pt", weights_only=True)
    assert best["config"]["mix"] == cls["best_mix"]
    best_val = max(cls[s]["val"]["f1"] for s in LAYER_MIXES)
    assert cls[cls["best_mix"]]["val"]["f1"] == best_val  # chosen on validation, never on test


def test_a_script_stopped_by_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path, tiny_agnews):
    """The real process (the in-process variants of every message are in tests/unit/pipelines/test_script_errors.py)."""
    result = run_script("classification.py", tmp_path, tiny_agnews)
    assert result.returncode == 2 and "holds no biLM (no such file or folder): looked for bilstm.pt" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert not any((tmp_path / name).exists() for name in ("models", "results", "images"))  # no empty folder left


def test_text_classifier_reproduces_the_test_accuracy_of_classifier_pt(small_pipeline):
    """classifier.pt loaded by the notebook API, on raw test.csv text, gives the accuracy classification.json reports."""
    from elmo import TextClassifier
    from elmo.data.agnews import CLASS_NAMES, read_agnews

    data, out, cls = small_pipeline.data, small_pipeline.out, small_pipeline.cls
    test = read_agnews(data / "test.csv")
    model = TextClassifier.from_pretrained(out / "models", device="cpu")
    probs = model.predict_proba(test.texts)
    assert probs.shape == (80, 4) and np.allclose(probs.sum(1), 1, atol=1e-5)
    labels = model.predict(test.texts)
    assert set(labels) <= set(CLASS_NAMES)
    accuracy = np.mean([CLASS_NAMES.index(label) == y for label, y in zip(labels, test.labels)])
    assert accuracy == pytest.approx(cls[cls["best_mix"]]["test"]["accuracy"])
    with pytest.raises(ElmoError, match="text 1 holds no word"):
        model.predict_proba(["the match", "  "])
    with pytest.raises(ElmoError, match="text 0: expected a str"):
        model.predict_proba([None])
    long_text = " ".join(["the match"] * 200)  # 400 tokens: the first 256 are classified, as in training
    with pytest.warns(UserWarning, match="text 0 has 400 tokens; classifying its first 256"):
        truncated = model.predict_proba([long_text])
    assert np.allclose(truncated, model.predict_proba([" ".join(["the match"] * 128)]), atol=1e-6)


def test_predict_cli_prints_label_and_probability_per_line(small_pipeline, tmp_path, capsys):
    from elmo import TextClassifier
    from elmo.data.agnews import CLASS_NAMES

    out = small_pipeline.out
    texts = ["The striker scored a late goal in the championship match", "Shares and oil prices fell as investors sold"]
    expected = TextClassifier.from_pretrained(out / "models", device="cpu").predict_proba(texts)
    models = ["--models-dir", str(out / "models")]
    one = subprocess.run([sys.executable, "-m", "elmo", "predict", *models, "--text", texts[0]], capture_output=True,
                         text=True, cwd=tmp_path, timeout=600)  # the real command, once
    assert one.returncode == 0, one.stderr
    label, prob, text = one.stdout.strip().split("\t")
    assert label == CLASS_NAMES[expected[0].argmax()] and float(prob) == pytest.approx(expected[0].max(), abs=1e-4)
    assert text == texts[0]
    (tmp_path / "texts.txt").write_text(f"{texts[0]}\n\n{texts[1]}\n", encoding="utf-8")
    assert cli_run("predict", [*models, "--input-file", str(tmp_path / "texts.txt")]) == 0
    many = capsys.readouterr()
    lines = many.out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == [CLASS_NAMES[i] for i in expected.argmax(1)]
    assert [float(line.split("\t")[1]) for line in lines] == pytest.approx(expected.max(1), abs=1e-4)
    assert "skipped 1 blank line" in many.err
    assert cli_run("predict", [*models, "--text", texts[1], "--text", texts[0]]) == 0  # each --text, in order
    repeated = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[2] for line in repeated] == [texts[1], texts[0]]
    assert [line.split("\t")[0] for line in repeated] == [CLASS_NAMES[i] for i in expected.argmax(1)[::-1]]
    assert cli_run("predict", [*models, "--text", texts[0], "--text", "  "]) == 2
    assert "--text 2 (of 2): the text holds no word" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("the match\n<br>\n", encoding="utf-8")  # markup only: no word
    assert cli_run("predict", [*models, "--input-file", str(tmp_path / "bad.txt")]) == 2
    err = capsys.readouterr().err
    assert "bad.txt line 2" in err and "Traceback" not in err
    assert cli_run("predict", [*models, "--input-file", str(tmp_path / "none.txt")]) == 2
    err = capsys.readouterr().err
    assert f"--input-file {tmp_path / 'none.txt'}: no such file" in err


def test_classifier_from_another_biLM_is_refused(small_pipeline, pinned_run, tmp_path):
    from elmo import TextClassifier

    other = tmp_path / "other"
    shutil.copytree(pinned_run.out / "models", other)  # a biLM of other sizes (the defaults, not 16)
    shutil.copy(small_pipeline.out / "models" / "classifier.pt", other / "classifier.pt")
    with pytest.raises(ElmoError, match="different biLM"):
        TextClassifier.from_pretrained(other, device="cpu")
    with pytest.raises(ElmoError, match="classifier_x.pt not found"):
        TextClassifier.from_pretrained(small_pipeline.out / "models", classifier="classifier_x.pt")
    assert TextClassifier.from_pretrained(pinned_run.out / "models", device="cpu").predict(["the match"])  # its own: fine


def test_readme_library_example_runs_as_written(small_pipeline):
    """The README's "Use it as a library" block, run verbatim in a fresh interpreter next to models/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Use it as a library"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("\n```\n")]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=small_pipeline.out,
                            timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(3, 10, 32)"  # 10 tokens, D = 2 × 16 in the small test run
    assert lines[1] == "torch.Size([1, 10, 32]) torch.Size([1, 10])"
    assert lines[2].startswith("[") and len(eval(lines[2])) == 2  # noqa: S307 - our own output
