"""The published (bilm-tf) biLM against bilm-tf's own outputs (tests/fixtures/bilm_tf, AllenNLP's test fixtures):
token layer, top layer, stateful batches; the options/hdf5 loader and its errors; the layer interface."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from published_reference import FIXTURES, OPTIONS, TOLERANCE, WEIGHTS, reference_batches, reference_top
from support import needs_native_bf16

from elmo import ElmoError
from elmo.data.chars import TF_BOS, TF_EOS, batch_char_ids, bilm_tf_char_ids, bilm_tf_char_table
from elmo.model.bilm import BiLM
from elmo.model.char_cnn import CharEncoder
from elmo.model.elmo import Elmo
from elmo.model.published_io import (
    expected_datasets,
    load_published_bilm,
    read_options,
    save_published_bilm,
    tf_datasets,
)
from lab.bench.published import random_layer_weights, random_weights


@pytest.fixture(scope="module")
def bilm() -> BiLM:
    return load_published_bilm(OPTIONS, WEIGHTS)


def char_batch(sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """bilm-tf character ids ``(B, T, 50)`` (AllenNLP's ``batch_to_ids``) and lengths of token lists."""
    return batch_char_ids(sentences, 50, "bilm_tf"), torch.tensor([len(s) for s in sentences])


# --- (a), (b), (c): exactness against bilm-tf ------------------------------------------------------------------------

def test_token_layer_of_every_vocabulary_word_equals_bilm_tf(bilm):
    words = (FIXTURES / "vocab_test.txt").read_text(encoding="utf-8").strip().split("\n")
    assert TF_BOS in words and TF_EOS in words and any(not w.isascii() for w in words)
    with torch.no_grad():
        ours = bilm.token_vectors(torch.from_numpy(bilm_tf_char_table(words)).long()).numpy()
    with h5py.File(FIXTURES / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    assert ours.shape == expected.shape == (458, 16)
    assert np.abs(ours - expected).max() < TOLERANCE


def test_top_layer_of_the_first_batch_equals_bilm_tf_and_does_not_depend_on_the_batch(bilm):
    batch = reference_batches()[0]
    chars, lengths = char_batch(batch)
    with torch.no_grad():
        layers = bilm(None, lengths, chars)
    assert layers.shape == (3, 3, max(lengths), 32)
    assert np.abs(layers[2, 0, : lengths[0]].numpy() - reference_top(0)).max() < TOLERANCE
    for row, sentence in enumerate(batch):  # stateless: each sentence alone, and among other sentences
        alone = bilm(None, *reversed(char_batch([sentence])))
        mixed = bilm(None, *reversed(char_batch([reference_batches()[5][1], sentence])))
        n = len(sentence)
        assert torch.allclose(alone[:, 0, :n], layers[:, row, :n], atol=TOLERANCE)
        assert torch.allclose(mixed[:, 1, :n], layers[:, row, :n], atol=TOLERANCE)
        assert not layers[:, row, n:].any()  # zero at padding


def test_carrying_the_states_reproduces_every_stateful_bilm_tf_batch(bilm):
    states = None
    with torch.no_grad():
        for i, batch in enumerate(reference_batches()):
            chars, lengths = char_batch(batch)
            layers, states = bilm.contextual(bilm.token_vectors(chars), lengths, states, carry=True)
            assert np.abs(layers[2, 0, : lengths[0]].numpy() - reference_top(i)).max() < TOLERANCE, f"batch {i}"
    assert len(states) == 4 and states[0][0].shape == (3, 16) and states[0][1].shape == (3, 64)


def test_stateless_batches_after_the_first_differ_from_the_stateful_reference(bilm):
    chars, lengths = char_batch(reference_batches()[1])
    with torch.no_grad():
        top = bilm(None, lengths, chars)[2, 0, : lengths[0]].numpy()
    assert np.abs(top - reference_top(1)).max() > 1e-3  # the reference carried batch 0's states


# --- the pieces ----------------------------------------------------------------------------------------------------

def test_bilm_tf_character_ids_follow_allennlps_mapper():
    assert bilm_tf_char_ids("a")[:4] == [259, ord("a") + 1, 260, 261] and len(bilm_tf_char_ids("a")) == 50
    assert bilm_tf_char_ids(TF_BOS)[:4] == [259, 257, 260, 261] and bilm_tf_char_ids(TF_EOS)[:3] == [259, 258, 260]
    assert bilm_tf_char_ids("é")[1:3] == [0xC3 + 1, 0xA9 + 1]  # UTF-8 bytes
    long = bilm_tf_char_ids("x" * 60)
    assert long[0] == 259 and long[1:49] == [ord("x") + 1] * 48 and long[49] == 260  # 48 bytes kept


def naive_token_vectors(encoder: CharEncoder, chars: torch.Tensor) -> torch.Tensor:
    """bilm-tf's char CNN written plainly: every filter over all 50 characters (the exactness check of the
    cut-off and the merged convolution)."""
    x = encoder.char_embedding(chars).transpose(1, 2)
    x = torch.cat([encoder.activation(conv(x).amax(dim=-1)) for conv in encoder.convs], dim=-1)
    for layer in encoder.highways:
        transform, carry = layer(x).chunk(2, dim=-1)
        x = torch.sigmoid(carry) * torch.relu(transform) + (1 - torch.sigmoid(carry)) * x
    return encoder.projection(x)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_encoder_equals_the_plain_computation_for_every_word_length(bilm, activation):
    model = random_weights(BiLM(replace(bilm.config, activation=activation)), 3)
    words = ["a", "the", "Winfrey", "•", "x" * 44, "y" * 45, "z" * 48, "w" * 70, "bio-identical", TF_BOS]
    chars = torch.from_numpy(bilm_tf_char_table(words)).long()
    with torch.no_grad():
        assert torch.allclose(model.token_vectors(chars), naive_token_vectors(model.token_encoder, chars), atol=1e-5)


def test_layer_interface_used_by_elmo_and_the_layer_cache(bilm):
    chars, lengths = char_batch(reference_batches()[2])
    ids = (chars[..., 0] > 0).long()
    with torch.no_grad():
        layers = bilm(ids, lengths, chars)
        assert torch.allclose(bilm.token_layer(ids, lengths, chars), layers[0], atol=1e-6)
        assert torch.allclose(bilm.lstm_layers(ids, lengths, chars), layers[1:])
        elmo = Elmo(bilm, mix="trainable_lambda", dropout=0.0).eval()
        plain = elmo(ids, lengths, chars)["elmo_representations"][0]
        cached = elmo(ids, lengths, chars, layers=layers[1:])["elmo_representations"][0]
    assert bilm.num_layers == 3 and bilm.output_dim == 32 and plain.shape == (3, max(lengths), 32)
    assert torch.allclose(plain, layers.mean(0), atol=1e-5) and torch.allclose(plain, cached, atol=1e-5)
    with pytest.raises(ElmoError, match="reads characters"):
        bilm(ids, lengths, None)


def test_fine_tuning_sends_gradients_into_every_lstm_layer():
    model = load_published_bilm(OPTIONS, WEIGHTS)
    elmo = Elmo(model, mix="trainable_lambda", dropout=0.0, requires_grad=True)
    chars, lengths = char_batch(reference_batches()[3])
    elmo((chars[..., 0] > 0).long(), lengths, chars)["elmo_representations"][0].sum().backward()
    groups = elmo.bilm.layer_groups()
    assert len(groups) == 3 and all(any(p.grad is not None and p.grad.abs().sum() > 0 for p in g) for g in groups)


@pytest.mark.cpu_features
@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="bf16 autocast needs oneDNN")
@needs_native_bf16()
def test_bf16_autocast_stays_close_to_fp32_on_a_cpu_with_native_bf16(bilm):
    chars, lengths = char_batch(reference_batches()[0])
    with torch.no_grad():
        exact = bilm(None, lengths, chars)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = bilm(None, lengths, chars)
    assert low.dtype == torch.float32 and 0 < (low - exact).abs().max() < 0.1


# --- reading and writing the files ---------------------------------------------------------------------------------

def test_options_and_layout_of_the_fixture(bilm):
    config = read_options(OPTIONS)
    assert (config.hidden_size, config.output_size, config.num_layers, config.num_highway) == (64, 16, 2, 2)
    assert config.cell_clip == 3 and config.proj_clip == 3 and config.residual and config.activation == "relu"
    with h5py.File(WEIGHTS, "r") as f:
        names = set()
        f.visititems(lambda name, node: names.add(name) if isinstance(node, h5py.Dataset) else None)
        assert names == set(expected_datasets(config))
        assert all(f[name].shape == shape for name, shape in expected_datasets(config).items())
    assert bilm.config.weights_digest and bilm.source == (str(OPTIONS.resolve()), str(WEIGHTS.resolve()))


def test_saving_writes_the_published_layout_back_exactly(bilm, tmp_path):
    save_published_bilm(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    datasets = tf_datasets(bilm)
    with h5py.File(WEIGHTS, "r") as original:
        for name, array in datasets.items():
            assert np.array_equal(original[name][...], array), name  # the forget-gate biases too (tf_bias)
    again = load_published_bilm(tmp_path / "o.json", tmp_path / "w.hdf5")
    assert read_options(tmp_path / "o.json") == replace(bilm.config, weights_digest="")
    chars, lengths = char_batch(reference_batches()[4])
    with torch.no_grad():
        assert torch.allclose(again(None, lengths, chars), bilm(None, lengths, chars), atol=1e-6)


def write_options(tmp_path: Path, change) -> Path:
    options = json.loads(OPTIONS.read_text())
    change(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda o: o.update(vocab_size=10), "unknown option.*vocab_size"),
    (lambda o: o["lstm"].update(peepholes=True), "unknown option.*lstm.peepholes"),
    (lambda o: o["char_cnn"].update(activation="sigmoid"), "char_cnn.activation 'sigmoid' is not supported"),
    (lambda o: o["lstm"].update(projection_dim=128), "lstm.projection_dim .128. must not exceed lstm.dim .64."),
    (lambda o: o["lstm"].pop("dim"), "lstm.dim is missing"),
    (lambda o: o["lstm"].update(n_layers="2"), "lstm.n_layers must be int"),
    (lambda o: o.pop("char_cnn"), "only character-input biLMs"),
    (lambda o: o.update(bidirectional=False), "bidirectional must be true"),
    (lambda o: o["char_cnn"].update(filters=[[1, 4], [2]]), "char_cnn.filters must be a list of"),
    (lambda o: o["char_cnn"].update(n_characters=300), "n_characters must be 261 or 262"),
    (lambda o: o["lstm"].update(cell_clip=-1), "lstm.cell_clip must be positive"),
])
def test_options_outside_what_is_supported_are_named(tmp_path, change, message):
    with pytest.raises(ElmoError, match=message):
        read_options(write_options(tmp_path, change))


def test_training_options_are_accepted_and_ignored(tmp_path):
    path = write_options(tmp_path, lambda o: o.update(dropout=0.1, n_epochs=10, all_clip_norm_val=10.0, batch_size=128))
    assert read_options(path) == read_options(OPTIONS)


def test_unreadable_options_files(tmp_path):
    with pytest.raises(ElmoError, match="options file not found"):
        read_options(tmp_path / "nowhere.json")
    (tmp_path / "bad.json").write_text("{\"lstm\": ")
    with pytest.raises(ElmoError, match="not valid JSON"):
        read_options(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ElmoError, match="expected a JSON object"):
        read_options(tmp_path / "list.json")


def copy_weights(tmp_path: Path, edit) -> Path:
    path = tmp_path / "weights.hdf5"
    shutil.copy(WEIGHTS, path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


def test_bad_weight_files_raise_clear_errors(tmp_path):
    with pytest.raises(ElmoError, match="weight file not found"):
        load_published_bilm(OPTIONS, tmp_path / "nowhere.hdf5")
    (tmp_path / "text.hdf5").write_text("not hdf5")
    with pytest.raises(ElmoError, match="not a readable HDF5 weight file"):
        load_published_bilm(OPTIONS, tmp_path / "text.hdf5")
    missing = copy_weights(tmp_path, lambda f: f.__delitem__("CNN_high_1/W_carry"))
    with pytest.raises(ElmoError, match="dataset CNN_high_1/W_carry is missing"):
        load_published_bilm(OPTIONS, missing)


def test_a_dataset_of_the_wrong_shape_names_both_shapes(tmp_path):
    def reshape(f):
        del f["CNN_proj/W_proj"]
        f.create_dataset("CNN_proj/W_proj", data=np.zeros((124, 8), dtype=np.float32))

    with pytest.raises(ElmoError, match=r"CNN_proj/W_proj has shape \(124, 8\), but the options need \(124, 16\)"):
        load_published_bilm(OPTIONS, copy_weights(tmp_path, reshape))
    wider = write_options(tmp_path, lambda o: o["lstm"].update(dim=128))  # options that do not fit the weights
    with pytest.raises(ElmoError, match=r"RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0 has shape \(32, 256\), but the "
                                        r"options need \(32, 512\)"):
        load_published_bilm(wider, WEIGHTS)



@pytest.mark.parametrize("change, message", [
    (lambda o: o["char_cnn"].update(n_highway=1),
     r"dataset CNN_high_1/W_carry is not used by these options \(char_cnn.n_highway is 1: highway layers CNN_high_0 "
     r"\.\. CNN_high_0\) \(and 3 more"),
    (lambda o: o["lstm"].update(n_layers=1),
     r"dataset RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B is not used by these options \(lstm.n_layers is 1: cells "
     r"Cell0 \.\. Cell0\)"),
])
def test_weights_larger_than_their_options_name_the_dataset_and_the_option(tmp_path, change, message):
    """Two highway layers (or LSTM layers) in the weights under options that ask for one: an error, not a
    silent load of part of the file."""
    with pytest.raises(ElmoError, match=message):
        load_published_bilm(write_options(tmp_path, change), WEIGHTS)


def test_a_dataset_no_option_accounts_for_is_an_error(tmp_path):
    extra = copy_weights(tmp_path, lambda f: f.create_dataset("CNN_extra/W", data=np.zeros(3, dtype=np.float32)))
    with pytest.raises(ElmoError, match=r"dataset CNN_extra/W is not used by these options \(no key of the options "
                                        r"file accounts for it\)"):
        load_published_bilm(OPTIONS, extra)
    three_directions = copy_weights(tmp_path, lambda f: f.copy("RNN_1", "RNN_2"))
    with pytest.raises(ElmoError, match=r"RNN_2/.* is not used by these options \(a biLM has two directions"):
        load_published_bilm(OPTIONS, three_directions)
    assert load_published_bilm(OPTIONS, WEIGHTS).config.num_highway == 2  # the fixture itself still loads


def _plain_lstm(layer, x: torch.Tensor, active: list[int]) -> torch.Tensor:
    """The clipped, projected LSTM written out step by step with plain autograd (gate order i, f, o, j)."""
    steps, batch, _ = x.shape
    h = x.new_zeros(batch, layer.output_size)
    c = x.new_zeros(batch, layer.hidden_size)
    out = []
    for t in range(steps):
        n = active[t] if t < len(active) else 0
        g = x[t, :n] @ layer.input_weight.t() + h[:n] @ layer.recurrent_weight.t() + layer.bias
        i, f, o = torch.sigmoid(g[:, : 3 * layer.hidden_size]).chunk(3, dim=1)
        cell = (f * c[:n] + i * torch.tanh(g[:, 3 * layer.hidden_size:])).clamp(-layer.cell_clip, layer.cell_clip)
        h_new = ((o * torch.tanh(cell)) @ layer.projection.t()).clamp(-layer.proj_clip, layer.proj_clip)
        out.append(torch.cat([h_new, h_new.new_zeros(batch - n, h_new.shape[1])]))
        h, c = torch.cat([h_new, h[n:]]), torch.cat([cell, c[n:]])
    return torch.stack(out)


@pytest.mark.parametrize("chunk_size", [None, 7])
def test_lstm_gradients_equal_those_of_the_plain_step_by_step_recurrence(chunk_size, monkeypatch):
    """The layer's training path (per-step pieces by split, the recurrent weight's gradient in one product per chunk)
    gives the gradients of the plain recurrence, for rows of different lengths and with chunking; every product
    large enough for oneDNN's path, which has no backward and must be skipped whenever one of its inputs needs a
    gradient (at the first step only the input products do)."""
    from elmo.model import lstm
    from elmo.model.lstm import ProjectedLSTM

    monkeypatch.setattr(lstm, "ONEDNN_MIN_WORK", 0)

    torch.manual_seed(0)
    layer = ProjectedLSTM(6, 16, 5, cell_clip=0.8, proj_clip=0.7)
    random_layer_weights(layer, torch.Generator().manual_seed(1))
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(5, 4, 6) * 2
    active = [4, 4, 3, 2, 1]
    grads = []
    for run in (lambda x: layer(x, active, chunk_size=chunk_size)[0], lambda x: _plain_lstm(layer, x, active)):
        layer.zero_grad()
        xr = x.clone().requires_grad_()
        out = run(xr)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append([out.detach(), xr.grad] + [p.grad.clone() for p in layer.parameters()])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert grads[0][3].abs().sum() > 0  # the recurrent weight's gradient is not empty
