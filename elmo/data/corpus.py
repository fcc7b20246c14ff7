"""Labelled documents as read (:class:`Corpus`) and encoded as token ids in one flat array (:class:`EncodedCorpus`),
with right-padded batches (:meth:`~EncodedCorpus.collate`); which documents form a batch is :mod:`elmo.data.batching`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from ..errors import ElmoError
from .batching import SINGLE, CountedBatches, Shard, bucket_batches, rank_share
from .chars import scheme_table
from .layer_store import DiskLayerStore, MemoryLayerStore
from .text import tokenize
from .vocab import Vocabulary

LayerStore = MemoryLayerStore | DiskLayerStore


@dataclass
class Corpus:
    """Labelled documents before encoding (e.g. one AG News CSV file, :func:`elmo.data.agnews.read_agnews`): ``texts``,
    the raw Description fields, one per row; ``tokens``, ``tokenize(text)`` of each (never empty); ``labels``, ``(N,)``
    int64, 0-based classes in ``[0, 4)``; ``path``, the source file (for messages)."""

    texts: list[str]
    tokens: list[list[str]]
    labels: np.ndarray
    path: str = ""

    def __len__(self) -> int:
        return len(self.texts)

    def cased(self) -> "Corpus":
        """These documents re-tokenised from :attr:`texts` with the case kept (the published ELMo reads cased text)."""
        return Corpus(self.texts, [tokenize(t, lowercase=False) for t in self.texts], self.labels, self.path)

    def subset(self, index: Sequence[int] | np.ndarray) -> "Corpus":
        """The rows at ``index``, in that order."""
        index = np.asarray(index, dtype=np.int64)
        return Corpus([self.texts[i] for i in index], [self.tokens[i] for i in index], self.labels[index], self.path)


class EncodedCorpus:
    """Token ids of many documents in one flat array (no padded whole-corpus tensor): ``sequences``, one non-empty list
    of token ids per document (else ElmoError), truncated to ``max_length`` tokens (``None`` = no limit); ``labels``:
    optional ``(N,)`` ints."""

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
        self.types: list[str] | None = None  # the distinct tokens spelled by char_table[1:]
        self.layers: LayerStore | None = None  # per token, cached biLM layers (elmo.inference.layer_cache)

    def attach_chars(self, documents: Iterable[Sequence[str]], max_chars: int, scheme: str = "elmo") -> "EncodedCorpus":
        """Keep the spelling of every token of ``documents`` (the token lists the ids were encoded from, truncated the
        same way here) so :meth:`collate` also returns character ids for a character biLM (:mod:`elmo.data.chars`; OOV
        words keep their spelling although their id is ``<unk>``), ``max_chars`` (C) per token numbered by ``scheme``
        (:data:`elmo.data.chars.CHAR_SCHEMES`). Each distinct token is stored once: ``char_table (n_types, C)`` int16
        with row 0 = padding (zeros), ``type_ids`` int32 aligned with :attr:`ids`, and :attr:`types` (``types[k]`` is
        spelled by row ``k + 1``). Raises ElmoError when the documents do not match the encoded lengths or for an
        unknown scheme."""
        table = scheme_table(scheme)
        types: dict[str | None, int] = {None: 0}  # None: the padding row, never a token
        flat = []
        for i, doc in enumerate(documents):
            doc = list(doc)[: self.lengths[i]] if i < len(self) else []
            if i >= len(self) or len(doc) != self.lengths[i]:
                raise ElmoError(f"attach_chars: document {i} does not match the encoded corpus")
            flat.extend(types.setdefault(w, len(types)) for w in doc)
        if len(flat) != self.num_tokens:  # fewer documents than encoded
            raise ElmoError(f"attach_chars: got {len(flat)} tokens for a corpus of {self.num_tokens}")
        self.type_ids = np.asarray(flat, dtype=np.int32)
        self.types = [w for w in types if w is not None]
        self.char_table = np.concatenate([np.zeros((1, max_chars), dtype=np.int16), table(self.types, max_chars)])
        return self

    def attach_layers(self, layers: torch.Tensor | LayerStore) -> "EncodedCorpus":
        """Keep precomputed per-token biLM layers (:func:`elmo.inference.layer_cache.compute_layers`) so that
        :meth:`collate` also returns them, padded, as ``batch["layers"]``. ``layers``: a :mod:`elmo.data.layer_store`
        store or a ``(num_tokens, L, D)`` tensor (kept in memory) whose row ``offsets[i] + k`` holds token k of
        document i. Raises ElmoError when the row count is not the corpus's token count."""
        shape = tuple(layers.shape) if isinstance(layers, torch.Tensor) else (layers.num_tokens, *layers.row_shape)
        if len(shape) != 3 or shape[0] != self.num_tokens:
            raise ElmoError(f"attach_layers: expected ({self.num_tokens}, L, D) layers, got {shape}")
        if isinstance(layers, torch.Tensor):
            layers = MemoryLayerStore(len(layers), shape[1:], layers.dtype, rows=layers)
        self.layers = layers
        return self

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    def collate(self, index: Sequence[int] | np.ndarray) -> dict[str, torch.Tensor]:
        """The documents at ``index``, right-padded with zeros: ``{"ids": (B, T) int64 (0 = <pad>), "lengths": (B,)
        int64, "labels": (B,) int64, "chars": (B, T, C) int64, "layers": (L, B, T, D)}``, T the longest document;
        ``labels`` only when present, ``chars`` / ``layers`` only after :meth:`attach_chars` / :meth:`attach_layers`."""
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths[index]
        positions = np.arange(int(lengths.max()))
        valid = positions[None, :] < lengths[:, None]
        flat = np.where(valid, self.offsets[index][:, None] + positions, 0)  # (B, T) rows of the flat arrays
        ids = np.where(valid, self.ids[flat], 0).astype(np.int64)
        batch = {"ids": torch.from_numpy(ids), "lengths": torch.from_numpy(lengths.copy())}
        if self.type_ids is not None:
            types = np.where(valid, self.type_ids[flat], 0)
            batch["chars"] = torch.from_numpy(self.char_table[types].astype(np.int64))
        if self.labels is not None:
            batch["labels"] = torch.from_numpy(self.labels[index])
        if self.layers is not None:
            layers = self.layers.gather(self.offsets[index], lengths, ids.shape[1])  # (B, T, L, D)
            batch["layers"] = layers.permute(2, 0, 1, 3)
        return batch

    def batches(self, batch_size: int, max_tokens: int | None = None, shuffle: bool = False,
                seed: int = 0) -> list[np.ndarray]:
        """Length-bucketed batches of document indices (:func:`elmo.data.batching.bucket_batches`)."""
        return bucket_batches(self.lengths, batch_size, max_tokens, shuffle, seed)

    def epoch_batches(self, batch_size: int, max_tokens: int | None, seed: int,
                      shard: Shard = SINGLE) -> CountedBatches[dict[str, torch.Tensor]]:
        """One training epoch: the shuffled batches of :meth:`batches` (pass ``seed + epoch``), collated as iterated;
        with ``shard = (rank, world_size)`` this rank's share of each (:func:`~elmo.data.batching.rank_share`, a ghost
        share marked by a zero-weight ``"ghost"`` key). Returns :class:`~elmo.data.batching.CountedBatches` whose
        ``len()``, the number of steps, is the same on every rank."""
        index_batches = self.batches(batch_size, max_tokens, shuffle=True, seed=seed)

        def collated() -> Iterator[dict[str, torch.Tensor]]:
            for index in index_batches:
                part, ghost = rank_share(index, shard)
                batch = self.collate(part)
                if ghost:
                    batch["ghost"] = torch.ones(())
                yield batch

        return CountedBatches(len(index_batches), collated)

    def eval_batches(self, batch_size: int, max_tokens: int | None,
                     shard: Shard = SINGLE) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        """Evaluation batches in a fixed order as ``(document indices, collated batch)``; with ``shard = (rank,
        world_size)`` only that rank's share, every ``world_size``-th batch (sum the results over ranks)."""
        for index in self.batches(batch_size, max_tokens)[shard[0]::shard[1]]:
            yield index, self.collate(index)


def encode_corpus(documents: Iterable[Sequence[str]], vocab: Vocabulary, labels: np.ndarray | None = None,
                  max_length: int | None = None, max_chars: int | None = None,
                  char_scheme: str = "elmo") -> EncodedCorpus:
    """Token ids of tokenised documents (OOV → ``<unk>``), truncated to ``max_length``; with ``max_chars`` (a
    character biLM, :attr:`elmo.model.bilm_config.BiLMConfig.chars_per_token`) batches also carry ``chars`` numbered by
    ``char_scheme`` (:meth:`EncodedCorpus.attach_chars`). Raises ElmoError on an empty document or unknown scheme."""
    documents = documents if isinstance(documents, list) else list(documents)
    encoded = EncodedCorpus((vocab.encode(t) for t in documents), labels, max_length=max_length)
    return encoded.attach_chars(documents, max_chars, char_scheme) if max_chars else encoded
