"""Embedding speed of the published ELMo architectures (``python -m lab bench --published``).

For the published **Small** (``2x1024_128_2048cnn_1xhighway``) and **Original**
(``2x4096_512_2048cnn_2xhighway``) models, in fp32 and (on CPUs with native bf16) bf16: random weights of
exactly the published shapes, written by the benchmark itself in the published hdf5 layout
(:func:`elmo.model.published_io.save_published_bilm`) and loaded back through
:class:`~elmo.inference.embedder.ElmoEmbedder` like the real files; embedded in batches of 64 real
AG News sentences (``train.csv``'s Description column, tokenised by :func:`elmo.data.text.tokenize` with
the case kept). Reported per model and precision: sentences/s and tokens/s (median of ``--repeats`` after a
warm-up batch), peak resident memory (each measurement runs in its own process), achieved GFLOP/s against
the measured matrix-product peak (:func:`~lab.bench.flops.cpu_matmul_peaks`: the larger of the one measured at
the start and the one measured right after that row, as the machine may be shared), where the time goes
(``torch.profiler`` over one batch, grouped), and for bf16 the largest absolute difference from the fp32 vectors.

FLOPs counted (:func:`embedding_flops`, from the counts of :mod:`lab.bench.flops`) are the matrix products the
result needs: per sentence of n tokens and per direction and layer, n + 1 LSTM steps (input and recurrent
products, the projection); per distinct word of each :data:`~elmo.inference.embedder.CHUNK_BATCHES`-batch pass,
the character convolutions over the characters the encoder reads, the highway layers and the projection.
Padding and zero-padded kernels, which are also computed, are not counted, so the achieved figure is a lower bound.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from elmo.artifacts import environment_info, write_json
from elmo.data.agnews import read_agnews
from elmo.data.text import tokenize
from elmo.inference.embedder import CHUNK_BATCHES, ElmoEmbedder
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import PUBLISHED_ARCHITECTURES, BiLMConfig
from elmo.model.lstm import ProjectedLSTM
from elmo.model.published_io import save_published_bilm
from elmo.runtime.device import configure_threads, cpu_has_bf16

from .children import in_child, peak_rss_mb
from .flops import cpu_matmul_peaks, published_lstm_flops, published_word_flops

#: the published architectures measured (:data:`~elmo.model.bilm_config.PUBLISHED_ARCHITECTURES` without ``elmo-``)
ARCHITECTURES = {name: PUBLISHED_ARCHITECTURES[f"elmo-{name}"] for name in ("small", "original")}
BATCH = 64
#: ``torch.profiler`` operator names → the part of the work they are
OP_GROUPS = {
    "matrix products": ("mkldnn::_linear_pointwise", "aten::mm", "aten::addmm", "aten::bmm"),
    "LSTM gates and clipping": ("aten::sigmoid", "aten::tanh", "aten::mul", "aten::addcmul", "aten::clamp_",
                                "aten::clamp", "aten::add", "aten::sub", "aten::rsub", "aten::relu"),
    "char max-pool and masks": ("aten::amax", "aten::masked_fill_", "aten::masked_fill"),
    "copies, gathers and padding": ("aten::copy_", "aten::cat", "aten::index", "aten::gather", "aten::fill_",
                                    "aten::zero_", "aten::index_put_", "aten::embedding", "aten::unique_dim",
                                    "aten::sort", "aten::argsort", "aten::nonzero", "aten::to", "aten::_to_copy"),
}


def sentences_of(data_dir: str, count: int) -> list[list[str]]:
    """The first ``count`` non-empty AG News training Descriptions, tokenised with the case kept."""
    corpus = read_agnews(Path(data_dir) / "train.csv", max_rows=2 * count + 100)
    sentences = [s for s in (tokenize(t, lowercase=False) for t in corpus.texts) if s]
    return sentences[:count]


def embedding_flops(config: BiLMConfig, sentences: list[list[str]], batch_size: int = BATCH) -> float:
    """Matrix-product FLOPs of embedding ``sentences`` statelessly (the module docstring says what counts)."""
    steps = sum(len(s) + 1 for s in sentences)
    chunk = CHUNK_BATCHES * batch_size
    words = sum(published_word_flops(config, w) for i in range(0, len(sentences), chunk)
                for w in {w for s in sentences[i:i + chunk] for w in s})
    return 2 * published_lstm_flops(config, steps) + words


def random_layer_weights(layer: ProjectedLSTM, generator: torch.Generator | None = None) -> None:
    """Random weights of the usual scale (uniform ±1/√fan-in), bias 0, for a published LSTM layer (formerly
    ``ProjectedLSTM.reset_parameters``)."""
    with torch.no_grad():
        for p in (layer.input_weight, layer.recurrent_weight, layer.projection):
            if p is not None:
                bound = p.shape[1] ** -0.5
                p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)
        layer.bias.zero_()


def random_weights(bilm: BiLM, seed: int = 0) -> BiLM:
    """Random weights of the right scale for ``bilm`` (bilm-tf's architecture), returned (real ones come from the hdf5
    file)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in bilm.token_encoder.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (p[0].numel() ** -0.5 if p.dim() > 1 else 0.1))
        bilm.token_encoder.char_embedding.weight[0].zero_()
    for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers):
        random_layer_weights(layer, generator)
    return bilm


def write_weights(name: str, folder: str, seed: int) -> dict[str, Any]:
    """Random weights of architecture ``name`` in the published layout: ``<folder>/<name>_{options.json,weights.hdf5}``."""
    config = ARCHITECTURES[name][1]
    bilm = random_weights(BiLM(config), seed)
    options, weights = Path(folder) / f"{name}_options.json", Path(folder) / f"{name}_weights.hdf5"
    save_published_bilm(bilm, options, weights)
    return {"options_file": str(options), "weight_file": str(weights), "weights_mb": weights.stat().st_size / 2**20,
            "parameters": sum(p.numel() for p in bilm.parameters())}


def profile_batch(embedder: ElmoEmbedder, batch: list[list[str]]) -> dict[str, dict[str, float]]:
    """Where the CPU time of one batch goes: shares per :data:`OP_GROUPS` group (``other`` for the rest) and
    per stage (the token layer, the LSTMs' all-steps input products, the step-by-step recurrence)."""
    with torch.profiler.profile() as prof:
        list(embedder.embed_sentences(batch, BATCH))
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    ops = {group: sum(e.self_cpu_time_total for e in events if e.key in names) / total for group, names in OP_GROUPS.items()}
    ops["other"] = max(0.0, 1.0 - sum(ops.values()))
    stage = {e.key: e.cpu_time_total / total for e in events if e.key.startswith("elmo.")}
    stages = {"token layer (char CNN, highway)": stage.get("elmo.token_layer", 0.0),
              "LSTM input products (all steps at once)": stage.get("elmo.lstm_input_products", 0.0)}
    stages["LSTM recurrence and the rest"] = max(0.0, 1.0 - sum(stages.values()))
    return {"operations": ops, "stages": stages}


def measure(name: str, files: dict[str, Any], precision: str, cfg: Any,
            reference: list[np.ndarray] | None) -> dict[str, Any]:
    """One model in one precision (its own process): rates, memory, profile; the first batch's vectors (fp32)
    or their largest difference from ``reference`` (a lower precision)."""
    threads = configure_threads(cfg.threads)
    sentences = sentences_of(cfg.data_dir, BATCH + cfg.published_sentences)
    warm, timed = sentences[:BATCH], sentences[BATCH:]
    started = time.perf_counter()
    embedder = ElmoEmbedder(files["options_file"], files["weight_file"], device="cpu", precision=precision)
    load_seconds = time.perf_counter() - started
    first = list(embedder.embed_sentences(warm, BATCH))
    seconds = []
    for _ in range(cfg.repeats):
        start = time.perf_counter()
        sum(1 for _ in embedder.embed_sentences(timed, BATCH))
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    peak = cpu_matmul_peaks(threads)[precision]  # measured now, under the same load as the rows it is compared with
    out = {"matmul_peak_gflops": peak, "model": ARCHITECTURES[name][0], "precision": precision, "threads": threads, "load_seconds": load_seconds,
           "sentences": len(timed), "tokens": sum(map(len, timed)), "seconds_runs": seconds,
           "sentences_per_second": len(timed) / median, "tokens_per_second": sum(map(len, timed)) / median,
           "gflops": embedding_flops(ARCHITECTURES[name][1], timed) / median / 1e9,
           "time_shares": profile_batch(embedder, timed[:BATCH]), "peak_rss_mb": peak_rss_mb()}
    if reference is None:
        out["vectors"] = first
    else:
        out["max_abs_diff_from_fp32"] = max(float(np.abs(a - b).max()) for a, b in zip(first, reference))
        out["max_abs_fp32"] = max(float(np.abs(b).max()) for b in reference)
    return out


def bench_published(cfg: Any) -> dict[str, Any]:
    """Run every model and precision (each in its own process), print the table and write ``cfg.out_path``."""
    threads = configure_threads(cfg.threads)
    cfg = replace(cfg, threads=threads)
    results: dict[str, Any] = {"config": {k: getattr(cfg, k) for k in ("data_dir", "threads", "repeats", "published_sentences")},
                               "meta": environment_info(cfg.seed), "load_average_before": os.getloadavg()}
    print("[bench] matmul peaks ...", file=sys.stderr, flush=True)
    results["matmul_peak_gflops"] = in_child(cpu_matmul_peaks, threads)
    precisions = ["fp32"] + (["bf16"] if cpu_has_bf16() else [])
    with tempfile.TemporaryDirectory() as tmp:
        for name in ARCHITECTURES:
            print(f"[bench] {name}: writing random weights ...", file=sys.stderr, flush=True)
            files = in_child(write_weights, name, tmp, cfg.seed)
            results[name] = {"files": {k: v for k, v in files.items() if k.endswith(("_mb", "parameters"))}}
            reference = None
            for precision in precisions:
                print(f"[bench] {name} {precision} ...", file=sys.stderr, flush=True)
                row = in_child(measure, name, files, precision, cfg, reference)
                reference = row.pop("vectors", reference)
                row["peak_fraction"] = row["gflops"] / max(row["matmul_peak_gflops"], results["matmul_peak_gflops"][precision])
                results[name][precision] = row
    return conclude(results, cfg.out_path, format_published)


def conclude(results: dict[str, Any], path: str, formatter: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Record the load average after the run, write ``results`` to ``path``, print ``formatter(results)``; returns them."""
    results["load_average_after"] = os.getloadavg()
    write_json(path, results)
    print(formatter(results))
    return results


def load_and_peaks(r: dict[str, Any]) -> str:
    """``load average 1.8 before, 2.0 after; matmul peak fp32 209, bf16 905 GFLOP/s`` of a benchmark's results."""
    return (f"load average {r['load_average_before'][0]:.1f} before, {r['load_average_after'][0]:.1f} after; matmul peak "
            + ", ".join(f"{k} {v:,.0f}" for k, v in r["matmul_peak_gflops"].items() if k in ("fp32", "bf16")) + " GFLOP/s")


def format_published(r: dict[str, Any]) -> str:
    """The published-model benchmark as a plain-text table (also what ``docs/published_elmo.md`` shows)."""
    lines = [f"{r['config']['threads']} threads; {load_and_peaks(r)}", "",
             f"{'model':<32}{'prec':>5}{'sent/s':>9}{'tok/s':>9}{'peak MB':>9}{'GFLOP/s':>9}{'of peak':>9}  time in"]
    for name, (model, _) in ARCHITECTURES.items():
        for precision in ("fp32", "bf16"):
            row = r.get(name, {}).get(precision)
            if row is None:
                continue
            top = sorted(row["time_shares"]["operations"].items(), key=lambda kv: -kv[1])[:3]
            lines.append(f"{model:<32}{precision:>5}{row['sentences_per_second']:>9.1f}{row['tokens_per_second']:>9,.0f}"
                         f"{row['peak_rss_mb']:>9,.0f}{row['gflops']:>9,.1f}{row['peak_fraction']:>9.0%}  "
                         + ", ".join(f"{k} {v:.0%}" for k, v in top))
            lines.append(f"{'':<37}stages: " + ", ".join(f"{k} {v:.0%}" for k, v in row["time_shares"]["stages"].items()))
            if "max_abs_diff_from_fp32" in row:
                lines.append(f"{'':<37}max |bf16 - fp32| {row['max_abs_diff_from_fp32']:.3g} "
                             f"(largest |value| {row['max_abs_fp32']:.3g})")
    return "\n".join(lines)
