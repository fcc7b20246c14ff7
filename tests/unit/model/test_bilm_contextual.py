"""Our biLM read from token vectors (``BiLM.token_vectors`` / ``word_vectors`` → ``BiLM.contextual``), the call shape
the published biLM has and what ``forward`` runs, so that every caller has one path: the layers the language models
read in training, the sentence boundaries kept on request, and stateful reading whose final states are each row's
own."""

from __future__ import annotations

import pytest
import torch

from elmo.data.chars import batch_char_ids
from elmo.data.vocab import SPECIALS, UNK_ID, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.language_model import reverse_padded

WORDS = [*SPECIALS, "the", "market", "rallied", "stocks", "fell", "on", "news"]


def tiny(token_encoder: str = "word", **sizes) -> BiLM:
    torch.manual_seed(0)
    config = {"vocab_size": len(WORDS), "embedding_dim": 8, "hidden_size": 8, "cutoffs": (6,), "dropout": 0.0,
              "token_encoder": token_encoder, "char_filters": ((1, 4), (2, 4)), "max_chars": 10} | sizes
    bilm = BiLM(BiLMConfig(**config)).eval()
    bilm.vocab = Vocabulary(WORDS)
    return bilm


SENTENCES = [["the", "market", "rallied", "on", "news"], ["stocks", "fell"], ["news"]]


def inputs(bilm: BiLM, sentences=SENTENCES) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros(len(sentences), int(lengths.max()), dtype=torch.long)
    for row, s in enumerate(sentences):
        ids[row, :len(s)] = torch.tensor(bilm.vocab.encode(s))
    chars = batch_char_ids(sentences, bilm.config.max_chars) if bilm.config.token_encoder == "char" else None
    return ids, lengths, chars


def reading_layers(bilm: BiLM, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None) -> torch.Tensor:
    """The layers as each language model reads them in training (``reading_order`` → ``states``: ``<bos> t_1 .. t_n``
    forward, ``<eos> t_n .. t_1`` backward), realigned with the tokens and masked: an independent reference."""
    halves = []
    for lm in (bilm.forward_lm, bilm.backward_lm):
        inputs, _, input_chars = lm.reading_order(ids, lengths, chars)
        states = [h[:, 1:] for h in lm.states(inputs, input_chars)]
        halves.append(torch.stack(states if lm.direction == "forward" else [reverse_padded(h, lengths) for h in states]))
    mask = torch.arange(ids.shape[1])[None] < lengths[:, None]
    return torch.cat(halves, dim=-1) * mask[..., None]


CLIPPED = {"cell_clip": 3.0, "proj_clip": 3.0, "hidden_size": 12, "proj_size": 8}  # bilm-tf's cell (--lstm clipped)


@pytest.mark.parametrize("cell", [{}, CLIPPED], ids=["fused", "clipped"])
@pytest.mark.parametrize("token_encoder", ["word", "char"])
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_the_layers_are_those_the_language_models_read_in_training(token_encoder, chunk_size, cell):
    bilm = tiny(token_encoder, residual=True, num_layers=3, **cell)
    bilm.chunk_size = chunk_size
    ids, lengths, chars = inputs(bilm)
    with torch.no_grad():
        expected = reading_layers(bilm, ids, lengths, chars)
        layers, final = bilm.contextual(bilm.token_vectors(chars if chars is not None else ids), lengths)
        forward = bilm(ids, lengths, chars)
    assert final is None and layers.shape == expected.shape == (4, 3, 5, 16)
    torch.testing.assert_close(layers, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(forward, expected, atol=1e-6, rtol=0)
    if token_encoder == "word" and chunk_size is None:  # the same operations on the same numbers: bit for bit
        assert torch.equal(layers, expected) and torch.equal(forward, expected)


@pytest.mark.parametrize("token_encoder", ["word", "char"])
def test_word_vectors_are_the_token_layer_rows_lower_cased_unknown_as_unk(token_encoder):
    bilm = tiny(token_encoder)
    with torch.no_grad():
        vectors = bilm.word_vectors(["Market", "zebra"])
        ids, _, chars = inputs(bilm, [["market", "zebra"]])
        expected = bilm.token_vectors(chars if chars is not None else ids)[0]
    torch.testing.assert_close(vectors, expected, atol=1e-6, rtol=0)
    if token_encoder == "word":
        assert int(ids[0, 1]) == UNK_ID
        bilm.vocab = None
        with pytest.raises(ElmoError, match="no vocabulary"):
            bilm.word_vectors(["market"])


def test_boundaries_add_the_bos_and_eos_positions_around_the_same_tokens():
    bilm = tiny(residual=True)
    ids, lengths, _ = inputs(bilm)
    with torch.no_grad():
        x = bilm.token_vectors(ids)
        plain = bilm.contextual(x, lengths)[0]
        kept = bilm.contextual(x, lengths, boundaries=True)[0]
    assert kept.shape == (3, 3, 7, 16)
    for row, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(kept[:, row, 1:n + 1], plain[:, row, :n], atol=1e-6, rtol=0)
        assert kept[:, row, n + 2:].abs().sum() == 0 and kept[:, row, [0, n + 1]].abs().sum() > 0
    bos, eos = bilm.forward_lm.boundary_vectors()
    torch.testing.assert_close(kept[0, 0, 0, :8], bos)  # layer 0 at <bos> is each direction's <bos> vector
    torch.testing.assert_close(kept[0, 2, 2, :8], eos)


@pytest.mark.parametrize("cell", [{}, CLIPPED], ids=["fused", "clipped"])
def test_carried_states_are_each_rows_own_and_start_the_next_call(cell):
    bilm = tiny("char", num_layers=2, residual=True, **cell)
    ids, lengths, chars = inputs(bilm)
    with torch.no_grad():
        x = bilm.token_vectors(chars)
        layers, final = bilm.contextual(x, lengths, carry=True)
        torch.testing.assert_close(layers, bilm.contextual(x, lengths)[0], atol=1e-6, rtol=0)
        cells = bilm.config.hidden_size
        assert len(final) == 4 and all(h.shape == (3, 8) and c.shape == (3, cells) for h, c in final)
        for row, n in enumerate(lengths.tolist()):  # each row alone, without padding, ends in the same states
            _, alone = bilm.contextual(x[row:row + 1, :n], lengths[row:row + 1], carry=True)
            for (h, c), (h1, c1) in zip(final, alone):
                torch.testing.assert_close(h[row:row + 1], h1, atol=1e-6, rtol=0)
                torch.testing.assert_close(c[row:row + 1], c1, atol=1e-6, rtol=0)
        again, _ = bilm.contextual(x, lengths, final, carry=True)
    assert (again - layers)[1:].abs().max() > 1e-4  # the states reach the LSTM layers
    torch.testing.assert_close(again[0], layers[0])  # and not the token layer
    assert [type(layer).__name__ for layer in bilm.forward_lm.layers] == ["ProjectedLSTM" if cell else "AutocastLSTM"] * 2


def test_clipped_cells_clip_and_train():
    """``--lstm clipped`` on our biLM: the training loss's gradients reach every weight of bilm-tf's cell, and the
    first layer's outputs stay within ±proj_clip."""
    bilm = tiny(**(CLIPPED | {"proj_clip": 0.1}))
    ids, lengths, _ = inputs(bilm)
    lm = bilm.forward_lm.train()
    loss, n = lm(ids, lengths)
    loss.backward()
    assert n == int((lengths + 1).sum()) and all(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.layers.parameters())
    with torch.no_grad():
        top = bilm.contextual(bilm.token_vectors(ids), lengths)[0][1]
    assert top.abs().max() == pytest.approx(0.1)  # the first layer's outputs, clipped to proj_clip (0.36 unclipped)
