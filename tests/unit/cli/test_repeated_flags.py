"""A flag given twice: a list flag (``predict --text``, ``classify --mixes``) takes the values of each in order; any
other flag of every user command is refused with one line naming it and exit status 2 (argparse alone would keep the
last value without a word)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from elmo.cli import COMMANDS, command_parser, flag_of
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.predict_command import PredictArgs


def parse(command: str, argv: list[str]):
    spec = COMMANDS[command]
    return spec.args(**vars(command_parser(spec, f"python -m elmo {command}").parse_args(argv)))


def test_text_given_twice_keeps_both_in_order():
    assert parse("predict", ["--text", "Oil prices jumped.", "--text", "The Yankees won."]).text == \
        ("Oil prices jumped.", "The Yankees won.")
    assert parse("predict", ["--text", "one", "two", "--text", "three"]).text == ("one", "two", "three")
    assert PredictArgs(text="a single text").text == ("a single text",)


def test_a_list_flag_given_twice_adds_its_values_instead_of_the_default():
    assert parse("classify", ["--mixes", "frozen_lambda", "--mixes", "learned_function"]).mixes == \
        ["frozen_lambda", "learned_function"]
    assert tuple(parse("classify", []).mixes) == tuple(ClassifyArgs().mixes)
    parser = command_parser(COMMANDS["classify"], "python -m elmo classify")  # one parser, parses that start afresh
    assert parser.parse_args(["--mixes", "frozen_lambda"]).mixes == ["frozen_lambda"]
    assert parser.parse_args(["--mixes", "learned_function"]).mixes == ["learned_function"]


def single_flags(command: str) -> list[tuple[str, list[str]]]:
    """Every non-list flag of ``command`` with one value it accepts (booleans: the flag alone)."""
    args = COMMANDS[command].args
    hints, out = typing.get_type_hints(args), []
    for f in dataclasses.fields(args):
        kind = hints[f.name]
        if f.metadata.get("positional") or f.metadata.get("lab") or typing.get_origin(kind) in (list, tuple):
            continue
        if kind is bool:
            out.append((flag_of(f), []))
        else:
            value = f.metadata["choices"][0] if "choices" in f.metadata else \
                "1" if int in (kind, *typing.get_args(kind)) or float in (kind, *typing.get_args(kind)) else "x"
            out.append((flag_of(f), [value]))
    return out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_other_flag_given_twice_is_refused_naming_it(command, capsys):
    flags = single_flags(command)
    assert flags, command
    spec = COMMANDS[command]
    positional = ["in.txt", "out.hdf5"] if command == "embed" else []
    for flag, value in flags:
        no_flag = "--no-" + flag[2:] in command_parser(spec, "x")._option_string_actions  # not a one_of choice
        second = ["--no-" + flag[2:]] if not value and no_flag else [flag, *value]
        with pytest.raises(SystemExit) as stop:
            command_parser(spec, f"python -m elmo {command}").parse_args([*positional, flag, *value, *second])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"error: {flag}" in err and "was given twice: give it once" in err and "Traceback" not in err
