"""``--precision`` is the dtype the LSTM kernels compute in, for every model family: our biLM (word and character
tokens), the published architecture (clipped loop and fused kernel), the classifier's encoder. On the CPU autocast
already runs them in bf16; on CUDA autocast's rule for cuDNN's RNNs is float16 whatever its dtype, so
:class:`AutocastLSTM` calls the kernel itself, in the autocast dtype with autocast off (:meth:`forward_in`, checked
here on the CPU). A CUDA test checks cuDNN itself where a GPU is present."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from support import needs_native_bf16

from elmo.data.vocab import SPECIALS
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import MaskedBiLSTM
from elmo.model.lstm import AutocastLSTM, lstm_compute_dtypes, summary_dtype
from elmo.runtime.device import autocast

pytestmark = pytest.mark.cpu_features

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
WORDS = [*SPECIALS, "the", "market", "rallied"]
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16}


def our_bilm(token_encoder: str) -> BiLM:
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=len(WORDS), embedding_dim=8, hidden_size=8, cutoffs=(5,),
                           token_encoder=token_encoder)).eval()


def run_bilm(bilm: BiLM) -> None:
    ids, lengths = torch.tensor([[4, 5, 6], [5, 4, 0]]), torch.tensor([3, 2])
    chars = None
    if bilm.config.token_encoder == "char":
        from elmo.data.chars import word_char_ids
        chars = torch.tensor([[word_char_ids(WORDS[i], bilm.config.max_chars) for i in row] for row in ids.tolist()])
    bilm(ids, lengths, chars)


def run_published(lstm: str) -> BiLM:
    config = TINY if lstm == "clipped" else replace(TINY, cell_clip=None, proj_clip=None)
    torch.manual_seed(0)
    bilm = BiLM(config).eval()
    return bilm


FAMILIES = ["bilm-word", "bilm-char", "published-clipped", "published-fused", "classifier-encoder"]


def lstm_dtypes(family: str, dtype: torch.dtype | None) -> dict[str, str]:
    """Run one model of ``family`` under ``--precision``'s autocast on the CPU; the dtypes its LSTMs computed in."""
    device = torch.device("cpu")
    with torch.no_grad(), autocast(device, dtype):
        if family.startswith("bilm"):
            model = our_bilm(family.split("-")[1])
            run_bilm(model)
        elif family.startswith("published"):
            model = run_published(family.split("-")[1])
            from elmo.data.chars import TF_MAX_CHARS
            model(None, torch.tensor([3, 1]), torch.randint(1, 200, (2, 3, TF_MAX_CHARS)))
        else:
            torch.manual_seed(0)
            model = MaskedBiLSTM(6, 4)
            model(torch.randn(2, 5, 6), torch.tensor([5, 3]))
    return lstm_compute_dtypes(model)


@pytest.mark.parametrize("family", FAMILIES)
def test_fp32_computes_every_lstm_in_float32(family):
    dtypes = lstm_dtypes(family, None)
    assert dtypes and set(dtypes.values()) == {"float32"}, dtypes


@needs_native_bf16()
@pytest.mark.parametrize("family", FAMILIES)
def test_bf16_computes_every_lstm_in_bfloat16_on_a_cpu_with_native_bf16(family):
    dtypes = lstm_dtypes(family, torch.bfloat16)
    expected = {"bilm-word": 4, "bilm-char": 4, "published-clipped": 4, "published-fused": 4, "classifier-encoder": 2}
    assert len(dtypes) == expected[family] and set(dtypes.values()) == {"bfloat16"}, dtypes
    assert summary_dtype(dtypes) == "bfloat16"


def test_summary_dtype_is_one_name_or_the_whole_mapping():
    assert summary_dtype({}) is None
    assert summary_dtype({"a": "bfloat16", "b": "bfloat16"}) == "bfloat16"
    assert summary_dtype({"a": "bfloat16", "b": "float16"}) == {"a": "bfloat16", "b": "float16"}


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("proj_size", [0, 4])
def test_forward_in_calls_the_kernel_in_the_dtype_with_autocast_off(monkeypatch, proj_size):
    """What CUDA runs, checked on the CPU (any CPU: with autocast off, ATen's own bf16 LSTM runs, not oneDNN's): the
    kernel gets every tensor in the asked dtype, autocast off, so autocast's float16 rule for cuDNN cannot apply."""
    torch.manual_seed(0)
    lstm = AutocastLSTM(6, 8, batch_first=True, proj_size=proj_size)
    x = torch.randn(3, 5, 6)
    seen = []
    kernel = torch._VF.lstm

    def spy(*args):
        seen.append((torch.is_autocast_enabled("cpu"), {t.dtype for t in [args[0], *args[1], *args[2]]}))
        return kernel(*args)
    monkeypatch.setattr(torch._VF, "lstm", spy)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (h, c) = lstm.forward_in(torch.bfloat16, x)
    assert seen == [(False, {torch.bfloat16})]
    assert out.dtype == h.dtype == c.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="batched input"):
        lstm.forward_in(torch.bfloat16, x[0])


@needs_native_bf16()
def test_forward_in_is_autocasts_cpu_result_bit_for_bit_on_a_cpu_with_native_bf16():
    """Without a projection, autocast runs oneDNN's bf16 LSTM on the CPU (a primitive that exists only with native
    bf16): :meth:`AutocastLSTM.forward_in` gives its output bit for bit."""
    torch.manual_seed(0)
    lstm = AutocastLSTM(6, 8, batch_first=True)
    reference = torch.nn.LSTM(6, 8, batch_first=True)
    reference.load_state_dict(lstm.state_dict())
    x = torch.randn(3, 5, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = lstm.forward_in(torch.bfloat16, x)
        expected, _ = reference(x)
    assert torch.equal(out, expected)


def test_the_cpu_path_is_nn_lstm_unchanged_bit_for_bit():
    torch.manual_seed(0)
    lstm = AutocastLSTM(6, 8, batch_first=True, proj_size=4)
    reference = torch.nn.LSTM(6, 8, batch_first=True, proj_size=4)
    reference.load_state_dict(lstm.state_dict())
    x = torch.randn(3, 5, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(lstm(x)[0], reference(x)[0])
    assert lstm.compute_dtype == torch.bfloat16
    assert torch.equal(lstm(x)[0], reference(x)[0]) and lstm.compute_dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's kernels)")
@pytest.mark.parametrize("family", ["bilm", "published-fused", "classifier-encoder"])
def test_bf16_on_cuda_runs_cudnn_in_bfloat16(family):
    device = torch.device("cuda")
    torch.manual_seed(0)
    with autocast(device, torch.bfloat16):
        if family == "bilm":
            model = our_bilm("word").to(device)
            model(torch.tensor([[4, 5, 6]], device=device), torch.tensor([3], device=device))
        elif family == "published-fused":
            model = run_published("fused").to(device)
            from elmo.data.chars import TF_MAX_CHARS
            model(None, torch.tensor([3], device=device), torch.randint(1, 200, (1, 3, TF_MAX_CHARS), device=device))
        else:
            model = MaskedBiLSTM(6, 4).to(device)
            model(torch.randn(2, 5, 6, device=device), torch.tensor([5, 3], device=device))
    assert set(lstm_compute_dtypes(model).values()) == {"bfloat16"}


def test_the_clipped_bf16_loop_gives_the_same_outputs_with_and_without_autograd():
    # Without autograd the projected state stays in bf16 between steps; with it, it goes through float32: same values.
    from elmo.model.lstm import ProjectedLSTM

    layer = ProjectedLSTM(6, 12, 4, 3.0, 3.0).initialize(torch.Generator().manual_seed(0))
    x, active = torch.randn(9, 3, 6, generator=torch.Generator().manual_seed(1)), [3] * 5 + [2, 2, 1, 1]
    results = []
    for grad in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
            out, (h, c) = layer(x.clone().requires_grad_(grad), active)
        results.append([t.detach() for t in (out, h, c)])
        assert out.dtype == h.dtype == c.dtype == torch.float32 and layer.compute_dtype == torch.bfloat16
    assert all(torch.equal(a, b) for a, b in zip(*results))
