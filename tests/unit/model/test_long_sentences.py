"""Long sentences in bounded memory (docs/published_elmo.md, "Long documents"): both biLMs computed in chunks of at
most ``chunk_size`` positions, the LSTM states carried across, give the vectors of one pass; the chunk bounds the
work the character CNN and the LSTM input products see at a time; ordinary sentences take the one-pass path."""

from __future__ import annotations

import random

import pytest
import torch

from elmo import ElmoError
from elmo.data.chars import batch_char_ids
from elmo.model.bilm import CHUNK_SIZE, BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.char_cnn import CharEncoder
from elmo.model.lstm import ProjectedLSTM, step_chunks
from lab.bench.published import random_weights

#: chunked and one-pass vectors agree to float rounding: the same arithmetic, but the matrix products of a chunk have
#: fewer rows, which BLAS may block (and so round) differently by an ulp or two (values up to about 3)
EXACT = 1e-6
LENGTHS = [53, 20, 7]  # none a multiple of the chunk sizes below
CHUNKS = [1, 7, 16]
#: our biLM's architecture options, each tiny
OURS = {
    "word": {},
    "char": {"token_encoder": "char", "char_dim": 4, "char_filters": ((1, 4), (2, 6), (3, 6)), "max_chars": 8},
    "proj_residual": {"hidden_size": 12, "proj_size": 8, "residual": True},
}


def published_bilm() -> BiLM:
    config = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8), (3, 8)), num_highway=1, hidden_size=16,
                                 projection_dim=8, num_layers=2, cell_clip=3.0, proj_clip=3.0)
    return random_weights(BiLM(config), 0).eval()


def published_batch() -> tuple[torch.Tensor, torch.Tensor]:
    rng = random.Random(0)
    sentences = [["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9))) for _ in range(n)] for n in LENGTHS]
    return batch_char_ids(sentences, 50, "bilm_tf"), torch.tensor(LENGTHS)


def our_bilm(options: dict) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": 40, "embedding_dim": 8, "hidden_size": 8, "num_layers": 2, "dropout": 0.0, "cutoffs": (10, 20)}
    return BiLM(BiLMConfig(**(sizes | options))).eval()


def our_batch(bilm: BiLM) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor(LENGTHS)
    ids = torch.randint(4, 40, (len(LENGTHS), max(LENGTHS)), generator=generator)
    ids[torch.arange(max(LENGTHS)) >= lengths.unsqueeze(1)] = 0
    chars = None
    if bilm.config.chars_per_token:
        chars = torch.randint(1, 60, (*ids.shape, bilm.config.max_chars), generator=generator) * (ids > 0).unsqueeze(-1)
    return ids, lengths, chars


def run(bilm, chunk_size, *batch):
    bilm.chunk_size = chunk_size
    with torch.no_grad():
        return bilm(*batch)


# --- how steps are cut ----------------------------------------------------------------------------------------------

def test_step_chunks_cover_every_step_once_within_the_chunk_size():
    assert step_chunks([3] * 10, None) == [(0, 10)]
    assert step_chunks([3] * 10, 10) == [(0, 10)]  # not longer than the chunk size: one pass
    assert step_chunks([3] * 10, 7) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]  # 2 steps x 3 rows <= 7 positions
    assert step_chunks([5, 5, 4, 2, 2, 1, 1], 6) == [(0, 1), (1, 2), (2, 4), (4, 7)]  # rows sorted by length
    assert step_chunks([9, 9, 9], 2) == [(0, 1), (1, 2), (2, 3)]  # a step with more rows than the chunk: alone
    assert step_chunks([], 4) == [(0, 0)]
    for bad in (0, -3):
        with pytest.raises(ElmoError, match="chunk_size must be a positive"):
            step_chunks([1] * 5, bad)
    assert CHUNK_SIZE >= 256  # ordinary sentences (AG News: tens of tokens) never take the chunked path


# --- the same vectors -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("chunk", CHUNKS)
def test_published_bilm_in_chunks_gives_the_vectors_of_one_pass(chunk):
    bilm = published_bilm()
    chars, lengths = published_batch()
    whole = run(bilm, None, None, lengths, chars)
    chunked = run(bilm, chunk, None, lengths, chars)
    assert chunked.shape == whole.shape == (3, 3, 53, 16)
    assert (chunked - whole).abs().max() <= EXACT
    assert not chunked[:, 2, 7:].any()  # padding still zero


def test_published_bilm_in_chunks_carries_the_same_final_states():
    bilm = published_bilm()
    chars, lengths = published_batch()
    results = {}
    for chunk in (None, 6):
        bilm.chunk_size = chunk
        with torch.no_grad():
            x = bilm.token_vectors(chars)
            first, states = bilm.contextual(x, lengths, None, carry=True)
            second, final = bilm.contextual(x, lengths, states, carry=True)  # stateful: the next batch starts from them
        results[chunk] = (first, second, final)
    for a, b in zip(results[None][:2], results[6][:2]):
        assert (a - b).abs().max() <= EXACT
    for (h, c), (h6, c6) in zip(results[None][2], results[6][2]):
        assert (h - h6).abs().max() <= EXACT and (c - c6).abs().max() <= EXACT


@pytest.mark.parametrize("variant", OURS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_our_bilm_in_chunks_gives_the_vectors_of_one_pass(variant, chunk):
    bilm = our_bilm(OURS[variant])
    batch = our_batch(bilm)
    whole = run(bilm, None, *batch)
    chunked = run(bilm, chunk, *batch)
    assert chunked.shape == whole.shape == (3, 3, 53, 16)
    assert (chunked - whole).abs().max() <= EXACT
    bilm.chunk_size = chunk
    with torch.no_grad():
        assert (bilm.token_layer(*batch) - whole[0]).abs().max() <= EXACT
        assert (bilm.lstm_layers(*batch) - whole[1:]).abs().max() <= EXACT


def test_a_sentence_no_longer_than_the_chunk_size_takes_the_one_pass_path_bit_for_bit():
    bilm, ours = published_bilm(), our_bilm(OURS["char"])
    chars, lengths = published_batch()
    assert torch.equal(run(bilm, None, None, lengths, chars), run(bilm, 60, None, lengths, chars))  # 55 steps
    batch = our_batch(ours)
    assert torch.equal(run(ours, None, *batch), run(ours, 200, *batch))  # 54 steps x 3 rows, one pass


def test_training_never_chunks_the_language_model():
    bilm = our_bilm(OURS["word"])
    ids, lengths, _ = our_batch(bilm)
    calls = []
    handle = bilm.forward_lm.layers[0].register_forward_pre_hook(lambda m, args: calls.append(args[0].shape[1]))
    bilm.chunk_size = 5
    bilm.forward_lm(ids, lengths)  # the training loss: one pass whatever chunk_size says
    handle.remove()
    assert calls == [54]


# --- the chunk bounds the work --------------------------------------------------------------------------------------

def spy(monkeypatch, cls, name, size, seen):
    original = getattr(cls, name)

    def wrapped(self, x, *args, **kwargs):
        seen.append(size(x))
        return original(self, x, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapped)


def test_published_bilm_sees_at_most_chunk_size_positions_at_a_time(monkeypatch):
    bilm = published_bilm()
    chars, lengths = published_batch()
    words, products = [], []
    spy(monkeypatch, CharEncoder, "encode_distinct", len, words)  # the character CNN, highway, projection
    spy(monkeypatch, ProjectedLSTM, "_input_gates", len, products)  # the input products of the steps of a chunk
    run(bilm, 7, None, lengths, chars)
    assert words and max(words) <= 7
    assert products and max(products) <= 7 and sum(products) == 4 * (54 + 21 + 8)  # every step once, 4 LSTMs
    words.clear()
    products.clear()
    run(bilm, None, None, lengths, chars)
    assert max(words) > 7 and len(products) == 4 and max(products) == 54 + 21 + 8


@pytest.mark.parametrize("variant", ["char", "word"])
def test_our_bilm_sees_at_most_chunk_size_positions_at_a_time(monkeypatch, variant):
    bilm = our_bilm(OURS[variant])
    batch = our_batch(bilm)
    tokens, lstm_inputs = [], []
    if variant == "char":
        spy(monkeypatch, CharEncoder, "encode_distinct", len, tokens)  # distinct words through the CNN at a time
    hooks = [lstm.register_forward_pre_hook(lambda m, args: lstm_inputs.append(args[0].shape[0] * args[0].shape[1]))
             for lm in (bilm.forward_lm, bilm.backward_lm) for lstm in lm.layers]
    run(bilm, 7, *batch)  # 3 rows: chunks of 2 steps, 6 positions
    with torch.no_grad():
        bilm.token_layer(*batch)
    for hook in hooks:
        hook.remove()
    if variant == "char":
        assert tokens and max(tokens) <= 7
    assert lstm_inputs and max(lstm_inputs) <= 7 and sum(lstm_inputs) == 4 * 3 * 54
