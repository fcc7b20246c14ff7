"""``python -m lab``: the lab's commands, parsed and run as ``python -m elmo``'s are."""

import subprocess
import sys

import pytest
from support import ROOT

from elmo.cli import COMMANDS as LIBRARY_COMMANDS
from lab.cli import COMMANDS, main


def test_the_lab_commands_are_not_library_commands():
    assert set(COMMANDS) == {"study", "report", "bench", "bench-scale"}
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
