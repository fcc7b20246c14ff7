"""The biLM: reading order, causality, padding invariance, exact perplexity, checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from elmo.artifacts import load_checkpoint, save_checkpoint
from elmo.data.chars import batch_char_ids, char_table, word_char_ids
from elmo.data.corpus import EncodedCorpus
from elmo.data.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD, SPECIALS, UNK_ID, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import IGNORE_INDEX, BiLM, BiLMConfig, LanguageModel, reverse_padded
from elmo.model.char_cnn import CharCNN
from elmo.model.serialization import lm_checkpoint, load_bilm, save_bilm
from elmo.training.evaluation import evaluate_words, perplexity

V = 40
WORDS = list(SPECIALS) + [f"w{i}" for i in range(V - 4)]
#: The paper's architecture options, each on a tiny biLM (the "word" variant is the assignment's).
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
    lm_f, lm_b = bilm.forward_lm, bilm.backward_lm
    g = torch.Generator().manual_seed(k)
    a = torch.randint(4, V, (1, 8), generator=g)
    b = a.clone()
    b[0, k + 1:] = torch.randint(4, V, (8 - k - 1,), generator=g)  # change tokens after k
    c = a.clone()
    c[0, :k] = torch.randint(4, V, (k,), generator=g)  # change tokens before k
    lengths = torch.tensor([8])
    with torch.no_grad():
        states = {name: (lm_f.token_states(x, lengths, chars_of(bilm, x)), lm_b.token_states(x, lengths, chars_of(bilm, x)))
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


@pytest.mark.parametrize("variant", VARIANTS)
def test_training_lowers_loss(variant):
    torch.manual_seed(0)
    config = BiLMConfig(**({"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "cutoffs": (10,)} | VARIANTS[variant]))
    lm = LanguageModel(config, "forward")
    ids, lengths = torch.tensor([[5, 6, 7, 8]] * 4), torch.tensor([4] * 4)
    chars = torch.from_numpy(char_table(WORDS, config.max_chars)[ids.numpy()]).long()
    opt = torch.optim.Adam(lm.parameters(), 0.05)
    first = None
    for _ in range(30):
        loss, n = lm(ids, lengths, chars)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert n == 20 and loss.item() < first / 3


def test_config_requires_matching_widths():
    with pytest.raises(ElmoError, match="embedding-dim"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=16)
    with pytest.raises(ElmoError, match="embedding-dim"):  # with a projection, x_k must match the projection
        BiLMConfig(vocab_size=10, embedding_dim=16, hidden_size=16, proj_size=8)
    with pytest.raises(ElmoError, match="proj-size"):
        BiLMConfig(vocab_size=10, embedding_dim=8, hidden_size=8, proj_size=8)
    with pytest.raises(ElmoError, match="token-encoder"):
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


def test_char_ids_frame_truncate_and_mark_sentence_boundaries():
    assert word_char_ids("ab", 6) == [257, 98, 99, 258, 0, 0]
    assert word_char_ids("abcdefgh", 5) == [257, 98, 99, 100, 258]  # C - 2 bytes kept
    assert word_char_ids("é", 5)[1:3] == [0xC3 + 1, 0xA9 + 1]  # UTF-8 bytes, any script works
    assert word_char_ids(BOS, 4) != word_char_ids(EOS, 4) and word_char_ids(PAD, 4) == [0, 0, 0, 0]
    with pytest.raises(ElmoError, match="max-chars"):
        char_table(["a"], 2)


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


@pytest.mark.parametrize("variant", ["char", "proj"])
def test_option_checkpoints_round_trip_with_weights_only(tmp_path, variant):
    bilm = make_bilm(**VARIANTS[variant])
    save_bilm(bilm, Vocabulary(WORDS), tmp_path / "bilstm.pt", {})
    loaded, _, _ = load_bilm(tmp_path / "bilstm.pt")
    assert loaded.config == bilm.config
    ids, lengths = torch.tensor([[5, 6, 7]]), torch.tensor([3])
    with torch.no_grad():
        assert torch.equal(loaded(ids, lengths, chars_of(bilm, ids)), bilm(ids, lengths, chars_of(bilm, ids)))


def test_encoded_corpus_keeps_the_spelling_of_oov_words():
    docs = [["w1", "zebra", "w2"], ["quokka"]]
    vocab = Vocabulary(WORDS)
    corpus = EncodedCorpus((vocab.encode(d) for d in docs), max_length=2).attach_chars(docs, 6)
    batch = corpus.collate([0, 1])
    assert batch["ids"].tolist() == [[5, UNK_ID], [UNK_ID, 0]]
    assert batch["chars"].shape == (2, 2, 6)
    assert batch["chars"][0, 1].tolist() == word_char_ids("zebra", 6)
    assert batch["chars"][1, 0].tolist() == word_char_ids("quokka", 6)
    assert batch["chars"][1, 1].tolist() == [0] * 6
    with pytest.raises(ElmoError, match="does not match"):
        EncodedCorpus([[5, 6]]).attach_chars([["w1"]], 6)


def test_bilstm_checkpoint_round_trip_with_weights_only(tmp_path):
    bilm = make_bilm()
    vocab = Vocabulary(WORDS)
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
    vocab = Vocabulary(WORDS)
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
