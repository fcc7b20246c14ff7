"""Training speed of the published ELMo architectures (``python -m lab bench --training``).

For **elmo-small**, **elmo-medium** and **elmo-original** (:data:`~elmo.model.bilm_config.PUBLISHED_ARCHITECTURES`):
:class:`~elmo.model.language_model.PublishedLM` (both directions on one token layer, one adaptive softmax,
the ``pretrain --architecture`` default) trained by the project's own loop, :func:`elmo.training.trainer.fit`
(forward, backward, gradient clipping, fused Adam step), on the device present, in fp32 and in bf16 where the
device has it natively (CUDA, or a CPU with AVX512-BF16/AMX). Each architecture and precision runs in its own
process (:func:`~lab.bench.children.in_child`), so its peak resident memory is its own.

The text is real: AG News training Descriptions (case kept, :func:`elmo.data.text.tokenize`) concatenated and cut
into windows of :data:`WINDOW` tokens, as bilm-tf cuts its stream into 20-step windows; ``--training-batch`` windows a
step (bilm-tf: 128 per GPU; default here 32 on a CPU, 128 on CUDA), a new batch every step. The softmax has
``--training-vocab`` classes (default 100,000): AG News train's cased vocabulary (every word, most frequent first,
48,144 with the 4 specials) and unseen ids up to that size, so the targets keep the real text's Zipfian frequencies.

Per row: ``--training-warmup`` steps, then ``--training-steps`` timed steps; the median step gives

* tokens/s **per direction** (predicted words, ``n + 1`` per window, bilm-tf's count of a step's tokens, and what a
  corpus's token count is compared with) and **in total** (both directions, twice that);
* training FLOPs per token (:func:`training_flops`: character CNN over the characters read, highway and projection
  per distinct word of the batch, both directions' LSTM cells with projection, the adaptive softmax per target;
  forward × 3 for forward + backward) and the achieved share of the precision's measured matrix-product peak (the
  larger of the one measured at the start and the one measured in the row's process right after it);
* the projected time of 10 epochs of the 1B Word Benchmark (:data:`BENCHMARK_TOKENS` tokens), next to the
  :data:`ANCHOR`: bilm-tf trained the Original model at about 6.4k tokens/s on 3 GTX 1080s (two weeks).

The goals (:data:`GOALS`) and whether they are met are recorded; when the Original's fp32 training is below the CPU
goal, one step is profiled (:func:`profile_step`) to say where the time goes.
"""

from __future__ import annotations

import collections
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from elmo.artifacts import environment_info
from elmo.data.agnews import read_agnews
from elmo.data.corpus import encode_corpus
from elmo.data.text import tokenize
from elmo.data.vocab import BOS_ID, EOS_ID, Vocabulary
from elmo.model.adaptive_softmax import adaptive_cutoffs
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import PUBLISHED_ARCHITECTURES, BiLMConfig
from elmo.model.language_model import PublishedLM
from elmo.model.lstm import lstm_compute_dtypes, summary_dtype
from elmo.model.plan import plan_batch, step_loss
from elmo.runtime.device import configure_threads, cpu_has_bf16, resolve_device, set_seed
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

from .children import in_child, peak_rss_mb
from .flops import adaptive_flops, device_matmul_peaks, published_lstm_flops, published_word_flops, synchronize
from .published import OP_GROUPS, conclude, load_and_peaks

#: the architectures measured, smallest first (``--architecture`` names)
ARCHITECTURES = {name: PUBLISHED_ARCHITECTURES[name] for name in ("elmo-small", "elmo-medium", "elmo-original")}
#: the architecture the goals are about
GOAL_ARCHITECTURE = "elmo-original"
#: tokens per window (bilm-tf's ``unroll_steps``)
WINDOW = 20
#: training tokens of the 1B Word Benchmark (bilm-tf's ``n_train_tokens``) and the epochs projected
BENCHMARK_TOKENS = 768_648_884
BENCHMARK_EPOCHS = 10
#: bilm-tf's Original model: 10 epochs of the 1B Word Benchmark in about two weeks on 3 GTX 1080s
ANCHOR = {"tokens_per_second": 6_400.0, "hardware": "3 x NVIDIA GTX 1080 (bilm-tf, 128 x 20 tokens per GPU)",
          "days": BENCHMARK_EPOCHS * BENCHMARK_TOKENS / 6_400.0 / 86_400}
#: what the training should reach: share of the fp32 matmul peak on a CPU, tokens/s per direction on one H100 in bf16
GOALS = {"cpu_fp32_peak_fraction": 0.5, "gpu_bf16_tokens_per_second": 100_000.0}
#: ``torch.profiler`` operator names → the part of the work they are (:data:`lab.bench.published.OP_GROUPS` plus
#: the backward pass's element-wise kernels and the optimiser)
TRAINING_OP_GROUPS = {**OP_GROUPS,
                      "LSTM gates and clipping": OP_GROUPS["LSTM gates and clipping"] + (
                          "aten::sigmoid_backward", "aten::tanh_backward", "aten::threshold_backward",
                          "aten::clamp_backward", "aten::where", "aten::mul_", "aten::add_"),
                      "softmax and loss": ("aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss_forward",
                                           "aten::nll_loss_backward", "aten::log_softmax", "aten::gather"),
                      "optimiser step (fused Adam, clipping)": ("aten::_fused_adam_", "aten::_foreach_norm",
                                                                "aten::_foreach_mul_", "aten::linalg_vector_norm")}
MATMUL_OPS = OP_GROUPS["matrix products"]


def training_text(data_dir: str, windows: int, vocab_size: int) -> dict[str, Any]:
    """``windows`` windows of :data:`WINDOW` tokens of AG News train's Descriptions (case kept, in file order) and the
    vocabulary: AG News train's every cased word, most frequent first, the softmax ``max(vocab_size, words)`` wide."""
    corpus = read_agnews(Path(data_dir) / "train.csv")
    documents = [tokenize(t, lowercase=False) for t in corpus.texts]
    vocab = Vocabulary.build(documents, min_freq=1)
    stream: list[str] = []
    for document in documents:
        stream.extend(document)
        if len(stream) >= windows * WINDOW:
            break
    return {"windows": [stream[i * WINDOW:(i + 1) * WINDOW] for i in range(windows)], "itos": vocab.itos,
            "softmax_classes": max(vocab_size, len(vocab))}


def training_flops(config: BiLMConfig, windows: Sequence[Sequence[str]],
                   ids: Sequence[Sequence[int]]) -> dict[str, float]:
    """FLOPs (matrix products) of one training step of ``config`` (with its training head) on ``windows`` (token
    strings) with word ids ``ids``.

    Forward per part: ``token layer`` (:func:`~lab.bench.flops.published_word_flops` of every distinct word of the batch and
    the two sentence marks, one character each: convolutions over the characters read, highway, projection), ``LSTMs`` (both directions,
    every layer, ``n + 1`` steps per window: :func:`~lab.bench.flops.published_lstm_flops`), ``softmax`` (per direction,
    per target: :func:`~lab.bench.flops.adaptive_flops`; sampled: ``2 · P · n · (samples + 1)``). ``training`` is 3 × their sum
    (the backward pass costs twice the forward)."""
    words = {w for window in windows for w in window}
    marks = 2 * published_word_flops(config, "x")  # <S> and </S>: one character each in bilm-tf's numbering
    steps = sum(len(w) + 1 for w in windows)
    width = config.output_size
    forward = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids] + [np.full(len(ids), EOS_ID)])
    backward = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids] + [np.full(len(ids), BOS_ID)])
    if config.softmax == "adaptive":
        cutoffs = adaptive_cutoffs(config.cutoffs, config.vocab_size, width, config.div_value)
        softmax = sum(adaptive_flops(width, config.vocab_size, cutoffs, config.div_value, t) for t in (forward, backward))
    else:
        softmax = 2 * 2.0 * width * steps * (min(config.samples, config.vocab_size) + 1)
    parts = {"token layer": marks + sum(published_word_flops(config, w) for w in words),
             "LSTMs": 2 * published_lstm_flops(config, steps),
             "softmax": softmax}
    return parts | {"training": 3.0 * sum(parts.values())}


def finish_row(row: dict[str, Any], peak_gflops: float) -> dict[str, Any]:
    """Add the rates to a measured ``row`` (``seconds_runs`` per timed step, ``tokens_per_step`` predicted words per
    direction, ``flops_per_step``): seconds per step (median), tokens/s per direction and in total, FLOPs per token
    (both directions, training), achieved GFLOP/s, its share of ``peak_gflops`` (GFLOP/s), and the projected days
    of :data:`BENCHMARK_EPOCHS` epochs of :data:`BENCHMARK_TOKENS` tokens (= tokens / tokens per second)."""
    seconds = statistics.median(row["seconds_runs"])
    rate = row["tokens_per_step"] / seconds
    gflops = row["flops_per_step"] / seconds / 1e9
    tokens = BENCHMARK_EPOCHS * BENCHMARK_TOKENS
    return row | {"seconds_per_step": seconds, "tokens_per_second": {"per_direction": rate, "total": 2 * rate},
                  "flops_per_token": row["flops_per_step"] / row["tokens_per_step"], "gflops": gflops,
                  "matmul_peak_gflops": peak_gflops, "peak_fraction": gflops / peak_gflops,
                  "projection": {"tokens": tokens, "seconds": tokens / rate, "days": tokens / rate / 86_400,
                                 "anchor_days": ANCHOR["days"]}}


def profile_step(model: PublishedLM, batch: dict, device: torch.device, amp: torch.dtype | None,
                 rows: int) -> dict[str, Any]:
    """Where the time of one training step goes (``torch.profiler`` over one :func:`fit` step on ``batch``, after the
    timed ones): self-time shares per :data:`TRAINING_OP_GROUPS` group (``other`` for the
    rest), and the matrix products' time split into those with a dimension of at most ``rows`` (the batch's windows:
    the recurrence's per-step products, forward and backward) and the rest (all steps or words at once)."""
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        _fit(model, lambda epoch: iter([batch]), device, amp)
        synchronize(device)
    events = prof.key_averages(group_by_input_shape=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    ops = {group: sum(e.self_cpu_time_total for e in events if e.key in names) / total
           for group, names in TRAINING_OP_GROUPS.items()}
    ops["other"] = max(0.0, 1.0 - sum(ops.values()))
    small = sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS
                and min([d for s in e.input_shapes[:2] if len(s) == 2 for d in s] or [rows + 1]) <= rows)
    matmuls = sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS) or 1.0
    top = sorted(((e.key, e.self_cpu_time_total / total) for e in prof.key_averages()), key=lambda kv: -kv[1])[:8]
    return {"operations": ops, "matrix_products": {"small (a dimension <= the batch's windows: the recurrence)": small / matmuls,
                                                   "large (all steps or all words at once)": 1.0 - small / matmuls},
            "top_operators": dict(top)}


#: operators whose result the host must read back from the device (a synchronisation on CUDA)
READING_OPERATORS = ("aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::_unique2", "aten::unique_dim",
                     "aten::unique_consecutive", "aten::masked_select", "aten::repeat_interleave", "aten::bincount")


def step_operators(model: PublishedLM, batch: dict[str, torch.Tensor], device: torch.device,
                   amp: torch.dtype | None) -> dict[str, Any]:
    """What one training step's forward and backward pass dispatch, the way :func:`fit` runs them
    (:func:`~elmo.model.plan.step_loss` with the batch's host copies): ``operators``, the ATen operators
    (views included: a device-independent count of the work the host does per step), ``reading_operators``, those
    of :data:`READING_OPERATORS` among them, and on CUDA ``synchronizations``, the waits for the device that
    ``torch.cuda.set_sync_debug_mode`` reports over a second step. The gradients are cleared afterwards."""
    moved = {k: v.to(device) for k, v in batch.items()} | {f"host_{k}": batch[k] for k in model.host_keys}

    def step() -> None:
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss, _ = step_loss(model, model, moved)
        loss.backward()
        model.zero_grad(set_to_none=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    counts = collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
    out: dict[str, Any] = {"operators": sum(counts.values()),
                           "reading_operators": {k: counts[k] for k in READING_OPERATORS if counts[k]}}
    if device.type == "cuda":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                step()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        out["synchronizations"] = sum("synchroniz" in str(w.message).lower() for w in caught)
    return out


def gpu_busy(model: PublishedLM, batch: dict, device: torch.device,
             amp: torch.dtype | None) -> dict[str, float] | None:
    """How much of one :func:`fit` step on ``batch`` the GPU spends computing (``torch.profiler`` with CUDA activity,
    after one unprofiled step): ``wall_ms`` on the host clock, ``busy_ms`` the union of the kernels' and copies'
    intervals (user annotations left out), ``share`` their ratio. ``None`` off CUDA."""
    if device.type != "cuda":
        return None
    _fit(model, lambda epoch: iter([batch]), device, amp)
    synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        started = time.perf_counter()
        _fit(model, lambda epoch: iter([batch]), device, amp)
        synchronize(device)
        wall = time.perf_counter() - started
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
                   and not e.name.startswith(("elmo.", "Optimizer.", "ProfilerStep")))
    busy, reach = 0.0, float("-inf")
    for start, end in spans:  # the union of the intervals, in microseconds
        busy += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return {"wall_ms": wall * 1e3, "busy_ms": busy / 1e3, "share": busy / 1e3 / (wall * 1e3)}


def _fit(model: PublishedLM, batches, device: torch.device, amp: torch.dtype | None,
         compile: bool = False, before_step: Callable[[], None] | None = None,
         after_last: Callable[[], None] | None = None) -> None:
    """One epoch of :func:`elmo.training.trainer.fit` over ``batches(epoch)``: the training step of ``pretrain``, its
    host plans made one batch ahead on a GPU (:func:`~elmo.model.plan.plan_batch`); ``compile``: through
    ``torch.compile`` (:attr:`~elmo.training.trainer.TrainConfig.compile`); ``before_step`` is called as each step
    starts, ``after_last`` right after the last one (before anything else of the epoch's end)."""
    def loss(m: torch.nn.Module, b: dict) -> tuple[torch.Tensor, int]:
        if before_step is not None:
            before_step()
        return step_loss(model, m, b)

    def validate() -> dict[str, float]:
        if after_last is not None:
            after_last()
        return {"none": 0.0}
    objective = Objective(batches=batches, loss_fn=loss, validate=validate, monitor="none", maximize=False,
                          host_keys=model.host_keys, prepare=plan_batch(model))
    fit(model, objective, TrainConfig(epochs=1, compile=compile), device, amp, progress=Progress(quiet=True))


def measure(name: str, precision: str, text: dict[str, Any], cfg: Any, batch: int, start_peak: float, *,
            config: BiLMConfig | None = None, compile: bool = False, extras: bool = True) -> dict[str, Any]:
    """One architecture in one precision (its own process): ``--training-warmup`` then ``--training-steps`` steps of
    :func:`fit`, each on a new batch of ``batch`` windows (``lstm_dtype``: the dtype the LSTMs computed in at the
    last step, :func:`~elmo.model.lstm.summary_dtype`); :func:`finish_row`'s figures against the larger of
    ``start_peak`` and the peak measured right after; :func:`profile_step` when it is the Original in fp32 below the goal.

    Args:
        config: the architecture's sizes instead of ``name``'s in :data:`ARCHITECTURES` (e.g. without clipping:
            ``pretrain --lstm fused``); compile: train through ``torch.compile``; extras: measure the peak again
            after the row and profile it (``python -m lab bench --training``); without, ``start_peak`` is the peak.
    """
    threads = configure_threads(cfg.threads)
    set_seed(cfg.seed)
    device = resolve_device(cfg.device)
    amp = {"fp32": None, "bf16": torch.bfloat16}[precision]
    label, config = ARCHITECTURES[name][0] if name in ARCHITECTURES else name, config or ARCHITECTURES[name][1]
    config = replace(config, vocab_size=text["softmax_classes"])
    model = PublishedLM(BiLM(config, seed=cfg.seed)).to(device)
    vocab = Vocabulary(text["itos"])
    steps = cfg.training_warmup + cfg.training_steps
    windows = text["windows"][:steps * batch]
    corpus = encode_corpus(windows, vocab, max_chars=config.max_chars, char_scheme=config.char_scheme)
    stamps: list[float] = []
    lstm_dtypes: dict[str, str] = {}

    def stamp() -> None:  # on the main thread, as a step starts and after the last (the batches come one ahead)
        synchronize(device)
        stamps.append(time.perf_counter())

    def after_last() -> None:
        stamp()
        lstm_dtypes.update(lstm_compute_dtypes(model))  # the last training step's, before any validation

    _fit(model, lambda epoch: (corpus.collate(np.arange(i * batch, (i + 1) * batch)) for i in range(steps)),
         device, amp, compile, stamp, after_last)
    seconds = np.diff(stamps)[cfg.training_warmup:].tolist()
    operators = None if compile else step_operators(model.train(), corpus.collate(np.arange(batch)), device, amp)
    flops = [training_flops(config, part, [vocab.encode(w) for w in part])
             for part in (windows[i * batch:(i + 1) * batch] for i in range(cfg.training_warmup, steps))]
    ids = corpus.collate(np.arange(batch))
    row = {"model": label, "precision": precision, "device": str(device), "threads": threads, "batch_windows": batch,
           "parameters": sum(p.numel() for p in model.parameters()), "seconds_runs": seconds,
           "lstm_dtype": summary_dtype(lstm_compute_dtypes(model) | lstm_dtypes), "step_operators": operators,
           "tokens_per_step": int((ids["lengths"] + 1).sum()),
           "flops_per_step": statistics.mean(f["training"] for f in flops),
           "flops_per_step_parts": {k: statistics.mean(f[k] for f in flops) for k in flops[0] if k != "training"}}
    if extras:  # measured now, under the same load as the row
        start_peak = max(start_peak, device_matmul_peaks(device, threads)[precision])
    row = finish_row(row, start_peak)
    if extras and name == GOAL_ARCHITECTURE and precision == "fp32" and row["peak_fraction"] < GOALS["cpu_fp32_peak_fraction"]:
        row["time_shares"] = profile_step(model, corpus.collate(np.arange(batch)), device, amp, batch)
    row["peak_rss_mb"] = peak_rss_mb()
    if device.type == "cuda":
        row["cuda_max_memory_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        row["gpu_busy"] = gpu_busy(model.train(), ids, device, amp)
    return row


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """:data:`GOALS` against the rows: the Original's fp32 share of peak (CPU), its bf16 tokens/s per direction (GPU);
    ``met`` is ``None`` where the device to test it on is absent."""
    cpu = results["device"]["type"] == "cpu"
    original = results["rows"].get(GOAL_ARCHITECTURE, {})
    share = original.get("fp32", {}).get("peak_fraction") if cpu else None
    rate = None if cpu else original.get("bf16", {}).get("tokens_per_second", {}).get("per_direction")
    return {"cpu_fp32_peak_fraction": {"target": GOALS["cpu_fp32_peak_fraction"], "achieved": share,
                                       "met": None if share is None else share >= GOALS["cpu_fp32_peak_fraction"],
                                       "note": "" if cpu else "measured on a GPU, not on a CPU"},
            "gpu_bf16_tokens_per_second": {"target": GOALS["gpu_bf16_tokens_per_second"], "achieved": rate,
                                           "met": None if rate is None else rate >= GOALS["gpu_bf16_tokens_per_second"],
                                           "note": "no GPU present" if cpu else results["device"]["name"]}}


def bench_training(cfg: Any) -> dict[str, Any]:
    """Every architecture and precision (each in its own process): print the table, write ``cfg.out_path``."""
    threads = configure_threads(cfg.threads)
    cfg = replace(cfg, threads=threads)
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    batch = cfg.training_batch or (128 if device.type == "cuda" else 32)
    precisions = ["fp32"] + (["bf16"] if device.type == "cuda" or cpu_has_bf16() else [])
    print("[bench] training text ...", file=sys.stderr, flush=True)
    text = training_text(cfg.data_dir, batch * (cfg.training_warmup + cfg.training_steps), cfg.training_vocab)
    results: dict[str, Any] = {
        "config": {k: getattr(cfg, k) for k in ("data_dir", "device", "threads", "seed", "training_steps",
                                                "training_warmup", "training_vocab")} | {"batch_windows": batch},
        "meta": environment_info(cfg.seed), "load_average_before": os.getloadavg(),
        "device": {"type": device.type, "name": device_name(device), "threads": threads, "cpu_count": os.cpu_count()},
        "text": {"source": f"AG News train.csv Descriptions, case kept, cut into {WINDOW}-token windows",
                 "window_tokens": WINDOW, "vocabulary_words": len(text["itos"]), "softmax_classes": text["softmax_classes"],
                 "softmax": "adaptive"},
        "anchor": ANCHOR, "benchmark": {"tokens": BENCHMARK_TOKENS, "epochs": BENCHMARK_EPOCHS}, "rows": {}}
    print("[bench] matmul peaks ...", file=sys.stderr, flush=True)
    results["matmul_peak_gflops"] = in_child(device_matmul_peaks, device, threads)
    for name in ARCHITECTURES:
        results["rows"][name] = {}
        for precision in precisions:
            print(f"[bench] training {name} {precision} ...", file=sys.stderr, flush=True)
            results["rows"][name][precision] = in_child(measure, name, precision, text, cfg, batch,
                                                        results["matmul_peak_gflops"][precision])
    results["goals"] = goals(results)
    results["seconds"] = time.perf_counter() - started
    return conclude(results, cfg.out_path, format_training)


def format_training(r: dict[str, Any]) -> str:
    """The training benchmark as a plain-text table (what ``docs/performance.md`` shows)."""
    lines = [f"{r['device']['name']} ({r['device']['type']}), {r['device']['threads']} threads; batch "
             f"{r['config']['batch_windows']} x {r['text']['window_tokens']} tokens; softmax adaptive over "
             f"{r['text']['softmax_classes']:,} classes; {load_and_peaks(r)}", "",
             f"{'model':<15}{'prec':>5}{'s/step':>8}{'tok/s dir':>10}{'tok/s all':>10}{'GFLOP/tok':>10}"
             f"{'GFLOP/s':>9}{'of peak':>8}{'10 ep. 1B (days)':>17}{'peak MB':>9}"]
    for name, rows in r["rows"].items():
        for precision, row in rows.items():
            lines.append(f"{name:<15}{precision:>5}{row['seconds_per_step']:>8.2f}"
                         f"{row['tokens_per_second']['per_direction']:>10,.0f}{row['tokens_per_second']['total']:>10,.0f}"
                         f"{row['flops_per_token'] / 1e9:>10.2f}{row['gflops']:>9,.1f}{row['peak_fraction']:>8.0%}"
                         f"{row['projection']['days']:>17,.0f}{row['peak_rss_mb']:>9,.0f}")
            if "time_shares" in row:
                top = sorted(row["time_shares"]["operations"].items(), key=lambda kv: -kv[1])[:4]
                lines.append(f"{'':<20}time in: " + ", ".join(f"{k} {v:.0%}" for k, v in top))
                lines.append(f"{'':<20}matrix products: " + ", ".join(
                    f"{k} {v:.0%}" for k, v in row["time_shares"]["matrix_products"].items()))
    lines.append(f"anchor: bilm-tf Original, {r['anchor']['tokens_per_second']:,.0f} tokens/s on {r['anchor']['hardware']}, "
                 f"{r['anchor']['days']:.0f} days for {r['benchmark']['epochs']} epochs")
    for goal, g in r["goals"].items():
        state = "untested" if g["met"] is None else ("met" if g["met"] else "not met")
        lines.append(f"goal {goal}: target {g['target']:,}, {state}" + (f" ({g['note']})" if g["note"] else ""))
    return "\n".join(lines)
