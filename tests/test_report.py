"""The report builder: sentences computed from the numbers, and a PDF from a real (tiny) pipeline run."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, make_rows, write_csv
from pypdf import PdfReader

from elmo.cli import run as elmo_run
from elmo.report.pdf import analysis

CONTEXT = ["--context-words", "bank", "season", "said"]  # words of the toy corpus that occur in several topics


def metrics(acc: float, f1: float | None = None) -> dict:
    f1 = acc if f1 is None else f1
    return {"accuracy": acc, "precision": f1, "recall": f1, "f1": f1, "confusion_matrix": [[1]]}


def fake_results(elmo: float, w2v: float, svd: float) -> dict:
    cls = {s: {"train": metrics(0.99), "val": metrics(elmo), "test": metrics(elmo - d), "lambdas": lam, "gamma": g,
               "history": [{"val_f1": elmo}]}
           for s, d, lam, g in (("trainable_lambda", 0.0, [0.3, 0.3, 0.4], 1.2),
                                ("frozen_lambda", 0.01, [0.8, 0.15, 0.05], 1.0),
                                ("learned_function", 0.005, None, None))}
    cls["best_setting"] = "trainable_lambda"
    base = {m: {"train": metrics(0.95), "val": metrics(a), "test": metrics(a)}
            for m, a in (("word2vec", w2v), ("svd", svd), ("tfidf_logreg", 0.85))}
    return {"lm": {}, "classification": cls, "baselines": base, "init": None}


def test_analysis_says_when_elmo_loses():
    text = analysis(fake_results(elmo=0.88, w2v=0.90, svd=0.86))["elmo_vs_static"]
    joined = " ".join(text)
    assert "loses to Word2Vec (same head)" in joined and "SVD" not in joined.split("loses to")[1]
    assert "test accuracy 0.8800 vs 0.9000 (-2.00 points)" in joined and "behind on both" in joined
    assert "Contextual layers are worth -2.00 accuracy points over the best static embedding" in joined


def test_analysis_says_when_elmo_wins_and_describes_lambda():
    out = analysis(fake_results(elmo=0.92, w2v=0.90, svd=0.89))
    joined = " ".join(out["elmo_vs_static"])
    assert "ahead of every baseline" in joined and "loses" not in joined
    assert "+2.00 points" in joined
    lam = " ".join(out["lambda"])
    assert "λ = (0.300, 0.300, 0.400)" in lam and "largest weight is on h2" in lam
    assert "puts 80% of the weight on h0" in lam
    assert "ELMo, trainable λ vs ELMo, frozen λ: test accuracy 0.9200 vs 0.9100 (+1.00 points)" in lam


def test_analysis_of_the_word2vec_initialisation():
    res = fake_results(0.9, 0.9, 0.9)
    res["lm"] = {"test": {"forward_perplexity": 140.0, "backward_perplexity": 138.0}}
    init_cls = copy.deepcopy(res["classification"])
    init_cls["trainable_lambda"]["test"] = metrics(0.91)
    res["init"] = {"name": "w2v", "none": {"lm": res["lm"], "classification": res["classification"]},
                   "word2vec": {"lm": {"test": {"forward_perplexity": 120.0, "backward_perplexity": 150.0}},
                                "classification": {"trainable_lambda": init_cls["trainable_lambda"]}}}
    init = " ".join(analysis(res)["init"])
    assert "forward test perplexity 140.0 → 120.0" in init and "backward test perplexity 138.0 → 150.0" in init
    assert "0.9000 → 0.9100: the Word2Vec initialisation helps here (+1.00 points)" in init


def run(script: str, out: Path, data: Path, *extra: str) -> None:
    args = [sys.executable, str(ROOT / script), "--data-dir", str(data), "--models-dir", str(out / "models"),
            "--results-dir", str(out / "results"), "--images-dir", str(out / "images"), "--quiet", *extra]
    result = subprocess.run(args, capture_output=True, text=True, cwd=out, timeout=600,
                            env={**os.environ, "PYTHONHASHSEED": "0"})
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """ELMO.py, classification.py and baselines.py on a written corpus (tiny sizes)."""
    out = tmp_path_factory.mktemp("report")
    data = out / "data"
    write_csv(data / "train.csv", make_rows(240, seed=1))
    write_csv(data / "test.csv", make_rows(80, seed=2))
    head = ["--epochs", "2", "--batch-size", "16", "--encoder-hidden", "8", "--lr", "0.01"]
    run("ELMO.py", out, data, "--embedding-dim", "16", "--hidden-size", "16", "--epochs", "1")
    run("classification.py", out, data, *head)
    run("baselines.py", out, data, *head, "--static-dim", "8", "--w2v-epochs", "2", *CONTEXT)
    experiment = out / "results" / "experiments" / "ln"  # a diagnostic run with one flag changed
    run("classification.py", out, data, *head, "--settings", "trainable_lambda", "--layer-norm",
        "--results-dir", str(experiment))
    random_init = out / "results" / "experiments" / "random_init"  # a biLM with random token embeddings
    flags = ["--models-dir", str(out / "models_random"), "--results-dir", str(random_init)]
    run("ELMO.py", out, data, "--embedding-dim", "16", "--hidden-size", "16", "--epochs", "1",
        "--init-embeddings", "none", *flags)
    run("classification.py", out, data, *head, "--settings", "trainable_lambda", *flags)
    return out


def test_baselines_json_has_the_classification_keys_and_a_context_demo(tiny_run):
    base = json.loads((tiny_run / "results" / "baselines.json").read_text())
    cls = json.loads((tiny_run / "results" / "classification.json").read_text())
    for method in ("word2vec", "svd", "tfidf_logreg"):
        for split in ("train", "val", "test"):
            assert base[method][split].keys() == cls["trainable_lambda"][split].keys()
        assert sum(map(sum, base[method]["test"]["confusion_matrix"])) == 80
        assert (tiny_run / "images" / f"confusion_{method}.png").read_bytes()[:4] == b"\x89PNG"
    assert base["word2vec"]["history"] and base["svd"]["embedding"]["dim"] == 8
    assert base["head_mismatch"] == []
    assert base["context"], "a toy word in two topics must be demonstrated"
    for item in base["context"]:
        cos = item["cosine"]
        for key in ("example_same", "example_cross", "same_topic", "cross_topic"):
            assert cos["h0"][key] == pytest.approx(1.0)  # the token layer is context-free
            assert -1.0 <= cos["h1"][key] < 0.9999  # contextual layers differ between the sentences
        assert sum(item["occurrences"].values()) >= 3
        assert item["sentences"][0]["topic"] == item["sentences"][1]["topic"] != item["sentences"][2]["topic"]


def test_report_pdf_renders_every_section_with_the_numbers_from_the_json(tiny_run):
    out = tiny_run / "report.pdf"
    results = tiny_run / "results"
    assert elmo_run("report", ["--results-dir", str(results), "--images-dir", str(tiny_run / "images"), "--out", str(out)]) == 0
    reader = PdfReader(out)
    text = " ".join(page.extract_text() for page in reader.pages)
    for title in ("1. Data", "2. Pre-training the biLM", "3. Downstream classification", "4. The role of λ",
                  "5. Analysis: ELMo vs Word2Vec vs SVD", "6. Context sensitivity", "7. Confusion matrices",
                  "8. Reproduce"):
        assert title in text, title
    lm = json.loads((results / "lm.json").read_text())
    cls = json.loads((results / "classification.json").read_text())
    base = json.loads((results / "baselines.json").read_text())
    assert f"{lm['test']['forward_perplexity']:.2f}" in text
    for entry in (cls["trainable_lambda"], cls["frozen_lambda"], base["word2vec"], base["svd"]):
        assert f"{entry['test']['accuracy']:.4f}" in text
    for name in ("method_comparison.png", "lambda_weights.png", "validation_curves.png"):
        assert (tiny_run / "images" / name).read_bytes()[:4] == b"\x89PNG"
    assert len(reader.pages) >= 3
    ln = json.loads((results / "experiments" / "ln" / "classification.json").read_text())
    assert "layer_norm: True" in text and f"{ln['trainable_lambda']['test']['accuracy']:.4f}" in text
    assert "init_embeddings: none" in text
    ri = json.loads((results / "experiments" / "random_init" / "lm.json").read_text())
    assert (f"forward test perplexity {ri['test']['forward_perplexity']:.1f} → {lm['test']['forward_perplexity']:.1f}"
            in " ".join(text.split()))


def test_report_without_baselines_exits_2_naming_the_command(tmp_path, capsys):
    (tmp_path / "lm.json").write_text("{}")
    (tmp_path / "classification.json").write_text("{}")
    assert elmo_run("report", ["--results-dir", str(tmp_path), "--out", str(tmp_path / "r.pdf")]) == 2
    assert "baselines.json not found: run `python baselines.py` first" in capsys.readouterr().err
    (tmp_path / "baselines.json").write_text("{not json")
    assert elmo_run("report", ["--results-dir", str(tmp_path), "--out", str(tmp_path / "r.pdf")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "r.pdf").exists()


def test_experiments_table_lists_each_run_with_its_change_perplexity_and_accuracy_difference(tiny_run):
    from elmo.report.pdf import experiments_table, load_results

    results = tiny_run / "results"
    res = load_results(results, results / "experiments")
    rows = {line.split(" | ")[0].strip("| `"): line for line in experiments_table(res).splitlines()[2:]}
    assert rows.keys() == {"main (default)", "ln", "random_init"}
    main_acc = res["classification"]["trainable_lambda"]["test"]["accuracy"]
    ln_acc = res["experiments"]["ln"]["classification"]["trainable_lambda"]["test"]["accuracy"]
    assert "layer_norm: True" in rows["ln"] and "(reference biLM)" in rows["ln"]
    assert rows["ln"].endswith(f"| {(ln_acc - main_acc) * 100:+.2f} |")
    ri = res["experiments"]["random_init"]["lm"]["test"]
    assert "init_embeddings: none" in rows["random_init"]
    assert f"{ri['forward_perplexity']:.1f} / {ri['backward_perplexity']:.1f}" in rows["random_init"]
