"""Character ids of words (elmo.data.chars), the input of the character token encoder."""

from __future__ import annotations

import pytest
import torch

from elmo.data.chars import batch_char_ids, char_table, word_char_ids
from elmo.data.vocab import BOS, EOS, PAD
from elmo.errors import ElmoError


def test_char_ids_frame_truncate_and_mark_sentence_boundaries():
    assert word_char_ids("ab", 6) == [257, 98, 99, 258, 0, 0]
    assert word_char_ids("abcdefgh", 5) == [257, 98, 99, 100, 258]  # C - 2 bytes kept
    assert word_char_ids("é", 5)[1:3] == [0xC3 + 1, 0xA9 + 1]  # UTF-8 bytes, any script works
    assert word_char_ids(BOS, 4) != word_char_ids(EOS, 4) and word_char_ids(PAD, 4) == [0, 0, 0, 0]
    with pytest.raises(ElmoError, match="max_chars"):
        char_table(["a"], 2)


def test_char_table_and_batches_spell_each_word():
    table = char_table(["ab", "c"], 5)
    assert table.shape == (2, 5) and table[0].tolist() == word_char_ids("ab", 5)
    batch = batch_char_ids([["ab", "c"], ["c"]], 5)
    assert batch.dtype == torch.int64 and batch.shape == (2, 2, 5)
    assert batch[1, 0].tolist() == word_char_ids("c", 5) and batch[1, 1].tolist() == [0] * 5  # padding is all zeros
