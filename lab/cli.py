"""The lab's command line: ``python -m lab <command> [flags]``, parsed and run as ``python -m elmo``'s commands are.

=================  =========================================================================================
command            what it runs
=================  =========================================================================================
``study``          :func:`run_study`: the comparison over seeds (``results/seeds.json``), the learning curve
                   (``--labelled-fractions``) or the pre-training-text curve (``--pretraining-texts``)
``report``         :func:`lab.report.make_report`: ``report.pdf`` from ``results/`` and ``images/``
``bench``          :func:`lab.bench.speed.bench`: speed and memory (``results/bench.json``)
``bench-scale``    :func:`lab.bench.scale.bench_scale`: streaming and ``torchrun`` scaling
``gpu``            :func:`lab.bench.gpu.measure_gpu`: one GPU in one call (``results/gpu/gpu.json``)
``elmo``           :func:`run_library`: ``python -m elmo``'s commands with the lab's flags too (the study's parts)
=================  =========================================================================================
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from elmo import cli
from elmo.cli import Command, add_flags
from elmo.training.state import Interrupted

from . import learning_curve, study
from .bench.gpu import GpuArgs, measure_gpu
from .bench.scale import ScaleArgs, bench_scale
from .bench.speed import BenchArgs, bench
from .readme import ReadmeArgs, write_readme
from .report import ReportArgs, make_report
from .study import StudyArgs


def run_study(config: StudyArgs) -> dict[str, Any]:
    """Run the unfinished parts (:func:`run_parts`), then :func:`aggregate`; prints the table. With
    ``--labelled-fractions``, the learning curve instead (:mod:`lab.learning_curve`).

    Raises:
        ElmoError: bad flags, ``--out`` is one of the study's inputs (:func:`check_files`), a failed part,
            or no seed finished.
    """
    if config.pretraining_texts and not config.labelled_fractions:
        config = replace(config, labelled_fractions=(0.1, 1.0))
    config.check()
    study.check_files(config)
    if config.pretraining_texts:
        record = None if config.aggregate_only else study.run_parts(config, learning_curve.plan_text_curve(config))
        out = learning_curve.aggregate_text_curve(config, record)
        print(learning_curve.format_text_curve(out), flush=True)
        return out
    curve = bool(config.labelled_fractions)
    record = None
    if not config.aggregate_only:
        started = time.perf_counter()
        record = study.run_parts(config, learning_curve.plan_curve(config) if curve else study.plan(config))
        print(f"[study] parts finished in {(time.perf_counter() - started) / 60:.1f} min", flush=True)
    if curve:
        out = learning_curve.aggregate_curve(config, record)
        print(learning_curve.format_curve(out), flush=True)
        return out
    out = study.aggregate(config, record)
    print(study.format_study(out), flush=True)
    return out


def ctrl_c_message(command: str) -> str:
    """What Ctrl-C left behind, for the lab's ``command``: the study keeps the parts that had finished (a part's
    file is written only when it is complete), so the same command does the rest; for the others, as for the
    library's commands (:func:`elmo.cli.ctrl_c_message`), that no file was left half-written."""
    if command == "study":
        return "study interrupted by Ctrl-C; its finished parts are kept: run the same command to do the rest"
    return cli.ctrl_c_message(command)


def stops_with_its_message(command: str, function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``function`` with Ctrl-C turned into :class:`~elmo.training.state.Interrupted` carrying
    :func:`ctrl_c_message` of ``command``, which :func:`elmo.cli.run` prints (exit status 130)."""
    @functools.wraps(function)
    def run(config: Any) -> Any:
        try:
            return function(config)
        except KeyboardInterrupt:
            raise Interrupted(ctrl_c_message(command)) from None
    return run


COMMANDS: dict[str, Command] = {
    "study": Command(StudyArgs, run_study, "the comparison over several seeds with confidence intervals and paired "
                                           "tests (results/seeds.json), or its learning curves"),
    "report": Command(ReportArgs, make_report, "write report.pdf from results/ and images/"),
    "bench": Command(BenchArgs, bench, "speed and memory benchmark (results/bench.json)"),
    "bench-scale": Command(ScaleArgs, bench_scale, "streaming and torchrun scaling benchmark"),
    "gpu": Command(GpuArgs, measure_gpu, "one GPU in one call, within 9 minutes: published-architecture training and "
                                         "embedding speed, the default run (results/gpu/gpu.json)"),
    "readme": Command(ReadmeArgs, write_readme, "fill README.md's generated blocks and write lab/results.md from results/"),
}


def run(command: str, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as the flags of the lab's ``command`` and run it (:func:`elmo.cli.run`); the exit status
    (2 for an :class:`~elmo.errors.ElmoError`, 130 for Ctrl-C with the lab's :func:`ctrl_c_message`)."""
    spec = COMMANDS[command]
    interruptible = {command: replace(spec, run=stops_with_its_message(command, spec.run))}
    return cli.run(command, argv, prog=f"python -m lab {command}", commands=interruptible)


#: ``python -m lab elmo <command> [flags]``: a library command, with the lab's flags as well (:func:`run_library`)
LIBRARY = "elmo"
LIBRARY_HELP = ("a library command (python -m elmo's) that also takes the lab's flags: the learning curves' shares, "
                "diagnostics, options measured and not adopted; the study's parts run through it")


def run_library(argv: Sequence[str]) -> int:
    """``python -m lab elmo <command> [flags]``: the library's ``command`` (:data:`elmo.cli.COMMANDS`) run by
    :func:`elmo.cli.run` with the fields marked ``lab=True`` as flags too (e.g. ``classify --labelled-fraction``);
    the exit status. Without a library command, prints the usage and exits with 2."""
    if not argv or argv[0] not in cli.COMMANDS:
        cli.build_parser(f"python -m lab {LIBRARY}", LIBRARY_HELP).parse_args(argv)  # prints usage (or --help), exits
        return 2
    return cli.run(argv[0], argv[1:], prog=f"python -m lab {LIBRARY} {argv[0]}", lab=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab <command> [flags]`` (or ``python -m lab elmo <command> [flags]``, :func:`run_library`);
    returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [LIBRARY]:
        return run_library(argv[1:])
    if not argv or argv[0] not in COMMANDS:
        parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
        sub = parser.add_subparsers(dest="command", required=True, metavar="command")
        for name, command in COMMANDS.items():
            add_flags(sub.add_parser(name, help=command.help, description=command.help), command.args)
        sub.add_parser(LIBRARY, help=LIBRARY_HELP, description=LIBRARY_HELP)
        parser.parse_args(argv)  # prints usage (or --help) and exits
        return 2
    return run(argv[0], argv[1:])
