"""Shared fixtures: small AG-News-like corpora written by the tests themselves."""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOPIC_WORDS = [
    ["minister", "election", "troops", "president", "talks", "border", "rebels", "parliament"],
    ["match", "season", "coach", "goal", "team", "league", "championship", "striker"],
    ["shares", "profit", "market", "investors", "oil", "prices", "quarter", "bank"],
    ["software", "internet", "computer", "researchers", "space", "wireless", "microsoft", "chip"],
]
COMMON = ["the", "a", "of", "in", "on", "said", "and", "to", "its", "after", "new", "for"]


def make_rows(n: int, seed: int) -> list[tuple[int, str, str]]:
    """``n`` rows (class 1-4, title, description) whose words depend on the class."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % 4
        words = [rng.choice(TOPIC_WORDS[label] if rng.random() < 0.5 else COMMON) for _ in range(rng.randint(5, 14))]
        rows.append((label + 1, f"title {i}", " ".join(words).capitalize() + " #39;s &lt;b&gt;news&lt;/b&gt;."))
    return rows


def write_csv(path: Path, rows, header: list[str] | None = None) -> Path:
    """Write rows the way AG News does: every field quoted, LF line endings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def tiny_agnews(tmp_path: Path) -> Path:
    """A data folder with train.csv (240 rows) and test.csv (80 rows) in the original layout."""
    data = tmp_path / "data"
    write_csv(data / "train.csv", make_rows(240, seed=1))
    write_csv(data / "test.csv", make_rows(80, seed=2))
    return data
