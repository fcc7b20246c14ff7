"""``python -m elmo export`` (elmo/pipelines/export.py): bilm-tf's files from a biLM. The published fixture exported
again is the same file, dataset for dataset; a random published biLM exported and read back by ``ElmoEmbedder``
gives its own vectors; bilm-tf's vocabulary file; our own biLM is refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from published_reference import FIXTURES, OPTIONS, TOLERANCE, WEIGHTS

from elmo import ElmoEmbedder, ElmoError
from elmo.data.vocab import SPECIALS
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.published_io import (
    VOCAB_SPECIALS,
    load_published_bilm,
    read_vocabulary,
    tf_datasets,
    vocabulary_lines,
)
from elmo.pipelines.export import EXPORT_FILES, ExportArgs, export, export_bilm
from lab.bench.published import random_weights


def datasets_of(path: Path) -> dict[str, np.ndarray]:
    """Every dataset of an hdf5 file (groups walked), name → array as stored."""
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, node: out.__setitem__(name, node[...]) if isinstance(node, h5py.Dataset) else None)
    return out


def max_abs_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(a[name].astype(np.float64) - b[name]).max()) for name in a)


# --- identity: the published fixture, loaded and exported, is the same file ------------------------------------------

def test_the_published_fixture_exported_again_has_exactly_its_datasets_and_options(tmp_path):
    summary = export(ExportArgs(out=str(tmp_path / "out"), options_file=str(OPTIONS), weight_file=str(WEIGHTS),
                                quiet=True))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(EXPORT_FILES)  # no temporary file left
    original, exported = datasets_of(WEIGHTS), datasets_of(tmp_path / "out" / "weights.hdf5")
    assert set(exported) == set(original) and len(original) == summary["datasets"] == 33
    for name, array in original.items():
        assert exported[name].shape == array.shape and exported[name].dtype == array.dtype, name
        assert np.array_equal(exported[name], array), name  # bit for bit, the forget-gate biases included
    assert max_abs_difference(exported, original) == 0.0
    options = json.loads(OPTIONS.read_text(encoding="utf-8"))
    written = json.loads((tmp_path / "out" / "options.json").read_text(encoding="utf-8"))
    assert written == {key: options[key] for key in ("lstm", "char_cnn")}
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\n"
    again = load_published_bilm(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5")
    assert again.config == load_published_bilm(OPTIONS, WEIGHTS).config  # the weights' digest too


def test_writing_back_a_changed_bias_subtracts_the_forget_bias(tmp_path):
    bilm = load_published_bilm(OPTIONS, WEIGHTS)
    with torch.no_grad():
        bilm.backward_lm.layers[1].bias.add_(0.25)  # e.g. fine-tuned: the loaded TF bias no longer applies
    name = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"
    written, original = tf_datasets(bilm)[name], datasets_of(WEIGHTS)[name]
    assert np.abs(written - (original + 0.25)).max() < 1e-6
    assert np.array_equal(tf_datasets(bilm)["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B"],
                          datasets_of(WEIGHTS)["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B"])


def test_a_vocabulary_file_follows_the_three_specials_in_its_order(tmp_path):
    vocab_test = FIXTURES / "vocab_test.txt"
    export(ExportArgs(out=str(tmp_path), options_file=str(OPTIONS), weight_file=str(WEIGHTS),
                      vocab_file=str(vocab_test), quiet=True))
    words = vocab_test.read_text(encoding="utf-8").strip().split("\n")
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and lines[:3] == ["<S>", "</S>", "<UNK>"]
    assert lines[3:-1] == [w for w in words if w not in VOCAB_SPECIALS] and len(lines) - 1 == len(words) == 458


def test_vocabulary_lines_and_files():
    assert vocabulary_lines(["the", "<UNK>", "cat", "the", "</S>"]) == ["<S>", "</S>", "<UNK>", "the", "cat"]
    with pytest.raises(ElmoError, match="vocabulary word 1 .'a b'. is empty or holds whitespace"):
        vocabulary_lines(["ok", "a b"])


def test_reading_a_vocabulary_file_names_its_problems(tmp_path):
    good = tmp_path / "words.txt"
    good.write_text("\ufeffthe\n\n  cat \nÉcole\n", encoding="utf-8")
    assert read_vocabulary(good) == ["the", "cat", "École"]
    two = tmp_path / "two.txt"
    two.write_text("the\nNew York\n", encoding="utf-8")
    with pytest.raises(ElmoError, match="two.txt line 2 holds more than one token"):
        read_vocabulary(two)
    with pytest.raises(ElmoError, match="missing.txt: vocabulary file not found"):
        read_vocabulary(tmp_path / "missing.txt")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(ElmoError, match="not UTF-8"):
        read_vocabulary(binary)


# --- round trip: a random published biLM through the files and ElmoEmbedder -----------------------------------------

TINY = {
    "projected": BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 6), (3, 6)), num_highway=1, hidden_size=12,
                                     projection_dim=6, num_layers=2, cell_clip=3.0, proj_clip=3.0,
                                     use_skip_connections=True),
    "plain": BiLMConfig.bilm_tf(char_dim=3, filters=((1, 4), (3, 4)), num_highway=0, hidden_size=8, projection_dim=8,
                                 num_layers=2, cell_clip=None, proj_clip=None, use_skip_connections=False,
                                 activation="tanh"),
}
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."],
             ["Zyxquv", "naïve", "École", "antidisestablishmentarianism-and-more-than-fifty-characters-long", "!"],
             ["a"]]


def random_bilm(config: BiLMConfig, seed: int = 0) -> BiLM:
    """Random weights of ``config``, biases too (the forget-gate conversion must matter)."""
    bilm = random_weights(BiLM(config), seed)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers):
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.5)
    return bilm.eval()


@pytest.mark.parametrize("kind", sorted(TINY))
def test_a_random_published_bilm_read_back_by_elmo_embedder_gives_the_same_layers(tmp_path, kind):
    bilm = random_bilm(TINY[kind])
    summary = export_bilm(bilm, tmp_path, words=["the", "cat"])  # every other word of SENTENCES is outside vocab.txt
    assert summary["vocabulary"] == 5 and (summary["allennlp_limits"] == []) == (kind == "projected")
    written = datasets_of(tmp_path / "weights.hdf5")
    assert ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0" in written) == (kind == "projected")
    assert ("CNN_proj/W_proj" in written) == (kind == "projected")
    expected = ElmoEmbedder(bilm=bilm, device="cpu").embed_batch(SENTENCES)
    loaded = ElmoEmbedder(options_file=tmp_path / "options.json", weight_file=tmp_path / "weights.hdf5", device="cpu")
    got = loaded.embed_batch(SENTENCES)
    for ours, theirs, sentence in zip(expected, got, SENTENCES):
        assert ours.shape == theirs.shape == (3, len(sentence), 2 * TINY[kind].output_size)
        assert np.abs(ours - theirs).max() < TOLERANCE
    # and the exported files, exported again, are the same file
    export_bilm(loaded.bilm, tmp_path / "again")
    again = datasets_of(tmp_path / "again" / "weights.hdf5")
    assert set(again) == set(written) and all(np.array_equal(again[n], written[n]) for n in written)


# --- our own biLM: refused, with the reason ----------------------------------------------------------------------------

def our_bilm(token_encoder: str) -> BiLM:
    torch.manual_seed(0)
    extra = {"char_filters": ((1, 4), (2, 4)), "max_chars": 10, "char_dim": 4} if token_encoder == "char" else {}
    return BiLM(BiLMConfig(vocab_size=len(SPECIALS) + 10, embedding_dim=8, hidden_size=8, cutoffs=(6,),
                           token_encoder=token_encoder, **extra)).eval()


@pytest.mark.parametrize("token_encoder, reason", [
    ("word", "is read by bilm-tf alone: AllenNLP's _ElmoBiLm"),
    ("char", "our character CNN is not bilm-tf's (our character numbering, 10 characters per token"),
])
def test_our_bilm_is_refused_saying_why(tmp_path, token_encoder, reason):
    bilm = our_bilm(token_encoder)
    with pytest.raises(ElmoError) as error:
        export_bilm(bilm, tmp_path / "out")
    message = str(error.value)
    assert message.startswith("our biLM cannot be written as bilm-tf's files: bilm-tf's format has one token layer "
                              "that both directions read (layer 0 is [x; x]), but our forward and backward LMs each "
                              "trained their own ")
    assert "differ by up to" in message and reason in message and "ElmoEmbedder.from_pretrained" in message
    assert not (tmp_path / "out").exists()


def test_our_word_bilm_with_equal_embeddings_is_still_refused_for_its_readers(tmp_path):
    bilm = our_bilm("word")
    with torch.no_grad():
        bilm.backward_lm.embedding.weight.copy_(bilm.forward_lm.embedding.weight)
    with pytest.raises(ElmoError) as error:
        export_bilm(bilm, tmp_path)
    assert "differ" not in str(error.value) and "is read by bilm-tf alone" in str(error.value)
