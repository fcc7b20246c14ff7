"""The command line: ``python -m elmo <command> [flags]`` (and the top-level scripts, which are shims).

=============  ==============================================  =========================
command        what it runs                                    top-level shim
=============  ==============================================  =========================
``pretrain``   :func:`elmo.pipelines.pretraining.pretrain`     ``python ELMO.py``
``classify``   :func:`elmo.pipelines.classification.classify`  ``python classification.py``
``baselines``  :func:`elmo.pipelines.baselines.baselines`      ``python baselines.py``
``predict``    :func:`elmo.pipelines.prediction.predict_texts`
``embed``      :func:`elmo.pipelines.embedding.embed` (hdf5)
``report``     :func:`elmo.report.make_report` (report.pdf)
``bench``      :func:`elmo.bench.speed.bench`
``bench-scale`` :func:`elmo.bench.scale.bench_scale`
``study``      :func:`elmo.pipelines.study.study` (seeds)
``fetch``      :func:`elmo.data.agnews.fetch` (AG News)
=============  ==============================================  =========================

Each command's flags are generated 1:1 from its config dataclass (``--max-docs`` ↔ ``max_docs``; see
:func:`elmo.pipelines.common.option`). An :class:`~elmo.errors.ElmoError` becomes one line on stderr
and exit status 2; Ctrl-C exits with 130 (after saving a training checkpoint when one is being written).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .bench.scale import ScaleConfig, bench_scale
from .bench.speed import BenchConfig, bench
from .data.agnews import SOURCE_URL, fetch
from .errors import ElmoError
from .pipelines.baselines import BaselinesConfig, baselines
from .pipelines.classification import ClassifyConfig, classify
from .pipelines.common import option
from .pipelines.embedding import EmbedConfig, embed
from .pipelines.prediction import predict_texts
from .pipelines.pretraining import PretrainConfig, pretrain
from .pipelines.study import StudyConfig, study
from .report import ReportConfig, make_report
from .runtime import distributed
from .runtime.device import PRECISIONS
from .training.state import Interrupted


@dataclass
class PredictConfig:
    """Flags of ``python -m elmo predict``."""

    text: str | None = option(None, "classify this text")
    file: str | None = option(None, "classify every non-blank line of this UTF-8 file")
    models_dir: str = option("models", "folder holding bilstm.pt and classifier.pt")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("auto", "auto, fp32, bf16 or fp16 (as classification.py)", choices=PRECISIONS)
    threads: int | None = option(None, "CPU threads (default: all cores)")

    def check(self) -> None:
        """Exactly one of ``--text`` and ``--file``. Raises :class:`ElmoError`."""
        if (self.text is None) == (self.file is None):
            raise ElmoError("give either --text TEXT or --file FILE")


@dataclass
class FetchConfig:
    """Flags of ``python -m elmo fetch``."""

    data_dir: str = option("data/ag_news", "where train.csv and test.csv go")
    url: str = option(SOURCE_URL, "base URL holding train.csv and test.csv")
    force: bool = option(False, "replace present files whose md5 differs")

    def check(self) -> None:
        """Nothing to check."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its config dataclass, the function it runs and a one-line description."""

    config: type
    run: Callable[[Any], Any]
    help: str


COMMANDS: dict[str, Command] = {
    "pretrain": Command(PretrainConfig, pretrain, "pre-train the biLM on AG News or your corpus (ELMO.py)"),
    "classify": Command(ClassifyConfig, classify, "train the AG News classifier on ELMo, three layer mixes "
                                                  "(classification.py)"),
    "baselines": Command(BaselinesConfig, baselines, "Word2Vec, SVD and TF-IDF baselines (baselines.py)"),
    "predict": Command(PredictConfig, lambda c: predict_texts(c.models_dir, c.text, c.file, c.device, c.precision,
                                                              c.threads), "classify texts with classifier.pt"),
    "report": Command(ReportConfig, make_report, "write report.pdf from results/ and images/"),
    "embed": Command(EmbedConfig, embed, "ELMo vectors of every line of a text file into an hdf5 file (AllenNLP's "
                                         "`elmo` command; the published ELMo or our biLM)"),
    "bench": Command(BenchConfig, bench, "speed and memory benchmark (results/bench.json)"),
    "bench-scale": Command(ScaleConfig, bench_scale, "streaming and torchrun scaling benchmark"),
    "study": Command(StudyConfig, study, "the comparison over several seeds with confidence intervals and paired "
                                         "tests (results/seeds.json)"),
    "fetch": Command(FetchConfig, lambda c: fetch(c.data_dir, c.url, c.force), "download AG News (md5-verified)"),
}


def _flag_type(annotation: Any):
    """The argparse type of a field annotation such as ``int | None`` or ``float``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # Optional[X] -> X
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def add_flags(parser: argparse.ArgumentParser, config_cls: type) -> argparse.ArgumentParser:
    """Add one ``--flag`` per field of the dataclass ``config_cls`` (booleans get ``--no-flag`` too; a field
    whose metadata says ``positional=True`` becomes a positional argument)."""
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        kind = _flag_type(hints[f.name])
        extra = {k: v for k, v in f.metadata.items() if k not in ("help", "positional")}
        if f.metadata.get("positional"):
            parser.add_argument(f.name, type=kind, help=f.metadata.get("help"), **extra)
        elif kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata.get("help"))
        elif typing.get_origin(kind) in (list, tuple):
            parser.add_argument(flag, nargs="+", type=typing.get_args(kind)[0], default=f.default,
                                help=f.metadata.get("help"), **extra)
        else:
            parser.add_argument(flag, type=kind, default=f.default, help=f.metadata.get("help"), **extra)
    return parser


def build_parser(prog: str = "python -m elmo") -> argparse.ArgumentParser:
    """The parser of ``python -m elmo``: one subcommand per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, command in COMMANDS.items():
        add_flags(sub.add_parser(name, help=command.help, description=command.help,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter), command.config)
    return parser


def run(command: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Parse ``argv`` as the flags of ``command`` and run it; returns the exit status.

    Args:
        command: a key of :data:`COMMANDS`; argv: its flags (default ``sys.argv[1:]``); prog: the
            program name in ``--help`` (the shims pass their file name).

    An :class:`~elmo.errors.ElmoError` → one line on stderr, 2; Ctrl-C → 130. Under ``torchrun`` the
    command joins the process group, which is left here whatever happens.
    """
    spec = COMMANDS[command]
    parser = add_flags(argparse.ArgumentParser(prog=prog or f"python -m elmo {command}", description=spec.help,
                                               formatter_class=argparse.ArgumentDefaultsHelpFormatter), spec.config)
    args = parser.parse_args(argv)
    try:
        config = spec.config(**vars(args))
        config.check()
        try:
            spec.run(config)
        finally:
            distributed.shutdown()  # leave the torchrun process group, if the command joined one
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elmo <command> [flags]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # prints usage (or --help) and exits
        return 2
    return run(argv[0], argv[1:])
