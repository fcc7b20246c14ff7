"""Character ids of tokens, for the character-level token encoders.

Characters are the word's UTF-8 bytes (no character vocabulary to store; any string works), framed by begin/end-of-word
marks and padded to ``max_chars``. Two numberings exist (:data:`CHAR_SCHEMES`), both with ``id = byte + 1`` (1..256)
and an all-zero row for a padded token:

* ``"elmo"`` — ours (:class:`elmo.model.char_cnn.CharEncoder`): :data:`BOW_CHAR` 257, :data:`EOW_CHAR` 258, the
  marks 259 / 260 that spell the sentence boundaries ``<bos>`` / ``<eos>``, and 0 after the end of the word.
* ``"bilm_tf"`` — the published ELMo models' (bilm-tf; AllenNLP's ``ELMoCharacterMapper``, :func:`bilm_tf_char_ids`):
  ``<S>`` 256, ``</S>`` 257, begin-of-word 258, end-of-word 259 and the in-word padding character 260, each + 1
  (:data:`TF_BOS_CHAR` .. :data:`TF_PAD_CHAR`), at most 50 characters per token (48 bytes); the tokens ``<S>`` /
  ``</S>`` get the boundary marks. :func:`batch_to_ids` (AllenNLP's) numbers a batch of sentences this way.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from ..errors import ElmoError
from .vocab import BOS, EOS, PAD

CHAR_PAD = 0
BOW_CHAR, EOW_CHAR, BOS_CHAR, EOS_CHAR = 257, 258, 259, 260
NUM_CHARS = 261

#: bilm-tf's numbering (the module docstring's ``"bilm_tf"``): its constants 256..260, + 1 as for the bytes.
TF_BOS_CHAR, TF_EOS_CHAR, TF_BOW_CHAR, TF_EOW_CHAR, TF_PAD_CHAR = 257, 258, 259, 260, 261
TF_NUM_CHARS = 262  # ids 0..261: 0 only in a padded (masked) token
TF_MAX_CHARS = 50
TF_BOS, TF_EOS = "<S>", "</S>"
#: the sentence-boundary tokens' marks in each numbering
_MARKS, _TF_MARKS = {BOS: BOS_CHAR, EOS: EOS_CHAR}, {TF_BOS: TF_BOS_CHAR, TF_EOS: TF_EOS_CHAR}


def word_char_ids(word: str, max_chars: int) -> list[int]:
    """Character ids of one token in our numbering, framed and padded: ``C = max_chars`` (>= 3) ints in
    ``[0, NUM_CHARS)``. ``<bos>`` / ``<eos>`` get their boundary marks, ``<pad>`` all zeros; every other string,
    ``<unk>`` included, is spelled byte by byte, keeping its first ``C - 2`` bytes."""
    if word == PAD:
        return [CHAR_PAD] * max_chars
    return _spell(word, max_chars, _MARKS, BOW_CHAR, EOW_CHAR, CHAR_PAD)


def _spell(word: str, max_chars: int, marks: dict[str, int], bow: int, eow: int, pad: int) -> list[int]:
    """``[bow, byte + 1 (its first max_chars - 2 UTF-8 bytes) or marks[word], eow, pad, ...]``, ``max_chars`` long."""
    body = [marks[word]] if word in marks else [b + 1 for b in word.encode("utf-8", "ignore")[: max_chars - 2]]
    ids = [bow, *body, eow]
    return ids + [pad] * (max_chars - len(ids))


def char_table(words: Sequence[str], max_chars: int) -> np.ndarray:
    """``(len(words), max_chars)`` int16 array: row i = :func:`word_char_ids` of ``words[i]``. Raises ElmoError when
    ``max_chars < 3`` (no room for one byte between the word marks)."""
    return _table(words, max_chars, word_char_ids, "max_chars")


def _table(words: Sequence[str], max_chars: int, spell: Callable[[str, int], list[int]], name: str) -> np.ndarray:
    """Rows ``spell(word, max_chars)`` as an int16 array; ``name`` is the option named when ``max_chars < 3``."""
    if max_chars < 3:
        raise ElmoError(f"{name} must be >= 3, got {max_chars}", field=name)
    return np.array([spell(w, max_chars) for w in words], dtype=np.int16).reshape(len(words), max_chars)


def batch_char_ids(sentences: Sequence[Sequence[str]], max_chars: int, scheme: str = "elmo") -> torch.Tensor:
    """Right-padded character ids ``(B, T, max_chars)`` int64 for token lists (T = longest sentence; padded tokens
    all zeros) in the numbering ``scheme`` (:data:`CHAR_SCHEMES`; ``"bilm_tf"`` with 50 characters is AllenNLP's
    ``batch_to_ids``, the input of a published biLM)."""
    table = scheme_table(scheme)
    longest = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), longest, max_chars), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        if sentence:
            out[b, : len(sentence)] = table(sentence, max_chars)
    return torch.from_numpy(out)


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """AllenNLP's ``allennlp.modules.elmo.batch_to_ids``: the input of :class:`elmo.model.elmo.Elmo` (and of any
    published, bilm-tf, biLM) for B tokenised sentences, each a list of str tokens, case kept (the published models are
    cased), without ``<S>`` / ``</S>`` (the biLM adds the sentence boundaries). Returns ``(B, T, 50)`` int64 character
    ids, T the longest sentence: each token as :func:`bilm_tf_char_ids` spells it, padded tokens all zeros (AllenNLP's
    mask). Raises ElmoError when a sentence is a str (tokenise it first) or holds something other than str tokens."""
    if isinstance(batch, str):
        raise ElmoError("batch_to_ids expects a list of token lists, got a str (tokenise it first)")
    for i, sentence in enumerate(batch):
        if isinstance(sentence, str) or not all(isinstance(token, str) for token in sentence):
            raise ElmoError(f"batch_to_ids: sentence {i} must be a list of str tokens, got {str(sentence)[:60]!r}")
    return batch_char_ids(batch, TF_MAX_CHARS, "bilm_tf")


def bilm_tf_char_ids(word: str, max_chars: int = TF_MAX_CHARS) -> list[int]:
    """Character ids of one token in bilm-tf's scheme (AllenNLP's ``ELMoCharacterMapper.convert_word_to_char_ids``):
    ``C = max_chars`` (50 in the published models) ints in ``[1, TF_NUM_CHARS)``, ``[BOW, byte + 1, .., EOW, PAD, ..]``.
    ``<S>`` / ``</S>`` get the sentence-boundary marks; every other string, case kept, is spelled as UTF-8 bytes, those
    past ``C - 2`` dropped."""
    return _spell(word, max_chars, _TF_MARKS, TF_BOW_CHAR, TF_EOW_CHAR, TF_PAD_CHAR)


def bilm_tf_char_table(words: Sequence[str], max_chars: int = TF_MAX_CHARS) -> np.ndarray:
    """``(len(words), max_chars)`` int16 array: row i = :func:`bilm_tf_char_ids` of ``words[i]``. Raises ElmoError when
    ``max_chars < 3``."""
    return _table(words, max_chars, bilm_tf_char_ids, "max_characters_per_token")


#: name → ``table(words, max_chars)`` of each character numbering (see the module docstring).
CHAR_SCHEMES: dict[str, Callable[[Sequence[str], int], np.ndarray]] = {"elmo": char_table, "bilm_tf": bilm_tf_char_table}


def scheme_table(scheme: str) -> Callable[[Sequence[str], int], np.ndarray]:
    """The table function of a character numbering. Raises :class:`ElmoError` for an unknown name."""
    if scheme not in CHAR_SCHEMES:
        raise ElmoError(f"unknown character scheme {scheme!r} (use {', '.join(CHAR_SCHEMES)})")
    return CHAR_SCHEMES[scheme]
