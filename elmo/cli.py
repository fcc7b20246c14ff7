"""Command-line plumbing shared by ``ELMO.py`` and ``classification.py``.

Each script's flags are generated 1:1 from a config dataclass (``--max-docs`` ↔ ``max_docs``), so
the config saved in results files and checkpoints is exactly what the user asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import distributed
from .errors import ElmoError
from .train import PRECISIONS, Checkpointing, Interrupted


def option(default: Any, help: str, **kwargs) -> Any:
    """A dataclass field carrying its ``--flag`` help text."""
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class CommonConfig:
    """Flags both scripts share."""

    data_dir: str = option("data/ag_news", "folder holding train.csv and test.csv")
    models_dir: str = option("models", "where model files are written / read")
    results_dir: str = option("results", "where JSON results are written")
    images_dir: str = option("images", "where plots are written")
    max_docs: int | None = option(None, "use only the first N training documents")
    val_fraction: float = option(0.05, "share of training documents held out for validation")
    max_length: int = option(256, "truncate documents to this many tokens")
    skip_bad_rows: bool = option(False, "skip (and count) malformed rows instead of stopping")
    epochs: int = option(5, "maximum training epochs")
    batch_size: int = option(64, "documents per batch")
    max_tokens: int = option(8192, "token budget per batch (padding included)")
    lr: float = option(1e-3, "Adam learning rate")
    clip_norm: float = option(1.0, "gradient-norm clipping")
    patience: int = option(2, "early-stopping patience in epochs (on the validation metric)")
    seed: int = option(0, "random seed; a CPU run with the same seed repeats its metrics exactly")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("auto", "mixed precision of training and inference: auto (bf16 on CPUs with native bf16 "
                            "and on GPUs that have it, fp16 on older GPUs, else fp32), fp32, bf16 or fp16 (CUDA "
                            "only); weights, losses and evaluation perplexities stay fp32", choices=PRECISIONS)
    threads: int | None = option(None, "CPU threads per process (default: all cores; under torchrun "
                                        "the cores shared out among the processes on the node)")
    quiet: bool = option(False, "no progress bars or per-epoch lines")
    resume: bool = option(False, "continue an interrupted run from its training checkpoints in "
                          "<models-dir>/checkpoints/ (same flags; they are deleted when the script finishes)")
    checkpoint_every: int = option(500, "save the training state every N steps as well as at each epoch end")

    def check(self) -> None:
        """Validate sizes common to both scripts. Raises :class:`ElmoError` naming the flag."""
        for name in ("epochs", "batch_size", "max_length", "max_tokens", "patience", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ElmoError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.max_docs is not None and self.max_docs < 1:
            raise ElmoError(f"--max-docs must be >= 1, got {self.max_docs}")
        if self.lr <= 0 or self.clip_norm <= 0:
            raise ElmoError(f"--lr and --clip-norm must be positive, got {self.lr}, {self.clip_norm}")
        if self.threads is not None and self.threads < 1:
            raise ElmoError(f"--threads must be >= 1, got {self.threads}")


#: Flags that do not change what a run computes: a checkpoint written under other values may be resumed.
RESUMABLE_FLAGS = ("resume", "checkpoint_every", "quiet", "threads", "device", "models_dir", "results_dir", "images_dir")


def checkpointing(config: CommonConfig, name: str, **meta: Any) -> Checkpointing:
    """The :class:`~elmo.train.Checkpointing` of one training run (``name``, e.g. ``forward_lm``) of a
    script: ``<models-dir>/checkpoints/<name>.pt``, every ``--checkpoint-every`` steps, resumed with
    ``--resume``; its meta holds the script's flags (those that change results) and ``meta``."""
    flags = {k: v for k, v in dataclasses.asdict(config).items() if k not in RESUMABLE_FLAGS}
    return Checkpointing(Path(config.models_dir) / "checkpoints" / f"{name}.pt", config.checkpoint_every,
                         config.resume, {"flags": repr(sorted(flags.items())), **meta})


def remove_checkpoints(config: CommonConfig, names: Sequence[str]) -> None:
    """Delete the training checkpoints of a script that has finished (and the folder when empty)."""
    folder = Path(config.models_dir) / "checkpoints"
    for name in names:
        (folder / f"{name}.pt").unlink(missing_ok=True)
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _flag_type(annotation: Any):
    """The argparse type of a field annotation such as ``int | None`` or ``float``."""
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(typing), {"int": int, "float": float, "str": str, "bool": bool})  # noqa: S307
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # Optional[X] -> X
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def build_parser(config_cls: type, description: str) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with one ``--flag`` per field of ``config_cls``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        kind = _flag_type(hints[f.name])
        extra = {k: v for k, v in f.metadata.items() if k != "help"}
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata.get("help"))
        elif typing.get_origin(kind) in (list, tuple):
            parser.add_argument(flag, nargs="+", type=typing.get_args(kind)[0], default=f.default,
                                help=f.metadata.get("help"), **extra)
        else:
            parser.add_argument(flag, type=kind, default=f.default, help=f.metadata.get("help"), **extra)
    return parser


def run_cli(config_cls: type, main: Callable[[Any], Any], description: str, argv: Sequence[str] | None = None) -> int:
    """Parse flags into ``config_cls``, call ``main(config)``; an :class:`ElmoError` → one line, exit 2;
    Ctrl-C → exit 130. Under ``torchrun`` ``main`` joins the process group (:func:`elmo.distributed.init`)
    and it is left here whatever happens."""
    args = build_parser(config_cls, description).parse_args(argv)
    try:
        config = config_cls(**vars(args))
        config.check()
        try:
            main(config)
        finally:
            distributed.shutdown()  # leave the torchrun process group, if main() joined one
    except Interrupted as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # Ctrl-C outside a training loop: nothing half-written, nothing to save
        print("stopped by Ctrl-C; finished training runs keep their checkpoints in <models-dir>/checkpoints/: "
              "run the same command with --resume to continue", file=sys.stderr)
        return 130
    except ElmoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
