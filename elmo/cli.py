"""The command line: ``python -m elmo <command> [flags]`` (and the top-level scripts, which are shims).

=============  ==============================================  =========================
command        what it runs                                    top-level shim
=============  ==============================================  =========================
``pretrain``   :func:`elmo.pipelines.pretraining.pretrain`     ``python ELMO.py``
``finetune``   :func:`elmo.pipelines.finetuning.finetune`
``classify``   :func:`elmo.pipelines.classification.classify`  ``python classification.py``
``baselines``  :func:`elmo.pipelines.baselines.baselines`      ``python baselines.py``
``predict``    :func:`elmo.pipelines.predict_command.predict`  ``classification.py --predict``
``embed``      :func:`elmo.pipelines.embedding.embed` (hdf5)
``export``     :func:`elmo.pipelines.export.export` (bilm-tf's files)
``fetch``      :func:`elmo.data.agnews.fetch` (AG News)
=============  ==============================================  =========================

Each command's flags are generated 1:1 from its arguments dataclass, named ``*Args`` (``--max-docs`` ↔
``max_docs``; see :func:`elmo.pipelines.common.option`). An :class:`~elmo.errors.ElmoError` becomes one line
on stderr (a field it names, such as ``ClassifierConfig.token_embedding_dim``, spelt as the flag that sets
it: :func:`flag_message`) and exit status 2; Ctrl-C exits with 130 (after saving a training checkpoint when one is being written).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .data.agnews import SOURCE_URL, fetch
from .errors import ElmoError
from .pipelines.baselines import BaselinesArgs, baselines
from .pipelines.classification import ClassifyArgs, classify
from .pipelines.common import option
from .pipelines.embedding import EmbedArgs, embed
from .pipelines.export import ExportArgs, export
from .pipelines.finetuning import FinetuneArgs, finetune
from .pipelines.predict_command import PredictArgs, predict
from .pipelines.pretraining import PretrainArgs, pretrain
from .runtime import distributed
from .training.state import Interrupted


@dataclass
class FetchArgs:
    """Flags of ``python -m elmo fetch``."""

    data_dir: str = option("data/ag_news", "where train.csv and test.csv go")
    url: str = option(SOURCE_URL, "base URL holding train.csv and test.csv")
    force: bool = option(False, "replace present files whose md5 differs")

    def check(self) -> None:
        """Nothing to check."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its arguments dataclass (``*Args``), the function it runs and a one-line description."""

    args: type
    run: Callable[[Any], Any]
    help: str


COMMANDS: dict[str, Command] = {
    "pretrain": Command(PretrainArgs, pretrain, "pre-train the biLM on AG News or your corpus (ELMO.py)"),
    "finetune": Command(FinetuneArgs, finetune, "continue the language-model training of a published (or exported) "
                                                "bilm-tf ELMo on your domain's text"),
    "classify": Command(ClassifyArgs, classify, "train the AG News classifier on ELMo, three layer mixes "
                                                "(classification.py)"),
    "baselines": Command(BaselinesArgs, baselines, "Word2Vec, SVD and TF-IDF baselines (baselines.py)"),
    "predict": Command(PredictArgs, predict, "classify texts with classifier.pt"),
    "embed": Command(EmbedArgs, embed, "ELMo vectors of every line of a text file into an hdf5 file (AllenNLP's "
                                       "`elmo` command; the published ELMo or our biLM)"),
    "export": Command(ExportArgs, export, "write a bilm-tf biLM as bilm-tf's options.json, weights.hdf5 and vocab.txt "
                                          "(for AllenNLP, bilm-tf and ElmoEmbedder)"),
    "fetch": Command(FetchArgs, lambda c: fetch(c.data_dir, c.url, c.force), "download AG News (md5-verified)"),
}


def _flag_type(annotation: Any):
    """The argparse type of a field annotation such as ``int | None`` or ``float``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # Optional[X] -> X
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


class _DeprecatedAlias(argparse.Action):
    """A hidden old spelling of a flag: stores into the flag's field and says which spelling to use."""

    def __init__(self, option_strings, dest, current: str = "", **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.current = current

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"warning: {option_string} is deprecated: use {self.current}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def flag_of(field: dataclasses.Field) -> str:
    """The ``--flag`` spelling of an arguments dataclass field (``max_docs`` → ``--max-docs``)."""
    return "--" + field.name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, args_cls: type) -> argparse.ArgumentParser:
    """Add one ``--flag`` per field of the arguments dataclass ``args_cls`` (booleans get ``--no-flag`` too; a field
    whose metadata says ``positional=True`` becomes a positional argument; ``deprecated_aliases`` in its
    metadata are old spellings, accepted with a warning and hidden from ``--help``)."""
    hints = typing.get_type_hints(args_cls)
    for f in dataclasses.fields(args_cls):
        flag = flag_of(f)
        kind = _flag_type(hints[f.name])
        extra = {k: v for k, v in f.metadata.items() if k not in ("help", "positional", "deprecated_aliases")}
        listed = typing.get_origin(kind) in (list, tuple)
        if listed:  # a list flag takes one or more values, or any number where its field says nargs="*"
            extra.setdefault("nargs", "+")
        for alias in f.metadata.get("deprecated_aliases", ()):
            many = {"type": typing.get_args(kind)[0]} if listed else {"type": kind}
            parser.add_argument(alias, dest=f.name, action=_DeprecatedAlias, current=flag, default=argparse.SUPPRESS,
                                help=argparse.SUPPRESS, **many, **extra)
        if f.metadata.get("positional"):
            parser.add_argument(f.name, type=kind, help=f.metadata.get("help"), **extra)
        elif kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata.get("help"))
        elif listed:
            parser.add_argument(flag, type=typing.get_args(kind)[0], default=f.default,
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
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter), command.args)
    return parser


#: commands whose training runs keep checkpoints that ``--resume`` continues
TRAINING_COMMANDS = ("pretrain", "finetune", "classify", "baselines")


def ctrl_c_message(command: str) -> str:
    """What Ctrl-C outside a training loop left behind, for ``command``: training checkpoints and ``--resume``
    only for the training commands; otherwise that no file was half-written."""
    if command in TRAINING_COMMANDS:
        return ("interrupted by Ctrl-C; training runs that had started keep their checkpoints in "
                "<models-dir>/checkpoints/: run the same command with --resume to continue")
    return (f"{command} interrupted by Ctrl-C before it finished; files are moved into place only when complete, "
            "so none was left half-written")


def run(command: str, argv: Sequence[str] | None = None, prog: str | None = None,
        commands: dict[str, Command] | None = None) -> int:
    """Parse ``argv`` as the flags of ``command`` and run it; returns the exit status.

    Args:
        command: a key of :data:`COMMANDS`; argv: its flags (default ``sys.argv[1:]``); prog: the
            program name in ``--help`` (the shims pass their file name); commands: the table ``command`` is
            looked up in (default :data:`COMMANDS`; ``lab`` passes its own).

    An :class:`~elmo.errors.ElmoError` → one line on stderr, 2; Ctrl-C → 130. Under ``torchrun`` the
    command joins the process group, which is left here whatever happens.
    """
    spec = (COMMANDS if commands is None else commands)[command]
    parser = add_flags(argparse.ArgumentParser(prog=prog or f"python -m elmo {command}", description=spec.help,
                                               formatter_class=argparse.ArgumentDefaultsHelpFormatter), spec.args)
    args = parser.parse_args(argv)
    try:
        config = spec.args(**vars(args))
        config.check()
        try:
            spec.run(config)
        finally:
            distributed.shutdown()  # leave the torchrun process group, if the command joined one
    except Interrupted as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # Ctrl-C outside a training loop: nothing half-written, nothing to save
        print(f"stopped: {ctrl_c_message(command)}", file=sys.stderr)
        return 130
    except ElmoError as exc:
        print(f"error: {flag_message(exc, spec.args)}", file=sys.stderr)
        return 2
    return 0


def flag_message(error: ElmoError, args_cls: type) -> str:
    """``error``'s message as a command-line user reads it: the field it names (:attr:`ElmoError.field`,
    e.g. ``ClassifierConfig.token_embedding_dim``) spelt as the flag of ``args_cls`` that sets it
    (``--token-embedding-dim``), and so are the other fields of the same config named in the message;
    ``field=True`` / ``field=False`` become ``--flag`` / ``--no-flag``. Fields without a flag of the same name
    (and messages of errors without a field) are left as they are.

    Args:
        error: the error raised; args_cls: the command's arguments dataclass (e.g. ``ClassifyArgs``).
    """
    message = str(error)
    if not error.field:
        return message
    flags = {f.name: flag_of(f) for f in dataclasses.fields(args_cls) if not f.metadata.get("positional")}
    owner, _, name = error.field.rpartition(".")
    names = rf"{re.escape(owner)}\.(\w+)" if owner else rf"({re.escape(name)})"

    def spell(match: re.Match) -> str:
        flag = flags.get(match.group(1))
        if flag is None:
            return match.group(0)
        if match.group(2):
            return flag if match.group(2) == "=True" else "--no-" + flag[2:]
        return flag

    return re.sub(rf"(?<![\w.-]){names}(?!\w)(=True|=False)?", spell, message)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elmo <command> [flags]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # prints usage (or --help) and exits
        return 2
    return run(argv[0], argv[1:])
