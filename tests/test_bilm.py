"""The biLM: reading order, causality, padding invariance, exact perplexity, checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from elmo.bilm import IGNORE_INDEX, BiLM, BiLMConfig, LanguageModel, lm_checkpoint, load_bilm, reverse_padded, save_bilm
from elmo.checkpoint import load_checkpoint, save_checkpoint
from elmo.data import EncodedCorpus
from elmo.errors import ElmoError
from elmo.pretrain import evaluate_words, perplexity
from elmo.vocab import BOS_ID, EOS_ID, SPECIALS, Vocabulary

V = 40


def make_bilm(seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    return BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, num_layers=2, dropout=0.0,
                           cutoffs=(10, 20))).eval()


def test_reverse_padded_reverses_within_length_and_is_an_involution():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    lengths = torch.tensor([3, 2])
    assert reverse_padded(x, lengths).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]
    assert torch.equal(reverse_padded(reverse_padded(x, lengths), lengths), x)


def test_reading_order_forward_and_backward():
    bilm = make_bilm()
    ids, lengths = torch.tensor([[11, 12, 13], [14, 15, 0]]), torch.tensor([3, 2])
    inp, tgt = bilm.forward_lm.reading_order(ids, lengths)
    assert inp.tolist() == [[BOS_ID, 11, 12, 13], [BOS_ID, 14, 15, 0]]
    assert tgt.tolist() == [[11, 12, 13, EOS_ID], [14, 15, EOS_ID, IGNORE_INDEX]]
    inp, tgt = bilm.backward_lm.reading_order(ids, lengths)
    assert inp.tolist() == [[EOS_ID, 13, 12, 11], [EOS_ID, 15, 14, 0]]
    assert tgt.tolist() == [[13, 12, 11, BOS_ID], [15, 14, BOS_ID, IGNORE_INDEX]]


@pytest.mark.parametrize("k", [0, 3, 6])
def test_forward_states_never_see_the_future_and_backward_never_the_past(k):
    lm_f = make_bilm().forward_lm
    lm_b = make_bilm().backward_lm
    g = torch.Generator().manual_seed(k)
    a = torch.randint(4, V, (1, 8), generator=g)
    b = a.clone()
    b[0, k + 1:] = torch.randint(4, V, (8 - k - 1,), generator=g)  # change tokens after k
    c = a.clone()
    c[0, :k] = torch.randint(4, V, (k,), generator=g)  # change tokens before k
    lengths = torch.tensor([8])
    with torch.no_grad():
        for layer_a, layer_b in zip(lm_f.token_states(a, lengths), lm_f.token_states(b, lengths)):
            assert torch.allclose(layer_a[0, :k + 1], layer_b[0, :k + 1], atol=1e-6)
            if k < 7:
                assert not torch.allclose(layer_a[0, k + 1:], layer_b[0, k + 1:])
        for layer_a, layer_c in zip(lm_b.token_states(a, lengths), lm_b.token_states(c, lengths)):
            assert torch.allclose(layer_a[0, k:], layer_c[0, k:], atol=1e-6)


def test_bilm_layers_are_padding_invariant():
    bilm = make_bilm()
    short = torch.tensor([[5, 6, 7]])
    long = torch.tensor([[9, 10, 11, 12, 13, 14]])
    batch = torch.tensor([[5, 6, 7, 0, 0, 0], [9, 10, 11, 12, 13, 14]])
    with torch.no_grad():
        alone = bilm(short, torch.tensor([3]))
        together = bilm(batch, torch.tensor([3, 6]))
        long_alone = bilm(long, torch.tensor([6]))
    assert alone.shape == (3, 1, 3, 16)
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


def test_adaptive_loss_perplexity_equals_full_softmax_perplexity():
    bilm = make_bilm()
    g = torch.Generator().manual_seed(1)
    corpus = EncodedCorpus([torch.randint(4, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 9, (20,), generator=g)])
    for lm in (bilm.forward_lm, bilm.backward_lm):
        fast = perplexity(lm, corpus, torch.device("cpu"))
        exact, targets, top5 = evaluate_words(lm, corpus, torch.device("cpu"))
        assert fast == pytest.approx(exact["perplexity"], rel=1e-4)
        assert len(targets) == corpus.num_tokens + len(corpus)  # every word plus one boundary word
        assert 1 < exact["perplexity"] < 10 * V and top5.shape == (len(targets), 5)
        assert exact["top1_accuracy"] <= exact["top5_accuracy"]


def test_training_lowers_loss():
    lm = LanguageModel(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, cutoffs=(10,)), "forward")
    ids, lengths = torch.tensor([[5, 6, 7, 8]] * 4), torch.tensor([4] * 4)
    opt = torch.optim.Adam(lm.parameters(), 0.05)
    first = None
    for _ in range(30):
        loss, n = lm(ids, lengths)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert n == 20 and loss.item() < first / 3


def test_config_requires_matching_widths():
    with pytest.raises(ElmoError, match="embedding-dim"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=16)


def test_bilstm_checkpoint_round_trip_with_weights_only(tmp_path):
    bilm = make_bilm()
    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(V - 4)])
    save_bilm(bilm, vocab, tmp_path / "bilstm.pt", {"seed": 0})
    raw = torch.load(tmp_path / "bilstm.pt", weights_only=True)
    assert raw["format"] == "elmo.bilm" and raw["vocab"] == vocab.itos
    loaded, loaded_vocab, _ = load_bilm(tmp_path / "bilstm.pt")
    ids, lengths = torch.tensor([[5, 6, 7]]), torch.tensor([3])
    with torch.no_grad():
        assert torch.equal(loaded(ids, lengths), bilm(ids, lengths))
    assert loaded_vocab == vocab
    save_checkpoint(lm_checkpoint(bilm.forward_lm, vocab, {}), tmp_path / "forward.pt")
    assert load_checkpoint(tmp_path / "forward.pt", "elmo.lm")["direction"] == "forward"


def test_bad_model_files_give_clear_errors(tmp_path):
    with pytest.raises(ElmoError, match="not found"):
        load_bilm(tmp_path / "missing.pt")
    bilm = make_bilm()
    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(V - 4)])
    save_bilm(bilm, vocab, tmp_path / "bilstm.pt", {})
    data = (tmp_path / "bilstm.pt").read_bytes()
    (tmp_path / "truncated.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoError, match="not a loadable ELMo checkpoint"):
        load_bilm(tmp_path / "truncated.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ElmoError, match="expected a checkpoint of format elmo.bilm"):
        load_bilm(tmp_path / "other.pt")
    save_checkpoint(lm_checkpoint(bilm.forward_lm, vocab, {}), tmp_path / "forward.pt")
    with pytest.raises(ElmoError, match="found 'elmo.lm'"):
        load_bilm(tmp_path / "forward.pt")


def test_perplexity_of_uniform_model_is_vocabulary_size():
    lm = LanguageModel(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, cutoffs=(10,)), "forward")
    with torch.no_grad():
        for p in lm.softmax.parameters():
            p.zero_()
    corpus = EncodedCorpus([[5, 6, 25]])  # targets 5, 6, 25, <eos>: word 25 is in the tail
    # head: 10 words + 1 cluster equally likely; the cluster spreads its mass over 30 words
    expected = math.exp(-(3 * math.log(1 / 11) + math.log(1 / 11 / 30)) / 4)
    assert perplexity(lm, corpus, torch.device("cpu")) == pytest.approx(expected, rel=1e-5)
