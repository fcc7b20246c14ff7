"""The biLM: reading order, causality, padding invariance, exact perplexity, checkpoints."""

from __future__ import annotations

import pytest
import torch

from elmo.data.chars import batch_char_ids, char_table
from elmo.data.vocab import BOS_ID, EOS_ID, SPECIALS, UNK_ID
from elmo.errors import ElmoError
from elmo.model.adaptive_softmax import IGNORE_INDEX
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.language_model import LanguageModel, reverse_padded

V = 40
WORDS = list(SPECIALS) + [f"w{i}" for i in range(V - 4)]
#: The paper's architecture options, each on a tiny biLM (the "word" variant is the default).
VARIANTS = {
    "word": {},
    "char": {"token_encoder": "char", "char_dim": 4, "char_filters": ((1, 4), (2, 6), (3, 6)), "max_chars": 6},
    "residual": {"residual": True},
    "proj": {"hidden_size": 12, "proj_size": 8},
}


def make_bilm(seed: int = 0, **options) -> BiLM:
    torch.manual_seed(seed)
    sizes = {"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "num_layers": 2, "dropout": 0.0,
             "cutoffs": (10, 20)} | options
    return BiLM(BiLMConfig(**sizes)).eval()


def chars_of(bilm: BiLM, ids: torch.Tensor) -> torch.Tensor | None:
    """Character ids of word ids (spelled from WORDS) for a character biLM, else None."""
    if not bilm.config.chars_per_token:
        return None
    return torch.from_numpy(char_table(WORDS, bilm.config.max_chars)[ids.numpy()]).long()


def test_reverse_padded_reverses_within_length_and_is_an_involution():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    lengths = torch.tensor([3, 2])
    assert reverse_padded(x, lengths).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]
    assert torch.equal(reverse_padded(reverse_padded(x, lengths), lengths), x)


def test_reading_order_forward_and_backward():
    bilm = make_bilm()
    ids, lengths = torch.tensor([[11, 12, 13], [14, 15, 0]]), torch.tensor([3, 2])
    inp, tgt, _ = bilm.forward_lm.reading_order(ids, lengths)
    assert inp.tolist() == [[BOS_ID, 11, 12, 13], [BOS_ID, 14, 15, 0]]
    assert tgt.tolist() == [[11, 12, 13, EOS_ID], [14, 15, EOS_ID, IGNORE_INDEX]]
    inp, tgt, _ = bilm.backward_lm.reading_order(ids, lengths)
    assert inp.tolist() == [[EOS_ID, 13, 12, 11], [EOS_ID, 15, 14, 0]]
    assert tgt.tolist() == [[13, 12, 11, BOS_ID], [15, 14, BOS_ID, IGNORE_INDEX]]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k", [0, 3, 6])
def test_forward_states_never_see_the_future_and_backward_never_the_past(k, variant):
    bilm = make_bilm(**VARIANTS[variant])
    g = torch.Generator().manual_seed(k)
    a = torch.randint(4, V, (1, 8), generator=g)
    b = a.clone()
    b[0, k + 1:] = torch.randint(4, V, (8 - k - 1,), generator=g)  # change tokens after k
    c = a.clone()
    c[0, :k] = torch.randint(4, V, (k,), generator=g)  # change tokens before k
    lengths = torch.tensor([8])
    width = bilm.output_dim // 2
    with torch.no_grad():  # each direction's half of every layer
        states = {name: ((layers := bilm(x, lengths, chars_of(bilm, x)))[..., :width], layers[..., width:])
                  for name, x in (("a", a), ("b", b), ("c", c))}
        for layer_a, layer_b in zip(states["a"][0], states["b"][0]):
            assert torch.allclose(layer_a[0, :k + 1], layer_b[0, :k + 1], atol=1e-6)
            if k < 7:
                assert not torch.allclose(layer_a[0, k + 1:], layer_b[0, k + 1:])
        for layer_a, layer_c in zip(states["a"][1], states["c"][1]):
            assert torch.allclose(layer_a[0, k:], layer_c[0, k:], atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bilm_layers_are_padding_invariant(variant):
    bilm = make_bilm(**VARIANTS[variant])
    short = torch.tensor([[5, 6, 7]])
    long = torch.tensor([[9, 10, 11, 12, 13, 14]])
    batch = torch.tensor([[5, 6, 7, 0, 0, 0], [9, 10, 11, 12, 13, 14]])
    with torch.no_grad():
        alone = bilm(short, torch.tensor([3]), chars_of(bilm, short))
        together = bilm(batch, torch.tensor([3, 6]), chars_of(bilm, batch))
        long_alone = bilm(long, torch.tensor([6]), chars_of(bilm, long))
    assert alone.shape == (3, 1, 3, 16) and bilm.output_dim == 16
    assert torch.allclose(alone[:, 0], together[:, 0, :3], atol=1e-6)
    assert torch.allclose(long_alone[:, 0], together[:, 1], atol=1e-6)
    assert together[:, 0, 3:].abs().sum() == 0  # padding zeroed


def test_layer_zero_is_both_token_embeddings():
    bilm = make_bilm()
    ids = torch.tensor([[5, 6]])
    with torch.no_grad():
        layers = bilm(ids, torch.tensor([2]))
    expected = torch.cat([bilm.forward_lm.embedding(ids), bilm.backward_lm.embedding(ids)], -1)
    assert torch.allclose(layers[0], expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_training_lowers_loss(variant):
    torch.manual_seed(0)
    config = BiLMConfig(**({"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "cutoffs": (10,)} | VARIANTS[variant]))
    lm = LanguageModel(config, "forward")
    ids, lengths = torch.tensor([[5, 6, 7, 8]] * 4), torch.tensor([4] * 4)
    chars = torch.from_numpy(char_table(WORDS, config.max_chars)[ids.numpy()]).long()
    opt = torch.optim.Adam(lm.parameters(), 0.05)
    first = None
    for _ in range(40):
        loss, n = lm(ids, lengths, chars)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert n == 20 and loss.item() < first / 2  # at least halved for seeds 0-4 of every variant


def test_config_requires_matching_widths():
    with pytest.raises(ElmoError, match="BiLMConfig.embedding_dim"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=16)
    with pytest.raises(ElmoError, match="BiLMConfig.embedding_dim"):  # with a projection, x_k must match the projection
        BiLMConfig(vocab_size=10, embedding_dim=16, hidden_size=16, proj_size=8)
    with pytest.raises(ElmoError, match="BiLMConfig.proj_size"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=8, proj_size=8)
    with pytest.raises(ElmoError, match="BiLMConfig.token_encoder"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=8, token_encoder="bytes")


def test_char_encoder_gives_each_oov_word_its_own_vector():
    """Two words outside the vocabulary share the id <unk>: a word biLM cannot tell them apart, the
    character biLM spells them out (§3.1) while still predicting word ids."""
    oov = ["zebra", "quokka"]
    ids = torch.tensor([[UNK_ID, 5], [UNK_ID, 5]])  # both read as <unk> followed by w1
    lengths = torch.tensor([2, 2])
    char = make_bilm(**VARIANTS["char"])
    word = make_bilm()
    with torch.no_grad():
        char_layers = char(ids, lengths, batch_char_ids([[oov[0], "w1"], [oov[1], "w1"]], char.config.max_chars))
        word_layers = word(ids, lengths)
    for j in range(3):  # every layer tells the two OOV words (and what follows them) apart
        assert not torch.allclose(char_layers[j, 0, 0], char_layers[j, 1, 0])
        assert torch.equal(word_layers[j, 0], word_layers[j, 1])
    # the forward LM's state at w1 depends on the OOV word before it; its token vector does not
    assert torch.equal(char_layers[0, 0, 1], char_layers[0, 1, 1])
    assert not torch.allclose(char_layers[1, 0, 1, :8], char_layers[1, 1, 1, :8])
    with pytest.raises(ElmoError, match="pass chars"):
        char(ids, lengths)


def test_residual_connection_adds_the_first_layer_to_the_second():
    lm = make_bilm(**VARIANTS["residual"]).forward_lm
    inputs = torch.tensor([[BOS_ID, 5, 6, 7]])
    with torch.no_grad():
        x, h1, h2 = lm.states(inputs)
        assert torch.allclose(h2, lm.layers[1](h1)[0] + h1, atol=1e-6)
        assert torch.allclose(h1, lm.layers[0](x)[0], atol=1e-6)  # no skip into the first layer


def test_projected_lstm_has_more_cells_than_outputs():
    bilm = make_bilm(**VARIANTS["proj"])
    lstm = bilm.forward_lm.layers[0]
    assert lstm.hidden_size == 12 and lstm.proj_size == 8 and lstm.weight_hr_l0.shape == (8, 12)
    assert bilm.output_dim == 16 and bilm.forward_lm.softmax.in_features == 8


