"""The text that representations are learnt from, as opposed to the labelled documents a classifier trains on: the
training split's descriptions, or a share of them (``--text-fraction``), plus unlabelled
``--extra-text`` CSV files (docs/commands.md). An extra row is dropped when it repeats another or contains a validation
or test description (matched without the description's first word, which may be glued to the title's last).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import ElmoError
from .corpus import Corpus
from .text import tokenize

#: descriptions shorter than this many words are not matched inside extra text (too likely to occur by chance)
MIN_MATCH_WORDS = 4


def read_extra_text(path: str | os.PathLike) -> list[str]:
    """The texts of an extra-text CSV file (a header row; a ``text`` column, or ``title`` and ``description`` joined
    with a space). Raises ElmoError, naming the file, when it is missing, not CSV or has neither layout."""
    path = Path(path)
    if not path.is_file():
        raise ElmoError(f"{path}: file not found", field="extra_text")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ElmoError(f"{path}: not a readable CSV file with a header row ({exc})", field="extra_text") from None
    columns = {c.strip().lower(): c for c in frame.columns}
    if "text" in columns:
        return frame[columns["text"]].tolist()
    if "title" in columns and "description" in columns:
        return (frame[columns["title"]].str.strip() + " " + frame[columns["description"]].str.strip()).tolist()
    raise ElmoError(f"{path}: expected a 'text' column or 'title' and 'description' columns, got "
                    f"{list(frame.columns)}", field="extra_text")


def _ends_with_one(corpora: Sequence[Corpus]) -> Callable[[tuple[str, ...]], bool]:
    """Whether words end with a description of ``corpora`` but its first word (of >= :data:`MIN_MATCH_WORDS` words)."""
    suffixes = {tuple(t[1:]) for c in corpora for t in c.tokens if len(t) > MIN_MATCH_WORDS}
    lengths = sorted({len(s) for s in suffixes})
    return lambda words: any(n <= len(words) and words[-n:] in suffixes for n in lengths)


def pretraining_text(train: Corpus, held_out: Sequence[Corpus], fraction: float = 1.0, seed: int = 0,
                     extra_files: Sequence[str | os.PathLike] = ()) -> tuple[Corpus, dict[str, Any]]:
    """The text representations are learnt from: ``round(fraction * n)`` (at least 1; ``fraction`` in ``(0, 1]``) of
    the n documents of ``train``, drawn from ``seed`` in a stream of its own (apart from the validation split's and the
    labelled draw's), plus the new rows of ``extra_files`` (:func:`read_extra_text`; see the module docstring);
    ``held_out``: the validation and test splits, whose descriptions must not leak in through extra text. Raises
    ElmoError on a bad ``fraction`` (field ``text_fraction``) or an unreadable extra file (naming it). Returns
    ``(corpus, stats)``: the documents (train's first, in file order, keeping their labels, then the extra rows kept,
    labelled -1, "no label") and ``{"train_documents", "extra": {file: {"rows", "kept", "held_out", "repeats",
    "empty"}}}``."""
    if not 0.0 < fraction <= 1.0:
        raise ElmoError(f"text_fraction must be in (0, 1], got {fraction}", field="text_fraction")
    n = len(train)
    drawn = np.random.default_rng([seed, 2]).permutation(n)[:max(1, int(round(fraction * n)))] if fraction < 1 else None
    corpus = train.subset(np.arange(n) if drawn is None else np.sort(drawn))
    stats: dict[str, Any] = {"train_documents": len(corpus), "extra": {}}
    if not extra_files:
        return corpus, stats
    is_held = _ends_with_one(held_out)
    is_known = _ends_with_one([train])  # a training description again (any share) adds no new text
    seen: set[tuple[str, ...]] = set()
    texts, tokens = list(corpus.texts), list(corpus.tokens)
    for path in extra_files:
        counts = {"rows": 0, "kept": 0, "held_out": 0, "repeats": 0, "empty": 0}
        for text in read_extra_text(path):
            counts["rows"] += 1
            words = tokenize(text)
            key = tuple(words)
            if not words:
                counts["empty"] += 1
            elif is_held(key):
                counts["held_out"] += 1
            elif key in seen or is_known(key):
                counts["repeats"] += 1
            else:
                seen.add(key)
                texts.append(text)
                tokens.append(words)
                counts["kept"] += 1
        stats["extra"][str(path)] = counts
    labels = np.concatenate([corpus.labels, np.full(len(texts) - len(corpus), -1, dtype=np.int64)])
    return Corpus(texts, tokens, labels, corpus.path), stats
