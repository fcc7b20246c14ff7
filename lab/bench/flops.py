"""What the benchmarks' achieved GFLOP/s are made of: FLOP counts and measured matrix-product peaks.

Counts are of matrix products only (2 FLOPs per multiply-add), computed from the sizes; each function says whether
it counts the **forward** pass or **training** (forward + backward = 3 × forward):

* training: :func:`bilm_lstm_flops` (our biLM's LSTM stack, :class:`~elmo.model.bilm_config.BiLMConfig`),
  :func:`bilm_softmax_flops` (its adaptive softmax), :func:`task_encoder_flops` (a classifier's task encoder);
* forward: :func:`adaptive_flops` (any adaptive softmax, given its width, cutoffs and targets),
  :func:`published_lstm_flops` (one direction of a published architecture's LSTM stack) and
  :func:`published_word_flops` (one word through its token layer).

The peaks they are a share of are measured, not looked up: :func:`matmul_gflops` (one precision on any device),
:func:`cpu_matmul_peaks` (a CPU's fp32 BLAS, fp32 oneDNN and bf16 kernels) and :func:`device_matmul_peaks` (every
precision the device runs natively, either way).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from elmo.errors import ElmoError
from elmo.model.adaptive_softmax import adaptive_cutoffs
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import SequenceClassifier
from elmo.runtime.device import configure_threads, cpu_has_bf16, resolve_precision

from .children import peak_rss_mb

# ------------------------------------------------------------------------------------------
# FLOP counts
# ------------------------------------------------------------------------------------------


def bilm_lstm_flops(config: BiLMConfig, positions: int) -> float:
    """Training FLOPs of our biLM's LSTM stack (one direction) over ``positions`` (B × S, padding included: the
    kernel runs on it)."""
    sizes = [config.embedding_dim] + [config.output_size] * config.num_layers
    h, p = config.hidden_size, config.proj_size or config.hidden_size
    per_position = sum(2 * 4 * h * (i + p) + (2 * h * p if config.proj_size else 0) for i in sizes[:-1])
    return 3.0 * per_position * positions


def adaptive_flops(width: int, vocab_size: int, cutoffs: Sequence[int], div_value: float, targets: np.ndarray) -> float:
    """Forward FLOPs of an adaptive softmax (:class:`elmo.model.adaptive_softmax.AdaptiveSoftmax`) over ``width``-wide inputs for
    these target ids: the head (shortlist + one logit per cluster) for every target, a cluster's two projections only
    for the targets in it. ``cutoffs`` as the softmax uses them (:func:`elmo.model.adaptive_softmax.adaptive_cutoffs`)."""
    bounds = list(cutoffs) + [vocab_size]
    flops = 2.0 * width * (bounds[0] + len(bounds) - 1) * len(targets)
    for i in range(1, len(bounds)):
        inner = int(width // div_value ** i)
        count = int(((targets >= bounds[i - 1]) & (targets < bounds[i])).sum())
        flops += 2.0 * (width * inner + inner * (bounds[i] - bounds[i - 1])) * count
    return flops


def bilm_softmax_flops(config: BiLMConfig, targets: np.ndarray) -> float:
    """Training FLOPs of our biLM's adaptive softmax for these target ids (:func:`adaptive_flops` × 3)."""
    cutoffs = adaptive_cutoffs(config.cutoffs, config.vocab_size, config.output_size, config.div_value)
    return 3.0 * adaptive_flops(config.output_size, config.vocab_size, cutoffs, config.div_value, targets)


def task_encoder_flops(model: SequenceClassifier, positions: int) -> float:
    """Training FLOPs of a classifier's task encoder over ``positions`` (B × T, padding included: the kernels run on
    it): both directions' LSTM products (input and recurrent weights) and the optional input projection, 2 FLOPs per
    weight and position forward, × 3 for forward + backward. Counted from the model's own weight shapes; the scalar
    mix, the pooling and the output layer are not counted.

    Args:
        model: a :class:`~elmo.model.classifier.SequenceClassifier` whose head is built; positions: B × T.
    """
    parts = [model.encoder.forward_rnn, model.encoder.backward_rnn, model.projection]
    per_position = sum(2 * p.numel() for part in parts if part is not None
                       for name, p in part.named_parameters() if name.startswith("weight"))
    return 3.0 * per_position * positions


def published_lstm_flops(config: BiLMConfig, steps: int) -> float:
    """Forward FLOPs of ``steps`` steps of one direction of a published architecture's LSTM stack (all its layers:
    the gates' input and recurrent products, and the projection where it is narrower than the cells)."""
    proj, cells = config.output_size, config.hidden_size
    per_step = 2 * 2 * proj * 4 * cells + (2 * cells * proj if proj < cells else 0)
    return float(per_step * steps * config.num_layers)


def published_word_flops(config: BiLMConfig, word: str) -> float:
    """Forward FLOPs of one word's token vector in a published architecture: convolutions over the characters read,
    highway, projection."""
    read = min(config.max_chars, len(word.encode("utf-8")[: config.max_chars - 2]) + 2 + max(w for w, _ in config.char_filters))
    conv = sum(2 * config.char_dim * w * n * max(0, read - w + 1) for w, n in config.char_filters)
    width = config.n_filters
    rest = config.num_highway * 2 * width * 2 * width + (2 * width * config.output_size if width != config.output_size else 0)
    return float(conv + rest)


# ------------------------------------------------------------------------------------------
# Measured matrix-product peaks
# ------------------------------------------------------------------------------------------


def precision_refusal(precision: str, device: torch.device) -> str | None:
    """Why the library does not run ``--precision precision`` on ``device`` (the message of
    :func:`~elmo.runtime.device.resolve_precision`'s error: bf16 on a CPU without native bf16, fp16 on a CPU), or
    ``None`` where it does. The benchmarks' one rule, training and inference alike: a row the library would refuse is
    left out with this reason, not run in an emulation no user gets."""
    try:
        resolve_precision(precision, device)
    except ElmoError as exc:
        return str(exc)
    return None


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fastest(run: Callable[[], Any], device: torch.device, repeats: int, warmup: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``run`` after ``warmup`` untimed ones (on CUDA timed with CUDA
    events, queued back to back, so no launch or host wait is counted)."""
    if device.type == "cuda":
        for _ in range(warmup):
            run()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for start, end in events:
            start.record()
            run()
            end.record()
        synchronize(device)
        return min(start.elapsed_time(end) for start, end in events) / 1e3
    times = []
    for i in range(warmup + repeats):
        synchronize(device)
        start = time.perf_counter()
        run()
        synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return min(times)


def matmul_gflops(device: torch.device, dtype: torch.dtype, n: int = 2048, repeats: int = 20) -> float:
    """Measured GFLOP/s of an ``n × n`` matrix product in ``dtype`` on ``device``: the fastest of ``repeats`` after two
    warm-up products. A peak is the best the device reaches, so the fastest, not the median: on a 2-core AVX2 CPU
    (fp32, 2 threads) single products ran at 93-159 GFLOP/s, and a median of 5 in a fresh process once gave 93, below
    what the LM's own kernels sustained (104)."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n ** 3 / _fastest(lambda: a @ b, device, repeats, warmup=2) / 1e9


def cpu_matmul_peaks(threads: int | None, n: int = 2048) -> dict[str, float]:
    """Measured GFLOP/s of an ``n × n`` product on the CPU (fastest of 5 after a warm-up, with ``threads`` threads):
    ``fp32_blas`` (the default BLAS), ``fp32_onednn`` (oneDNN, where built in), ``bf16`` (oneDNN, where the CPU has it
    natively), ``fp32`` (the faster fp32), and ``peak_rss_mb`` of the process."""
    configure_threads(threads)
    cpu = torch.device("cpu")
    a, b = torch.randn(n, n), torch.randn(n, n)

    def gflops(run: Callable[[], Any]) -> float:
        return 2 * n ** 3 / _fastest(run, cpu, repeats=5, warmup=1) / 1e9

    out = {"fp32_blas": gflops(lambda: a @ b)}
    if torch.backends.mkldnn.is_available():
        out["fp32_onednn"] = gflops(lambda: torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], ""))
    if cpu_has_bf16():
        ab, bb = a.bfloat16(), b.bfloat16()
        out["bf16"] = gflops(lambda: F.linear(ab, bb))
    out["fp32"] = max(v for k, v in out.items() if k.startswith("fp32"))
    out["peak_rss_mb"] = peak_rss_mb()
    return out


#: the matrix size of a GPU's peak: large enough that one product takes milliseconds (a 2048 × 2048 bf16 product is
#: over in microseconds on an H100, where its launch would count)
GPU_PEAK_SIZE = 8192


def device_matmul_peaks(device: torch.device, threads: int | None) -> dict[str, float]:
    """Measured matrix-product GFLOP/s per precision on ``device``: a CPU's :func:`cpu_matmul_peaks`; on a GPU
    ``fp32`` and ``bf16`` (:func:`matmul_gflops` of :data:`GPU_PEAK_SIZE` squared matrices; fp32 as PyTorch runs it
    by default, without TF32)."""
    if device.type == "cpu":
        return cpu_matmul_peaks(threads)
    return {"fp32": matmul_gflops(device, torch.float32, GPU_PEAK_SIZE),
            "bf16": matmul_gflops(device, torch.bfloat16, GPU_PEAK_SIZE)}
