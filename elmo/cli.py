"""The command line: ``python -m elmo <command> [flags]`` (and the top-level scripts, which are shims).

:data:`COMMANDS` maps each command to the function it runs; its flags are generated 1:1 from its arguments dataclass
(``*Args``, ``--max-docs`` ↔ ``max_docs``: :func:`add_flags`). An :class:`~elmo.errors.ElmoError` becomes one line on
stderr (fields spelt as flags: :func:`flag_message`) and exit status 2; Ctrl-C exits with 130 (after saving a training
checkpoint when one is being written).
"""

from __future__ import annotations

import argparse
import copy
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
    "export": Command(ExportArgs, export, "write a biLM as bilm-tf's options.json, weights.hdf5 and vocab.txt (for "
                                          "AllenNLP, bilm-tf and ElmoEmbedder), or a model as a save_pretrained folder"),
    "fetch": Command(FetchArgs, lambda c: fetch(c.data_dir, c.url, c.force), "download AG News (md5-verified)"),
}


def flag_of(field: dataclasses.Field) -> str:
    """The ``--flag`` spelling of an arguments dataclass field (``max_docs`` → ``--max-docs``)."""
    return "--" + field.name.replace("_", "-")


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` that gives each flag a line or two: ``--[no-]flag`` for a boolean, short metavars, ``(default:
    ...)`` unless there is none (``None``, an empty list), a list's default written as its values."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=30)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, argparse.BooleanOptionalAction):
            return "--[no-]" + action.option_strings[0][2:]
        return super()._format_action_invocation(action)

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        if action.nargs in ("+", "*"):
            return self._metavar_formatter(action, default_metavar)(1)[0] + " ..."
        return super()._format_args(action, default_metavar)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" in text or not action.option_strings or action.default in (None, (), [], argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"

    def _expand_help(self, action: argparse.Action) -> str:
        if isinstance(action.default, (tuple, list)) and action.default:
            action = copy.copy(action)
            action.default = " ".join(map(str, action.default))
        return super()._expand_help(action)


class _PerParse:
    """What an action remembers of the parse it is in: whether its flag was given already (argparse starts every
    parse with a new namespace; the last one is held so that its ``id`` is never another's)."""

    def given_before(self, namespace: argparse.Namespace) -> bool:
        seen = getattr(self, "_namespace", None) is namespace
        self._namespace = namespace
        return seen


class StoreOnce(_PerParse, argparse.Action):
    """A flag with one value, refused when given twice (argparse's own keeps the last one without a word). With
    ``nargs=0``, a ``one_of`` flag (:func:`~elmo.pipelines.common.option`): it sets its field to ``True``."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self.given_before(namespace):
            parser.error(f"{' / '.join(self.option_strings)} was given twice: give it once")
        if isinstance(self, argparse.BooleanOptionalAction):
            super().__call__(parser, namespace, values, option_string)
        else:
            setattr(namespace, self.dest, True if self.nargs == 0 else values)


class BooleanOnce(StoreOnce, argparse.BooleanOptionalAction):
    """``--flag`` / ``--no-flag``, refused when either is given twice (:class:`StoreOnce`)."""


class ExtendList(_PerParse, argparse.Action):
    """A list flag: its values replace the default; a repeated one appends (``--text A --text B`` is ``--text A B``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        earlier = list(getattr(namespace, self.dest) or ()) if self.given_before(namespace) else []
        setattr(namespace, self.dest, [*earlier, *values])


def add_flags(parser: argparse.ArgumentParser, args_cls: type, lab: bool = False) -> argparse.ArgumentParser:
    """Add one ``--flag`` per field of the arguments dataclass ``args_cls`` (booleans also get ``--no-flag``; metadata
    ``positional=True``: a positional argument; ``lab=True``: only with ``lab``; ``one_of=TITLE``: listed together under
    ``TITLE (one is required)``). A flag given twice is refused except a list flag, which appends (:class:`ExtendList`)."""
    hints = typing.get_type_hints(args_cls)
    groups: dict[str, Any] = {}
    for f in dataclasses.fields(args_cls):
        if f.metadata.get("lab") and not lab:
            continue
        flag, kind, text = flag_of(f), hints[f.name], f.metadata.get("help")
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # Optional[X] -> X
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        listed = typing.get_origin(kind) in (list, tuple)
        item = typing.get_args(kind)[0] if listed else kind
        # a short metavar: N for a whole number, X for a real one, else the field name's last word (--models-dir DIR);
        # none (argparse's {a,b}) for a field with choices
        metavar = {int: "N", float: "X"}.get(item, f.name.rpartition("_")[2].upper())
        extra = {"metavar": None if "choices" in f.metadata and not listed else metavar,
                 **{k: v for k, v in f.metadata.items() if k not in ("help", "positional", "lab", "one_of")}}
        if listed:  # a list flag takes one or more values, or any number where its field says nargs="*"
            extra.setdefault("nargs", "+")
        if f.metadata.get("positional"):
            parser.add_argument(f.name, type=kind, help=text, **{k: v for k, v in extra.items() if k != "metavar"})
        elif kind is bool and f.metadata.get("one_of"):
            title = f.metadata["one_of"]
            group = groups.get(title) or groups.setdefault(title, parser.add_argument_group(f"{title} (one is required)"))
            group.add_argument(flag, action=StoreOnce, nargs=0, default=argparse.SUPPRESS, help=text)
        elif kind is bool:
            parser.add_argument(flag, action=BooleanOnce, default=f.default, help=text)
        else:
            parser.add_argument(flag, type=item, default=f.default, help=text,
                                action=ExtendList if listed else StoreOnce, **extra)
    return parser


def command_parser(spec: Command, prog: str, lab: bool = False) -> argparse.ArgumentParser:
    """The parser of one command: its flags (:func:`add_flags`; ``lab``: with the lab's), one-line usage naming the
    positional arguments and each required choice (``(--all | --top | --average)``)."""
    positional = [f.name for f in dataclasses.fields(spec.args) if f.metadata.get("positional")]
    choices: dict[str, list[str]] = {}
    for f in dataclasses.fields(spec.args):
        if f.metadata.get("one_of"):
            choices.setdefault(f.metadata["one_of"], []).append(flag_of(f))
    parser = argparse.ArgumentParser(prog=prog, description=spec.help, formatter_class=HelpFormatter,
                                     usage=" ".join(["%(prog)s [-h] [options]",
                                                     *(f"({' | '.join(flags)})" for flags in choices.values()),
                                                     *positional]))
    return add_flags(parser, spec.args, lab)


def build_parser(prog: str = "python -m elmo", description: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``python -m elmo`` (or of ``python -m lab elmo``, its ``description``): one subcommand per entry of
    :data:`COMMANDS` (its flags: :func:`run`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description or __doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, description=command.help)
    return parser


def ctrl_c_message(command: str) -> str:
    """What Ctrl-C outside a training loop left behind: checkpoints and ``--resume`` for the commands that keep them,
    else no half-written file."""
    if command in ("pretrain", "finetune", "classify", "baselines"):
        return ("interrupted by Ctrl-C; training runs that had started keep their checkpoints in "
                "<models-dir>/checkpoints/: run the same command with --resume to continue")
    return (f"{command} interrupted by Ctrl-C before it finished; files are moved into place only when complete, "
            "so none was left half-written")


def run(command: str, argv: Sequence[str] | None = None, prog: str | None = None,
        commands: dict[str, Command] | None = None, lab: bool = False) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) as ``command``'s flags and run it; returns the exit status (module
    docstring: 0, 2, 130). Under ``torchrun`` the command joins the process group, always left here. ``prog``: the
    name in ``--help`` (the shims pass their file name); ``commands``: the table holding ``command`` (default
    :data:`COMMANDS`; ``lab.cli`` passes its own); ``lab``: also the ``lab=True`` fields' flags (:func:`add_flags`)."""
    spec = (COMMANDS if commands is None else commands)[command]
    parser = command_parser(spec, prog or f"python -m elmo {command}", lab)
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
    """``error``'s message as a command-line user reads it: the fields it names (:attr:`ElmoError.field` says how)
    spelt as the flags of ``args_cls`` (the command's ``*Args``) that set them (``ClassifierConfig.token_embedding_dim``
    → ``--token-embedding-dim``); fields with no flag of that name, and errors with no field, are left alone."""
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
        return "--no-" + flag[2:] if match.group(2) == "=False" else flag

    return re.sub(rf"(?<![\w.-]){names}(?!\w)(=True|=False)?", spell, message)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elmo <command> [flags]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # prints usage (or --help) and exits
        return 2
    return run(argv[0], argv[1:])
