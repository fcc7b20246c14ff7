"""End-to-end runs, made once per test run, that several integration modules read (never modify them: copy first)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import CLASSIFY, SMALL, run_script, write_tiny_agnews


@dataclass(frozen=True)
class PipelineRun:
    """``ELMO.py`` then ``classification.py`` on the tiny corpus: where, and what they wrote."""

    data: Path
    out: Path
    lm: dict
    cls: dict


@pytest.fixture(scope="session")
def small_pipeline(tmp_path_factory) -> PipelineRun:
    """Both scripts with the shared small flags (:data:`support.SMALL`, :data:`support.CLASSIFY`)."""
    root = tmp_path_factory.mktemp("pipeline")
    data = write_tiny_agnews(root / "data")
    out = root / "run1"
    for script, flags in (("ELMO.py", SMALL), ("classification.py", CLASSIFY)):
        done = run_script(script, out, data, *flags)
        assert done.returncode == 0, done.stderr
    return PipelineRun(data, out, json.loads((out / "results" / "lm.json").read_text()),
                       json.loads((out / "results" / "classification.json").read_text()))


#: Flags of the pinned run (tests/fixtures/pinned_metrics.json): the defaults of both scripts except these.
#: ``--batch-size 64`` and ``--init-embeddings word2vec`` are what the defaults choose on the full AG News sample
#: (tests/unit/pipelines/test_small_corpus_defaults.py); on this tiny corpus they would choose batches of 8 and
#: random embeddings, so the pinned numbers follow the computation of the full-data default run.
PINNED_COMMON = ["--precision", "fp32", "--threads", "1", "--quiet", "--batch-size", "64"]
PINNED_LM = ["--max-docs", "2000", "--epochs", "1", "--init-embeddings", "word2vec"]


@pytest.fixture(scope="session")
def pinned_run(tmp_path_factory) -> PipelineRun:
    """``ELMO.py --max-docs 2000 --epochs 1`` and ``classification.py`` at their default sizes, fp32, one thread,
    on the tiny corpus: the run whose metrics are pinned (its models double as "another biLM" elsewhere)."""
    root = tmp_path_factory.mktemp("pinned")
    data = write_tiny_agnews(root / "data")
    out = root / "run"
    for script, flags in (("ELMO.py", [*PINNED_COMMON, *PINNED_LM]), ("classification.py", PINNED_COMMON)):
        done = run_script(script, out, data, *flags)
        assert done.returncode == 0, done.stderr
    return PipelineRun(data, out, json.loads((out / "results" / "lm.json").read_text()),
                       json.loads((out / "results" / "classification.json").read_text()))
