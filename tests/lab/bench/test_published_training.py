"""The published architectures' training benchmark (lab.bench.published_training), in process on a tiny
architecture: the FLOP count by hand, the JSON's schema and its arithmetic. No timing is asserted."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

import lab.bench.published_training as training
from elmo.data.vocab import BOS_ID, EOS_ID
from elmo.errors import ElmoError
from elmo.model.bilm_config import BiLMConfig
from lab.bench.speed import BenchArgs, bench

TINY = BiLMConfig.bilm_tf(char_dim=2, filters=((1, 2), (2, 2)), num_highway=1, hidden_size=8, projection_dim=4,
                           num_layers=2)


def test_training_flops_by_hand():
    windows, ids = [["ab", "ab", "c"]], [[4, 4, 10]]

    def word(n_bytes: int) -> int:
        """Convolutions over the bytes + 2 word marks + the widest filter (2): 2 * char_dim * width * filters per
        position; highway 2 * 4 * 8; no projection (4 filters are already 4 wide)."""
        read = n_bytes + 2 + 2
        return 2 * 2 * 1 * 2 * read + 2 * 2 * 2 * 2 * (read - 1) + 2 * 4 * 8
    token_layer = word(2) + word(1) + 2 * word(1)  # distinct words ab, c; <S> and </S> are one character each
    # per direction, per step (n + 1 = 4), per layer: gates 2 * (4 + 4) * 32, projection 2 * 8 * 4
    lstms = 2 * 4 * 2 * (2 * 8 * 32 + 2 * 8 * 4)
    # per direction 4 targets: head 2 * 4 * (6 + 1) each; tail (width 2) for the 10 only: 2 * (4 * 2 + 2 * 14)
    softmax = 2 * (4 * 2 * 4 * 7 + 2 * (4 * 2 + 2 * 14))
    flops = training.training_flops(replace(TINY, vocab_size=20, cutoffs=(6,), div_value=2.0), windows, ids)
    assert flops["token layer"] == token_layer
    assert flops["LSTMs"] == lstms
    assert flops["softmax"] == softmax
    assert flops["training"] == 3 * (token_layer + lstms + softmax)
    assert EOS_ID < 6 and BOS_ID < 6  # the sentence marks are shortlist words


def test_finish_row_arithmetic():
    row = training.finish_row({"seconds_runs": [2.0, 4.0, 3.0], "tokens_per_step": 630, "flops_per_step": 6e11}, 400.0)
    assert row["seconds_per_step"] == 3.0
    assert row["tokens_per_second"] == {"per_direction": 210.0, "total": 420.0}
    assert row["gflops"] == 200.0 and row["peak_fraction"] == 0.5
    assert row["flops_per_token"] == 6e11 / 630
    assert math.isclose(row["projection"]["seconds"], 10 * training.BENCHMARK_TOKENS / 210.0)
    assert math.isclose(row["projection"]["days"] * 86_400, row["projection"]["seconds"])


def test_training_section_schema(tmp_path, monkeypatch, tiny_agnews):
    monkeypatch.setattr(training, "ARCHITECTURES", {"elmo-original": ("tiny", TINY)})
    monkeypatch.setattr(training, "in_child", lambda function, *args: function(*args))
    monkeypatch.setattr(training, "device_matmul_peaks", lambda device, threads: {"fp32": 1e6, "bf16": 2e6})
    monkeypatch.setattr(training, "cpu_has_bf16", lambda: False)
    out = tmp_path / "bench_training.json"
    cfg = BenchArgs(data_dir=str(tiny_agnews), threads=1, training=True, training_steps=2, training_warmup=1,
                    training_batch=2, training_vocab=50, out=str(out))
    cfg.check()
    bench(cfg)
    r = json.loads(out.read_text())
    assert r["device"]["type"] == "cpu" and r["text"]["softmax_classes"] >= 50
    row = r["rows"]["elmo-original"]["fp32"]
    assert list(r["rows"]["elmo-original"]) == ["fp32"]
    assert len(row["seconds_runs"]) == 2 and row["batch_windows"] == 2
    assert row["tokens_per_step"] == 2 * (training.WINDOW + 1)
    rate = row["tokens_per_second"]["per_direction"]
    assert math.isclose(rate, row["tokens_per_step"] / float(np.median(row["seconds_runs"])))
    assert math.isclose(row["tokens_per_second"]["total"], 2 * rate)
    assert math.isclose(row["peak_fraction"], row["gflops"] / row["matmul_peak_gflops"])
    assert row["matmul_peak_gflops"] >= 1e6  # the larger of the two peaks
    assert math.isclose(row["projection"]["seconds"], row["projection"]["tokens"] / rate)
    assert row["projection"]["tokens"] == 10 * training.BENCHMARK_TOKENS
    assert set(row["flops_per_step_parts"]) == {"token layer", "LSTMs", "softmax"}
    goal = r["goals"]["cpu_fp32_peak_fraction"]
    assert goal["achieved"] == row["peak_fraction"] and goal["met"] == (row["peak_fraction"] >= 0.5)
    assert r["goals"]["gpu_bf16_tokens_per_second"] == {"target": 100_000.0, "achieved": None, "met": None,
                                                        "note": "no GPU present"}
    assert not goal["met"]  # far below a peak of 1e6 GFLOP/s: one step profiled
    shares = row["time_shares"]
    assert math.isclose(sum(shares["operations"].values()), 1.0, abs_tol=1e-6)
    assert math.isclose(sum(shares["matrix_products"].values()), 1.0, abs_tol=1e-6)
    assert shares["top_operators"] and shares["operations"]["matrix products"] > 0


def test_training_flags_checked():
    with pytest.raises(ElmoError, match="--published and --training"):
        BenchArgs(published=True, training=True).check()
    with pytest.raises(ElmoError, match="--training-steps"):
        BenchArgs(training=True, training_steps=0).check()
