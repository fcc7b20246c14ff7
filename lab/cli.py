"""The lab's command line: ``python -m lab <command> [flags]``, parsed and run as ``python -m elmo``'s commands are.

=================  =========================================================================================
command            what it runs
=================  =========================================================================================
``study``          :func:`run_study`: the comparison over seeds (``results/seeds.json``), the learning curve
                   (``--labelled-fractions``) or the pre-training-text curve (``--pretraining-texts``)
``report``         :func:`lab.report.make_report`: ``report.pdf`` from ``results/`` and ``images/``
``bench``          :func:`lab.bench.speed.bench`: speed and memory (``results/bench.json``)
``bench-scale``    :func:`lab.bench.scale.bench_scale`: streaming and ``torchrun`` scaling
=================  =========================================================================================
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any, Sequence

from elmo import cli
from elmo.cli import Command, add_flags

from . import learning_curve, study
from .bench.scale import ScaleArgs, bench_scale
from .bench.speed import BenchArgs, bench
from .report import ReportArgs, make_report
from .study import StudyArgs


def run_study(config: StudyArgs) -> dict[str, Any]:
    """Run the unfinished parts (:func:`run_parts`), then :func:`aggregate`; prints the table. With
    ``--labelled-fractions``, the learning curve instead (:mod:`lab.learning_curve`).

    Raises:
        ElmoError: bad flags, ``--results`` is one of the study's inputs (:func:`check_files`), a failed part,
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


COMMANDS: dict[str, Command] = {
    "study": Command(StudyArgs, run_study, "the comparison over several seeds with confidence intervals and paired "
                                           "tests (results/seeds.json), or its learning curves"),
    "report": Command(ReportArgs, make_report, "write report.pdf from results/ and images/"),
    "bench": Command(BenchArgs, bench, "speed and memory benchmark (results/bench.json)"),
    "bench-scale": Command(ScaleArgs, bench_scale, "streaming and torchrun scaling benchmark"),
}


def run(command: str, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as the flags of the lab's ``command`` and run it (:func:`elmo.cli.run`); the exit status."""
    return cli.run(command, argv, prog=f"python -m lab {command}", commands=COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab <command> [flags]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
        sub = parser.add_subparsers(dest="command", required=True, metavar="command")
        for name, command in COMMANDS.items():
            add_flags(sub.add_parser(name, help=command.help, description=command.help), command.args)
        parser.parse_args(argv)  # prints usage (or --help) and exits
        return 2
    return run(argv[0], argv[1:])
