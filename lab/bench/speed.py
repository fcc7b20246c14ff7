"""Speed and memory benchmark (``python -m lab bench``): prints a table and writes ``results/bench.json``.

Everything is measured on the device present (``--device``), at the pipeline's default sizes, on
real AG News batches, through the same code the scripts run (:func:`elmo.training.trainer.fit` for training):

* **biLM training** tokens/s per direction (predicted words, as ``lm.json``): ours as shipped
  (length-bucketed batches under a token budget, adaptive softmax, mixed precision where the
  hardware has it, fused Adam) against a **naive reference** measured in the same run, the way course
  implementations train (:class:`NaiveLM`: one ``nn.LSTM``, full softmax over the vocabulary at every
  position, every batch padded to the longest sentence of the corpus, fp32), and the ratio.
* **Achieved GFLOP/s** of the LM training step (LSTM and softmax matrix products counted, forward +
  backward = 3 × forward) against a **measured matmul peak** of the same precision on the same device
  (:mod:`lab.bench.flops`).
* **The two directions side by side**, as ``ELMO.py`` trains them on the CPU with two or more threads: each
  direction's tokens/s in a process of its own with half of the threads, their summed GFLOP/s and its share of
  the peak, and the speed-up over one direction after the other (:func:`section_lm_side_by_side`).
* **ElmoEmbedder** sentences/s and tokens/s, batches of 64 and one sentence at a time.
* **Classifier training** documents/s per layer mix, with the biLM layer cache
  (:mod:`elmo.inference.layer_cache`, the default) and without it; the task encoder's achieved GFLOP/s (its BiLSTM's
  products) and their share of the peak; the cache's fill rate and size per token.
* **Peak resident memory** of each section (each runs in a fresh process) and of ``ELMO.py`` /
  ``classification.py`` runs at two corpus sizes, extrapolated linearly to the full train file.
* **The published ELMo** (``--published``, instead of the above): embedding speed of the Small and
  Original architectures in fp32 and bf16 (:mod:`lab.bench.published`).
* **Training the published ELMo** (``--training``, instead of the above): tokens/s, FLOPs per token, share of
  the matmul peak and the projected 1B Word Benchmark time of the Small, Medium and Original architectures
  (:mod:`lab.bench.published_training`).
* **Projected wall time** of the whole pipeline (both scripts, all three layer mixes, default epochs)
  for the official 120,000-row train file, from the measured rates, component by component.

Every figure is the median of ``--repeats`` measurements after a warm-up. This is a benchmark that
prints numbers, not a timed test.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from elmo.artifacts import environment_info, refuse_overwriting_inputs, write_json
from elmo.data.agnews import load_agnews
from elmo.data.corpus import Corpus, EncodedCorpus, encode_corpus
from elmo.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from elmo.errors import ElmoError
from elmo.inference.class_probabilities import class_probabilities
from elmo.inference.embedder import ElmoEmbedder
from elmo.inference.layer_cache import compute_layers
from elmo.model.adaptive_softmax import IGNORE_INDEX
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import ElmoClassifier
from elmo.model.language_model import LanguageModel, length_mask
from elmo.model.mix import LAYER_MIXES
from elmo.model.serialization import load_bilm
from elmo.model.static import word2vec_vectors
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.common import DEFAULT_BATCH_SIZE, option
from elmo.pipelines.pretraining import PretrainArgs, load_data
from elmo.pipelines.task import classifier_loss
from elmo.runtime.device import (
    cap_kernel_caches,
    configure_threads,
    cpu_has_bf16,
    precision_name,
    resolve_device,
    resolve_precision,
    set_seed,
    steady_heap,
)
from elmo.training.evaluation import evaluate_words, perplexity
from elmo.training.processes import ChildRun, run_side_by_side
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

from .children import in_child, peak_rss_mb, run_script
from .flops import bilm_lstm_flops, bilm_softmax_flops, matmul_gflops, task_encoder_flops
from .published import bench_published
from .published_training import bench_training


@dataclass
class BenchArgs:
    """Flags of ``python -m lab bench``."""

    data_dir: str = option("data/ag_news", "folder holding train.csv and test.csv")
    models_dir: str = option("models", "bilstm.pt to embed / classify with (a randomly initialised biLM of the "
                             "default sizes when absent: speed does not depend on the weights)")
    out: str | None = option(None, "where the JSON is written (default: results/bench.json; results/bench_published.json "
                             "with --published, results/bench_training.json with --training)")
    device: str = option("auto", "auto, cpu or cuda")
    precision: str = option("auto", "mixed precision of 'ours' (the naive reference is always fp32)")
    threads: int | None = option(None, "CPU threads (default: all cores)")
    seed: int = option(0, "random seed")
    repeats: int = option(3, "measurements per figure; the median is reported")
    lm_batches: int = option(40, "LM training batches per measurement")
    naive_batches: int = option(3, "naive-reference batches per measurement")
    classifier_batches: int = option(30, "classifier training batches per measurement")
    embed_sentences: int = option(2000, "sentences per batched-embedding measurement")
    single_sentences: int = option(200, "sentences per one-at-a-time measurement")
    memory_docs: tuple[int, ...] = option((12000, 36000), "training rows of the ELMO.py / classification.py runs "
                                          "whose peak memory is extrapolated; both large enough that oneDNN's "
                                          "shape caches are full (--memory-docs with no value: skip those runs)",
                                          nargs="*")
    target_rows: int = option(120000, "train rows of the file the pipeline time and memory are projected for")
    published: bool = option(False, "instead of the sections above, measure embedding with the published ELMo "
                             "architectures (Small and Original, random weights in the published layout; fp32 and bf16) "
                             "and write --out (lab/bench/published.py)")
    published_sentences: int = option(256, "AG News sentences per measurement of --published (after a warm-up batch)")
    training: bool = option(False, "instead of the sections above, measure training of the published ELMo architectures "
                            "(Small, Medium, Original: forward, backward and optimiser step of `pretrain --architecture`, "
                            "adaptive softmax; fp32 and native bf16) and write --out "
                            "(lab/bench/published_training.py)")
    training_steps: int = option(3, "timed training steps per architecture and precision of --training (median reported)")
    training_warmup: int = option(2, "untimed warm-up steps before them")
    training_batch: int | None = option(None, "--training: 20-token windows per step (default: 32 on a CPU, 128 on CUDA, "
                                        "bilm-tf's per-GPU batch)")
    training_vocab: int = option(100_000, "--training: softmax classes (AG News train's cased words, then unseen ids)")

    @property
    def out_path(self) -> str:
        """``--out``, or its default for the mode (``--published``, ``--training`` or the sections)."""
        if self.out is not None:
            return self.out
        return ("results/bench_published.json" if self.published else "results/bench_training.json" if self.training
                else "results/bench.json")

    def check(self) -> None:
        for name in ("repeats", "lm_batches", "naive_batches", "classifier_batches", "embed_sentences",
                     "single_sentences", "target_rows", "published_sentences", "training_steps", "training_warmup"):
            if getattr(self, name) < 1:
                raise ElmoError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.memory_docs and (len(self.memory_docs) != 2 or min(self.memory_docs) < 100
                                 or self.memory_docs[0] >= self.memory_docs[1]):
            raise ElmoError(f"--memory-docs needs two increasing sizes >= 100, got {self.memory_docs}")
        if self.published and self.training:
            raise ElmoError("--published and --training are two separate runs: pass one of them")
        if self.training_batch is not None and self.training_batch < 1:
            raise ElmoError(f"--training-batch must be >= 1, got {self.training_batch}")
        if self.training_vocab < 5:
            raise ElmoError(f"--training-vocab must be >= 5, got {self.training_vocab}")


# ------------------------------------------------------------------------------------------
# The naive reference
# ------------------------------------------------------------------------------------------


class NaiveLM(nn.Module):
    """How course implementations train an LM, kept only as the benchmark's baseline.

    One multi-layer ``nn.LSTM``, ``nn.Dropout``, and a full softmax: a ``Linear(H, V)`` and
    cross-entropy over the whole vocabulary at every position, padding included (masked from the
    loss). Same sizes as :class:`~elmo.model.language_model.LanguageModel` (forward direction).

    Args:
        config: :class:`~elmo.model.bilm_config.BiLMConfig` (word token encoder, no projection).
    """

    def __init__(self, config: BiLMConfig):
        super().__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=PAD_ID)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_size, config.num_layers, batch_first=True,
                            dropout=config.dropout)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, int]:
        """``(mean NLL per predicted word, number of predicted words)`` for ``ids (B, T)``, ``lengths (B,)``."""
        batch = ids.shape[0]
        inputs = torch.cat([ids.new_full((batch, 1), BOS_ID), ids], dim=1)
        targets = torch.cat([ids, ids.new_full((batch, 1), PAD_ID)], dim=1)
        targets.scatter_(1, lengths.unsqueeze(1), EOS_ID)
        targets = targets.masked_fill(~length_mask(lengths + 1, targets.shape[1]), IGNORE_INDEX)
        h, _ = self.lstm(self.dropout(self.embedding(inputs)))
        logits = self.out(self.dropout(h))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX)
        return loss, int((targets != IGNORE_INDEX).sum())


# ------------------------------------------------------------------------------------------
# Sections (each runs in its own process so that its peak RSS is its own)
# ------------------------------------------------------------------------------------------


def _setup(cfg: BenchArgs) -> tuple[torch.device, torch.dtype | None]:
    set_seed(cfg.seed)
    configure_threads(cfg.threads)
    device = resolve_device(cfg.device)
    return device, resolve_precision(cfg.precision, device)


def _train_rate(model: nn.Module, batches: list[np.ndarray], corpus: EncodedCorpus, loss_fn: Callable,
                device: torch.device, amp_dtype: torch.dtype | None, lr: float,
                transform: Callable[[dict], dict] = lambda b: b) -> tuple[float, float]:
    """``(units/s, seconds)`` of one pass of :func:`elmo.training.trainer.fit` over ``batches`` (collated inside
    the timed loop, as in training)."""
    objective = Objective(batches=lambda epoch: (transform(corpus.collate(i)) for i in batches), loss_fn=loss_fn,
                          validate=lambda: {"none": 0.0}, monitor="none", maximize=False)
    fitted = fit(model, objective, TrainConfig(epochs=1, lr=lr), device, amp_dtype, progress=Progress(quiet=True))
    row = fitted.history[0]
    return row["units_per_second"], row["seconds"]


def _median_runs(cfg: BenchArgs, batches: list[np.ndarray], per_run: int, measure: Callable) -> list[Any]:
    """Warm up on one slice of ``batches``, then call ``measure(slice)`` on ``cfg.repeats`` further slices."""
    need = per_run * (cfg.repeats + 1)
    if len(batches) < need:
        raise ElmoError(f"the benchmark needs {need} batches, the corpus gives {len(batches)}: lower the batch counts")
    measure(batches[:per_run])
    return [measure(batches[per_run * (r + 1): per_run * (r + 2)]) for r in range(cfg.repeats)]


def section_machine(cfg: BenchArgs) -> dict[str, Any]:
    """Device, threads, precision and measured matmul peaks: fp32 always, bf16 where the device has it natively (on a
    CPU without AVX512-BF16/AMX oneDNN emulates it, hundreds of times slower, and no run uses it), fp16 on CUDA."""
    device, amp_dtype = _setup(cfg)
    native_bf16 = device.type == "cuda" or cpu_has_bf16()
    dtypes = ({"fp32": torch.float32} | ({"bf16": torch.bfloat16} if native_bf16 else {})
              | ({"fp16": torch.float16} if device.type == "cuda" else {}))
    out = {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
           else platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
           "cpu_count": os.cpu_count(), "precision": precision_name(amp_dtype), "torch": torch.__version__,
           "matmul_peak_gflops": {name: matmul_gflops(device, dt) for name, dt in dtypes.items()}}
    out["peak_rss_mb"] = peak_rss_mb()
    return out


@dataclass
class _LMStart:
    """What an LM measurement starts from: the device and precision, ``ELMO.py``'s settings for the full corpus, its
    vocabulary and encoded splits, the seconds reading them took, and the training batches (as ``ELMO.py`` makes
    them)."""

    device: torch.device
    amp_dtype: torch.dtype | None
    pre: PretrainArgs
    vocab: Vocabulary
    data: dict[str, EncodedCorpus]
    load_seconds: float
    batches: list[np.ndarray]


def _lm_start(cfg: BenchArgs) -> _LMStart:
    """Set up a process as ``ELMO.py``'s training processes are (oneDNN cache caps, the steady heap, threads, seed)
    and read the data."""
    cap_kernel_caches(32)
    steady_heap()
    device, amp_dtype = _setup(cfg)
    started = time.perf_counter()
    pre = PretrainArgs(data_dir=cfg.data_dir, seed=cfg.seed, batch_size=DEFAULT_BATCH_SIZE)  # the full corpus's
    loaded = load_data(pre)
    load_seconds = time.perf_counter() - started
    batches = loaded.data["train"].batches(pre.batch_size, pre.max_tokens, shuffle=True, seed=cfg.seed)
    return _LMStart(device, amp_dtype, pre, loaded.vocab, loaded.data, load_seconds, batches)


def _lm_training_runs(cfg: BenchArgs, start: _LMStart, direction: str) -> tuple[LanguageModel, list[tuple[float, float]]]:
    """Our LM of ``direction`` and its ``(tokens/s, achieved GFLOP/s)`` on ``cfg.repeats`` slices of
    ``cfg.lm_batches`` training batches after a warm-up slice (:func:`_median_runs`)."""
    pre, corpus, device, amp_dtype = start.pre, start.data["train"], start.device, start.amp_dtype
    bilm_config = pre.bilm_config(len(start.vocab))

    def flops_ours(index: Sequence[np.ndarray]) -> float:
        total = 0.0
        for i in index:
            lengths = corpus.lengths[i]
            targets = np.concatenate([np.concatenate([corpus.ids[corpus.offsets[j]:corpus.offsets[j] + corpus.lengths[j]]
                                                      for j in i]), np.full(len(i), EOS_ID)])
            total += bilm_lstm_flops(bilm_config, len(i) * (int(lengths.max()) + 1)) + bilm_softmax_flops(bilm_config, targets)
        return total

    lm = LanguageModel(bilm_config, direction).to(device)

    def ours(index):
        rate, seconds = _train_rate(lm, index, corpus, lambda m, b: m(b["ids"], b["lengths"]), device, amp_dtype, pre.lr)
        return rate, flops_ours(index) / seconds / 1e9

    return lm, _median_runs(cfg, start.batches, cfg.lm_batches, ours)


def section_lm(cfg: BenchArgs) -> dict[str, Any]:
    """biLM training throughput, ours vs the naive reference, achieved GFLOP/s; evaluation rates."""
    setup = _lm_start(cfg)
    device, pre, vocab, data, batches = setup.device, setup.pre, setup.vocab, setup.data, setup.batches
    corpus, bilm_config = data["train"], pre.bilm_config(len(vocab))
    lm, runs = _lm_training_runs(cfg, setup, "forward")
    ours_rss = peak_rss_mb()  # before the naive reference, whose (B, T, V) logits need far more
    longest = int(corpus.lengths.max())
    naive = NaiveLM(bilm_config).to(device)
    naive_batches = corpus.batches(pre.batch_size, shuffle=True, seed=cfg.seed)  # document count only: no budget

    def pad_to_longest(batch: dict) -> dict:
        return {**batch, "ids": F.pad(batch["ids"], (0, longest - batch["ids"].shape[1]))}

    def reference(index):
        rate, seconds = _train_rate(naive, index, corpus, lambda m, b: m(b["ids"], b["lengths"]), device, None, pre.lr,
                                    transform=pad_to_longest)
        positions = sum(len(i) for i in index) * (longest + 1)
        flops = bilm_lstm_flops(bilm_config, positions) + 3.0 * 2 * bilm_config.hidden_size * bilm_config.vocab_size * positions
        return rate, flops / seconds / 1e9

    naive_runs = _median_runs(cfg, naive_batches, cfg.naive_batches, reference)
    ours_rate, naive_rate = statistics.median(r for r, _ in runs), statistics.median(r for r, _ in naive_runs)

    val = data["val"]
    eval_rates = _eval_rates(cfg, lm, val, device)
    return {
        "vocab_size": len(vocab), "train_documents": len(corpus), "train_tokens": corpus.num_tokens,
        "val_documents": len(val), "test_documents": len(data["test"]),
        "longest_document": longest, "batch_size": pre.batch_size, "max_tokens": pre.max_tokens,
        "padding_share": {"ours": 1 - corpus.num_tokens / sum(len(i) * int(corpus.lengths[i].max()) for i in batches),
                          "naive": 1 - corpus.num_tokens / (len(corpus) * longest)},
        "tokens_per_second": {"ours": ours_rate, "naive": naive_rate, "ratio": ours_rate / naive_rate,
                              "ours_runs": [r for r, _ in runs], "naive_runs": [r for r, _ in naive_runs]},
        "gflops": {"ours": statistics.median(g for _, g in runs), "naive": statistics.median(g for _, g in naive_runs)},
        "eval_words_per_second": eval_rates,
        "load_seconds_per_row": setup.load_seconds / (len(corpus) + len(val) + len(data["test"])),
        "precision": precision_name(setup.amp_dtype), "peak_rss_mb": ours_rss, "peak_rss_mb_with_naive": peak_rss_mb(),
    }


def _eval_rates(cfg: BenchArgs, lm: LanguageModel, val: EncodedCorpus, device: torch.device) -> dict[str, float]:
    """Words/s of ``lm``'s two evaluations of ``val``, median of ``cfg.repeats``: ``perplexity`` (the per-epoch
    validation, adaptive softmax) and ``full_softmax`` (the exact final evaluation, top-k accuracy). A word is a
    predicted token, the end marker included."""
    lm.eval()
    ppl_rates, eval_rates = [], []
    words = val.num_tokens + len(val)
    for _ in range(cfg.repeats):
        start = time.perf_counter()
        perplexity(lm, val, device)
        ppl_rates.append(words / (time.perf_counter() - start))
        start = time.perf_counter()
        evaluate_words(lm, val, device)
        eval_rates.append(words / (time.perf_counter() - start))
    return {"perplexity": statistics.median(ppl_rates), "full_softmax": statistics.median(eval_rates)}


def lm_direction_rates(job: tuple[BenchArgs, str]) -> dict[str, Any]:
    """One direction's LM training rates in a process of its own (:func:`section_lm_side_by_side`'s children):
    ``job`` is ``(cfg, direction)``; returns the median tokens/s and achieved GFLOP/s, every run's tokens/s, the
    evaluation rates (:func:`_eval_rates`, after the training runs, while the other direction's process may still
    train or evaluate), the precision and the process's peak RSS (MiB)."""
    cfg, direction = job
    start = _lm_start(cfg)
    lm, runs = _lm_training_runs(cfg, start, direction)
    return {"tokens_per_second": statistics.median(r for r, _ in runs), "runs": [r for r, _ in runs],
            "gflops": statistics.median(g for _, g in runs),
            "eval_words_per_second": _eval_rates(cfg, lm, start.data["val"], start.device),
            "precision": precision_name(start.amp_dtype), "peak_rss_mb": peak_rss_mb()}


def section_lm_side_by_side(cfg: BenchArgs) -> dict[str, Any] | None:
    """biLM training as ``ELMO.py`` runs it on the CPU with two or more threads (``--concurrent-directions auto``):
    the forward and the backward LM at once, each in a process of its own with half of ``cfg.threads``
    (:func:`~elmo.training.processes.run_side_by_side`), each measured as :func:`section_lm` measures one
    direction. Both processes train through the same number of batches from the same start, so their timed
    slices overlap; each direction's rate is its own, the achieved GFLOP/s are the two directions' sum.

    Returns:
        ``None`` where ``ELMO.py`` trains the directions one after the other (fewer than 2 threads, or not the
        CPU); else ``threads_per_direction``, ``tokens_per_second`` (``forward``, ``backward``, and ``slowest``,
        the one that sets the wall time), ``runs`` per direction, ``gflops`` (the sum), ``eval_words_per_second``
        (``forward``, ``backward``, each with ``perplexity`` and ``full_softmax`` words/s as in
        :func:`section_lm`, and ``slowest``, the lower of the two per evaluation), ``precision`` and
        ``peak_rss_mb`` per direction's process.
    """
    if cfg.threads is None or cfg.threads < 2 or resolve_device(cfg.device).type != "cpu":
        return None
    each = cfg.threads // 2
    with tempfile.TemporaryDirectory(prefix="elmo-bench-") as folder:
        runs = [ChildRun(f"{direction} LM benchmark", lm_direction_rates, (replace(cfg, threads=each), direction), each,
                         Path(folder) / f"{direction}.log", Path(folder) / f"{direction}.result.pt")
                for direction in ("forward", "backward")]
        done = dict(zip(("forward", "backward"), (finished.value for finished in run_side_by_side(runs))))
    rates = {direction: out["tokens_per_second"] for direction, out in done.items()}
    evals = {direction: out["eval_words_per_second"] for direction, out in done.items()}
    slowest_eval = {kind: min(e[kind] for e in evals.values()) for kind in ("perplexity", "full_softmax")}
    return {"threads_per_direction": each, "tokens_per_second": {**rates, "slowest": min(rates.values())},
            "runs": {direction: out["runs"] for direction, out in done.items()},
            "gflops": sum(out["gflops"] for out in done.values()),
            "eval_words_per_second": {**evals, "slowest": slowest_eval}, "precision": done["forward"]["precision"],
            "peak_rss_mb": {direction: out["peak_rss_mb"] for direction, out in done.items()}}


def _bilm(cfg: BenchArgs, train: Corpus) -> tuple[BiLM, Vocabulary, str]:
    path = Path(cfg.models_dir) / "bilstm.pt"
    if path.is_file():
        bilm, vocab, _ = load_bilm(path)
        return bilm, vocab, str(path)
    pre = PretrainArgs()
    vocab = Vocabulary.build(train.tokens, pre.min_freq, pre.max_vocab)
    return BiLM(pre.bilm_config(len(vocab))).eval(), vocab, "random initialisation, default sizes"


def section_embedding(cfg: BenchArgs) -> dict[str, Any]:
    """ElmoEmbedder sentences/s and tokens/s, batched (64) and one sentence at a time."""
    device, _ = _setup(cfg)
    train, _, test = load_agnews(cfg.data_dir, 0.05, cfg.seed)
    bilm, vocab, source = _bilm(cfg, train)
    embedder = ElmoEmbedder(bilm=bilm, vocab=vocab, device=device, precision=cfg.precision)
    sentences = [s for s in test.tokens if s][: cfg.embed_sentences]
    single = sentences[: cfg.single_sentences]

    def rate(run: Callable[[], Any], items: list[list[str]]) -> tuple[float, float]:
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
        return len(items) / seconds, sum(map(len, items)) / seconds

    batched = [rate(lambda: sum(1 for _ in embedder.embed_sentences(sentences, batch_size=64)), sentences)
               for _ in range(cfg.repeats + 1)][1:]
    one = [rate(lambda: [embedder.embed_sentence(s) for s in single], single) for _ in range(cfg.repeats + 1)][1:]
    return {"bilm": source, "sentences": len(sentences), "mean_tokens": float(np.mean([len(s) for s in sentences])),
            "batch_64": {"sentences_per_second": statistics.median(r for r, _ in batched),
                         "tokens_per_second": statistics.median(t for _, t in batched)},
            "single": {"sentences_per_second": statistics.median(r for r, _ in one),
                       "seconds_per_sentence": 1 / statistics.median(r for r, _ in one)},
            "precision": precision_name(embedder.amp_dtype), "peak_rss_mb": peak_rss_mb()}


def section_classifier(cfg: BenchArgs) -> dict[str, Any]:
    """Classifier training documents/s per layer mix, with the biLM layer cache in memory, on disk
    (:mod:`elmo.data.layer_store`) and without it, each after one untimed pass over every measured batch; the task
    encoder's achieved GFLOP/s with the cache in memory (:func:`~lab.bench.flops.task_encoder_flops` over the whole step's time); cache
    fill rate and size; prediction documents/s."""
    cap_kernel_caches(256)  # as classification.py
    device, amp_dtype = _setup(cfg)
    clf = ClassifyArgs(data_dir=cfg.data_dir, seed=cfg.seed, batch_size=DEFAULT_BATCH_SIZE)  # the full corpus's
    train, _, _ = load_agnews(cfg.data_dir, clf.val_fraction, cfg.seed)
    bilm, vocab, source = _bilm(cfg, train)
    bilm.to(device)
    per_run = cfg.classifier_batches
    docs = train.subset(np.arange(min(len(train), 100 * per_run * (cfg.repeats + 1))))
    plain, cached, on_disk = (encode_corpus(docs.tokens, vocab, docs.labels, clf.max_length, bilm.config.chars_per_token)
                              for _ in range(3))
    start = time.perf_counter()
    layers = compute_layers(bilm, cached, device, amp_dtype)
    fill_seconds = time.perf_counter() - start
    cached.attach_layers(layers)
    start = time.perf_counter()
    on_disk.attach_layers(compute_layers(bilm, on_disk, device, amp_dtype, kind="disk"))
    disk_fill_seconds = time.perf_counter() - start
    batches = plain.batches(clf.batch_size, clf.max_tokens, shuffle=True, seed=cfg.seed)
    out: dict[str, Any] = {"bilm": source, "documents": len(docs), "mean_tokens": float(plain.lengths.mean()),
                           "cache": {"tokens_per_second": cached.num_tokens / fill_seconds,
                                     "disk_tokens_per_second": cached.num_tokens / disk_fill_seconds,
                                     "bytes_per_token": layers.nbytes // layers.num_tokens},
                           "train_docs_per_second": {}, "encoder_gflops": {}, "predict_docs_per_second": {}}

    def fresh(mix: str) -> ElmoClassifier:
        set_seed(cfg.seed)
        return ElmoClassifier(bilm, clf.classifier_config(mix)).to(device)

    for mix in LAYER_MIXES:
        out["train_docs_per_second"][mix] = {}
        # One untimed pass without the cache over every batch to be measured: oneDNN builds its kernels per batch
        # shape, and without this the store timed first pays for every new shape that the later ones then reuse.
        _train_rate(fresh(mix), batches[: per_run * (cfg.repeats + 1)], plain, classifier_loss, device, amp_dtype,
                    clf.lr)
        for name, corpus in (("cached", cached), ("cached_on_disk", on_disk), ("uncached", plain)):
            model = fresh(mix)

            def measure(index, model=model, corpus=corpus):
                rate, seconds = _train_rate(model, index, corpus, classifier_loss, device, amp_dtype, clf.lr)
                positions = sum(len(i) * int(corpus.lengths[i].max()) for i in index)
                return rate, task_encoder_flops(model, positions) / seconds / 1e9

            runs = _median_runs(cfg, batches, per_run, measure)
            out["train_docs_per_second"][mix][name] = statistics.median(r for r, _ in runs)
            if name == "cached":
                out["encoder_gflops"][mix] = statistics.median(g for _, g in runs)
        start = time.perf_counter()
        class_probabilities(model, cached, device, amp_dtype)
        out["predict_docs_per_second"][mix] = len(cached) / (time.perf_counter() - start)
    out["precision"], out["peak_rss_mb"] = precision_name(amp_dtype), peak_rss_mb()
    return out


def section_word2vec(cfg: BenchArgs) -> dict[str, Any]:
    """Seconds per training token of the Word2Vec initialisation (``--init-embeddings word2vec``)."""
    _setup(cfg)
    pre = PretrainArgs()
    train, _, _ = load_agnews(cfg.data_dir, pre.val_fraction, cfg.seed, max_docs=5000)
    vocab = Vocabulary.build(train.tokens, pre.min_freq, pre.max_vocab)
    _, info = word2vec_vectors(train.tokens, vocab, dim=pre.bilm_config(len(vocab)).embedding_dim, seed=cfg.seed)
    tokens = sum(map(len, train.tokens))
    return {"tokens": tokens, "seconds": info["seconds"], "seconds_per_token": info["seconds"] / tokens,
            "peak_rss_mb": peak_rss_mb()}


# ------------------------------------------------------------------------------------------
# Whole-script runs at two sizes (peak memory), and the 120k projection
# ------------------------------------------------------------------------------------------


def pretrain_peak(measured: tuple[float, float], lm_json: Path) -> tuple[float, float]:
    """``(wall seconds, peak RSS MiB)`` of an ``ELMO.py`` run: :func:`~lab.bench.children.run_script`'s, except that
    when the two directions trained side by side (``lm.json``'s ``peak_rss_mb`` per process) the peak is the sum of
    the main process's and the two directions' (an upper bound: the largest process alone is what ``wait4`` sees)."""
    per_process = json.loads(lm_json.read_text()).get("peak_rss_mb") if lm_json.is_file() else None
    return (measured[0], sum(per_process.values())) if per_process else measured


def section_scripts(cfg: BenchArgs, threads: int) -> dict[str, Any]:
    """Peak RSS of ``ELMO.py`` (1 epoch; both directions' processes and the main one, :func:`pretrain_peak`) and
    ``classification.py`` (1 layer mix, 1 epoch; the layer cache on
    disk as ``--cache-layers auto`` chooses, and in memory) at the two ``--memory-docs`` sizes, and the
    straight line through them extrapolated to the train split of ``--target-rows`` rows (epochs and
    layer mixes add time, not memory)."""
    out: dict[str, Any] = {"documents": list(cfg.memory_docs), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--data-dir", cfg.data_dir, "--seed", str(cfg.seed), "--threads", str(threads), "--quiet",
                  "--epochs", "1", "--device", cfg.device, "--precision", cfg.precision]
        for docs in cfg.memory_docs:
            dirs = [f"--{k}-dir" for k in ("models", "results", "images")]
            where = [x for d in dirs for x in (d, str(Path(tmp) / d[2:-4] / str(docs)))]
            args = common + ["--max-docs", str(docs)] + where
            out["runs"][docs] = {
                "ELMO.py": pretrain_peak(run_script(["-m", "elmo", "pretrain", *args]),
                                         Path(tmp) / "results" / str(docs) / "lm.json"),
                "classification.py": run_script(["-m", "elmo", "classify", *args, "--mixes",
                                                   "trainable_lambda", "--cache-layers", "disk"]),
                "classification.py (cache in memory)": run_script(["-m", "elmo", "classify", *args, "--mixes",
                                                                   "trainable_lambda", "--cache-layers", "memory"]),
            }
    small, large = cfg.memory_docs
    target_docs = cfg.target_rows * (1 - PretrainArgs().val_fraction)
    out["projected_peak_rss_mb"] = {}
    for script in out["runs"][small]:
        (_, a), (_, b) = out["runs"][small][script], out["runs"][large][script]
        slope = (b - a) / ((large - small) * (1 - PretrainArgs().val_fraction))
        out["projected_peak_rss_mb"][script] = b + slope * (target_docs - large * (1 - PretrainArgs().val_fraction))
    return out


def project_pipeline(results: dict[str, Any], train_docs: float, val_docs: float, test_docs: float,
                     tokens_per_doc: float) -> dict[str, float]:
    """Wall seconds of ``ELMO.py`` + ``classification.py`` (defaults: both LM directions, every epoch,
    all three layer mixes, no early stop) for a corpus of these sizes, from the measured rates. The LM training
    is the two directions side by side at the slower one's rate where ``results["lm_side_by_side"]`` measured it
    (``ELMO.py``'s default on the CPU with two or more threads), else one direction after the other at
    ``results["lm"]``'s rate; so are the LM evaluations (each epoch's validation perplexity and the final exact
    evaluation of validation and test), at the slower direction's evaluation rates where the side-by-side section
    measured them. A result without them (written before that section measured evaluations) counts the
    evaluations one direction after the other."""
    pre, clf = PretrainArgs(), ClassifyArgs()
    lm, c, w2v = results["lm"], results["classifier"], results["word2vec"]
    words = lambda docs: docs * (tokens_per_doc + 1)  # noqa: E731  (predicted words incl. the end marker)
    rows = train_docs + val_docs + test_docs
    side_by_side = results.get("lm_side_by_side")
    lm_training = (pre.epochs * words(train_docs) / side_by_side["tokens_per_second"]["slowest"] if side_by_side
                   else 2 * pre.epochs * words(train_docs) / lm["tokens_per_second"]["ours"])
    side_by_side_eval = (side_by_side or {}).get("eval_words_per_second")
    # side by side: both directions evaluate at once, the slower one sets the time; else one after the other
    directions, eval_rate = (1, side_by_side_eval["slowest"]) if side_by_side_eval else (2, lm["eval_words_per_second"])
    parts = {
        "read_and_tokenise": 2 * rows * lm["load_seconds_per_row"],  # both scripts read the data
        "word2vec_init": w2v["seconds_per_token"] * train_docs * tokens_per_doc,
        "lm_training": lm_training,
        "lm_validation": directions * pre.epochs * words(val_docs) / eval_rate["perplexity"],
        "lm_final_evaluation": directions * words(val_docs + test_docs) / eval_rate["full_softmax"],
        "layer_cache": rows * tokens_per_doc / c["cache"]["tokens_per_second"],
        "classifier_training": sum(clf.epochs * train_docs / c["train_docs_per_second"][s]["cached"]
                                   for s in LAYER_MIXES),
        "classifier_prediction": sum((clf.epochs * val_docs + train_docs + val_docs + test_docs)
                                     / c["predict_docs_per_second"][s] for s in LAYER_MIXES),
    }
    parts["total"] = sum(parts.values())
    return parts


def bench(cfg: BenchArgs) -> dict[str, Any]:
    """Run every section, print the table, write ``cfg.out``; returns the JSON content. With ``--published``
    only the published-ELMo section (:func:`lab.bench.published.bench_published`, its own JSON), with
    ``--training`` only the published architectures' training (:func:`lab.bench.published_training.bench_training`,
    its own JSON)."""
    data = Path(cfg.data_dir)
    refuse_overwriting_inputs({"--data-dir (train.csv)": data / "train.csv", "--data-dir (test.csv)": data / "test.csv",
                               "--models-dir (bilstm.pt)": Path(cfg.models_dir) / "bilstm.pt"},
                              {"--out": cfg.out_path})
    if cfg.published:
        return bench_published(cfg)
    if cfg.training:
        return bench_training(cfg)
    threads = configure_threads(cfg.threads)
    cfg = replace(cfg, threads=threads)
    started = time.perf_counter()
    results: dict[str, Any] = {"config": asdict(cfg), "meta": environment_info(cfg.seed)}
    for name, section in (("machine", section_machine), ("lm", section_lm), ("embedding", section_embedding),
                          ("classifier", section_classifier), ("word2vec", section_word2vec)):
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        results[name] = in_child(section, cfg)
    print("[bench] lm, the two directions side by side ...", file=sys.stderr, flush=True)
    results["lm_side_by_side"] = section_lm_side_by_side(cfg)  # its own two child processes
    if cfg.memory_docs:
        print("[bench] ELMO.py / classification.py memory runs ...", file=sys.stderr, flush=True)
        results["scripts"] = section_scripts(cfg, threads)
    lm = results["lm"]
    tokens_per_doc = lm["train_tokens"] / lm["train_documents"]
    val_fraction, test_docs = PretrainArgs().val_fraction, lm["test_documents"]  # the official test file
    results["projection"] = {
        "target_rows": cfg.target_rows, "tokens_per_document": tokens_per_doc,
        "this_corpus_seconds": project_pipeline(results, lm["train_documents"], lm["val_documents"], test_docs,
                                                tokens_per_doc),
        "target_seconds": project_pipeline(results, cfg.target_rows * (1 - val_fraction), cfg.target_rows * val_fraction,
                                           test_docs, tokens_per_doc),
    }
    mm = results["machine"]["matmul_peak_gflops"]
    peak = mm.get(lm["precision"], mm["fp32"])
    results["lm"]["peak_fraction"] = {"ours": lm["gflops"]["ours"] / peak, "naive": lm["gflops"]["naive"] / mm["fp32"]}
    classifier = results["classifier"]
    classifier["encoder_peak_fraction"] = {mix: g / mm.get(classifier["precision"], mm["fp32"])
                                           for mix, g in classifier["encoder_gflops"].items()}
    side_by_side = results["lm_side_by_side"]
    if side_by_side is not None:
        side_by_side["peak_fraction"] = side_by_side["gflops"] / mm.get(side_by_side["precision"], mm["fp32"])
        # one direction after the other takes 2 N / ours; side by side N / slowest
        side_by_side["speedup_over_one_after_the_other"] = (2 * side_by_side["tokens_per_second"]["slowest"]
                                                            / lm["tokens_per_second"]["ours"])
    results["seconds"] = time.perf_counter() - started
    write_json(cfg.out_path, results)
    print(format_bench(results))
    return results


def format_side_by_side(sbs: dict[str, Any] | None) -> list[str]:
    """The table's lines of :func:`section_lm_side_by_side` (none where it did not run)."""
    if sbs is None:
        return []
    rates, each = sbs["tokens_per_second"], sbs["threads_per_direction"]
    lines = [f"{'biLM training side by side (tokens/s, slower one)':<52}{rates['slowest']:>14,.0f}"
             f"  {sum(sbs['peak_rss_mb'].values()):,.0f} MB (both)",
             f"{'  forward / backward, ' + str(each) + ' thread(s) each':<52}{rates['forward']:>14,.0f}"
             f"  / {rates['backward']:,.0f}",
             f"{'  speed-up over one direction after the other':<52}{sbs['speedup_over_one_after_the_other']:>13.2f}x",
             f"{'  achieved GFLOP/s, both (share of ' + sbs['precision'] + ' peak)':<52}{sbs['gflops']:>14,.1f}"
             f"  ({sbs['peak_fraction']:.0%})"]
    if "eval_words_per_second" in sbs:  # bench.json files written before it lack it
        slowest = sbs["eval_words_per_second"]["slowest"]
        lines.append(f"{'  evaluation, slower one (words/s: perplexity, exact)':<52}{slowest['perplexity']:>14,.0f}"
                     f"  / {slowest['full_softmax']:,.0f}")
    return lines


def format_bench(r: dict[str, Any]) -> str:
    """The benchmark as a plain-text table (also what README's "Performance" section shows)."""
    m, lm, e, c, p = r["machine"], r["lm"], r["embedding"], r["classifier"], r["projection"]
    mm = m["matmul_peak_gflops"]
    lines = [f"device {m['device']} ({m['device_name']}), {m['threads']} threads, precision {m['precision']}, "
             f"torch {m['torch']}",
             "matmul peak: " + ", ".join(f"{k} {v:,.0f} GFLOP/s" for k, v in mm.items()),
             "",
             f"{'measurement':<52}{'value':>14}  peak RSS",
             f"{'biLM training, ours (tokens/s per direction)':<52}{lm['tokens_per_second']['ours']:>14,.0f}"
             f"  {lm['peak_rss_mb']:,.0f} MB",
             f"{'biLM training, naive reference (tokens/s)':<52}{lm['tokens_per_second']['naive']:>14,.0f}",
             f"{'  speed-up ours / naive':<52}{lm['tokens_per_second']['ratio']:>13.1f}x",
             f"{'  achieved GFLOP/s, ours (share of ' + lm['precision'] + ' peak)':<52}{lm['gflops']['ours']:>14,.1f}"
             f"  ({lm['peak_fraction']['ours']:.0%})",
             f"{'  achieved GFLOP/s, naive (share of fp32 peak)':<52}{lm['gflops']['naive']:>14,.1f}"
             f"  ({lm['peak_fraction']['naive']:.0%})",
             *format_side_by_side(r.get("lm_side_by_side")),
             f"{'ElmoEmbedder, batch 64 (sentences/s)':<52}{e['batch_64']['sentences_per_second']:>14,.0f}"
             f"  {e['peak_rss_mb']:,.0f} MB",
             f"{'ElmoEmbedder, batch 64 (tokens/s)':<52}{e['batch_64']['tokens_per_second']:>14,.0f}",
             f"{'ElmoEmbedder, one sentence at a time (sentences/s)':<52}{e['single']['sentences_per_second']:>14,.0f}",
             f"{'biLM layer cache fill (tokens/s)':<52}{c['cache']['tokens_per_second']:>14,.0f}"
             f"  {c['peak_rss_mb']:,.0f} MB"]
    for s, v in c["train_docs_per_second"].items():
        lines.append(f"{'classifier training, ' + s + ' (docs/s)':<52}{v['cached']:>14,.0f}"
                     f"  cache on disk {v.get('cached_on_disk', float('nan')):,.0f}, uncached {v['uncached']:,.0f}")
        if s in c.get("encoder_peak_fraction", {}):  # bench.json files written before it lack it
            lines.append(f"{'  task encoder GFLOP/s (share of ' + c['precision'] + ' peak)':<52}"
                         f"{c['encoder_gflops'][s]:>14,.1f}  ({c['encoder_peak_fraction'][s]:.0%})")
    if "scripts" in r:
        for script, mb in r["scripts"]["projected_peak_rss_mb"].items():
            lines.append(f"{script + ' peak RSS projected for ' + format(p['target_rows'], ',') + ' rows (MB)':<52}"
                         f"{mb:>14,.0f}")
    lines += ["", f"projected pipeline wall time (minutes){'':<14}{'this corpus':>14}{format(p['target_rows'], ',') + ' rows':>14}"]
    for part, seconds in p["target_seconds"].items():
        lines.append(f"  {part:<50}{p['this_corpus_seconds'][part] / 60:>14.1f}{seconds / 60:>14.1f}")
    return "\n".join(lines)
