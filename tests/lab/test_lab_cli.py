"""``python -m lab``: the lab's commands, parsed and run as ``python -m elmo``'s are."""

import subprocess
import sys

import pytest
from support import ROOT

from elmo.cli import COMMANDS as LIBRARY_COMMANDS
from elmo.cli import main as library_main
from lab.cli import COMMANDS, main


def test_the_lab_commands_are_not_library_commands():
    assert {"study", "report", "bench", "bench-scale"} <= set(COMMANDS)
    assert not set(COMMANDS) & set(LIBRARY_COMMANDS)


def test_python_m_lab_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "lab", "--help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in COMMANDS:
        assert f"    {name}" in out, name


def test_an_unknown_lab_command_prints_usage_and_exits_2(capsys):
    with pytest.raises(SystemExit) as done:
        main(["pretrain"])
    assert done.value.code == 2
    assert "usage: python -m lab" in capsys.readouterr().err


def test_python_m_lab_elmo_runs_a_library_command_with_the_lab_flags_too(capsys, tmp_path):
    flags = ["classify", "--data-dir", str(tmp_path), "--labelled-fraction", "2"]
    assert main(["elmo", *flags]) == 2  # the lab's flag is taken, and checked
    assert "--labelled-fraction must be in (0, 1], got 2.0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:  # the library's own command line does not take it
        library_main(flags)
    assert done.value.code == 2 and "unrecognized arguments: --labelled-fraction" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["elmo", "study"])  # a lab command is not a library command
    assert done.value.code == 2 and "usage: python -m lab elmo" in capsys.readouterr().err
