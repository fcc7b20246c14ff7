"""The biLM layer cache (elmo.inference.layer_cache): the same ELMo vectors as running the biLM, and its policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import needs_native_bf16

from elmo import Elmo
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.inference.layer_cache import compute_layers, should_cache
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.runtime.device import autocast

V = 30


def make_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "dropout": 0.0, "cutoffs": (10, 20)} | options
    return BiLM(BiLMConfig(**sizes)).eval()


def make_corpus(n: int = 9, seed: int = 0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    return EncodedCorpus([rng.integers(4, V, size=rng.integers(1, 12)).tolist() for _ in range(n)])


@pytest.mark.cpu_features
@pytest.mark.parametrize("kind", ["memory", "disk"])
@pytest.mark.parametrize("options", [{}, {"residual": True}])
def test_cached_layers_give_the_same_elmo_vectors_as_running_the_bilm(options, kind, tmp_path):
    bilm = make_bilm(**options)
    corpus = make_corpus()
    store = compute_layers(bilm, corpus, torch.device("cpu"), kind=kind, directory=str(tmp_path))
    assert store.kind == kind and (store.num_tokens, *store.row_shape) == (corpus.num_tokens, 2, bilm.output_dim)
    assert store.dtype == torch.float16  # an fp32 run stores 16 bits per value too
    assert store.nbytes == corpus.num_tokens * 2 * bilm.output_dim * 2  # L = 2 layers of 2-byte values
    cached = make_corpus().attach_layers(store)
    elmo = Elmo(bilm, dropout=0.0).eval()
    for index in (np.array([0, 3, 5]), np.array([8]), np.arange(9)):
        batch = cached.collate(index)
        assert batch["layers"].shape == (2, len(index), batch["ids"].shape[1], bilm.output_dim)
        direct = elmo(batch["ids"], batch["lengths"])["elmo_representations"][0]
        from_cache = elmo(batch["ids"], batch["lengths"], layers=batch["layers"])["elmo_representations"][0]
        # fp16 storage: each cached value within 2^-11 relative (LSTM outputs are at most 2 in magnitude)
        torch.testing.assert_close(from_cache, direct, rtol=0, atol=2 * 2.0 ** -11)
        pad = ~torch.arange(batch["ids"].shape[1]).unsqueeze(0).lt(batch["lengths"].unsqueeze(1))
        assert not batch["layers"][:, pad].any()  # padding is zero


@pytest.mark.cpu_features
@needs_native_bf16()
@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_cache_keeps_the_lstm_precision_under_bf16_autocast_on_a_cpu_with_native_bf16(kind):
    bilm = make_bilm()
    corpus = make_corpus()
    store = compute_layers(bilm, corpus, torch.device("cpu"), torch.bfloat16, kind=kind)
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
    size = 1000 * 2 * bilm.output_dim * 2  # bytes: 1000 tokens × L = 2 layers × D × 2 bytes (bf16)
    monkeypatch.setattr(cache, "disk_free", lambda where: 4 * size)
    decided, why = should_cache("auto", bilm, 1000, torch.bfloat16)
    assert decided == "disk" and f"{size / 2**30:.2f} GiB for 1,000 tokens" in why  # the default when the disk has room
    monkeypatch.setattr(cache, "disk_free", lambda where: size)
    monkeypatch.setattr(cache, "available_memory", lambda: 4 * size)
    assert should_cache("auto", bilm, 1000, torch.bfloat16)[0] == "memory"
    monkeypatch.setattr(cache, "available_memory", lambda: size)
    decided, why = should_cache("auto", bilm, 1000, torch.bfloat16)
    assert decided is None and "available" in why
    assert [should_cache(m, bilm, 1000, torch.bfloat16)[0] for m in ("on", "memory", "disk", "off")] == \
        ["memory", "memory", "disk", None]


def test_on_a_gpu_the_cache_stays_in_its_memory_when_it_fits(monkeypatch):
    import elmo.inference.layer_cache as cache

    bilm, gpu = make_bilm(), torch.device("cuda", 0)  # a device named, nothing run on it
    size = 1000 * 2 * bilm.output_dim * 2  # as should_cache sizes it: exactly half of 2 * size still fits
    monkeypatch.setattr(cache, "disk_free", lambda where: 4 * size)
    monkeypatch.setattr(cache, "device_memory_free", lambda device: 2 * size if device.type == "cuda" else None)
    decided, why = should_cache("auto", bilm, 1000, torch.bfloat16, device=gpu)
    assert decided == "device" and "GPU's memory" in why
    monkeypatch.setattr(cache, "device_memory_free", lambda device: 2 * size - 1 if device.type == "cuda" else None)
    assert should_cache("auto", bilm, 1000, torch.bfloat16, device=gpu)[0] == "disk"  # more than half: the disk
    assert should_cache("auto", bilm, 1000, torch.bfloat16, device=torch.device("cpu"))[0] == "disk"
    assert should_cache("device", bilm, 1000, torch.bfloat16, device=gpu)[0] == "device"
    with pytest.raises(ElmoError, match="--cache-layers device keeps the layers in a GPU's memory"):
        should_cache("device", bilm, 1000, torch.bfloat16, device=torch.device("cpu"))


def test_a_store_on_the_models_device_gathers_the_same_batches():
    """The device store's gather (positions from the host, index_select and masked_fill there) gives what the
    host store gives; on a CPU the device is the host."""
    bilm, corpus = make_bilm(), make_corpus()
    host = compute_layers(bilm, corpus, torch.device("cpu"), kind="memory")
    on_device = compute_layers(bilm, corpus, torch.device("cpu"), kind="device")
    for index in (np.array([0, 3, 5]), np.arange(9)):
        a, b = make_corpus().attach_layers(host).collate(index), make_corpus().attach_layers(on_device).collate(index)
        assert torch.equal(a["layers"], b["layers"])
