"""Precision, device and thread choices (elmo.runtime.device), and mixed precision where the CPU has bf16."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import needs_native_bf16

import elmo.runtime.device as device_module
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.runtime.device import (
    autocast,
    cpu_has_bf16,
    default_threads,
    precision_name,
    resolve_device,
    resolve_precision,
)

pytestmark = pytest.mark.cpu_features

CPU = torch.device("cpu")
CUDA = torch.device("cuda", 0)  # only a name here: nothing runs on it


# ---------------------------------------------------------------- the decision, on every machine


@pytest.mark.parametrize("native", [True, False])
def test_auto_on_a_cpu_is_bf16_exactly_when_the_cpu_has_native_bf16(native):
    assert resolve_precision("auto", CPU, native_bf16=native) is (torch.bfloat16 if native else None)
    assert resolve_precision("fp32", CPU, native_bf16=native) is None


def test_on_cuda_fp32_means_fp32_not_tf32(monkeypatch):
    for flags in (torch.backends.cudnn, torch.backends.cuda.matmul):
        monkeypatch.setattr(flags, "allow_tf32", True)  # cuDNN's default, and a user's choice for products
    assert resolve_precision("fp32", CUDA) is None
    assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    resolve_precision("fp32", CPU, native_bf16=False)  # a CPU run leaves the CUDA flags alone
    assert torch.backends.cudnn.allow_tf32 is True


def test_explicit_bf16_on_a_cpu_without_native_bf16_is_an_error_that_names_fp32_and_auto():
    assert resolve_precision("bf16", CPU, native_bf16=True) is torch.bfloat16
    with pytest.raises(ElmoError, match="native bf16") as error:
        resolve_precision("bf16", CPU, native_bf16=False)
    assert "--precision fp32" in str(error.value) and "auto" in str(error.value)


@pytest.mark.parametrize("native", [True, False])
def test_fp16_needs_cuda_and_unknown_names_are_refused(native):
    with pytest.raises(ElmoError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", CPU, native_bf16=native)
    with pytest.raises(ElmoError, match="--precision: unknown precision 'int8'"):
        resolve_precision("int8", CPU, native_bf16=native)


@pytest.mark.parametrize("native", [True, False])
def test_the_fp16_refusal_on_a_cpu_advises_bf16_only_where_the_cpu_has_native_bf16(monkeypatch, native):
    for given in (native, None):  # passed, or read from the CPU (cpu_has_bf16)
        monkeypatch.setattr(device_module, "cpu_has_bf16", lambda: native)
        with pytest.raises(ElmoError) as refused:
            resolve_precision("fp16", CPU, native_bf16=given)
        message = str(refused.value)
        assert message.startswith("--precision fp16 needs a CUDA device; on this CPU use ") and "fp32" in message
        assert ("bf16" in message.split("CUDA device")[1].replace("native bf16", "")) is native, message
        assert resolve_precision("bf16" if native else "fp32", CPU, native_bf16=given) is \
            (torch.bfloat16 if native else None)  # what it advises is accepted


@pytest.mark.parametrize("native", [True, False])
def test_without_the_argument_the_decision_follows_cpu_has_bf16(monkeypatch, native):
    monkeypatch.setattr(device_module, "cpu_has_bf16", lambda: native)
    assert resolve_precision("auto", CPU) is (torch.bfloat16 if native else None)
    if native:
        assert resolve_precision("bf16", CPU) is torch.bfloat16
    else:
        with pytest.raises(ElmoError, match="fp32"):
            resolve_precision("bf16", CPU)


def test_this_machine_gets_what_its_cpu_supports():
    assert resolve_precision("auto", CPU) is (torch.bfloat16 if cpu_has_bf16() else None)


@pytest.mark.parametrize("bf16_gpu, expected", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_is_bf16_where_the_gpu_supports_it_else_fp16(monkeypatch, bf16_gpu, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_gpu)
    assert resolve_precision("auto", CUDA) is expected
    assert resolve_precision("fp16", CUDA) is torch.float16
    assert resolve_precision("bf16", CUDA, native_bf16=False) is torch.bfloat16  # the CPU's flags do not matter


@pytest.mark.parametrize("cpuinfo, expected", [
    ("flags : fpu sse avx2 avx512f avx512_bf16 fma", True),
    ("flags : fpu sse avx2 amx_bf16 amx_tile", True),
    ("flags : fpu sse avx2 fma avx512f", False),
    (None, False),  # no /proc/cpuinfo
])
def test_cpu_has_bf16_reads_the_cpu_flags(monkeypatch, cpuinfo, expected):
    class FakePath:
        def __init__(self, name):
            assert name == "/proc/cpuinfo"

        def read_text(self, **_):
            if cpuinfo is None:
                raise FileNotFoundError("/proc/cpuinfo")
            return cpuinfo

    monkeypatch.setattr(device_module, "Path", FakePath)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert cpu_has_bf16() is expected
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")  # a oneDNN ceiling below bf16 (how CI-like runs are reproduced)
    assert cpu_has_bf16() is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")  # a ceiling that keeps bf16 changes nothing
    assert cpu_has_bf16() is expected


def test_precision_names_and_autocast_off_for_fp32():
    assert [precision_name(d) for d in (None, torch.bfloat16, torch.float16)] == ["fp32", "bf16", "fp16"]
    with autocast(CPU, None):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(CPU, torch.bfloat16):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") is torch.bfloat16


def test_device_names():
    assert resolve_device("cpu") == CPU and resolve_device(CPU) is CPU
    assert resolve_device("auto") == (resolve_device("cuda") if torch.cuda.is_available() else CPU)
    with pytest.raises(ElmoError, match="--device: unknown device 'gpu'"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ElmoError, match="no CUDA device"):
            resolve_device("cuda")


def test_default_threads_divide_the_cores_among_the_local_torchrun_processes(monkeypatch):
    monkeypatch.setattr(device_module.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert default_threads() == 8
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    assert default_threads() == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "16")
    assert default_threads() == 1  # never zero
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "many")
    assert default_threads() == 8


# ---------------------------------------------------------------- bf16 kernels, where the CPU has them


@needs_native_bf16()
def test_lm_loss_under_bf16_autocast_is_fp32_and_close_to_the_fp32_loss_on_a_cpu_with_native_bf16():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embedding_dim=16, hidden_size=16, dropout=0.0, cutoffs=(10, 20))).eval()
    rng = np.random.default_rng(0)
    corpus = EncodedCorpus([rng.integers(4, 30, size=rng.integers(1, 12)).tolist() for _ in range(16)])
    batch = corpus.collate(np.arange(len(corpus)))
    exact, n = bilm.forward_lm(batch["ids"], batch["lengths"])
    with autocast(CPU, torch.bfloat16):
        mixed, n_mixed = bilm.forward_lm(batch["ids"], batch["lengths"])
    assert mixed.dtype == torch.float32 and n_mixed == n
    assert abs(mixed.item() - exact.item()) < 0.02 * exact.item()
    assert mixed.item() != exact.item()  # the products really ran in bf16
    mixed.backward()  # the adaptive softmax's mixed-dtype buffers also work backwards
    assert all(p.grad is not None for p in bilm.forward_lm.layers.parameters())
