"""Shared fixtures. Helper functions live in ``support.py`` (``from support import make_rows``): ``pythonpath``
in pyproject.toml puts this folder on ``sys.path``, so no test edits ``sys.path`` itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ROOT, make_rows, write_csv, write_tiny_agnews

__all__ = ["ROOT", "make_rows", "write_csv"]  # also importable from here, for tests written against the old conftest

INTEGRATION = ROOT / "tests" / "integration"


#: the longest test (3-4 minutes on a 2-core CPU), started first so that the two workers of ``pytest -n 2`` finish
#: together: pytest-xdist's ``worksteal`` gives each worker half of the collected tests in order and lets an idle
#: worker take tests from the end of the other's half
FIRST = "test_smoke_agnews.py"


def pytest_collection_modifyitems(items):
    """Every test under tests/integration/ is ``slow`` (each module says so with ``pytestmark``; this makes sure a
    new module cannot forget it, so ``-m "not slow"`` always leaves only the in-process tests). The slow tests run
    first, the smoke run on AG News (:data:`FIRST`) before them all; the order is otherwise the collection order."""
    for item in items:
        if INTEGRATION in Path(str(item.path)).parents and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: (Path(str(item.path)).name != FIRST, not item.get_closest_marker("slow")))


@pytest.fixture
def tiny_agnews(tmp_path: Path) -> Path:
    """A data folder with train.csv (240 rows) and test.csv (80 rows) in the original layout."""
    return write_tiny_agnews(tmp_path / "data")


@pytest.fixture(scope="session")
def tiny_agnews_shared(tmp_path_factory) -> Path:
    """The same corpus, written once per test run, for module- and run-scoped fixtures (read only)."""
    return write_tiny_agnews(tmp_path_factory.mktemp("tiny") / "data")
