"""save_pretrained / from_pretrained (elmo.model.hub): a folder of config.json, model.safetensors, vocab.txt and a
model card for both biLMs, the Elmo layer and the classifier; the same vectors and predictions after the round trip;
a bad folder gets one line naming the file and the key."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import torch
from support import CLASSIFY, SMALL, run_in_process

from elmo import Elmo, ElmoEmbedder, ElmoError, TextClassifier
from elmo.cli import run
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import ClassifierConfig, ElmoClassifier, bilm_fingerprint
from elmo.model.hub import load_pretrained
from elmo.model.serialization import load_bilm, open_bilm

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
WORDS = list(SPECIALS) + ["the", "market", "rallied", "."]
SENTENCES = [["the", "market", "rallied", "."], ["zorgblatt", "fell"]]
FILES = ["README.md", "config.json", "model.safetensors", "vocab.txt"]


def our_bilm(seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    bilm = BiLM(BiLMConfig(vocab_size=len(WORDS), embedding_dim=16, hidden_size=16, cutoffs=(5,))).eval()
    bilm.vocab = Vocabulary(WORDS)
    return bilm


def published_bilm(seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    bilm = BiLM(TINY).eval()
    for p in bilm.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return bilm


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


@pytest.mark.parametrize("make", [our_bilm, published_bilm], ids=["ours", "published"])
def test_a_biLM_saved_and_opened_gives_the_same_vectors(tmp_path, make):
    bilm = make()
    bilm.card = {"text": "four words", "train_tokens": 1234, "command": "python -m elmo pretrain --epochs 1",
                 "perplexity": {"val": {"forward": 12.5, "backward": 11.25}}}
    expected = ElmoEmbedder(bilm=bilm, vocab=bilm.vocab, device="cpu").embed_batch(SENTENCES)
    bilm.save_pretrained(tmp_path / "saved")
    assert sorted(os.listdir(tmp_path / "saved")) == (FILES if bilm.vocab else [f for f in FILES if f != "vocab.txt"])
    loaded = type(bilm).from_pretrained(tmp_path / "saved")
    assert isinstance(loaded, type(bilm)) and not loaded.training and loaded.card == bilm.card
    for opened in (ElmoEmbedder.from_pretrained(tmp_path / "saved", device="cpu"), ElmoEmbedder(str(tmp_path / "saved"))):
        assert max_difference(opened.embed_batch(SENTENCES), expected) <= 1e-6
    card = (tmp_path / "saved" / "README.md").read_text()
    for fact in ("1,234", "python -m elmo pretrain --epochs 1", "forward 12.50, backward 11.25",
                 "ElmoEmbedder.from_pretrained('saved')", "library_name: elmo-toolkit"):
        assert fact in card


def test_our_biLM_keeps_its_fingerprint_so_classifiers_trained_on_it_still_load(tmp_path):
    bilm = our_bilm()
    bilm.save_pretrained(tmp_path / "saved")
    opened = open_bilm(tmp_path / "saved")
    assert opened.source.kind == "pretrained" and opened.vocab.itos == WORDS
    assert bilm_fingerprint(opened.bilm, opened.vocab) == bilm_fingerprint(bilm, bilm.vocab)


def test_the_published_biLM_gets_the_same_weights_digest_from_a_folder(tmp_path):
    bilm, other = published_bilm(0), published_bilm(1)
    for b, name in ((bilm, "a"), (other, "b"), (bilm, "c")):
        b.save_pretrained(tmp_path / name)
    a, b, c = (open_bilm(tmp_path / n).bilm.config.weights_digest for n in "abc")
    assert a == c != b and a


def test_the_elmo_layer_and_a_classifier_round_trip(tmp_path):
    bilm = our_bilm()
    ids = torch.tensor([[5, 6, 7, 4], [4, 7, 0, 0]])
    elmo = Elmo(bilm, num_output_representations=2, mix="frozen_lambda", seed=3).eval()
    elmo.save_pretrained(tmp_path / "elmo")
    loaded = Elmo.from_pretrained(tmp_path / "elmo")
    for x, y in zip(elmo(ids)["elmo_representations"], loaded(ids)["elmo_representations"]):
        assert float((x - y).abs().max()) <= 1e-6
    model = ElmoClassifier(our_bilm(), ClassifierConfig(mix="trainable_lambda", encoder_hidden=8)).eval()
    model.vocab = bilm.vocab
    model.save_pretrained(tmp_path / "clf")
    again = ElmoClassifier.from_pretrained(tmp_path / "clf")
    lengths = torch.tensor([4, 2])
    with torch.no_grad():
        assert float((model(ids, lengths) - again(ids, lengths)).abs().max()) <= 1e-6
    texts = ["the market rallied .", "zorgblatt fell"]
    ours = TextClassifier(model, bilm.vocab, model.class_names, precision="fp32")
    assert TextClassifier.from_pretrained(tmp_path / "clf", precision="fp32").predict(texts) == ours.predict(texts)
    assert json.loads((tmp_path / "clf" / "config.json").read_text())["elmo_kind"] == "elmo_classifier"
    assert open_bilm(tmp_path / "clf").bilm.config == bilm.config  # the biLM inside a classifier's folder
    with pytest.raises(ElmoError, match="holds a ElmoClassifier .* not a BiLM"):
        BiLM.from_pretrained(tmp_path / "clf")


def test_files_follow_the_umask_and_a_second_save_replaces_the_first(tmp_path):
    old = os.umask(0o027)
    try:
        our_bilm(0).save_pretrained(tmp_path / "saved")
        published_bilm(0).save_pretrained(tmp_path / "saved")
    finally:
        os.umask(old)
    assert all(os.stat(tmp_path / "saved" / f).st_mode & 0o777 == 0o640 for f in os.listdir(tmp_path / "saved"))
    assert load_pretrained(tmp_path / "saved").shared_token_layer
    assert not (tmp_path / "saved" / "vocab.txt").exists()  # the first model's vocabulary is not left behind


def break_folder(folder, how: str):
    weights, config = folder / "model.safetensors", folder / "config.json"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif how == "config":
        data = json.loads(config.read_text())
        data["config"]["hidden_size"] = 32
        data["config"]["embedding_dim"] = 32
        config.write_text(json.dumps(data))
    elif how == "vocab":
        (folder / "vocab.txt").write_text("\n".join(WORDS[:-1]) + "\n")
    elif how == "kind":
        config.write_text(json.dumps({**json.loads(config.read_text()), "elmo_kind": "gpt"}))
    elif how == "json":
        config.write_text("{not json")
    elif how == "missing":
        weights.unlink()


@pytest.mark.parametrize("how, message", [
    ("truncated", r"model\.safetensors: not a complete safetensors file"),
    ("config", r"model\.safetensors: key 'forward_lm\.\S+' has shape \(\d+, 16\), but the model of .*config\.json "
               r"needs \(\d+, 32\)"),
    ("vocab", r"config\.json: config\.vocab_size is 8 but vocab\.txt holds 7 words"),
    ("kind", r"config\.json: key elmo_kind is 'gpt', not one of bilm, elmo, elmo_classifier, published_bilm, "
             r"published_lm"),
    ("json", r"config\.json: not valid JSON"),
    ("missing", r"holds no biLM: looked for bilstm\.pt, published_lm\.pt, bilm/config\.json \+ bilm/model\.safetensors, "
                r"config\.json \+ model\.safetensors"),
])
def test_a_broken_folder_gets_one_line_naming_the_file_and_key(tmp_path, capsys, how, message):
    our_bilm().save_pretrained(tmp_path / "saved")
    break_folder(tmp_path / "saved", how)
    with pytest.raises(ElmoError, match=message):
        ElmoEmbedder.from_pretrained(tmp_path / "saved")
    sentences = tmp_path / "s.txt"
    sentences.write_text("the market rallied .\n")
    assert run("embed", ["--all", "--models-dir", str(tmp_path / "saved"), str(sentences), str(tmp_path / "e.hdf5")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and re.search(message, err), err


def test_no_folder_nor_hub_id(tmp_path):
    with pytest.raises(ElmoError, match="no such folder"):
        BiLM.from_pretrained(tmp_path / "nowhere")


def test_ELMO_py_then_export_hub_then_from_pretrained_then_classify_on_the_folder(tmp_path, tiny_agnews, capsys):
    assert run_in_process("pretrain", tmp_path, tiny_agnews, *SMALL) == 0
    bilm, vocab, _ = load_bilm(tmp_path / "models" / "bilstm.pt")
    saved = tmp_path / "saved"
    assert run("export", ["--format", "hub", "--models-dir", str(tmp_path / "models"), "--out", str(saved)]) == 0
    expected = ElmoEmbedder(bilm=bilm, vocab=vocab, device="cpu").embed_batch(SENTENCES)
    assert max_difference(ElmoEmbedder.from_pretrained(saved, device="cpu").embed_batch(SENTENCES), expected) <= 1e-6
    card = (saved / "README.md").read_text()
    assert "python -m elmo pretrain" in card and "--epochs 2" in card and "val perplexity: forward" in card
    flags = ["--models-dir", str(saved), "--results-dir", str(tmp_path / "r2"), "--images-dir", str(tmp_path / "i2")]
    assert run("classify", ["--data-dir", str(tiny_agnews), *flags, *CLASSIFY, "--mixes", "trainable_lambda"]) == 0
    classifier = TextClassifier.from_pretrained(saved, device="cpu")
    assert classifier.predict(["stocks rallied"])[0] in classifier.class_names
    out = tmp_path / "clf"
    assert run("export", ["--format", "hub", "--models-dir", str(saved), "--classifier", "classifier.pt",
                          "--out", str(out)]) == 0
    again = TextClassifier.from_pretrained(out, device="cpu")
    texts = ["stocks rallied on friday", "the team won the cup"]
    np.testing.assert_allclose(again.predict_proba(texts), classifier.predict_proba(texts), atol=1e-6)
    assert "test accuracy" in (out / "README.md").read_text()
    capsys.readouterr()  # what the training runs printed (--quiet keeps their summaries and tables)
    assert run("predict", ["--models-dir", str(out), "--text", texts[0], "--device", "cpu"]) == 0
    assert capsys.readouterr().out.split("\t")[0] == again.predict(texts[:1])[0]
