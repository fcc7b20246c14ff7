"""The smoke run on real AG News: ``--max-docs 2000 --epochs 1`` through both scripts.

Needs ``data/ag_news/{train,test}.csv`` (CI links the shared copy there). Skipped when the data is
absent on a developer machine; under CI (``CI=true``) missing data is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

DATA = ROOT / "data" / "ag_news"
HAVE_DATA = (DATA / "train.csv").is_file() and (DATA / "test.csv").is_file()

if not HAVE_DATA and os.environ.get("CI"):
    pytest.fail(f"CI run without AG News in {DATA}: .ci/run must link ../shared/data/ag_news there", pytrace=False)


@pytest.mark.skipif(not HAVE_DATA, reason=f"AG News not found in {DATA}")
def test_smoke_run_on_real_agnews(tmp_path):
    common = ["--data-dir", str(DATA), "--models-dir", str(tmp_path / "models"), "--results-dir",
              str(tmp_path / "results"), "--images-dir", str(tmp_path / "images"), "--max-docs", "2000",
              "--epochs", "1", "--quiet"]
    started = time.perf_counter()
    for script in ("ELMO.py", "classification.py"):
        result = subprocess.run([sys.executable, str(ROOT / script), *common], capture_output=True, text=True,
                                timeout=900)
        assert result.returncode == 0, result.stderr
    print(f"smoke run (both scripts): {time.perf_counter() - started:.0f} s")
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    cls = json.loads((tmp_path / "results" / "classification.json").read_text())
    assert lm["documents"] == {"train": 1900, "val": 100, "test": 7600}
    assert lm["test"]["forward_perplexity"] < lm["vocab_size"]  # better than a uniform guess
    assert sum(map(sum, cls[cls["best_setting"]]["test"]["confusion_matrix"])) == 7600
