"""What every pipeline shares: the common flags (:class:`CommonArgs`, help texts carried by :func:`option`), the
start-up (:func:`start`), training checkpoints named per run (:func:`checkpointing`) and the text tables printed last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from ..artifacts import Outputs, PathArg, check_writable, refuse_overwriting_inputs, remove_file, write_json
from ..data.agnews import CLASS_NAMES
from ..errors import ElmoError
from ..runtime import distributed
from ..runtime.device import (
    PRECISIONS,
    cap_kernel_caches,
    configure_threads,
    precision_name,
    resolve_device,
    resolve_precision,
    set_seed,
)
from ..training.state import Checkpointing, flags_meta

#: ``--batch-size``'s default, its floor and the optimiser steps per epoch it keeps (:func:`auto_batch_size`)
DEFAULT_BATCH_SIZE, MIN_AUTO_BATCH, MIN_STEPS_PER_EPOCH = 64, 8, 250


def auto_batch_size(batch_size: int | None, train_documents: int | None) -> int:
    """Documents per batch: ``batch_size`` (``--batch-size``) when given, else the default for ``train_documents``
    (AG News's training split, or a ``--train-file``'s lines; ``None``: unknown; the rule: ``docs/commands.md``'s
    "The default batch size")."""
    if batch_size is not None:
        return batch_size
    if train_documents is None:
        return DEFAULT_BATCH_SIZE
    return max(MIN_AUTO_BATCH, min(DEFAULT_BATCH_SIZE, train_documents // MIN_STEPS_PER_EPOCH))


def resolve_batch_size(config: CommonArgs, train_documents: int | None, say: Callable[[str], None]) -> int:
    """Set and return ``config.batch_size`` as :func:`auto_batch_size` chooses, before training, so the checkpoints and
    results JSON record (and ``--resume`` compares) the size that ran; say it, and why when it lowered the default:
    batches of at most B documents make at least ceil(N / B) steps an epoch (``3,800 training documents: at least 254
    steps per epoch``, plus ``; the smallest automatic batch, 8, cannot promise 250`` when the floor binds)."""
    chosen, why = auto_batch_size(config.batch_size, train_documents), ""
    if config.batch_size is None and chosen < DEFAULT_BATCH_SIZE:  # lowered, so train_documents is known
        steps = -(-train_documents // chosen)
        why = f"{train_documents:,} training documents: at least {steps:,} steps per epoch"
        if steps < MIN_STEPS_PER_EPOCH:
            why += f"; the smallest automatic batch, {MIN_AUTO_BATCH}, cannot promise {MIN_STEPS_PER_EPOCH}"
    say(f"batches: up to {chosen} documents{f' ({why})' if why else ''} and {config.max_tokens:,} tokens, padding included "
        "(--batch-size, --max-tokens)")
    config.batch_size = chosen
    return chosen


def at_least(config: Any, least: int, *names: str) -> None:
    """Check that each field ``names`` of ``config`` (an arguments dataclass) not ``None`` is at least ``least``, in
    order. Raises :class:`ElmoError` naming the first that is not: ``--max-docs must be >= 1, got 0``."""
    for name in names:
        if getattr(config, name) is not None and getattr(config, name) < least:
            raise ElmoError(f"--{name.replace('_', '-')} must be >= {least}, got {getattr(config, name)}")


def option(default: Any, help: str, **kwargs) -> Any:
    """A dataclass field carrying its ``--flag`` help text (and argparse extras such as ``choices``). ``lab=True``: only
    experiments set it, the user commands take no flag for it (:func:`elmo.cli.add_flags`); ``one_of=TITLE``: a boolean
    flag of a choice the command requires (``embed``'s ``--all`` / ``--top`` / ``--average``)."""
    return field(default=default, metadata={"help": help, **kwargs})


@contextlib.contextmanager
def phase(out: dict[str, Any], name: str) -> Iterator[None]:
    """Add the block's seconds to ``out["phase_seconds"][name]`` (written with the results: where a command's time
    goes); the interpreter's start and imports are the command's wall time less their sum."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = out.setdefault("phase_seconds", {})
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started


def command_line(command: str, config: Any) -> str:
    """``python -m elmo <command>`` with the flags of ``config`` (an arguments dataclass) that differ from their
    defaults, as a shell line: what the model card records as the command that trained a model."""
    parts = ["python", "-m", "elmo", command]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.default is not dataclasses.MISSING and value == f.default:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            parts += [flag, *map(str, value)]
        elif value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts)


@dataclass
class CommonArgs:
    """Flags every training command shares; what their help lines leave out is ``docs/commands.md``'s "Main flags"
    and :mod:`elmo.data.pretraining_text` (``--extra-text``), :func:`auto_batch_size`, :func:`resolve_precision`,
    :func:`~elmo.runtime.device.default_threads`, :meth:`~elmo.artifacts.Outputs.of` (``None``: not given) and
    :func:`checkpointing` (``--resume``)."""

    data_dir: str = option("data/ag_news", "folder holding train.csv and test.csv")
    download: bool = option(True, "download AG News when it is missing")
    models_dir: str | None = option(None, "where models go and are read (default: models)")
    results_dir: str | None = option(None, "where JSON results go (default: results)")
    images_dir: str | None = option(None, "where plots go (default: images); a folder not given goes inside the first "
                                          "given (--models-dir M alone: M/results, M/images)")
    max_docs: int | None = option(None, "use only the first N training documents")
    val_fraction: float = option(0.05, "training documents held out for validation")
    max_length: int = option(256, "truncate documents to this many tokens")
    skip_bad_rows: bool = option(False, "skip (and count) malformed rows")
    text_fraction: float = option(1.0, "learn the representations from this share of the training text", lab=True)
    extra_text: tuple[str, ...] = option((), "CSV files of more text to learn the representations from",
                                         metavar="FILE")
    epochs: int = option(5, "maximum training epochs")
    batch_size: int | None = option(None, f"documents per batch (default: {DEFAULT_BATCH_SIZE}, fewer on small data)")
    max_tokens: int = option(8192, "token budget per batch (padding included)")
    lr: float = option(1e-3, "Adam learning rate")
    clip_norm: float = option(1.0, "gradient-norm clipping")
    patience: int = option(2, "early-stopping patience in epochs")
    seed: int = option(0, "random seed; same flags and --threads on a CPU: the same metrics (on a GPU: the same "
                       "split and batches, not the same numbers)")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("auto", "mixed precision (weights stay fp32)", choices=PRECISIONS)
    threads: int | None = option(None, "CPU threads per process (default: all cores)")
    quiet: bool = option(False, "no progress bars or per-epoch lines (the other lines and the final table still print)")
    resume: bool = option(False, "continue an interrupted run (same flags)")
    checkpoint_every: int = option(500, "save the training state every N steps")

    def check(self) -> None:
        """Validate sizes common to both scripts. Raises :class:`ElmoError` naming the flag."""
        at_least(self, 1, "epochs", "batch_size", "max_length", "max_tokens", "patience", "checkpoint_every",
                 "max_docs", "threads")
        if self.lr <= 0 or self.clip_norm <= 0:
            raise ElmoError(f"--lr and --clip-norm must be positive, got {self.lr}, {self.clip_norm}")
        if not 0.0 < self.text_fraction <= 1.0:
            raise ElmoError(f"--text-fraction must be in (0, 1], got {self.text_fraction}")

    @property
    def outputs(self) -> Outputs:
        """The output files of this run (:class:`~elmo.artifacts.Outputs`)."""
        return Outputs.of(self.models_dir, self.results_dir, self.images_dir)


#: Flags that do not change what a run computes: a checkpoint written under other values may be resumed.
RESUMABLE_FLAGS = ("resume", "checkpoint_every", "quiet", "threads", "device", "models_dir", "results_dir", "images_dir",
                   "download", "concurrent_directions", "overwrite")


@dataclass
class StartedRun:
    """A started run (:func:`start`). ``ctx``: this process's place in a ``torchrun`` job (single process otherwise);
    ``amp_dtype``: the autocast dtype (``None`` = fp32); ``say``: prints a line on rank 0, ``--quiet`` or not."""

    ctx: distributed.Context
    device: torch.device
    amp_dtype: torch.dtype | None
    threads: int
    outputs: Outputs
    say: Callable[..., None]

    @property
    def precision(self) -> str:
        """``fp32``, ``bf16`` or ``fp16``."""
        return precision_name(self.amp_dtype)

    @property
    def word2vec_workers(self) -> int:
        """gensim's threads for the Word2Vec vectors that initialise token embeddings: one on a CPU, so they repeat
        with ``--seed``; all :attr:`threads` on a GPU, where the cores would idle and cuDNN does not repeat anyway."""
        return self.threads if self.device.type == "cuda" else 1


def start(config: CommonArgs, kernel_cache_entries: int) -> StartedRun:
    """The start-up every training script runs, in this order: bound oneDNN's kernel caches before any kernel exists,
    join the ``torchrun`` group if any, seed, set threads, resolve device and precision, and prove the output folders
    writable (rank 0). Raises :class:`ElmoError` on a bad device or precision, or an unwritable output folder."""
    cap_kernel_caches(kernel_cache_entries)
    ctx = distributed.init(config.device)
    set_seed(config.seed)
    threads = configure_threads(config.threads)
    device = resolve_device(config.device)
    amp_dtype = resolve_precision(config.precision, device)
    say = (lambda *a: print(*a, flush=True)) if ctx.is_main else (lambda *a: None)
    outputs = config.outputs
    say(f"output folders: models {outputs.models}, results {outputs.results}, plots {outputs.images}")
    if ctx.is_main:
        check_writable(outputs.models, outputs.results, outputs.images,
                       flags=("--models-dir", "--results-dir", "--images-dir"))
    return StartedRun(ctx, device, amp_dtype, threads, outputs, say)


def checkpointing(config: CommonArgs, name: str, **meta: Any) -> Checkpointing:
    """The :class:`~elmo.training.state.Checkpointing` of one training run (``name``, e.g. ``forward_lm``) of a script:
    ``<models-dir>/checkpoints/<name>.pt`` (when it is saved, resumed and deleted: docs/troubleshooting.md,
    :func:`write_results`); its meta holds the flags not in :data:`RESUMABLE_FLAGS` and ``meta``."""
    flags = {k: v for k, v in dataclasses.asdict(config).items() if k not in RESUMABLE_FLAGS}
    return Checkpointing(config.outputs.checkpoint(name), config.checkpoint_every, config.resume,
                         {"flags": flags_meta(flags), **meta})


def write_results(config: CommonArgs, name: str, out: dict, meta: dict, checkpoints: Sequence[str], table: str,
                  say: Callable[[str], None]) -> None:
    """How a training command ends, on rank 0: ``out`` with ``config`` and ``meta`` to ``<results-dir>/<name>.json``,
    the training ``checkpoints`` deleted (and their folder when empty), ``table`` said."""
    out["config"], out["meta"] = dataclasses.asdict(config), meta
    write_json(config.outputs.result(name), out)
    for checkpoint in checkpoints:
        remove_file(config.outputs.checkpoint(checkpoint))
    folder = config.outputs.checkpoint("x").parent
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    say("\n" + table)


def refuse_overwriting(config: CommonArgs, inputs: Mapping[str, PathArg], outputs: Sequence[Path],
                       agnews: bool = True) -> None:
    """:func:`~elmo.artifacts.refuse_overwriting_inputs` for a training command's ``outputs`` (files under the three
    output folders), its ``inputs`` (keyed by flag) and, with ``agnews``, the ``--data-dir`` files it reads."""
    data = {f"--data-dir ({name})": Path(config.data_dir) / name for name in ("train.csv", "test.csv")} if agnews else {}
    refuse_overwriting_inputs({**data, **inputs}, config.outputs.labelled(*outputs))


def refuse_another_model(flag: str, folder: Path, found: tuple[Any, str] | None, overwrite: bool) -> None:
    """Stop before anything is written when ``folder`` (given as ``flag``: ``--out``, ``--models-dir``) holds another
    model's file, ``found`` = ``(file, what it is)`` (e.g. :meth:`~elmo.model.hub.HubMixin.saved_difference`), unless
    ``overwrite``: :class:`ElmoError` naming the file, what it is and the two ways on (another ``flag``, ``--overwrite``)."""
    if found is not None and not overwrite:
        file, what = found
        raise ElmoError(f"{flag} {folder} holds {file} ({what}): choose another {flag}, or give --overwrite to replace it")


def format_confusion(cm: list[list[int]]) -> str:
    """The confusion matrix as text (rows true class, columns predicted)."""
    width = max(9, max(len(str(v)) for row in cm for v in row) + 2)
    lines = ["true \\ pred".ljust(12) + "".join(n[:width - 1].rjust(width) for n in CLASS_NAMES)]
    lines += [name.ljust(12) + "".join(str(v).rjust(width) for v in row) for name, row in zip(CLASS_NAMES, cm)]
    return "\n".join(lines)


def format_results_table(out: dict, names: Sequence[str], header: str = "mix") -> str:
    """One line per layer mix (or baseline method) and split: accuracy and macro precision, recall, F1."""
    lines = [f"{header:<20}split  accuracy  precision  recall     F1"]
    for s in names:
        for split in ("train", "test"):
            m = out[s][split]
            lines.append(f"{s:<20}{split:<7}{m['accuracy']:>8.4f}{m['precision']:>11.4f}{m['recall']:>8.4f}{m['f1']:>7.4f}")
    return "\n".join(lines)
