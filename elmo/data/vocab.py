"""Word vocabulary: specials, frequency order, min-freq / max-size, safe save and load.

Ids are ordered ``<pad>`` = 0, ``<unk>`` = 1, ``<bos>`` = 2, ``<eos>`` = 3, then words by descending training
frequency (ties alphabetical), the order ``nn.AdaptiveLogSoftmaxWithLoss`` needs (Grave et al. 2017).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from ..artifacts import atomic_write_bytes
from ..errors import ElmoError

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(4)


class Vocabulary:
    """A bijection between words and ids. ``itos``, the id-to-word list, must start with :data:`SPECIALS` and hold no
    duplicates, else ElmoError."""

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        if tuple(itos[:4]) != SPECIALS:
            raise ElmoError(f"a vocabulary must start with {SPECIALS}, got {itos[:4]}")
        self.itos = itos
        self.stoi = {w: i for i, w in enumerate(itos)}
        if len(self.stoi) != len(itos):
            raise ElmoError("the vocabulary repeats a word")

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]], min_freq: int = 2, max_size: int | None = None) -> "Vocabulary":
        """Count words over tokenised training ``documents`` (token lists of the training split only, so validation/test
        OOV rates are honest) and keep those seen at least ``min_freq`` times (>= 1), at most ``max_size`` of them besides
        the 4 specials (>= 1; ``None`` = no cap). Either out of range raises ElmoError."""
        if min_freq < 1:
            raise ElmoError(f"min_freq must be >= 1, got {min_freq}", field="min_freq")
        if max_size is not None and max_size < 1:
            raise ElmoError(f"max_size must be >= 1, got {max_size}", field="max_size")
        counts = Counter(w for doc in documents for w in doc)
        for special in SPECIALS:
            counts.pop(special, None)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + words[:max_size])

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.itos == other.itos

    def fingerprint(self) -> str:
        """A short SHA-256 of the word list (checkpoints compare it so a run resumes only on its vocabulary)."""
        return hashlib.sha256("\n".join(self.itos).encode("utf-8")).hexdigest()[:16]

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of ``tokens``; words not in the vocabulary (OOV) map to ``<unk>``."""
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids``."""
        return [self.itos[int(i)] for i in ids]

    def oov_rate(self, documents: Iterable[Sequence[str]]) -> float:
        """Fraction of tokens in ``documents`` that are not in the vocabulary (0 when empty)."""
        total = oov = 0
        for doc in documents:
            total += len(doc)
            oov += sum(1 for t in doc if t not in self.stoi)
        return oov / total if total else 0.0

    # ---- word2idx.pkl: a plain dict str -> int, read back through a restricted unpickler ----

    def save_pickle(self, path: str | os.PathLike) -> None:
        """Write ``word2idx`` (a plain ``dict[str, int]``) as a pickle, atomically."""
        atomic_write_bytes(path, pickle.dumps(dict(self.stoi), protocol=4))

    @classmethod
    def load_pickle(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a ``word2idx.pkl`` (:meth:`save_pickle`) safely: the unpickler refuses every global (class or function),
        so a pickle crafted to run code cannot; only a dict of str -> int with ids exactly ``0..len-1`` is accepted.
        Raises ElmoError on a missing file, any other pickle, or bad ids."""
        path = Path(path)
        if not path.is_file():
            raise ElmoError(f"{path}: vocabulary file not found; run `python ELMO.py` first")
        try:
            word2idx = _RestrictedUnpickler(io.BytesIO(path.read_bytes())).load()
        except ElmoError:
            raise
        except Exception as exc:  # truncated or not a pickle at all
            raise ElmoError(f"{path}: not a readable word2idx pickle ({exc})") from None
        if not isinstance(word2idx, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in word2idx.items()
        ):
            raise ElmoError(f"{path}: expected a dict of str -> int")
        itos = sorted(word2idx, key=word2idx.get)
        if [word2idx[w] for w in itos] != list(range(len(itos))):
            raise ElmoError(f"{path}: ids are not 0..{len(itos) - 1}")
        return cls(itos)


class _RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that rejects every global, so only builtin containers and scalars load."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise ElmoError(f"refusing to unpickle {module}.{name}: word2idx.pkl may only hold a dict of str -> int")
