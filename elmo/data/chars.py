"""Character ids of tokens, for the character-level token encoder (:class:`elmo.model.char_cnn.CharCNN`).

Characters are the word's UTF-8 bytes (so no character vocabulary has to be stored and any string
works), framed by begin/end-of-word marks and padded to ``max_chars``:

``id = byte + 1`` (1..256), :data:`BOW_CHAR`, :data:`EOW_CHAR`, and two marks that spell the
sentence boundaries ``<bos>`` / ``<eos>``; 0 is padding, so a padded token is all zeros. This is
AllenNLP's ``ELMoCharacterMapper`` scheme.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..errors import ElmoError
from .vocab import BOS, EOS, PAD

CHAR_PAD = 0
BOW_CHAR, EOW_CHAR, BOS_CHAR, EOS_CHAR = 257, 258, 259, 260
NUM_CHARS = 261


def word_char_ids(word: str, max_chars: int) -> list[int]:
    """Character ids of one token, framed and padded.

    Args:
        word: a token; ``<bos>``/``<eos>`` get their boundary marks, ``<pad>`` all zeros. Every other
            string, ``<unk>`` included, is spelled out byte by byte.
        max_chars: C, the padded width (>= 3); longer words keep their first ``C - 2`` bytes.

    Returns:
        ``C`` ints in ``[0, NUM_CHARS)``.
    """
    if word == PAD:
        return [CHAR_PAD] * max_chars
    if word in (BOS, EOS):
        body = [BOS_CHAR if word == BOS else EOS_CHAR]
    else:
        body = [b + 1 for b in word.encode("utf-8")[: max_chars - 2]]
    ids = [BOW_CHAR, *body, EOW_CHAR]
    return ids + [CHAR_PAD] * (max_chars - len(ids))


def char_table(words: Sequence[str], max_chars: int) -> np.ndarray:
    """``(len(words), max_chars)`` int16 array: row i = :func:`word_char_ids` of ``words[i]``.

    Raises:
        ElmoError: ``max_chars < 3`` (no room for one byte between the word marks).
    """
    if max_chars < 3:
        raise ElmoError(f"--max-chars must be >= 3, got {max_chars}")
    table = np.zeros((len(words), max_chars), dtype=np.int16)
    for i, w in enumerate(words):
        table[i] = word_char_ids(w, max_chars)
    return table


def batch_char_ids(sentences: Sequence[Sequence[str]], max_chars: int) -> torch.Tensor:
    """Right-padded character ids ``(B, T, max_chars)`` int64 for token lists (T = longest sentence)."""
    longest = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), longest, max_chars), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        if sentence:
            out[b, : len(sentence)] = char_table(sentence, max_chars)
    return torch.from_numpy(out)
