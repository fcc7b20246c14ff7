"""``ELMO.py --concurrent-directions``: the two LM directions trained side by side, each in a process of its own,
give bit for bit the numbers of the one-thread run that trains them one after the other (the resume of a killed
side-by-side run is in tests/integration/test_resume_scripts.py; the flag and a failing process in
tests/unit/pipelines/test_pretraining.py)."""

from __future__ import annotations

import json

import pytest
import torch
from support import SMALL, run_script, without_timings

pytestmark = pytest.mark.slow

#: both directions at once, one thread each (SMALL's own run: one thread, one direction after the other)
SIDE_BY_SIDE = ["--threads", "2", "--concurrent-directions", "on"]


def test_side_by_side_directions_give_the_numbers_of_the_one_thread_run(small_pipeline, tmp_path):
    ref = small_pipeline.lm
    done = run_script("ELMO.py", tmp_path, small_pipeline.data, *SMALL, *SIDE_BY_SIDE)
    assert done.returncode == 0, done.stderr
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert (lm["concurrent_directions"], lm["threads_per_direction"]) == (True, 1)
    assert (ref["concurrent_directions"], ref["threads_per_direction"]) == (False, 1)
    assert set(lm["startup_seconds"]) == {"forward", "backward"}
    assert set(lm["peak_rss_mb"]) == {"forward", "backward", "main"} and min(lm["peak_rss_mb"].values()) > 50
    assert lm["val"] == ref["val"] and lm["test"] == ref["test"]
    for d in ("forward", "backward"):
        assert lm["directions"][d]["best_epoch"] == ref["directions"][d]["best_epoch"], d
        assert without_timings(lm["directions"][d]["history"]) == without_timings(ref["directions"][d]["history"]), d
    got, want = (torch.load(out / "models" / "bilstm.pt", weights_only=True) for out in (tmp_path, small_pipeline.out))
    for d in ("forward", "backward"):
        assert all(torch.equal(got[d][k], want[d][k]) for k in want[d]), d
    assert not (tmp_path / "models" / "checkpoints").exists()  # the checkpoints and the processes' logs are gone
