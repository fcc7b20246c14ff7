"""AG News (Zhang et al. 2015): reading, the validation split and the md5-verified download.

Two CSV layouts are accepted, detected from the first row: the original ``ag_news_csv`` one (no header; columns
class, title, description) and the course one (a header row with at least ``Class Index`` and ``Description``). The
text is the Description column; the label is the class index 1-4, stored 0-based. Missing files are downloaded
(:func:`fetch`) unless told not to.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..artifacts import atomic_write
from ..errors import ElmoError
from .corpus import Corpus
from .text import tokenize

CLASS_NAMES = ("World", "Sports", "Business", "Sci/Tech")
NUM_CLASSES = len(CLASS_NAMES)

#: Official files, the public URL torchtext downloads them from, and torchtext's published md5s.
SOURCE_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
OFFICIAL_MD5 = {
    "train.csv": "b1a00f826fdfbd249f79597b59e1dc12",
    "test.csv": "d52ea96a97a2d943681189a97654912d",
}


def read_agnews(path: str | os.PathLike, skip_bad_rows: bool = False, max_rows: int | None = None) -> Corpus:
    """A :class:`Corpus` (raw Description texts, 0-based labels) of an AG News CSV file in either layout (module
    docstring): UTF-8 with or without a BOM, LF or CRLF. ``skip_bad_rows``: skip rows with a bad label or an empty
    description (counted on stderr) instead of raising; ``max_rows``: read only the first data rows (``None`` = all).
    Raises ElmoError when the file is missing, empty, not UTF-8 or not CSV, the columns fit neither layout, or (unless
    ``skip_bad_rows``) a row has a label outside 1-4 or an empty description (the message gives the lines)."""
    path = Path(path)
    if not path.is_file():
        raise ElmoError(f"{path}: file not found")
    if max_rows is not None and max_rows <= 0:
        raise ElmoError(f"max_rows must be positive, got {max_rows}")
    try:
        frame = pd.read_csv(
            path, header=None, dtype=str, keep_default_na=False, na_filter=False,
            encoding="utf-8-sig", skip_blank_lines=True, nrows=None if max_rows is None else max_rows + 1,
        )
    except pd.errors.EmptyDataError:
        raise ElmoError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as exc:
        raise ElmoError(f"{path}: malformed CSV ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ElmoError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None

    names = [c.strip().lower() for c in frame.iloc[0].tolist()]
    if "class index" in names:
        if "description" not in names:
            raise ElmoError(f"{path}: header {frame.iloc[0].tolist()} has 'Class Index' but no 'Description' column")
        label_col, text_col = names.index("class index"), names.index("description")
        frame, first_line = frame.iloc[1:], 2
    elif frame.shape[1] == 3:
        label_col, text_col, first_line = 0, 2, 1
    else:
        raise ElmoError(
            f"{path}: {frame.shape[1]} columns and no header; expected the original AG News layout "
            "(no header; class, title, description) or a header with 'Class Index' and 'Description'"
        )
    if max_rows is not None:
        frame = frame.iloc[:max_rows]
    if len(frame) == 0:
        raise ElmoError(f"{path}: no data rows")

    raw_labels = frame.iloc[:, label_col].str.strip()
    texts = frame.iloc[:, text_col].tolist()
    bad_label = ~raw_labels.isin(["1", "2", "3", "4"]).to_numpy()
    tokens = [tokenize(t) for t in texts]
    empty = np.array([not t for t in tokens], dtype=bool)
    problems = []
    for mask, what in ((bad_label, "a label that is not 1-4"), (empty, "an empty description")):
        if mask.any():
            lines = first_line + np.flatnonzero(mask)
            shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
            problems.append(f"{int(mask.sum())} row(s) with {what} (line {shown})")
    if problems:
        if not skip_bad_rows:
            raise ElmoError(f"{path}: " + "; ".join(problems) + ". Fix the file or pass skip_bad_rows=True.",
                            field="skip_bad_rows")
        keep = ~(bad_label | empty)
        print(f"warning: {path}: skipped " + "; ".join(problems), file=sys.stderr)
        if not keep.any():
            raise ElmoError(f"{path}: every row was skipped; nothing left to use")
        texts, tokens = ([x for x, k in zip(xs, keep) if k] for xs in (texts, tokens))
        raw_labels = raw_labels[keep]
    labels = raw_labels.astype(np.int64).to_numpy() - 1
    return Corpus(texts=texts, tokens=tokens, labels=labels, path=str(path))


def find_split(data_dir: str | os.PathLike, split: str, download: bool = True) -> Path:
    """Path of ``<data_dir>/<split>.csv``; when it is missing and ``download`` is true, the official files are first
    downloaded into ``data_dir`` (:func:`fetch`, said on stderr). Raises ElmoError, saying where to put the files by
    hand, when it is missing and downloading is off or fails."""
    path = Path(data_dir) / f"{split}.csv"
    if path.is_file():
        return path
    how = (f"Put the AG News CSV files (train.csv, test.csv; no header; class, title, description) in "
           f"{Path(data_dir)}/, or download the official ones with: python -m elmo fetch --data-dir {data_dir}")
    if not download:
        raise ElmoError(f"{path} not found (and download=False is set). {how}", field="download")
    print(f"{path} not found: downloading the official AG News files into {Path(data_dir)}/ "
          "(md5-verified; --no-download turns this off)", file=sys.stderr)
    try:
        fetch(data_dir)
    except ElmoError as exc:
        raise ElmoError(f"{path} not found and the download failed ({exc}). {how}") from None
    return path


def labelled_draw(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted int64 indices ``(about fraction * N,)`` of a class-balanced draw of ``fraction`` (in ``(0, 1]``; 1 keeps
    all) of the documents with ``labels`` (int, ``(N,)``), for learning curves: each class keeps ``max(1, round(fraction
    * n_c))`` of its ``n_c`` documents, drawn from ``seed`` in a stream of its own (not the validation split's). Raises
    ElmoError (field ``labelled_fraction``) for ``fraction`` outside ``(0, 1]``."""
    if not 0.0 < fraction <= 1.0:
        raise ElmoError(f"labelled_fraction must be in (0, 1], got {fraction}", field="labelled_fraction")
    labels = np.asarray(labels)
    if fraction == 1.0:
        return np.arange(len(labels), dtype=np.int64)
    rng = np.random.default_rng([seed, 1])
    kept = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        kept.append(rng.permutation(members)[:max(1, int(round(fraction * len(members))))])
    return np.sort(np.concatenate(kept)).astype(np.int64)


def load_agnews(data_dir: str | os.PathLike, val_fraction: float = 0.05, seed: int = 0,
                max_docs: int | None = None, skip_bad_rows: bool = False,
                download: bool = True) -> tuple[Corpus, Corpus, Corpus]:
    """``(train, val, test)`` corpora of ``data_dir``'s ``train.csv`` and ``test.csv``: ``max(1, round(n *
    val_fraction))`` of the n (first ``max_docs``, ``None`` = all) training rows are held out for validation and model
    selection (the rows shuffled with ``seed``; each split in file order); the test rows only ever serve the final
    report. ``skip_bad_rows``: :func:`read_agnews`; ``download``: fetch missing files (:func:`find_split`). Raises
    ElmoError for missing files (with instructions), bad rows, ``max_docs < 1``, ``val_fraction`` outside ``(0, 1)`` or
    too few rows to split."""
    if max_docs is not None and max_docs < 1:
        raise ElmoError(f"max_docs must be a positive number of documents, got {max_docs}", field="max_docs")
    full = read_agnews(find_split(data_dir, "train", download), skip_bad_rows=skip_bad_rows, max_rows=max_docs)
    test = read_agnews(find_split(data_dir, "test", download), skip_bad_rows=skip_bad_rows)
    if not 0.0 < val_fraction < 1.0:
        raise ElmoError(f"val_fraction must be in (0, 1), got {val_fraction}", field="val_fraction")
    n_val = max(1, int(round(len(full) * val_fraction)))
    if len(full) - n_val < 1:
        raise ElmoError(f"need at least 2 training documents to split off validation, got {len(full)}")
    order = np.random.default_rng(seed).permutation(len(full))
    return full.subset(np.sort(order[n_val:])), full.subset(np.sort(order[:n_val])), test


def _download(url: str, handle, expected_md5: str, quiet: bool, timeout: float) -> None:
    """Stream ``url`` into ``handle`` (progress bar) and check its md5; raises ElmoError as :func:`fetch` does."""
    digest = hashlib.md5()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=url.rsplit("/", 1)[-1],
                      disable=quiet, leave=False) as bar:
                for block in iter(lambda: response.read(1 << 20), b""):
                    digest.update(block)
                    handle.write(block)
                    bar.update(len(block))
    except (OSError, urllib.error.URLError) as exc:
        raise ElmoError(f"could not download {url}: {getattr(exc, 'reason', exc)}") from None
    if digest.hexdigest() != expected_md5:
        raise ElmoError(f"{url}: md5 {digest.hexdigest()} does not match the official {expected_md5}; not saved")


def fetch(data_dir: str | os.PathLike, base_url: str = SOURCE_URL, force: bool = False,
          checksums: dict[str, str] | None = None, quiet: bool = False, timeout: float = 60.0) -> list[Path]:
    """Download the official AG News ``train.csv`` and ``test.csv`` into ``data_dir`` (created; also ``python -m elmo
    fetch``) from ``base_url``, the folder URL holding both (``file://`` works too), and return their paths. Each file
    is streamed to a temporary file and moved into place only when its md5 matches ``checksums`` (``{name: md5}``,
    default :data:`OFFICIAL_MD5`; :func:`elmo.artifacts.atomic_write`), so a failed or tampered download leaves nothing,
    not even new folders. ``force``: replace present files whose md5 differs; ``quiet``: no progress bar; ``timeout``:
    socket timeout in seconds. Raises ElmoError when a download fails (offline, HTTP error) or a checksum does not match.
    """
    data_dir = Path(data_dir)
    created = [p for p in (data_dir, *data_dir.parents) if not p.exists()]
    try:  # the atomic writes create the folders
        written = []
        for name, expected in (checksums or OFFICIAL_MD5).items():
            target = data_dir / name
            if target.is_file() and not force:
                if hashlib.md5(target.read_bytes()).hexdigest() != expected:
                    raise ElmoError(f"{target} exists but its md5 is not the official {expected}; pass force=True to "
                                    "replace it", field="force")
                print(f"{target}: present, md5 ok", file=sys.stderr)
            else:
                print(f"downloading {base_url}{name} ...", file=sys.stderr)
                url = base_url + name
                atomic_write(target, lambda handle, url=url, md5=expected: _download(url, handle, md5, quiet, timeout))
                print(f"{target}: md5 ok", file=sys.stderr)
            written.append(target)
        return written
    except BaseException:
        for folder in created:  # deepest first; a folder that holds anything stays
            try:
                folder.rmdir()
            except OSError:
                break
        raise

