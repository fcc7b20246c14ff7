"""The character CNN token encoder of both biLMs (elmo.model.char_cnn, paper §3.1): the merged-convolution encoder
computes what ``nn.Conv1d`` + max-pool + highway + projection (+ layer norm) compute, each distinct word once, in
either numbering; our encoder's files keep their names."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from elmo.data.chars import batch_char_ids
from elmo.errors import ElmoError
from elmo.model.char_cnn import CharEncoder


def reference(encoder: CharEncoder, chars: torch.Tensor) -> torch.Tensor:
    """The encoder written out with ``nn.Conv1d`` over all C positions, one word at a time."""
    x = encoder.char_embedding(chars.reshape(-1, chars.shape[-1])).transpose(1, 2)
    x = encoder.activation(torch.cat([conv(x).amax(dim=-1) for conv in encoder.convs], dim=-1))
    for layer in encoder.highways:
        transform, carry = layer(x).chunk(2, dim=-1)
        gate = torch.sigmoid(carry)
        x = gate * torch.relu(transform) + (1 - gate) * x
    x = x if encoder.projection is None else encoder.projection(x)
    x = x if encoder.norm is None else encoder.norm(x)
    return x.reshape(*chars.shape[:-1], -1)


@pytest.mark.parametrize("numbering, options", [("elmo", {"layer_norm": True}), ("bilm_tf", {"activation": "tanh"})])
def test_the_encoder_is_conv1d_maxpool_highway_projection_each_distinct_word_once(numbering, options):
    torch.manual_seed(0)
    encoder = CharEncoder(8, char_dim=4, filters=((1, 3), (2, 5)), num_highway=2, max_chars=6, numbering=numbering,
                          **options).eval()
    chars = batch_char_ids([["a", "bb", "a"], ["bb", "ccc", "dddddd"]], 6, numbering)
    with torch.no_grad():
        out = encoder(chars, words_per_pass=2)
        expected = reference(encoder, chars)
    assert out.shape == (2, 3, 8)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    assert torch.equal(out[0, 0], out[0, 2]) and torch.equal(out[0, 1], out[1, 0])
    assert (encoder.norm is not None) == (numbering == "elmo")


def test_bad_sizes_are_refused():
    with pytest.raises(ElmoError, match="widest"):
        CharEncoder(8, filters=((7, 2),), max_chars=6)
    with pytest.raises(ElmoError, match="numbering"):
        CharEncoder(8, numbering="ascii")
    with pytest.raises(ElmoError, match="expected 6 character positions per token, got 5"):
        CharEncoder(8, filters=((1, 2),), max_chars=6)(torch.zeros(2, 5, dtype=torch.long))


def test_our_encoder_keeps_the_names_of_its_files_and_bilm_tfs_its_own():
    torch.manual_seed(0)
    ours = CharEncoder(8, char_dim=4, filters=((1, 3),), num_highway=2, max_chars=6, layer_norm=True)
    keys = list(ours.state_dict())
    assert keys == ["char_embedding.weight", "convs.0.weight", "convs.0.bias", "highway.layers.0.weight",
                    "highway.layers.0.bias", "highway.layers.1.weight", "highway.layers.1.bias", "projection.weight",
                    "projection.bias", "norm.weight", "norm.bias"]
    again = CharEncoder(8, char_dim=4, filters=((1, 3),), num_highway=2, max_chars=6, layer_norm=True)
    again.load_state_dict(ours.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), ours.parameters(), strict=True))
    theirs = CharEncoder(3, char_dim=4, filters=((1, 3),), num_highway=1, max_chars=6, numbering="bilm_tf")
    assert list(theirs.state_dict()) == ["char_embedding.weight", "convs.0.weight", "convs.0.bias", "highways.0.weight",
                                         "highways.0.bias"]  # the filters' width is the token width: no projection
    assert F.embedding(torch.tensor([0]), theirs.char_embedding.weight).abs().sum() == 0  # padding row 0


def test_a_gpu_encodes_a_batchs_spellings_in_few_passes_and_a_cpu_within_the_chunk():
    from elmo.model.bilm import words_per_pass
    from elmo.model.char_cnn import WORDS_PER_PASS, WORDS_PER_PASS_GPU
    from elmo.model.plan import word_plan
    assert words_per_pass("cpu", None) == WORDS_PER_PASS and words_per_pass("cpu", 100) == 100
    assert words_per_pass("cuda", 100) == words_per_pass("cuda", None) == WORDS_PER_PASS_GPU > WORDS_PER_PASS
    torch.manual_seed(0)
    words = [[f"w{i}" for i in range(j, j + 50)] for j in range(0, 1000, 50)]  # 1,000 distinct spellings
    encoder = CharEncoder(8, char_dim=4, filters=((1, 3), (2, 5)), num_highway=1, max_chars=8,
                          numbering="bilm_tf").eval()
    chars = batch_char_ids(words, 8, "bilm_tf")
    plans = {n: word_plan(chars.reshape(-1, 8).numpy(), n, encoder.max_width)
             for n in (WORDS_PER_PASS, WORDS_PER_PASS_GPU)}
    assert len(plans[WORDS_PER_PASS].passes) == 4 and len(plans[WORDS_PER_PASS_GPU].passes) == 1
    with torch.no_grad():
        few, many = (encoder(chars, n, plans[n]) for n in (WORDS_PER_PASS_GPU, WORDS_PER_PASS))
    torch.testing.assert_close(few, many, atol=1e-6, rtol=0)
