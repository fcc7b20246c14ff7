"""The report from a real (tiny) pipeline run: baselines.json, experiments, and a PDF holding the JSON's numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader
from support import CLASSIFY, SMALL, run_in_process

from lab.cli import run as elmo_run
from lab.report import analysis, experiments_table, load_results

pytestmark = pytest.mark.slow

CONTEXT = ["--context-words", "bank", "season", "said"]  # words of the toy corpus that occur in several topics


def run(command: str, out: Path, data: Path, *extra: str) -> None:
    assert run_in_process(command, out, data, *extra) == 0  # the scripts' code, without starting interpreters


@pytest.fixture(scope="module")
def tiny_run(small_pipeline, tmp_path_factory) -> Path:
    """The shared small pipeline run (copied), then baselines.py with the same head and two diagnostic runs."""
    out = tmp_path_factory.mktemp("report")
    for folder in ("models", "results", "images"):
        shutil.copytree(small_pipeline.out / folder, out / folder)
    data = small_pipeline.data
    run("baselines", out, data, *CLASSIFY, "--static-dim", "8", "--w2v-epochs", "2", *CONTEXT)
    experiment = out / "results" / "experiments" / "ln"  # a diagnostic run with one flag changed
    run("classify", out, data, *CLASSIFY, "--mixes", "trainable_lambda", "--layer-norm",
        "--results-dir", str(experiment))
    random_init = out / "results" / "experiments" / "random_init"  # a biLM with random token embeddings
    flags = ["--models-dir", str(out / "models_random"), "--results-dir", str(random_init)]
    run("pretrain", out, data, *SMALL, "--init-embeddings", "none", *flags)
    run("classify", out, data, *CLASSIFY, "--mixes", "trainable_lambda", *flags)
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


#: the report's sections, in order: the question, the method, the results, λ, the curves, what they mean, appendices
TITLES = ("1. The question", "2. Method", "3. Results: test accuracy and its uncertainty", "4. λ: how the layers are mixed",
          "5. When ELMo pays: learning curves", "6. What the results mean", "Appendix A. Per-seed results",
          "Appendix B. Diagnostic runs", "Appendix C. Context sensitivity", "Appendix D. Confusion matrices",
          "Appendix E. Rebuilding this report")


def test_report_pdf_renders_every_section_with_the_numbers_from_the_json(tiny_run):
    out = tiny_run / "report.pdf"
    results = tiny_run / "results"
    assert elmo_run("report", ["--results-dir", str(results), "--images-dir", str(tiny_run / "images"), "--out", str(out),
                               "--experiments", "ln", "random_init"]) == 0
    reader = PdfReader(out)
    text = " ".join(page.extract_text() for page in reader.pages)
    where = [text.find(title) for title in TITLES]
    assert -1 not in where and where == sorted(where), dict(zip(TITLES, where))
    assert "The answer in brief" in text.split(TITLES[1])[0]  # page 1 answers the question
    assert "One seed only" in text  # no seeds.json: the report says its numbers carry no uncertainty
    lm = json.loads((results / "lm.json").read_text())
    cls = json.loads((results / "classification.json").read_text())
    base = json.loads((results / "baselines.json").read_text())
    assert f"{lm['test']['forward_perplexity']:.2f}" in text
    for entry in (cls["trainable_lambda"], cls["frozen_lambda"], base["word2vec"], base["svd"]):
        assert f"{entry['test']['accuracy']:.4f}" in text
    for name in ("method_comparison.png", "lambda_weights.png", "validation_curves.png"):
        assert (tiny_run / "images" / name).read_bytes()[:4] == b"\x89PNG"
    assert len(reader.pages) >= 3
    joined = " ".join(text.split())
    for sentences in analysis(load_results(results, results / "experiments", ("ln", "random_init"))).values():
        for sentence in sentences:  # no sentence printed twice
            assert joined.count(" ".join(sentence.split())) <= 1, sentence
    ln = json.loads((results / "experiments" / "ln" / "classification.json").read_text())
    assert "layer_norm: True" in text and f"{ln['trainable_lambda']['test']['accuracy']:.4f}" in text
    assert "init_embeddings: none" in text
    ri = json.loads((results / "experiments" / "random_init" / "lm.json").read_text())
    assert (f"forward test perplexity {ri['test']['forward_perplexity']:.1f} → {lm['test']['forward_perplexity']:.1f}"
            in " ".join(text.split()))


def test_experiments_table_lists_each_run_with_its_change_perplexity_and_accuracy_difference(tiny_run):
    results = tiny_run / "results"
    res = load_results(results, results / "experiments", ("ln", "random_init"))
    rows = {line.split(" | ")[0].strip("| `"): line for line in experiments_table(res).splitlines()[2:]}
    assert rows.keys() == {"main (default)", "ln", "random_init"}
    main_acc = res["classification"]["trainable_lambda"]["test"]["accuracy"]
    ln_acc = res["experiments"]["ln"]["classification"]["trainable_lambda"]["test"]["accuracy"]
    assert "layer_norm: True" in rows["ln"] and "(reference biLM)" in rows["ln"]
    assert rows["ln"].endswith(f"| {(ln_acc - main_acc) * 100:+.2f} |")
    ri = res["experiments"]["random_init"]["lm"]["test"]
    assert "init_embeddings: none" in rows["random_init"]
    assert f"{ri['forward_perplexity']:.1f} / {ri['backward_perplexity']:.1f}" in rows["random_init"]
