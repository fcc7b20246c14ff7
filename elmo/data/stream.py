"""Your own corpus of any size, streamed from a plain-text file (one sentence or document per line) or one column of a
CSV file (``python ELMO.py --train-file corpus.txt [--val-file val.txt]``), with flat memory: the vocabulary is counted
as :meth:`TextSource.documents` tokenises line by line, and each epoch :class:`StreamedCorpus` rereads the file in
shuffled, length-bucketed buffers. What is split, skipped and held out, and why to ``shuf`` an ordered file:
docs/own_corpus_and_scaling.md.
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from ..errors import ElmoError
from .batching import SINGLE, Shard
from .corpus import EncodedCorpus, encode_corpus
from .text import tokenize
from .vocab import Vocabulary

#: CSV rows read per pandas chunk in a CSV source.
CSV_CHUNK_ROWS = 10_000


def _unit_hash(k: int, seed: int) -> float:
    """A deterministic pseudo-random number in [0, 1) for line ``k`` (splitmix64 of ``k`` and ``seed``)."""
    x = (k * 0x9E3779B97F4A7C15 + seed * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return ((x ^ (x >> 31)) >> 11) / float(1 << 53)


class TextSource:
    """The documents of one file, read lazily in file order: UTF-8 text, one document per line (BOM and CRLF accepted),
    or with ``text_column`` (``--text-column``) that column of a CSV with a header. ``max_docs``: read only the first
    ``max_docs`` documents (``None`` = all); ``lowercase=False`` keeps the case (the published ELMo architecture,
    ``pretrain --architecture``). Raises ElmoError (on construction) on a missing file, or a CSV that is unreadable or
    whose header lacks ``text_column``."""

    def __init__(self, path: str | os.PathLike, text_column: str | None = None, max_docs: int | None = None,
                 lowercase: bool = True):
        self.path, self.text_column, self.max_docs, self.lowercase = Path(path), text_column, max_docs, lowercase
        if not self.path.is_file():
            raise ElmoError(f"{self.path}: file not found")
        if text_column is not None:
            import pandas as pd

            try:
                header = pd.read_csv(self.path, nrows=0, encoding="utf-8-sig").columns.tolist()
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
                raise ElmoError(f"{self.path}: not a readable CSV file with a header row ({exc})") from None
            if text_column not in header:
                raise ElmoError(f"{self.path}: no column {text_column!r} (text_column); its header has {header}",
                                field="text_column")
        self.skipped = 0  # blank or wordless lines seen by the last full pass

    def texts(self) -> Iterator[tuple[int, str]]:
        """``(line or row number, raw text)`` of every non-blank document (1-based; a CSV's header is row 1). Raises
        ElmoError on bytes that are not UTF-8 (naming the line) or malformed CSV."""
        texts = self._csv_texts() if self.text_column is not None else self._lines()
        yield from itertools.islice(((number, text) for number, text in texts if text.strip()), self.max_docs)

    def _lines(self) -> Iterator[tuple[int, str]]:
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise ElmoError(f"{self.path} line {number}: not UTF-8 ({exc.reason} at byte {exc.start} of "
                                    "the line)") from None
                yield number, text

    def _csv_texts(self) -> Iterator[tuple[int, str]]:
        import pandas as pd

        try:
            reader = pd.read_csv(self.path, usecols=[self.text_column], dtype=str, keep_default_na=False,
                                 na_filter=False, encoding="utf-8-sig", chunksize=CSV_CHUNK_ROWS)
            row = 1
            for chunk in reader:
                for text in chunk[self.text_column].tolist():
                    row += 1
                    yield row, text
        except pd.errors.ParserError as exc:
            raise ElmoError(f"{self.path}: malformed CSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ElmoError(f"{self.path}: not valid UTF-8 (bad byte at offset {exc.start})") from None

    def documents(self, part: str | None = None, val_fraction: float = 0.0, seed: int = 0,
                  max_val_docs: int | None = None) -> Iterator[list[str]]:
        """Token lists of the documents, in file order; sets :attr:`skipped` when the pass ends. ``part``: ``None`` =
        all; ``"val"`` / ``"train"``: the documents a hash of the document number and ``seed`` puts below / not below
        ``val_fraction`` (only the first ``max_val_docs`` below it go to ``"val"``, later ones to ``"train"``)."""
        skipped, held_out = 0, 0
        for k, (_, text) in enumerate(self.texts()):
            if part is not None:
                is_val = _unit_hash(k, seed) < val_fraction and (max_val_docs is None or held_out < max_val_docs)
                held_out += is_val
                if is_val != (part == "val"):
                    continue
            tokens = tokenize(text, self.lowercase)
            if not tokens:  # e.g. a line of markup only
                skipped += 1
                continue
            yield tokens
        self.skipped = skipped


class StreamedCorpus:
    """Batches of a :class:`TextSource` reread from disk every epoch: the streaming counterpart of
    :class:`elmo.data.corpus.EncodedCorpus`, with the same :meth:`epoch_batches` and :meth:`eval_batches`. ``part``,
    ``val_fraction``, ``seed``, ``max_val_docs`` pick the documents (:meth:`TextSource.documents`); ``vocab`` encodes
    them (OOV → ``<unk>``), longer ones split into pieces of ``max_length`` tokens; ``max_chars``, ``char_scheme``:
    characters per token and their numbering (:data:`elmo.data.chars.CHAR_SCHEMES`) for a character biLM (batches then
    carry ``chars``; ``None`` otherwise); ``buffer_tokens``: tokens read, shuffled and bucketed at a time (bounds the
    stream's memory). Raises ElmoError when ``max_length`` or ``buffer_tokens`` is not positive."""

    def __init__(self, source: TextSource, vocab: Vocabulary, max_length: int, part: str | None = None,
                 val_fraction: float = 0.0, seed: int = 0, max_val_docs: int | None = None,
                 max_chars: int | None = None, buffer_tokens: int = 1_000_000, char_scheme: str = "elmo"):
        if max_length < 1 or buffer_tokens < 1:
            raise ElmoError(f"max_length and the stream buffer must be positive, got {max_length}, {buffer_tokens}")
        self.source, self.vocab, self.max_length, self.max_chars = source, vocab, max_length, max_chars
        self.part, self.val_fraction, self.seed, self.max_val_docs = part, val_fraction, seed, max_val_docs
        self.buffer_tokens, self.char_scheme = buffer_tokens, char_scheme

    def pieces(self) -> Iterator[list[str]]:
        """Token lists of at most ``max_length`` tokens (long documents split), in file order."""
        for doc in self.source.documents(self.part, self.val_fraction, self.seed, self.max_val_docs):
            for start in range(0, len(doc), self.max_length):
                yield doc[start:start + self.max_length]

    def buffers(self) -> Iterator[EncodedCorpus]:
        """The stream as :class:`~elmo.data.corpus.EncodedCorpus` buffers of about ``buffer_tokens`` tokens each."""
        encode = functools.partial(encode_corpus, vocab=self.vocab, max_chars=self.max_chars, char_scheme=self.char_scheme)
        docs, size = [], 0
        for doc in self.pieces():
            docs.append(doc)
            size += len(doc)
            if size >= self.buffer_tokens:
                yield encode(docs)
                docs, size = [], 0
        if docs:
            yield encode(docs)

    def epoch_batches(self, batch_size: int, max_tokens: int | None, seed: int,
                      shard: Shard = SINGLE) -> Iterator[dict[str, torch.Tensor]]:
        """One epoch of shuffled, length-bucketed batches, buffer by buffer (``shard``'s share of each)."""
        for number, buffer in enumerate(self.buffers()):
            seed_of_buffer = int(np.random.SeedSequence([seed, number]).generate_state(1)[0])
            yield from buffer.epoch_batches(batch_size, max_tokens, seed_of_buffer, shard)

    def eval_batches(self, batch_size: int, max_tokens: int | None,
                     shard: Shard = SINGLE) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        """Evaluation batches, buffer by buffer (document indices are within their buffer; ``shard``'s share)."""
        for buffer in self.buffers():
            yield from buffer.eval_batches(batch_size, max_tokens, shard)
