"""AG News reading, text cleaning, tokenisation and length-bucketed batching.

AG News (Zhang et al. 2015, "Character-level Convolutional Networks for Text Classification") ships
as CSV. Two layouts are accepted, detected from the first row (never guessed):

* the original ``ag_news_csv`` layout: no header, three quoted columns ``class, title, description``;
* the course layout: a header row naming the columns, with at least ``Class Index`` and
  ``Description`` (e.g. ``Class Index,Description`` or ``Class Index,Title,Description``).

The text used everywhere is the Description column; the label is the class index 1-4, stored
0-based. Run ``python -m elmo.data fetch`` to download the official files (md5-verified).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import re
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from . import distributed
from .errors import ElmoError

CLASS_NAMES = ("World", "Sports", "Business", "Sci/Tech")
NUM_CLASSES = len(CLASS_NAMES)

#: Official files, the public URL torchtext downloads them from, and torchtext's published md5s.
SOURCE_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
OFFICIAL_MD5 = {
    "train.csv": "b1a00f826fdfbd249f79597b59e1dc12",
    "test.csv": "d52ea96a97a2d943681189a97654912d",
}

# --------------------------------------------------------------------------------------------
# Cleaning and tokenisation
# --------------------------------------------------------------------------------------------

_NUMERIC_ENTITY = re.compile(r" ?#(\d{1,6});")  # AG News writes &#39; as " #39;"
_HTML_TAG = re.compile(r"<[^<>]{0,300}>")
_LINE_BREAK = re.compile(r"\\n|\\\\|\\(?=[^\W\d_])")  # \n, \\ and a lone \ before a letter
_ESCAPED_CHAR = re.compile(r"\\(.)")  # \$ -> $ and any other escaped symbol
_SPACES = re.compile(r"\s+")

#: The tokeniser, applied to lower-cased cleaned text. In order of preference a token is an
#: abbreviation with dots (``u.s.``), a number with inner separators (``1,000``, ``3.5``), a run of
#: letters (``hurricane``), a clitic (``'s``, ``'t``), or any other single non-space symbol.
TOKEN_PATTERN = re.compile(
    r"(?:[^\W\d_]\.){2,}"  # u.s.  e.g.
    r"|\d+(?:[.,:]\d+)*"  # 1,000  3.5  10:30
    r"|[^\W\d_]+"  # words (any script)
    r"|'[^\W\d_]+"  # 's 're 't
    r"|[^\w\s]"  # any other symbol, one per token
)


def clean_text(text: str) -> str:
    """Undo AG News' escapes and markup and collapse whitespace.

    Handles: numeric entities written as `` #39;`` (the space is an artefact), HTML entities
    (``&lt;b&gt;``, ``&amp;``, ``&quot;``) and the tags they encode, ``\\n``, ``\\\\`` and a lone
    backslash before a letter (line breaks in the source), and backslash-escaped symbols (``\\$``).

    Args:
        text: one raw Description field.

    Returns:
        The cleaned text (may be empty). Never raises on any ``str``.
    """
    text = _NUMERIC_ENTITY.sub(lambda m: html.unescape(f"&#{m.group(1)};"), text)
    text = html.unescape(html.unescape(text))  # some fields are escaped twice (&amp;lt;)
    text = _HTML_TAG.sub(" ", text)
    text = _LINE_BREAK.sub(" ", text)
    text = _ESCAPED_CHAR.sub(r"\1", text)
    return _SPACES.sub(" ", text).strip()


def tokenize(text: str) -> list[str]:
    """Clean, lower-case and split text into word tokens with :data:`TOKEN_PATTERN`.

    Args:
        text: raw or cleaned text.

    Returns:
        A list of tokens; empty when the text holds no token. Deterministic, no downloads.

    Raises:
        ElmoError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise ElmoError(f"tokenize() expects a str, got {type(text).__name__}")
    return TOKEN_PATTERN.findall(clean_text(text).lower())


# --------------------------------------------------------------------------------------------
# Reading the CSV files
# --------------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Labelled documents read from one CSV file.

    Attributes:
        texts: the raw Description fields, one per row.
        tokens: ``tokenize(text)`` for each row (never empty).
        labels: int64 array of shape ``(N,)`` with 0-based classes in ``[0, 4)``.
        path: the file they came from (for messages).
    """

    texts: list[str]
    tokens: list[list[str]]
    labels: np.ndarray
    path: str = ""

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index: Sequence[int] | np.ndarray) -> "Corpus":
        """The rows at ``index``, in that order."""
        index = np.asarray(index, dtype=np.int64)
        return Corpus([self.texts[i] for i in index], [self.tokens[i] for i in index], self.labels[index], self.path)


def _is_header(row: Sequence[str]) -> bool:
    return any(cell.strip().lower() == "class index" for cell in row)


def read_agnews(path: str | os.PathLike, skip_bad_rows: bool = False, max_rows: int | None = None) -> Corpus:
    """Read an AG News CSV file in either layout (see the module docstring).

    Args:
        path: the CSV file. UTF-8, with or without a BOM; LF or CRLF line endings.
        skip_bad_rows: skip rows with a bad label or an empty description (and say how many on
            stderr) instead of raising.
        max_rows: read only the first ``max_rows`` data rows (``None`` = all).

    Returns:
        A :class:`Corpus` with the raw Description texts and 0-based labels.

    Raises:
        ElmoError: the file is missing, empty, not UTF-8 or not CSV; the columns fit neither layout;
            or (unless ``skip_bad_rows``) a row has a label outside 1-4 or an empty description.
            The message names the file and the line numbers.
    """
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

    first_line = 1
    if _is_header(frame.iloc[0].tolist()):
        names = [c.strip().lower() for c in frame.iloc[0].tolist()]
        if "description" not in names:
            raise ElmoError(f"{path}: header {frame.iloc[0].tolist()} has 'Class Index' but no 'Description' column")
        label_col, text_col = names.index("class index"), names.index("description")
        frame, first_line = frame.iloc[1:], 2
    elif frame.shape[1] == 3:
        label_col, text_col = 0, 2
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
    line_numbers = np.arange(first_line, first_line + len(frame))
    bad_label = ~raw_labels.isin(["1", "2", "3", "4"]).to_numpy()
    tokens = [tokenize(t) for t in texts]
    empty = np.array([not t for t in tokens], dtype=bool)
    problems = []
    for mask, what in ((bad_label, "a label that is not 1-4"), (empty, "an empty description")):
        if mask.any():
            lines = line_numbers[mask]
            shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
            problems.append(f"{int(mask.sum())} row(s) with {what} (line {shown})")
    if problems:
        if not skip_bad_rows:
            raise ElmoError(f"{path}: " + "; ".join(problems) + ". Fix the file or pass --skip-bad-rows.")
        keep = ~(bad_label | empty)
        print(f"warning: {path}: skipped " + "; ".join(problems), file=sys.stderr)
        if not keep.any():
            raise ElmoError(f"{path}: every row was skipped; nothing left to use")
        texts = [t for t, k in zip(texts, keep) if k]
        tokens = [t for t, k in zip(tokens, keep) if k]
        raw_labels = raw_labels[keep]
    labels = raw_labels.astype(np.int64).to_numpy() - 1
    return Corpus(texts=texts, tokens=tokens, labels=labels, path=str(path))


def find_split(data_dir: str | os.PathLike, split: str) -> Path:
    """Path of ``<data_dir>/<split>.csv``, or an :class:`ElmoError` saying how to get it."""
    path = Path(data_dir) / f"{split}.csv"
    if not path.is_file():
        raise ElmoError(
            f"{path} not found. Put the AG News CSV files (train.csv, test.csv) in {Path(data_dir)}/ "
            f"or download the official ones with: python -m elmo.data fetch --data-dir {data_dir}"
        )
    return path


def train_val_split(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffle ``range(n)`` with ``seed`` and cut off a validation part.

    Returns:
        ``(train_index, val_index)``, int64 arrays; ``val_index`` has ``max(1, round(n*val_fraction))``
        rows when ``0 < val_fraction < 1``.

    Raises:
        ElmoError: ``val_fraction`` outside ``(0, 1)`` or too few rows to split.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ElmoError(f"--val-fraction must be in (0, 1), got {val_fraction}")
    n_val = max(1, int(round(n * val_fraction)))
    if n - n_val < 1:
        raise ElmoError(f"need at least 2 training documents to split off validation, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def load_agnews(data_dir: str | os.PathLike, val_fraction: float = 0.05, seed: int = 0,
                max_docs: int | None = None, skip_bad_rows: bool = False) -> tuple[Corpus, Corpus, Corpus]:
    """Read ``train.csv`` and ``test.csv`` and split validation off the training rows.

    Args:
        data_dir: folder holding ``train.csv`` and ``test.csv``.
        val_fraction: share of the (first ``max_docs``) training rows held out for validation and
            model selection; the test rows are only ever used for the final report.
        seed: seeds the split.
        max_docs: use only the first ``max_docs`` training rows (``None`` = all).
        skip_bad_rows: see :func:`read_agnews`.

    Returns:
        ``(train, val, test)`` corpora.

    Raises:
        ElmoError: missing files (with instructions), bad rows, or ``max_docs < 1``.
    """
    if max_docs is not None and max_docs < 1:
        raise ElmoError(f"--max-docs must be a positive number of documents, got {max_docs}")
    full = read_agnews(find_split(data_dir, "train"), skip_bad_rows=skip_bad_rows, max_rows=max_docs)
    test = read_agnews(find_split(data_dir, "test"), skip_bad_rows=skip_bad_rows)
    train_index, val_index = train_val_split(len(full), val_fraction, seed)
    return full.subset(train_index), full.subset(val_index), test


# --------------------------------------------------------------------------------------------
# Encoded corpora and batching
# --------------------------------------------------------------------------------------------


class EncodedCorpus:
    """Token ids of many documents in one flat array (no padded whole-corpus tensor).

    Args:
        sequences: one list of token ids per document (each non-empty).
        labels: optional int array of shape ``(N,)``.
        max_length: truncate documents to this many tokens (``None`` = no limit).
    """

    def __init__(self, sequences: Iterable[Sequence[int]], labels: np.ndarray | None = None,
                 max_length: int | None = None):
        seqs = [list(s)[:max_length] if max_length else list(s) for s in sequences]
        if any(len(s) == 0 for s in seqs):
            raise ElmoError("EncodedCorpus got an empty document")
        self.lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.ids = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(self.lengths.sum()))
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.type_ids: np.ndarray | None = None  # per token, a row of char_table (character biLMs)
        self.char_table: np.ndarray | None = None
        self.layers: torch.Tensor | None = None  # per token, cached biLM layers (elmo.cache)

    def attach_chars(self, documents: Iterable[Sequence[str]], max_chars: int) -> "EncodedCorpus":
        """Keep the spelling of every token so :meth:`collate` can return character ids (for a
        character biLM, :mod:`elmo.chars`; OOV words keep their own spelling although their id is ``<unk>``).

        Each distinct token is stored once: ``char_table (n_types, max_chars)`` int16, row 0 = padding,
        and ``type_ids`` int32 aligned with :attr:`ids`.

        Args:
            documents: the same token lists the ids were encoded from (truncated the same way here).
            max_chars: characters per token C.

        Raises:
            ElmoError: the documents do not match the encoded lengths.
        """
        from .chars import char_table
        from .vocab import PAD

        types: dict[str, int] = {PAD: 0}
        flat = []
        for i, doc in enumerate(documents):
            doc = list(doc)[: self.lengths[i]] if i < len(self) else []
            if i >= len(self) or len(doc) != self.lengths[i]:
                raise ElmoError(f"attach_chars: document {i} does not match the encoded corpus")
            flat.extend(types.setdefault(w, len(types)) for w in doc)
        if len(flat) != self.num_tokens:  # fewer documents than encoded
            raise ElmoError(f"attach_chars: got {len(flat)} tokens for a corpus of {self.num_tokens}")
        self.type_ids = np.asarray(flat, dtype=np.int32)
        self.char_table = char_table(list(types), max_chars)
        return self

    def attach_layers(self, layers: torch.Tensor) -> "EncodedCorpus":
        """Keep precomputed per-token biLM layers (:func:`elmo.cache.compute_layers`) so that
        :meth:`collate` also returns them, padded, as ``batch["layers"]``.

        Args:
            layers: ``(num_tokens, L, D)``, row ``offsets[i] + k`` for token k of document i.

        Raises:
            ElmoError: the number of rows is not the corpus's token count.
        """
        if layers.dim() != 3 or layers.shape[0] != self.num_tokens:
            raise ElmoError(f"attach_layers: expected ({self.num_tokens}, L, D) layers, got {tuple(layers.shape)}")
        self.layers = layers
        return self

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    def collate(self, index: Sequence[int] | np.ndarray) -> dict[str, torch.Tensor]:
        """Pad the documents at ``index`` on the right.

        Returns:
            ``{"ids": (B, T) int64 with 0 = <pad>, "lengths": (B,) int64, "labels": (B,) int64,
            "chars": (B, T, C) int64, "layers": (L, B, T, D)}`` where ``T`` is the longest of the ``B``
            documents (``labels`` only when present, ``chars`` only after :meth:`attach_chars`,
            ``layers`` only after :meth:`attach_layers`; padding is all zeros).
        """
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths[index]
        ids = np.zeros((len(index), int(lengths.max())), dtype=np.int64)
        types = None if self.type_ids is None else np.zeros_like(ids)
        for row, (i, n) in enumerate(zip(index, lengths)):
            ids[row, :n] = self.ids[self.offsets[i]:self.offsets[i] + n]
            if types is not None:
                types[row, :n] = self.type_ids[self.offsets[i]:self.offsets[i] + n]
        batch = {"ids": torch.from_numpy(ids), "lengths": torch.from_numpy(lengths.copy())}
        if types is not None:
            batch["chars"] = torch.from_numpy(self.char_table[types].astype(np.int64))
        if self.labels is not None:
            batch["labels"] = torch.from_numpy(self.labels[index])
        if self.layers is not None:
            positions = np.arange(ids.shape[1])
            valid = positions[None, :] < lengths[:, None]
            rows = np.where(valid, self.offsets[index][:, None] + positions[None, :], 0)
            layers = self.layers[torch.from_numpy(rows)]  # (B, T, L, D)
            layers[torch.from_numpy(~valid)] = 0
            batch["layers"] = layers.permute(2, 0, 1, 3)
        return batch

    def epoch_batches(self, batch_size: int, max_tokens: int | None, seed: int) -> Iterator[dict[str, torch.Tensor]]:
        """One training epoch: the shuffled length-bucketed batches of :meth:`batches` (``seed``: pass
        ``seed + epoch``), collated. Under ``torchrun`` each global batch is dealt out over the ranks and
        this rank gets its share (:func:`elmo.distributed.rank_share`; a zero-weight ``"ghost"`` key marks
        a share borrowed from a batch with fewer documents than ranks)."""
        for index in self.batches(batch_size, max_tokens, shuffle=True, seed=seed):
            part, ghost = distributed.rank_share(index)
            batch = self.collate(part)
            if ghost:
                batch["ghost"] = torch.ones(())
            yield batch

    def eval_batches(self, batch_size: int, max_tokens: int | None,
                     shard: bool = True) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        """Evaluation batches in a fixed order as ``(document indices, collated batch)``; with ``shard``
        only this rank's share under ``torchrun`` (:func:`elmo.distributed.eval_share`; sum the results
        over ranks)."""
        batches = self.batches(batch_size, max_tokens)
        for index in distributed.eval_share(batches) if shard else batches:
            yield index, self.collate(index)

    def batches(self, batch_size: int, max_tokens: int | None = None, shuffle: bool = False,
                seed: int = 0) -> list[np.ndarray]:
        """Length-bucketed batches of document indices.

        Documents are (optionally shuffled, then) grouped in pools of ``50 * batch_size``, sorted by
        length inside each pool, and cut into batches of at most ``batch_size`` documents and at most
        ``max_tokens`` padded tokens; with ``shuffle`` the batch order is shuffled too. Padding is
        therefore small while the order stays random across epochs (pass ``seed + epoch``).

        Raises:
            ElmoError: ``batch_size`` or ``max_tokens`` not positive.
        """
        if batch_size <= 0 or (max_tokens is not None and max_tokens <= 0):
            raise ElmoError(f"batch size and token budget must be positive, got {batch_size}, {max_tokens}")
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(self)) if shuffle else np.arange(len(self))
        pool = 50 * batch_size
        out: list[np.ndarray] = []
        for start in range(0, len(order), pool):
            chunk = order[start:start + pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            current: list[int] = []
            longest = 0
            for i in chunk:
                n = int(self.lengths[i])
                too_many = max_tokens is not None and current and max(longest, n) * (len(current) + 1) > max_tokens
                if len(current) == batch_size or too_many:
                    out.append(np.array(current, dtype=np.int64))
                    current, longest = [], 0
                current.append(int(i))
                longest = max(longest, n)
            if current:
                out.append(np.array(current, dtype=np.int64))
        if shuffle:
            out = [out[i] for i in rng.permutation(len(out))]
        return out


# --------------------------------------------------------------------------------------------
# Fetching the official files
# --------------------------------------------------------------------------------------------


def md5sum(path: str | os.PathLike) -> str:
    """Hex md5 of a file, read in 1 MiB blocks."""
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(data_dir: str | os.PathLike, base_url: str = SOURCE_URL, force: bool = False) -> list[Path]:
    """Download the official AG News train.csv and test.csv and verify their md5s.

    Each file is downloaded to a temporary file in ``data_dir`` and moved into place only when its
    md5 matches the value torchtext publishes, so a failed or tampered download leaves nothing.

    Raises:
        ElmoError: a download fails or a checksum does not match.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, expected in OFFICIAL_MD5.items():
        target = data_dir / name
        if target.is_file() and not force:
            if md5sum(target) == expected:
                print(f"{target}: present, md5 ok")
                written.append(target)
                continue
            raise ElmoError(f"{target} exists but its md5 is not the official {expected}; pass --force to replace it")
        fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=f".{name}.")
        os.close(fd)
        try:
            print(f"downloading {base_url}{name} ...")
            urllib.request.urlretrieve(base_url + name, tmp)
            got = md5sum(tmp)
            if got != expected:
                raise ElmoError(f"{name}: md5 {got} does not match the official {expected}; not saved")
            os.replace(tmp, target)
        except OSError as exc:
            raise ElmoError(f"could not download {base_url}{name}: {exc}") from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        print(f"{target}: md5 ok")
        written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elmo.data fetch [--data-dir DIR]``: download and verify the official files."""
    parser = argparse.ArgumentParser(prog="python -m elmo.data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_fetch = sub.add_parser("fetch", help="download the official AG News CSVs and verify their md5")
    p_fetch.add_argument("--data-dir", default="data/ag_news")
    p_fetch.add_argument("--url", default=SOURCE_URL, help="base URL holding train.csv and test.csv")
    p_fetch.add_argument("--force", action="store_true", help="replace files whose md5 differs")
    args = parser.parse_args(argv)
    try:
        fetch(args.data_dir, args.url, args.force)
    except ElmoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
