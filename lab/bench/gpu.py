"""One GPU measured in one call: ``python -m lab gpu --out results/gpu`` writes ``results/gpu/gpu.json``.

The record starts with the device (its name, memory, the torch, CUDA and cuDNN versions, whether TF32 is on), the
command line and the measured matrix-product peaks (an :data:`~lab.bench.flops.GPU_PEAK_SIZE`-squared ``torch.mm`` in
fp32 and in bf16, timed with CUDA events: :func:`~lab.bench.flops.matmul_gflops`). Then, in this order:

A row in a precision the library refuses on the device (bf16 on a CPU without native bf16, under ``--tiny``:
:func:`~lab.bench.flops.precision_refusal`) is left out and listed in ``skipped`` with the reason, in training and
inference alike. Then the parts:

* ``training`` (:func:`lab.bench.published_training.measure`, in this process): tokens/s per direction of
  elmo-original, elmo-medium and elmo-small trained as ``pretrain --architecture`` trains them (both directions, one
  adaptive softmax over 100,000 classes, :func:`~elmo.training.trainer.fit`), with ``--lstm fused`` (no clipping,
  PyTorch's fused LSTM kernel: cuDNN) and ``--lstm clipped`` (the published cell's per-step loop), in bf16 and fp32:
  ``--warmup`` steps, then ``--steps`` timed steps (median) of ``--batch`` 20-token windows of AG News text, and
  first the Original's rows at ``--large-batch`` windows (``large``); the training FLOPs' share of the peak, the peak
  CUDA memory (``torch.cuda.max_memory_allocated``, reset per row) and on CUDA ``gpu_busy``, the share of a step the
  GPU computes (:func:`~lab.bench.published_training.gpu_busy`);
Every training and inference row records ``lstm_dtype``, the dtype the LSTM kernels computed in (read from their
tensors: :func:`~elmo.model.lstm.lstm_compute_dtypes`), beside the precision asked for; every training row also
``step_operators`` (:func:`~lab.bench.published_training.step_operators`): the operators one step dispatches, those
among them that read the device back, and on CUDA the synchronisations ``torch.cuda.set_sync_debug_mode`` counts.

* ``inference``: sentences/s and tokens/s of :class:`~elmo.inference.embedder.ElmoEmbedder` on random weights of the
  published Original written in the published layout (:func:`lab.bench.published.random_weights`), over
  ``--sentences`` AG News Descriptions (case kept) in batches of 64 after a warm-up batch, bf16 and fp32, then again
  in batches of :data:`LARGE_EMBED_BATCH` (``large``);
* ``default_run``: ``python ELMO.py`` then ``python classification.py`` with their default flags in a scratch folder
  whose ``data/ag_news`` links to ``--data-dir`` (nothing of the checkout is written; a ``--data-dir`` holding the
  official 120,000-row ``train.csv`` times the full data): the wall time of each and its phases
  (:func:`phase_summary`), the
  perplexities and accuracies of the JSON they write (copied with their stdout to ``--out``/default_run/), each
  process's peak CUDA memory (read at its exit, :func:`run_with_peak`) and peak resident memory;
* ``larger_steps``, only when ``--parts`` names it (:func:`larger_steps_part`): ``pretrain --architecture elmo-small``
  at bilm-tf's 128 windows a step and at 2 and 4 times that with the learning rate scaled (:data:`LARGER_STEPS`), the
  held-out perplexities at the same number of tokens;
* ``compile``: training's first row again through ``torch.compile`` (``TrainConfig.compile``), in a process of its
  own that is ended when the budget runs out, beside the row without it.

Time: the parts together take at most ``--budget`` seconds (default 500, so that the command ends within 9 minutes):
``training`` and ``inference`` stop starting rows after their :data:`SHARES` of it, the default run is ended when only
the compile share is left, and compile gets the rest. What did not fit or failed is listed in ``skipped``, and
``gpu.json`` is written after every row and part, so a run that is killed still leaves what it measured.

``--tiny`` runs every part at tiny sizes for a few steps on whatever device is present (CI's CPU; the compile part is
skipped, its first compilation takes minutes on a CPU), to check the command end to end.
"""

from __future__ import annotations

import atexit
import gc
import json
import multiprocessing
import os
import runpy
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable

import torch

from elmo.artifacts import atomic_write_bytes, environment_info, write_json
from elmo.errors import ElmoError
from elmo.inference.embedder import ElmoEmbedder
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import PUBLISHED_ARCHITECTURES, BiLMConfig
from elmo.model.lstm import lstm_compute_dtypes, summary_dtype
from elmo.model.published_io import save_published_bilm
from elmo.pipelines.common import command_line, option
from elmo.pipelines.pretraining import PretrainArgs
from elmo.runtime.device import configure_threads, resolve_device, resolve_precision

from .children import in_child, run_script
from .flops import GPU_PEAK_SIZE, matmul_gflops, precision_refusal, synchronize
from .published import BATCH, embedding_flops, random_weights, sentences_of
from .published_training import WINDOW, device_name, measure, training_text
from .speed import BenchArgs

#: the checkout (``ELMO.py`` and ``classification.py`` are here)
ROOT = Path(__file__).resolve().parents[2]
#: the most seconds of ``--budget`` a part takes, in the order the parts run; ``None``: what the later parts leave
SHARES = {"training": 150, "inference": 40, "default_run": None, "larger_steps": 240, "compile": 60}
#: the ``larger_steps`` part's runs of ``pretrain --architecture elmo-small --lstm fused`` on AG News, each
#: ``(tokens per step, learning rate as a multiple of the default, warm-up steps)``: bilm-tf's 128 windows (2,688
#: tokens) with the defaults, then 2 and 4 times the words per step with the rate scaled by the square root and the
#: warm-up kept at the same number of tokens (You et al. 2019). 16 times the words, with square-root or linear scaling,
#: lost more (lab/experiments.md, gpu_larger_steps)
LARGER_STEPS = {"base": (2688, 1.0, 300), "sqrt_2x": (5376, 2 ** 0.5, 150), "sqrt_4x": (10752, 2.0, 75)}
#: epochs of every ``larger_steps`` run: the runs compare at the same number of training tokens
LARGER_STEPS_EPOCHS = 2
#: the architectures trained, the one the goals are about first
ARCHITECTURES = {name: PUBLISHED_ARCHITECTURES[name][1] for name in ("elmo-original", "elmo-medium", "elmo-small")}
#: ``--tiny``'s stand-ins for them
TINY_ARCHITECTURES = {f"tiny-{name}": BiLMConfig.bilm_tf(char_dim=2, filters=((1, 2), (2, width - 2)), num_highway=1,
                                                          hidden_size=2 * width, projection_dim=width, num_layers=2)
                      for name, width in (("original", 8), ("medium", 6), ("small", 4))}
#: ``--tiny``'s sizes (the full run's are the flags' and :data:`SOFTMAX_CLASSES`)
TINY_SIZES = {"steps": 2, "warmup": 1, "batch": 2, "large_batch": 4, "large_embed_batch": 128, "sentences": 64,
              "softmax_classes": 50}
#: sentences per batch of the inference part's second rows: fewer launches and host reads per sentence
LARGE_EMBED_BATCH = 512
#: the training softmax's classes: AG News train's cased words, then unseen ids (``python -m lab bench --training``'s)
SOFTMAX_CLASSES = 100_000
#: the default run's flags under ``--tiny`` (the full run passes none)
TINY_FLAGS = {"ELMO.py": ["--max-docs", "300", "--epochs", "1", "--embedding-dim", "16", "--hidden-size", "16",
                          "--threads", "1", "--quiet"],
              "classification.py": ["--max-docs", "300", "--epochs", "1", "--encoder-hidden", "8", "--threads", "1",
                                    "--quiet"]}
#: what each script of the default run writes
RESULTS = {"ELMO.py": "lm.json", "classification.py": "classification.json"}


@dataclass
class GpuArgs:
    """Flags of ``python -m lab gpu``."""

    out: str = option("results/gpu", "folder gpu.json and the default run's results (default_run/) are written to")
    data_dir: str = option("data/ag_news", "folder holding train.csv and test.csv: the default run's data and the "
                           "training and inference text")
    tiny: bool = option(False, "every part at tiny sizes for a few steps on whatever device is present (a check of "
                        "the command, well under a minute on a CPU)")
    device: str = option("auto", "auto or cuda (cpu only with --tiny)")
    budget: int = option(500, "seconds all parts may take together; what does not fit is skipped and listed")
    steps: int = option(5, "timed training steps per architecture, LSTM and precision (the median is reported)")
    warmup: int = option(3, "untimed training steps before them")
    batch: int = option(128, "20-token windows per training step (bilm-tf's per-GPU batch)")
    large_batch: int = option(2048, "windows per step of the Original's rows again, where a GPU's launches are "
                              "amortised (0: none)")
    sentences: int = option(2048, "sentences embedded per inference row, after a warm-up batch")
    seed: int = option(0, "random seed")
    threads: int | None = option(None, "CPU threads (default: all cores)")
    parts: tuple[str, ...] = option(("training", "inference", "default_run", "compile"), "the parts run (in this "
                                    "order, whatever the order given): training inference default_run larger_steps "
                                    "compile (larger_steps only when named)",
                                    nargs="+")

    def check(self) -> None:
        for name in ("budget", "steps", "warmup", "batch", "sentences"):
            if getattr(self, name) < 1:
                raise ElmoError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.large_batch < 0:
            raise ElmoError(f"--large-batch must be >= 0, got {self.large_batch}")
        unknown = [p for p in self.parts if p not in SHARES]
        if unknown:
            raise ElmoError(f"--parts takes {', '.join(SHARES)}, got {' '.join(unknown)}")


def device_info(device: torch.device, threads: int) -> dict[str, Any]:
    """The device, the versions the speed depends on and whether fp32 products may use TF32."""
    info = {"type": device.type, "name": device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32},
            "threads": threads, "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {"memory_gib": props.total_memory / 2**30, "capability": f"{props.major}.{props.minor}"}
    return info


def matmul_peaks(device: torch.device, tiny: bool) -> dict[str, Any]:
    """GFLOP/s of a square ``torch.mm`` in fp32 and bf16 (:func:`~lab.bench.flops.matmul_gflops`; 256 wide under
    ``--tiny``)."""
    size = 256 if tiny else GPU_PEAK_SIZE
    return {"fp32": matmul_gflops(device, torch.float32, size), "bf16": matmul_gflops(device, torch.bfloat16, size),
            "size": size, "timed_with": "CUDA events" if device.type == "cuda" else "time.perf_counter"}


def reset_memory(device: torch.device) -> None:
    """Free what earlier rows left and start a new peak of CUDA memory."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def part_end(part: str, end: float, parts: tuple[str, ...]) -> float:
    """When ``part`` must stop (``time.perf_counter`` seconds): its :data:`SHARES` from now, and never into the
    shares of the ``parts`` run after it; ``end``: when the whole budget is spent."""
    later = [p for p in list(SHARES)[list(SHARES).index(part) + 1:] if p in parts]
    limit = end - sum(SHARES[p] or 0 for p in later)
    return limit if SHARES[part] is None else min(limit, time.perf_counter() + SHARES[part])


def training_part(cfg: GpuArgs, run: Run) -> None:
    """Part ``training``: the first architecture's LSTMs and precisions at ``--large-batch`` windows (``large``), then
    every architecture × LSTM × precision at ``--batch`` windows, each a row of :func:`~lab.bench.published_training.measure` in this process,
    until the part's time is up."""
    sizes, architectures = run.sizes, TINY_ARCHITECTURES if cfg.tiny else ARCHITECTURES
    training_setup(cfg, run)
    part = run.part("training", {"batch_windows": sizes["batch"], "window_tokens": WINDOW, "steps": sizes["steps"],
                                 "warmup": sizes["warmup"], "softmax": "adaptive",
                                 "softmax_classes": run.text["softmax_classes"], "rows": {}})
    if sizes["large_batch"]:
        part["large"] = {"batch_windows": sizes["large_batch"], "rows": {}}
    first = next(iter(architectures))
    for rows, batch, names in ((part.get("large", {}).get("rows"), sizes["large_batch"], [first]),
                               (part["rows"], sizes["batch"], list(architectures))):
        for name in names if rows is not None else ():
            for lstm in ("fused", "clipped"):
                for precision in ("bf16", "fp32"):
                    def row(name=name, lstm=lstm, precision=precision, batch=batch) -> dict[str, Any]:
                        reset_memory(run.device)
                        config = architectures[name]
                        fused = replace(config, cell_clip=None, proj_clip=None) if lstm == "fused" else config
                        out = measure(name, precision, run.text, run.bench, batch, run.peaks[precision],
                                      config=fused, extras=False)
                        out.pop("peak_rss_mb")  # this process's, all rows so far
                        return out
                    run.row(rows.setdefault(name, {}).setdefault(lstm, {}), precision,
                            f"training {name} {lstm} {precision} at {batch} windows", row,
                            precision_refusal(precision, run.device))


def training_setup(cfg: GpuArgs, run: Run) -> None:
    """The training text (:func:`~lab.bench.published_training.training_text`) and the settings of
    :func:`~lab.bench.published_training.measure`, made once."""
    if run.text is None:
        sizes = run.sizes
        run.text = training_text(cfg.data_dir, max(sizes["batch"], sizes["large_batch"]) * (sizes["warmup"] + sizes["steps"]),
                                 sizes["softmax_classes"])
        run.bench = BenchArgs(data_dir=cfg.data_dir, device=cfg.device, threads=cfg.threads, seed=cfg.seed,
                              training_steps=sizes["steps"], training_warmup=sizes["warmup"])


def inference_part(cfg: GpuArgs, run: Run) -> None:
    """Part ``inference``: :class:`~elmo.inference.embedder.ElmoEmbedder` on the published Original (random
    weights in the published files), bf16 and fp32, in batches of 64, then of :data:`LARGE_EMBED_BATCH` (``large``),
    until the part's time is up."""
    name, config = next(iter((TINY_ARCHITECTURES if cfg.tiny else ARCHITECTURES).items()))
    large = run.sizes.get("large_embed_batch", LARGE_EMBED_BATCH)
    sentences = sentences_of(cfg.data_dir, large + run.sizes["sentences"])
    warm, timed = sentences[:large], sentences[large:]
    tokens = sum(map(len, timed))
    part = run.part("inference", {"model": name, "batch": BATCH, "sentences": len(timed), "tokens": tokens,
                                  "flops": embedding_flops(config, timed), "rows": {},
                                  "large": {"batch": large, "rows": {}}})
    with tempfile.TemporaryDirectory(prefix="elmo-gpu-") as tmp:
        options, weights = Path(tmp) / "options.json", Path(tmp) / "weights.hdf5"
        save_published_bilm(random_weights(BiLM(config), cfg.seed), options, weights)
        for rows, batch in ((part["rows"], BATCH), (part["large"]["rows"], large)):
            for precision in ("bf16", "fp32"):
                def row(precision=precision, batch=batch) -> dict[str, Any]:
                    reset_memory(run.device)
                    embedder = ElmoEmbedder(options, weights, device=run.device, precision=precision)
                    list(embedder.embed_sentences(warm[:batch], batch))
                    synchronize(run.device)
                    start = time.perf_counter()
                    sum(1 for _ in embedder.embed_sentences(timed, batch))
                    synchronize(run.device)
                    seconds = time.perf_counter() - start
                    gflops = part["flops"] / seconds / 1e9
                    return {"seconds": seconds, "sentences_per_second": len(timed) / seconds,
                            "tokens_per_second": tokens / seconds, "gflops": gflops,
                            "lstm_dtype": summary_dtype(lstm_compute_dtypes(embedder.bilm)),
                            "peak_fraction": gflops / run.peaks[precision]} | run.cuda_memory()
                label = f"inference {name} {precision}" + ("" if batch == BATCH else f" in batches of {batch}")
                run.row(rows, precision, label, row, precision_refusal(precision, run.device))


def default_run_part(cfg: GpuArgs, run: Run) -> None:
    """Part ``default_run``: ``ELMO.py`` then ``classification.py`` (default flags; :data:`TINY_FLAGS` under
    ``--tiny``) in a scratch folder, each ended when the part's time is up."""
    data = Path(cfg.data_dir).resolve()
    keep = Path(cfg.out) / "default_run"  # made by the first file written there
    reset_memory(run.device)  # the GPU's memory to the scripts' processes
    part = run.part("default_run", {"data_dir": str(data), "scripts": {}})
    with tempfile.TemporaryDirectory(prefix="elmo-gpu-") as scratch:
        (Path(scratch) / "data").mkdir()
        (Path(scratch) / "data" / "ag_news").symlink_to(data, target_is_directory=True)
        for script, results in RESULTS.items():
            if script == "classification.py" and "seconds" not in part["scripts"].get("ELMO.py", {}):
                run.skipped.append(f"default run {script}: it needs the biLM ELMO.py did not finish")
                break
            flags = TINY_FLAGS[script] if cfg.tiny else []
            peak = Path(scratch) / f"{script}.peak.json"

            def row(script=script, results=results, flags=flags, peak=peak) -> dict[str, Any]:
                seconds, rss, written = run_kept(
                    ["-c", "from lab.bench.gpu import run_with_peak; run_with_peak()", str(peak), str(ROOT / script),
                     *flags], scratch, keep, f"{Path(script).stem}.log", Path(scratch) / "results" / results, results, run)
                return ({"command": " ".join(["python", script, *flags]), "seconds": seconds, "peak_rss_mb": rss,
                         "phase_seconds": phase_summary(written, seconds)}
                        | (json.loads(peak.read_text()) if peak.is_file() else {})
                        | (lm_summary(written) if results == "lm.json" else classification_summary(written)))
            run.row(part["scripts"], script, f"default run {script}", row)


def run_kept(args: list[str], scratch: str, keep: Path, log_name: str, result: Path, kept_name: str,
             run: Run) -> tuple[float, float, dict[str, Any]]:
    """``python args`` in ``scratch`` with the checkout importable, ended when the part's time is up: its stdout kept
    as ``keep``/``log_name`` (also when it failed) and the JSON it wrote (``result``) as ``keep``/``kept_name``;
    returns ``(wall seconds, peak RSS MiB, that JSON)``. Raises ElmoError: the run failed or ran out of time."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    log = Path(scratch) / log_name
    try:
        seconds, rss = run_script(args, cwd=scratch, env=env, timeout=max(1.0, run.until - time.perf_counter()),
                                  log=log)
    finally:  # its stdout, kept also when it failed
        atomic_write_bytes(keep / log.name, log.read_bytes() if log.is_file() else b"")
    atomic_write_bytes(keep / kept_name, result.read_bytes())
    return seconds, rss, json.loads((keep / kept_name).read_text())


def larger_steps_part(cfg: GpuArgs, run: Run) -> None:
    """Part ``larger_steps`` (only when named in ``--parts``): :data:`LARGER_STEPS`' runs of ``python -m elmo pretrain
    --architecture elmo-small --lstm fused`` for :data:`LARGER_STEPS_EPOCHS` epochs in a scratch folder (under
    ``--tiny`` a tiny model on 150 documents for one epoch, a 42nd of the tokens per step): each run's time, tokens/s and held-out
    perplexities (its ``lm.json`` kept in ``--out``/larger_steps/), and ``test_change``, its mean test perplexity
    over the directions against ``base``'s (+0.01 = 1 % higher), the goal being within 1 %."""
    data = Path(cfg.data_dir).resolve()
    keep = Path(cfg.out) / "larger_steps"
    epochs = 1 if cfg.tiny else LARGER_STEPS_EPOCHS
    default_lr = {f.name: f.default for f in fields(PretrainArgs)}["lr"]
    part = run.part("larger_steps", {"data_dir": str(data), "epochs": epochs, "runs": {}})
    with tempfile.TemporaryDirectory(prefix="elmo-gpu-") as scratch:
        for name, (tokens, lr, warmup) in LARGER_STEPS.items():
            tokens = max(16, tokens // 42) if cfg.tiny else tokens
            flags = ["--architecture", "elmo-small", "--lstm", "fused", "--epochs", str(epochs),
                     "--max-tokens", str(tokens), "--batch-size", str(tokens), "--lr", f"{default_lr * lr:g}",
                     "--warmup-steps", str(warmup), "--data-dir", str(data), "--quiet",
                     *(["--max-docs", "150", "--hidden-size", "16", "--proj-size", "8", "--char-filters", "1:4",
                        "2:8", "--threads", "1"] if cfg.tiny else [])]

            def row(name=name, flags=flags, tokens=tokens) -> dict[str, Any]:
                folder = Path(scratch) / name
                paths = ["--models-dir", str(folder / "models"), "--results-dir", str(folder / "results"),
                         "--images-dir", str(folder / "images")]
                seconds, _, written = run_kept(["-m", "elmo", "pretrain", *flags, *paths], scratch, keep, f"{name}.log",
                                               folder / "results" / "lm.json", f"{name}.json", run)
                summary = lm_summary(written)
                test = summary["perplexity"]["test"]
                out = {"command": " ".join(["python -m elmo pretrain", *flags]), "tokens_per_step": tokens,
                       "seconds": seconds, **summary, "test_mean": (test["forward"] + test["backward"]) / 2}
                base = part["runs"].get("base", {}).get("test_mean")
                return out | ({"test_change": out["test_mean"] / base - 1} if base else {})
            run.row(part["runs"], name, f"larger steps {name}", row)


def phase_summary(result: dict[str, Any], seconds: float) -> dict[str, float]:
    """Where a script's wall time went: the ``phase_seconds`` its JSON records (data, Word2Vec, training, the layer
    cache, evaluation, plots, saving) and ``start_and_exit``, the rest (the interpreter, imports, the start-up, the
    exit)."""
    phases = dict(result.get("phase_seconds") or {})
    return phases | {"start_and_exit": seconds - sum(phases.values())}


def lm_summary(lm: dict[str, Any]) -> dict[str, Any]:
    """What ``lm.json`` says of the run: the perplexities per split and direction, precision, training time."""
    return {"perplexity": {split: {d: lm[split][f"{d}_perplexity"] for d in ("forward", "backward")}
                           for split in ("val", "test")},
            "precision": lm.get("precision"), "lstm_dtype": lm.get("lstm_dtype"), "train_seconds": lm.get("train_seconds"),
            "tokens_per_second": lm.get("tokens_per_second")}


def classification_summary(result: dict[str, Any]) -> dict[str, Any]:
    """What ``classification.json`` says of the run: per layer mix the test accuracy and F1, the validation F1 and
    the epochs trained; the best mix, precision and the layer cache's time."""
    mixes = {mix: {"test_accuracy": r["test"]["accuracy"], "test_f1": r["test"]["f1"], "val_f1": r["val"]["f1"],
                   "best_epoch": r["best_epoch"], "epochs": len(r["history"]), "train_seconds": r.get("train_seconds")}
             for mix, r in result.items() if isinstance(r, dict) and "test" in r}
    return {"mixes": mixes, "best_mix": result.get("best_mix"), "precision": result.get("precision"),
            "lstm_dtype": result.get("lstm_dtype"),
            "layer_cache_seconds": result.get("layer_cache_seconds")}


def compile_part(cfg: GpuArgs, run: Run) -> None:
    """Part ``compile``: the first training row again through ``torch.compile``, in a process of its own ended when
    the budget is spent (compiling takes minutes on a CPU: skipped under ``--tiny``)."""
    if cfg.tiny:
        run.skipped.append("compile: not under --tiny (torch.compile's first compilation takes minutes on a CPU)")
        return
    name, config = next(iter(ARCHITECTURES.items()))
    fused = replace(config, cell_clip=None, proj_clip=None)
    training_setup(cfg, run)
    off = run.results["parts"].get("training", {}).get("rows", {}).get(name, {}).get("fused", {}).get("bf16")
    part = run.part("compile", {"model": name, "lstm": "fused", "precision": "bf16", "off": off})

    def row() -> dict[str, Any]:
        reset_memory(run.device)
        left = run.until - time.perf_counter()
        try:
            out = in_child(compiled_row, name, "bf16", run.text, run.bench, run.sizes["batch"], run.peaks["bf16"],
                           fused, timeout=left)
        except multiprocessing.TimeoutError:
            raise ElmoError(f"not finished in the {left:.0f} s left (compiling included)") from None
        if off and "seconds_per_step" in off:
            out["speedup"] = off["seconds_per_step"] / out["seconds_per_step"]
        return out
    run.row(part, "on", f"compile {name} fused bf16", row)


def compiled_row(name: str, precision: str, text: dict[str, Any], bench: BenchArgs, batch: int, peak: float,
                 config: BiLMConfig) -> dict[str, Any]:
    """:func:`~lab.bench.published_training.measure` with ``compile`` on (a child process's target)."""
    return measure(name, precision, text, bench, batch, peak, config=config, compile=True, extras=False)


PARTS: dict[str, Callable[[GpuArgs, "Run"], None]] = {"training": training_part, "inference": inference_part,
                                                       "default_run": default_run_part,
                                                       "larger_steps": larger_steps_part, "compile": compile_part}


@dataclass
class Run:
    """What the parts share: the device, the sizes, the peaks, the record, and when the current part must stop."""

    path: Path
    device: torch.device
    sizes: dict[str, int]
    results: dict[str, Any]
    started: float
    end: float
    until: float = 0.0
    peaks: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    bench: BenchArgs | None = None

    @property
    def skipped(self) -> list[str]:
        return self.results["skipped"]

    def save(self) -> None:
        """Write the record so far (atomically)."""
        self.results["seconds"] = time.perf_counter() - self.started
        write_json(self.path, self.results)

    def part(self, name: str, record: dict[str, Any]) -> dict[str, Any]:
        """Start part ``name``'s record."""
        self.results["parts"][name] = record
        self.save()
        return record

    def row(self, into: dict[str, Any], key: str, label: str, measure_row: Callable[[], dict[str, Any]],
            refusal: str | None = None) -> bool:
        """``into[key] = measure_row()`` when the part still has time (else listed as skipped), its failure recorded
        as ``{"error": ...}`` and listed; saves the record. A row the library would refuse on this device
        (``refusal``: :func:`~lab.bench.flops.precision_refusal`) is left out: listed as ``LABEL: left out
        (REASON)``, nothing recorded under ``key``. Returns whether the row was measured."""
        if refusal is not None:
            self.skipped.append(f"{label}: left out ({refusal})")
            return False
        if time.perf_counter() >= self.until:
            self.skipped.append(f"{label}: the part's time was up")
            return False
        print(f"[gpu] {label} ...", file=sys.stderr, flush=True)
        try:
            started = time.perf_counter()
            into[key] = measure_row() | {"wall_seconds": time.perf_counter() - started}
            return True
        except Exception as exc:  # one failed row must not lose the others: recorded, and the run goes on
            into[key] = {"error": error_text(exc)}
            self.skipped.append(f"{label}: failed ({error_text(exc).splitlines()[-1]})")
            return False
        finally:
            self.save()

    def cuda_memory(self) -> dict[str, float]:
        """The peak CUDA memory since :func:`reset_memory` (MiB), on CUDA."""
        if self.device.type != "cuda":
            return {}
        return {"cuda_max_memory_mb": torch.cuda.max_memory_allocated(self.device) / 2**20}


def error_text(exc: BaseException) -> str:
    """An exception as the end of its traceback (what a one-shot run on a GPU needs to be fixed)."""
    text = "".join(traceback.format_exception(exc)).strip()
    return text[-1500:] if text else type(exc).__name__


def measure_gpu(cfg: GpuArgs) -> dict[str, Any]:
    """Run the parts (the module docstring) within ``cfg.budget`` seconds, writing ``cfg.out``/gpu.json after each
    row and part; print the summary; returns the record.

    Raises:
        ElmoError: no CUDA device without ``--tiny``, or no train.csv and test.csv in ``--data-dir``.
    """
    started = time.perf_counter()
    if not all((Path(cfg.data_dir) / name).is_file() for name in ("train.csv", "test.csv")):
        raise ElmoError(f"--data-dir {cfg.data_dir} has no train.csv and test.csv (python -m elmo fetch downloads them)")
    threads = configure_threads(cfg.threads)
    device = resolve_device(cfg.device)
    resolve_precision("fp32", device)  # TF32 off on CUDA, as in every run of the library: the record says so
    if device.type != "cuda" and not cfg.tiny:
        raise ElmoError(f"python -m lab gpu measures a GPU and found none (--device {cfg.device}); --tiny runs it "
                        "at tiny sizes on any device")
    sizes = TINY_SIZES if cfg.tiny else {"steps": cfg.steps, "warmup": cfg.warmup, "batch": cfg.batch,
                                         "large_batch": cfg.large_batch, "sentences": cfg.sentences,
                                         "softmax_classes": SOFTMAX_CLASSES}
    results: dict[str, Any] = {
        "command": command_line("gpu", cfg).replace("python -m elmo", "python -m lab", 1), "tiny": cfg.tiny,
        "device": device_info(device, threads), "meta": environment_info(cfg.seed), "budget_seconds": cfg.budget,
        "sizes": sizes, "order": [p for p in PARTS if p in cfg.parts], "parts": {}, "skipped": [], "finished": False}
    run = Run(Path(cfg.out) / "gpu.json", device, sizes, results, started, started + cfg.budget)
    print(f"[gpu] {results['device']['name']}: matrix-product peaks ...", file=sys.stderr, flush=True)
    run.peaks = results["matmul_peak_gflops"] = matmul_peaks(device, cfg.tiny)
    run.save()
    for name, part in PARTS.items():
        if name not in cfg.parts:
            continue
        run.until = part_end(name, run.end, cfg.parts)
        try:
            part(cfg, run)
        except Exception as exc:  # as in Run.row: the other parts still run
            run.results["parts"].setdefault(name, {})["error"] = error_text(exc)
            run.skipped.append(f"{name}: failed ({error_text(exc).splitlines()[-1]})")
        run.save()
    results["finished"] = True
    run.save()
    print(format_gpu(results))
    return results


def format_gpu(r: dict[str, Any]) -> str:
    """The record as a few lines of text."""
    d, peaks = r["device"], r["matmul_peak_gflops"]
    lines = [f"{d['name']} ({d['type']}), torch {d['torch']}, CUDA {d['cuda']}, cuDNN {d['cudnn']}; matmul peak "
             f"fp32 {peaks['fp32']:,.0f}, bf16 {peaks['bf16']:,.0f} GFLOP/s; {r['seconds']:.0f} s"]
    training = r["parts"].get("training", {})
    for part in (training, training.get("large", {})):
        for name, lstms in part.get("rows", {}).items():
            for lstm, precisions in lstms.items():
                for precision, row in precisions.items():
                    if "tokens_per_second" in row:
                        busy = (row.get("gpu_busy") or {}).get("share")
                        lines.append(f"train {name:<16}{lstm:<8}{precision:<5}{part['batch_windows']:>5} windows"
                                     f"{row['tokens_per_second']['per_direction']:>10,.0f} tok/s per direction "
                                     f"{row['peak_fraction']:>6.1%} of peak"
                                     + (f", GPU busy {busy:.0%}" if busy is not None else "")
                                     + (f", {row['cuda_max_memory_mb']:,.0f} MiB" if "cuda_max_memory_mb" in row else ""))
    inference = r["parts"].get("inference", {})
    for part in (inference, inference.get("large", {})):
        for precision, row in part.get("rows", {}).items():
            if "sentences_per_second" in row:
                lines.append(f"embed {inference['model']} {precision} in batches of {part['batch']}: "
                             f"{row['sentences_per_second']:,.1f} sentences/s")
    for script, row in r["parts"].get("default_run", {}).get("scripts", {}).items():
        if "seconds" in row:
            lines.append(f"{script}: {row['seconds']:.0f} s")
    for name, row in r["parts"].get("larger_steps", {}).get("runs", {}).items():
        if "seconds" in row:
            change = f", {row['test_change']:+.1%} against base" if "test_change" in row else ""
            lines.append(f"larger steps {name} ({row['tokens_per_step']:,} tokens a step): test perplexity "
                         f"{row['test_mean']:.2f}{change}, {row['seconds']:.0f} s")
    lines += [f"skipped: {s}" for s in r["skipped"]]
    return "\n".join(lines)


def run_with_peak() -> None:
    """``python -c 'from lab.bench.gpu import run_with_peak; run_with_peak()' PEAK_FILE SCRIPT [FLAGS]``: run SCRIPT
    in this process as ``python SCRIPT FLAGS`` would, and at exit write its peak CUDA memory (MiB, allocated and
    reserved) to PEAK_FILE when it used CUDA."""
    peak, script = sys.argv[1], sys.argv[2]
    sys.argv = sys.argv[2:]

    def write() -> None:
        if torch.cuda.is_initialized():
            write_json(peak, {"cuda_max_memory_mb": torch.cuda.max_memory_allocated() / 2**20,
                              "cuda_max_reserved_mb": torch.cuda.max_memory_reserved() / 2**20})
    atexit.register(write)
    sys.path.insert(0, str(Path(script).parent))
    runpy.run_path(script, run_name="__main__")
