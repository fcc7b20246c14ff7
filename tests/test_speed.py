"""The fast path: mixed precision, the CPU dropout, the biLM layer cache, and the benchmark's pieces."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT

from elmo import Elmo
from elmo.bench.speed import NaiveLM, adaptive_softmax_flops, lstm_flops
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.inference.layer_cache import cache_bytes, compute_layers, should_cache
from elmo.model.bilm import BiLM, BiLMConfig
from elmo.model.dropout import FastDropout as Dropout
from elmo.runtime.device import autocast, cpu_has_bf16, resolve_precision

V = 30


def make_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "dropout": 0.0, "cutoffs": (10, 20)} | options
    return BiLM(BiLMConfig(**sizes)).eval()


def make_corpus(n: int = 9, seed: int = 0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    return EncodedCorpus([rng.integers(4, V, size=rng.integers(1, 12)).tolist() for _ in range(n)])


# ---------------------------------------------------------------- precision


def test_resolve_precision_names_and_errors():
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) is None
    assert resolve_precision("bf16", cpu) is torch.bfloat16
    assert resolve_precision("auto", cpu) is (torch.bfloat16 if cpu_has_bf16() else None)
    with pytest.raises(ElmoError, match="CUDA"):
        resolve_precision("fp16", cpu)
    with pytest.raises(ElmoError, match="--precision"):
        resolve_precision("int8", cpu)


def test_lm_loss_under_bf16_autocast_is_fp32_and_close_to_the_fp32_loss():
    bilm = make_bilm(embedding_dim=16, hidden_size=16)
    corpus = make_corpus(16)
    batch = corpus.collate(np.arange(len(corpus)))
    exact, n = bilm.forward_lm(batch["ids"], batch["lengths"])
    with autocast(torch.device("cpu"), torch.bfloat16):
        mixed, n_mixed = bilm.forward_lm(batch["ids"], batch["lengths"])
    assert mixed.dtype == torch.float32 and n_mixed == n
    assert abs(mixed.item() - exact.item()) < 0.02 * exact.item()
    mixed.backward()  # the adaptive softmax's mixed-dtype buffers also work backwards
    assert all(p.grad is not None for p in bilm.forward_lm.layers.parameters())


# ---------------------------------------------------------------- dropout


def test_cpu_dropout_keeps_1_minus_p_and_rescales():
    torch.manual_seed(0)
    drop = Dropout(0.25).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.005
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # gradient is the same scaled mask
    assert torch.equal(drop.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)


def test_cpu_dropout_repeats_with_the_seed():
    x = torch.randn(50, 40)
    torch.manual_seed(3)
    a = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    b = Dropout(0.5).train()(x)
    assert torch.equal(a, b)


# ---------------------------------------------------------------- layer cache


@pytest.mark.parametrize("options", [{}, {"residual": True}])
def test_cached_layers_give_the_same_elmo_vectors_as_running_the_bilm(options):
    bilm = make_bilm(**options)
    corpus = make_corpus()
    store = compute_layers(bilm, corpus, torch.device("cpu"))
    assert store.shape == (corpus.num_tokens, 2, bilm.output_dim)
    cached = make_corpus().attach_layers(store)
    elmo = Elmo(bilm, dropout=0.0).eval()
    for index in (np.array([0, 3, 5]), np.array([8]), np.arange(9)):
        batch = cached.collate(index)
        assert batch["layers"].shape == (2, len(index), batch["ids"].shape[1], bilm.output_dim)
        direct = elmo(batch["ids"], batch["lengths"])["elmo_representations"][0]
        from_cache = elmo(batch["ids"], batch["lengths"], layers=batch["layers"])["elmo_representations"][0]
        torch.testing.assert_close(from_cache, direct, rtol=1e-5, atol=1e-6)
        pad = ~torch.arange(batch["ids"].shape[1]).unsqueeze(0).lt(batch["lengths"].unsqueeze(1))
        assert not batch["layers"][:, pad].any()  # padding is zero


def test_cache_keeps_the_lstm_precision_under_bf16_autocast():
    bilm = make_bilm()
    corpus = make_corpus()
    store = compute_layers(bilm, corpus, torch.device("cpu"), torch.bfloat16)
    assert store.dtype == torch.bfloat16  # 2 bytes per value, half of fp32
    batch = make_corpus().attach_layers(store).collate(np.arange(9))
    with autocast(torch.device("cpu"), torch.bfloat16):
        direct = bilm(batch["ids"], batch["lengths"])[1:]
    torch.testing.assert_close(batch["layers"].float(), direct, rtol=0.02, atol=0.02)


def test_token_layer_is_layer_zero_without_running_the_lstms():
    bilm = make_bilm()
    batch = make_corpus().collate(np.arange(9))
    torch.testing.assert_close(bilm.token_layer(batch["ids"], batch["lengths"]), bilm(batch["ids"], batch["lengths"])[0])


def test_layer_cache_errors():
    bilm = make_bilm()
    with pytest.raises(ElmoError, match="attach_layers"):
        make_corpus().attach_layers(torch.zeros(3, 2, bilm.output_dim))
    batch = make_corpus().collate(np.arange(2))
    tuned = Elmo(make_bilm(), requires_grad=True)
    with pytest.raises(ElmoError, match="fine-tuning"):
        tuned(batch["ids"], batch["lengths"], layers=torch.zeros(2, 2, batch["ids"].shape[1], bilm.output_dim))
    with pytest.raises(ElmoError, match="--cache-layers"):
        should_cache("sometimes", bilm, 10, torch.bfloat16)


def test_cache_policy_follows_available_memory(monkeypatch):
    import elmo.inference.layer_cache as cache

    bilm = make_bilm()
    size = cache_bytes(bilm, 1000, torch.bfloat16)
    assert size == 1000 * 2 * bilm.output_dim * 2
    monkeypatch.setattr(cache, "available_memory", lambda: 4 * size)
    assert should_cache("auto", bilm, 1000, torch.bfloat16)[0]
    monkeypatch.setattr(cache, "available_memory", lambda: size)
    decided, why = should_cache("auto", bilm, 1000, torch.bfloat16)
    assert not decided and "available" in why
    assert should_cache("on", bilm, 1000, torch.bfloat16)[0] and not should_cache("off", bilm, 1000, torch.bfloat16)[0]


# ---------------------------------------------------------------- benchmark pieces


def test_flop_counts_by_hand():
    config = BiLMConfig(vocab_size=100, embedding_dim=8, hidden_size=8, num_layers=2, cutoffs=(10, 50), div_value=2.0)
    # two layers of 4 gates, each gate a (8 + 8) x 8 product: 2 * 4 * 8 * 16 FLOPs per position, x3 for training
    assert lstm_flops(config, 5) == 3 * 5 * 2 * (2 * 4 * 8 * 16)
    targets = np.array([1, 2, 15, 60, 70])  # 2 in the shortlist, 1 in cluster 1 (width 4), 2 in cluster 2 (width 2)
    head = 2 * 8 * (10 + 2) * 5
    tails = 2 * (8 * 4 + 4 * 40) * 1 + 2 * (8 * 2 + 2 * 50) * 2
    assert adaptive_softmax_flops(config, targets) == 3 * (head + tails)


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


def test_bench_runs_end_to_end_and_writes_its_json(tiny_agnews, tmp_path):
    out = tmp_path / "bench.json"
    args = [sys.executable, "-m", "elmo", "bench", "--data-dir", str(tiny_agnews), "--models-dir", str(tmp_path / "none"),
            "--out", str(out), "--repeats", "1", "--lm-batches", "1", "--naive-batches", "1",
            "--classifier-batches", "1", "--embed-sentences", "40", "--single-sentences", "4",
            "--memory-docs", "120", "240", "--threads", "1"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    lm = result["lm"]["tokens_per_second"]
    assert lm["ours"] > 0 and lm["naive"] > 0 and lm["ratio"] == pytest.approx(lm["ours"] / lm["naive"])
    assert result["lm"]["padding_share"]["naive"] > result["lm"]["padding_share"]["ours"]
    assert set(result["classifier"]["train_docs_per_second"]) == {"trainable_lambda", "frozen_lambda", "learned_function"}
    projection = result["projection"]
    assert projection["target_seconds"]["total"] > projection["this_corpus_seconds"]["total"] > 0
    assert set(result["scripts"]["projected_peak_rss_mb"]) == {"ELMO.py", "classification.py"}
    assert "speed-up ours / naive" in done.stdout and "projected pipeline wall time" in done.stdout
