"""Runs side by side in child processes (elmo.training.processes); the pipeline that uses them is tested in
tests/unit/pipelines/test_pretraining.py and tests/integration/test_concurrent_directions.py."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from elmo.errors import ElmoError
from elmo.runtime.device import resolve_device
from elmo.training import processes
from elmo.training.processes import ChildRun, run_side_by_side


def test_the_first_error_a_child_raises_is_raised_with_its_message_and_the_other_run_is_stopped(tmp_path):
    """``resolve_device("tpu")`` raises ElmoError in its child: that message comes back (through the result file,
    read with weights_only); the other child, still sleeping, is stopped rather than waited for."""
    runs = [ChildRun("device run", resolve_device, "tpu", 1, tmp_path / "a.log", tmp_path / "a.pt"),
            ChildRun("slow run", time.sleep, 60, 1, tmp_path / "b.log", tmp_path / "b.pt")]  # never done first
    with pytest.raises(ElmoError, match=r"^--device: unknown device 'tpu'") as error:
        run_side_by_side(runs)
    assert not isinstance(error.value, KeyboardInterrupt)
    assert not (tmp_path / "a.pt").exists() and not (tmp_path / "b.pt").exists()  # results are read, then removed


def test_a_failed_child_is_named_with_its_exit_and_its_log_s_last_non_blank_line(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("Traceback (most recent call last):\n  ...\nTypeError: boom\n\n")
    run = ChildRun("x run", print, None, 1, log, tmp_path / "x.pt")
    failed = processes._outcome(run, 1)
    assert failed["outcome"] == "failed"
    assert failed["message"] == f"x run: its process failed with exit status 1; its log {log}: TypeError: boom"
    absent = tmp_path / "absent.log"
    assert processes._outcome(replace(run, log=absent), -9)["message"].endswith(f"SIGKILL; its log {absent}: (no log)")


def test_each_child_s_peak_memory_is_its_own(tmp_path):
    """Each child reports its own program's peak RSS, not the larger parent's it was started from (ru_maxrss would
    carry that over exec): /usr/bin/time -v on the parent reports only the largest of the processes."""
    import numpy
    from support import hold_memory

    from elmo.runtime.device import peak_rss_mb

    held = numpy.ones(800 * 2**20 // 8)  # the parent is the largest process when the children start
    runs = [ChildRun("large", hold_memory, 400, 1, tmp_path / "a.log", tmp_path / "a.pt"),
            ChildRun("small", hold_memory, 1, 1, tmp_path / "b.log", tmp_path / "b.pt")]
    large, small = run_side_by_side(runs)
    assert large.value["mib"] == 400 and small.value["mib"] == 1 and held.sum() > 0
    assert large.peak_rss_mb - small.peak_rss_mb > 350 and small.peak_rss_mb > 10  # 10: at least the interpreter
    assert small.peak_rss_mb + 600 < peak_rss_mb()
