"""The benchmark's pieces (lab.bench.speed, lab.bench.flops), in process: FLOP counts, the naive reference, the
projection."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
import torch

import lab.bench.speed as speed
from elmo.cli import COMMANDS, add_flags
from elmo.data.corpus import EncodedCorpus
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import StaticClassifierConfig, StaticEmbeddingClassifier
from elmo.model.mix import LAYER_MIXES
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.pretraining import PretrainArgs
from lab.bench.flops import bilm_lstm_flops, bilm_softmax_flops, cpu_matmul_peaks, matmul_gflops, task_encoder_flops
from lab.bench.speed import BenchArgs, NaiveLM, project_pipeline

V = 30


def make_corpus(n: int = 9, seed: int = 0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    return EncodedCorpus([rng.integers(4, V, size=rng.integers(1, 12)).tolist() for _ in range(n)])


def test_flop_counts_by_hand():
    config = BiLMConfig(vocab_size=100, embedding_dim=8, hidden_size=8, num_layers=2, cutoffs=(10, 50), div_value=2.0)
    # two layers of 4 gates, each gate a (8 + 8) x 8 product: 2 * 4 * 8 * 16 FLOPs per position, x3 for training
    assert bilm_lstm_flops(config, 5) == 3 * 5 * 2 * (2 * 4 * 8 * 16)
    targets = np.array([1, 2, 15, 60, 70])  # 2 in the shortlist, 1 in cluster 1 (width 4), 2 in cluster 2 (width 2)
    head = 2 * 8 * (10 + 2) * 5
    tails = 2 * (8 * 4 + 4 * 40) * 1 + 2 * (8 * 2 + 2 * 50) * 2
    assert bilm_softmax_flops(config, targets) == 3 * (head + tails)


@pytest.mark.parametrize("projection", [0, 3])
def test_task_encoder_flops_by_hand(projection):
    """A 5-wide representation plus a 2-wide x_k (D = 7), E = 4 per direction: each direction's 4 gates are a
    (D + E) x E product per position, 2 FLOPs per multiply-add, x 3 for training; a projection to P adds a D x P
    product and feeds the directions P wide instead."""
    config = StaticClassifierConfig(vectors="svd", encoder_hidden=4, encoder_projection=projection, token_embedding_dim=2)
    model = StaticEmbeddingClassifier(torch.randn(12, 5), config)
    width = projection or 7
    per_position = 2 * (2 * 4 * 4 * (width + 4)) + (2 * 7 * projection)
    assert task_encoder_flops(model, 10) == 3 * 10 * per_position


def test_naive_reference_scores_only_real_words():
    config = BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.0)
    naive = NaiveLM(config)
    torch.nn.init.zeros_(naive.out.weight)
    torch.nn.init.zeros_(naive.out.bias)
    batch = make_corpus().collate(np.arange(9))
    padded = torch.nn.functional.pad(batch["ids"], (0, 7))  # padded far past the longest document
    loss, n = naive(padded, batch["lengths"])
    assert n == int((batch["lengths"] + 1).sum())
    assert math.isclose(loss.item(), math.log(V), rel_tol=1e-6)  # uniform over V, padding ignored


def fake_results() -> dict:
    """Measured rates as the benchmark's sections return them (round numbers)."""
    rates = {s: {"cached": 400.0, "uncached": 100.0} for s in LAYER_MIXES}
    return {"lm": {"load_seconds_per_row": 1e-3, "tokens_per_second": {"ours": 10_000.0},
                   "eval_words_per_second": {"perplexity": 50_000.0, "full_softmax": 20_000.0}},
            "classifier": {"cache": {"tokens_per_second": 30_000.0}, "train_docs_per_second": rates,
                           "predict_docs_per_second": {s: 2_000.0 for s in LAYER_MIXES}},
            "word2vec": {"seconds_per_token": 2e-6}}


def test_projected_pipeline_time_is_the_sum_of_its_parts_each_from_its_rate():
    pre, clf = PretrainArgs(), ClassifyArgs()
    parts = project_pipeline(fake_results(), train_docs=1000, val_docs=50, test_docs=200, tokens_per_doc=9)
    words = lambda docs: docs * 10  # noqa: E731  (9 tokens + the end marker)
    expected = {
        "read_and_tokenise": 2 * 1250 * 1e-3,
        "word2vec_init": 2e-6 * 1000 * 9,
        "lm_training": 2 * pre.epochs * words(1000) / 10_000,
        "lm_validation": 2 * pre.epochs * words(50) / 50_000,
        "lm_final_evaluation": 2 * words(250) / 20_000,
        "layer_cache": 1250 * 9 / 30_000,
        "classifier_training": 3 * clf.epochs * 1000 / 400,
        "classifier_prediction": 3 * (clf.epochs * 50 + 1250) / 2_000,
    }
    assert {k: v for k, v in parts.items() if k != "total"} == pytest.approx(expected)
    assert parts["total"] == pytest.approx(sum(expected.values()))
    bigger = project_pipeline(fake_results(), train_docs=2000, val_docs=100, test_docs=200, tokens_per_doc=9)
    assert bigger["total"] > parts["total"] and bigger["lm_training"] == pytest.approx(2 * parts["lm_training"])


def test_the_side_by_side_lm_sets_the_projected_lm_training_at_its_slower_direction():
    """ELMO.py trains the two directions at once on the CPU: the projection's LM training is one pass of the epochs
    at the slower direction's rate (one after the other it was two passes at the one-direction rate)."""
    pre = PretrainArgs()
    results = fake_results()
    results["lm_side_by_side"] = {"tokens_per_second": {"forward": 8_000.0, "backward": 6_000.0, "slowest": 6_000.0}}
    parts = project_pipeline(results, train_docs=1000, val_docs=50, test_docs=200, tokens_per_doc=9)
    assert parts["lm_training"] == pytest.approx(pre.epochs * 1000 * 10 / 6_000)
    results["lm_side_by_side"] = None  # not measured (one thread, or not the CPU): one direction after the other
    assert project_pipeline(results, 1000, 50, 200, 9)["lm_training"] == pytest.approx(2 * pre.epochs * 1000 * 10 / 10_000)


def test_the_side_by_side_lm_evaluations_count_once_at_the_slower_direction_s_rates():
    """Each side-by-side process evaluates its own direction, both at once: the projection counts the validation
    and final evaluations once, at the slower direction's measured rates; a result from before the side-by-side
    section measured them counts them one direction after the other at the one-direction rates."""
    pre = PretrainArgs()
    results = fake_results()
    one_after_the_other = project_pipeline(results, 1000, 50, 200, 9)
    results["lm_side_by_side"] = {
        "tokens_per_second": {"forward": 8_000.0, "backward": 6_000.0, "slowest": 6_000.0},
        "eval_words_per_second": {"slowest": {"perplexity": 4_000.0, "full_softmax": 500.0}}}
    parts = project_pipeline(results, train_docs=1000, val_docs=50, test_docs=200, tokens_per_doc=9)
    assert parts["lm_validation"] == pytest.approx(pre.epochs * 50 * 10 / 4_000)
    assert parts["lm_final_evaluation"] == pytest.approx((50 + 200) * 10 / 500)
    del results["lm_side_by_side"]["eval_words_per_second"]
    older = project_pipeline(results, 1000, 50, 200, 9)
    assert older["lm_validation"] == one_after_the_other["lm_validation"]
    assert older["lm_final_evaluation"] == one_after_the_other["lm_final_evaluation"]


def test_the_side_by_side_rows_of_the_table_show_its_figures_and_none_when_it_did_not_run():
    sbs = {"threads_per_direction": 1, "tokens_per_second": {"forward": 8_000.0, "backward": 6_000.0, "slowest": 6_000.0},
           "gflops": 120.0, "precision": "fp32", "peak_fraction": 0.6, "speedup_over_one_after_the_other": 1.2,
           "peak_rss_mb": {"forward": 900.0, "backward": 1_000.0}}
    rows = "\n".join(speed.format_side_by_side(sbs))
    assert "6,000" in rows and "8,000  / 6,000" in rows and "1.20x" in rows and "120.0  (60%)" in rows
    assert "1,900 MB (both)" in rows and "1 thread(s) each" in rows
    assert "evaluation" not in rows  # a result from before the side-by-side evaluations were measured
    sbs["eval_words_per_second"] = {"slowest": {"perplexity": 4_000.0, "full_softmax": 500.0}}
    assert "4,000  / 500" in "\n".join(speed.format_side_by_side(sbs))
    assert speed.format_side_by_side(None) == []


def test_script_memory_runs_use_valid_flags_and_extrapolate_the_line_through_two_sizes(monkeypatch, tmp_path):
    """The ELMO.py / classification.py runs of ``--memory-docs`` (faked here: the end-to-end benchmark test skips
    them): their arguments parse as the real commands' flags, and the peak RSS is extrapolated linearly."""
    calls = []

    def fake_run_script(args):
        assert args[:2] == ["-m", "elmo"]
        command, flags = args[2], args[3:]
        config = COMMANDS[command].args(**vars(add_flags(argparse.ArgumentParser(), COMMANDS[command].args)
                                                 .parse_args(flags)))
        config.check()  # what `python -m elmo <command>` would accept
        calls.append((command, config))
        rss = {"pretrain": 100.0, "classify": 50.0}[command] + config.max_docs / 10  # MB: linear in documents
        return 1.0, rss

    monkeypatch.setattr(speed, "run_script", fake_run_script)
    cfg = BenchArgs(data_dir=str(tmp_path), memory_docs=(1000, 3000), target_rows=10_000, threads=1)
    out = speed.section_scripts(cfg, threads=1)
    assert [(c, config.max_docs) for c, config in calls] == [("pretrain", 1000), ("classify", 1000), ("classify", 1000),
                                                            ("pretrain", 3000), ("classify", 3000), ("classify", 3000)]
    for _, config in calls:
        assert config.epochs == 1 and config.threads == 1 and config.data_dir == str(tmp_path)
    assert [config.cache_layers for command, config in calls if command == "classify"] == ["disk", "memory"] * 2
    assert all(config.mixes == ["trainable_lambda"] for command, config in calls if command == "classify")
    assert out["runs"][3000]["ELMO.py"] == (1.0, 400.0)
    # 10,000 rows → 9,500 training documents (5% validation); the line rises 1 MB per 10 documents of max_docs,
    # i.e. per 9.5 training documents
    line = 10_000 / 10
    assert out["projected_peak_rss_mb"] == pytest.approx({"ELMO.py": 100 + line, "classification.py": 50 + line,
                                                          "classification.py (cache in memory)": 50 + line})


def test_a_side_by_side_pretrain_s_peak_is_the_sum_of_its_processes(tmp_path):
    lm = tmp_path / "lm.json"
    assert speed.pretrain_peak((5.0, 700.0), lm) == (5.0, 700.0)  # no lm.json: what wait4 saw
    lm.write_text(json.dumps({"concurrent_directions": False}))
    assert speed.pretrain_peak((5.0, 700.0), lm) == (5.0, 700.0)  # one process
    lm.write_text(json.dumps({"peak_rss_mb": {"forward": 700.0, "backward": 650.0, "main": 400.0}}))
    assert speed.pretrain_peak((5.0, 700.0), lm) == (5.0, 1750.0)


def test_measured_matmul_peaks_are_positive_and_fp32_is_the_faster_kernel():
    assert matmul_gflops(torch.device("cpu"), torch.float32, n=64, repeats=2) > 0
    peaks = cpu_matmul_peaks(1, n=64)
    assert peaks["fp32_blas"] > 0 and peaks["peak_rss_mb"] > 0
    assert peaks["fp32"] == max(v for k, v in peaks.items() if k.startswith("fp32_"))
