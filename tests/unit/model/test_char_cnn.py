"""The character CNN token encoder (elmo.model.char_cnn, paper §3.1)."""

from __future__ import annotations

import pytest
import torch

from elmo.data.chars import batch_char_ids
from elmo.errors import ElmoError
from elmo.model.char_cnn import CharCNN


def test_char_cnn_encodes_each_distinct_word_once_with_the_same_result():
    torch.manual_seed(0)
    cnn = CharCNN(8, char_dim=4, filters=((1, 3), (2, 5)), num_highway=2, max_chars=6).eval()
    chars = batch_char_ids([["a", "bb", "a"], ["bb", "ccc"]], 6)
    with torch.no_grad():
        out = cnn(chars)
        direct = cnn.encode_words(chars.reshape(-1, 6)).reshape(2, 3, 8)
    assert out.shape == (2, 3, 8)
    assert torch.allclose(out, direct, atol=1e-6)
    assert torch.equal(out[0, 0], out[0, 2]) and torch.equal(out[0, 1], out[1, 0])
    with pytest.raises(ElmoError, match="widest"):
        CharCNN(8, filters=((7, 2),), max_chars=6)
