"""One call opens any biLM folder the project writes (elmo.model.serialization.open_bilm): ``bilstm.pt``
(``python ELMO.py``), the ``save_pretrained`` folder of ``pretrain --architecture`` and ``finetune`` (and the
``published_lm.pt`` earlier versions wrote there), and ``options.json`` +
``weights.hdf5`` (``export``), through ``ElmoEmbedder.from_pretrained``, ``embed --models-dir``, classify's biLM
loading and ``TextClassifier.from_pretrained``; a folder holding none gives one line naming what was looked for."""

from __future__ import annotations

from dataclasses import replace

import h5py
import numpy as np
import pytest
import torch
from support import ROOT, process_state_kept, write_published_lm, write_tiny_agnews

from elmo import ElmoEmbedder, ElmoError, TextClassifier
from elmo.artifacts import Outputs, save_checkpoint
from elmo.cli import run
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import (
    ClassifierConfig,
    ElmoClassifier,
    bilm_fingerprint,
    classifier_checkpoint,
    load_classifier_bilm,
    published_record,
)
from elmo.model.published_io import save_published_bilm
from elmo.model.serialization import (
    BILM_FILES,
    load_bilm,
    open_bilm,
    save_bilm,
)
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.task import TASK_MAX_VOCAB, TASK_MIN_FREQ, prepare

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
WORDS = list(SPECIALS) + ["The", "market", "rallied", "."]
SENTENCES = [["The", "market", "rallied", "."], ["Zorgblatt", "fell"]]
LOOKED_FOR = ("looked for bilstm.pt, published_lm.pt, bilm/config.json + bilm/model.safetensors, config.json + "
              "model.safetensors, options.json + weights.hdf5")


def published_lm_folder(folder, seed: int = 1, legacy: bool = False):
    """What ``pretrain --architecture`` writes into ``--models-dir`` (tiny, random weights): its ``save_pretrained``
    folder, or (``legacy``) an earlier version's ``published_lm.pt``."""
    vocab = Vocabulary(WORDS)
    model = BiLM(replace(TINY, vocab_size=len(vocab)), seed=seed).eval()
    if legacy:
        write_published_lm(model, vocab, Outputs(models=folder).published_lm)
    else:
        model.vocab = vocab
        model.save_pretrained(Outputs(models=folder).pretrained_dir)
    return folder, model


def vectors(embedder: ElmoEmbedder) -> list[np.ndarray]:
    return embedder.embed_batch(SENTENCES)


@pytest.mark.parametrize("legacy", [False, True])
def test_a_pretrain_architecture_folder_opens_as_its_published_biLM(tmp_path, legacy):
    folder, model = published_lm_folder(tmp_path / "models", legacy=legacy)
    file = folder / ("published_lm.pt" if legacy else "bilm/config.json")
    expected = vectors(ElmoEmbedder(bilm=model, device="cpu"))
    for path in (folder, file, str(folder)):
        embedder = ElmoEmbedder.from_pretrained(path, device="cpu")
        assert embedder.bilm.shared_token_layer
        for a, b in zip(vectors(embedder), expected):
            np.testing.assert_array_equal(a, b)
    opened = open_bilm(folder)
    assert opened.source.kind == ("published_lm" if legacy else "pretrained")
    assert opened.where == str(file if legacy else folder / "bilm") and opened.bilm.vocab.itos == WORDS
    assert opened.vocab.itos == WORDS and opened.bilm.config.weights_digest  # a classifier only loads onto it
    other = open_bilm(published_lm_folder(tmp_path / "other", seed=2, legacy=legacy)[0])
    assert other.bilm.config.weights_digest != opened.bilm.config.weights_digest
    for a, b in zip(vectors(ElmoEmbedder(str(folder), device="cpu")), expected):  # AllenNLP's signature too
        np.testing.assert_array_equal(a, b)


def test_an_export_folder_opens_without_a_vocabulary(tmp_path):
    torch.manual_seed(0)
    bilm = BiLM(replace(TINY, vocab_size=len(WORDS)), seed=3).without_head()
    out = tmp_path / "out"
    save_published_bilm(bilm, out / "options.json", out / "weights.hdf5")
    expected = vectors(ElmoEmbedder(options_file=out / "options.json", weight_file=out / "weights.hdf5", device="cpu"))
    for path in (out, out / "options.json", out / "weights.hdf5"):
        opened = open_bilm(path)
        assert opened.vocab is None and opened.source.kind == "bilm_tf"
        assert opened.source.files == (out / "options.json", out / "weights.hdf5")
    for a, b in zip(vectors(ElmoEmbedder.from_pretrained(out, device="cpu")), expected):
        np.testing.assert_array_equal(a, b)


def test_bilstm_pt_comes_first_and_opens_as_load_bilm_does(tmp_path):
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(WORDS), embedding_dim=8, hidden_size=8, cutoffs=(5,), dropout=0.0)).eval()
    save_bilm(bilm, Vocabulary(WORDS), tmp_path / "bilstm.pt", {"seed": 7})
    published_lm_folder(tmp_path)  # both in one folder: bilstm.pt wins
    opened = open_bilm(tmp_path)
    loaded, vocab, meta = load_bilm(tmp_path / "bilstm.pt")
    assert opened.source.kind == "bilstm" and opened.where == str(tmp_path / "bilstm.pt") and opened.meta == meta
    assert opened.vocab.itos == vocab.itos and bilm_fingerprint(opened.bilm, opened.vocab) == bilm_fingerprint(loaded, vocab)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in opened.bilm.state_dict().items())


def test_a_folder_holding_no_biLM_gives_one_line_naming_what_was_looked_for(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "options.json").write_text("{}")  # without weights.hdf5: not a biLM
    for path in (empty, tmp_path / "nowhere"):
        with pytest.raises(ElmoError) as caught:
            ElmoEmbedder.from_pretrained(path)
        message = str(caught.value)
        assert "\n" not in message and message.startswith(f"{path} holds no biLM") and LOOKED_FOR in message
    (tmp_path / "in.txt").write_text("the market\n")
    assert run("embed", [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--all", "--models-dir", str(empty),
                         "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {empty} holds no biLM") and LOOKED_FOR in err and "Traceback" not in err
    assert err.count("\n") == 1 and not (tmp_path / "out.hdf5").exists()


def test_embed_models_dir_writes_a_published_lm_folders_vectors(tmp_path):
    folder, model = published_lm_folder(tmp_path / "models")
    (tmp_path / "in.txt").write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n")
    assert run("embed", [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--all", "--models-dir", str(folder),
                         "--device", "cpu", "--quiet"]) == 0
    expected = vectors(ElmoEmbedder(bilm=model, device="cpu"))
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        for i, b in enumerate(expected):
            np.testing.assert_allclose(out[str(i)][...], b, atol=1e-6)


def test_classify_opens_a_published_lm_folder_and_its_classifier_finds_that_biLM_again(tmp_path, capsys):
    folder = published_lm_folder(tmp_path / "models")[0]
    with process_state_kept():
        task = prepare(ClassifyArgs(data_dir=str(write_tiny_agnews(tmp_path / "data")), models_dir=str(folder),
                                    download=False, device="cpu", threads=1, quiet=True))
    bilm = task.bilm
    assert bilm.shared_token_layer and f"biLM {folder / 'bilm'}, vocabulary" in capsys.readouterr().out
    # a published biLM: the task vocabulary is built from the cased training split
    assert any(w[0].isupper() for t in task.corpora["train"].tokens for w in t)
    assert task.vocab.itos == Vocabulary.build(task.corpora["train"].tokens, TASK_MIN_FREQ, TASK_MAX_VOCAB).itos
    task_vocab = Vocabulary(list(SPECIALS) + ["Stocks", "rallied"])
    torch.manual_seed(0)
    model = ElmoClassifier(bilm, ClassifierConfig(mix="trainable_lambda", encoder_hidden=6, token_embedding_dim=4),
                           vocab_size=len(task_vocab)).eval()
    record = published_record(bilm, task_vocab)
    assert record == {"bilm_source": str((folder / "bilm").resolve()), "vocab": task_vocab.itos}
    save_checkpoint(classifier_checkpoint(model, bilm_fingerprint(bilm, task_vocab), ["a", "b", "c", "d"], record),
                    folder / "classifier.pt")
    again, again_vocab = load_classifier_bilm(folder / "classifier.pt")
    assert bilm_fingerprint(again, again_vocab) == bilm_fingerprint(bilm, task_vocab)
    classifier = TextClassifier.from_pretrained(folder, device="cpu", precision="fp32")  # `python -m elmo predict`
    assert classifier.model.bilm.shared_token_layer and classifier.predict(["Stocks rallied"])[0] in "abcd"


def test_embed_models_dir_takes_a_save_pretrained_folder_and_help_and_docs_list_every_kind(tmp_path, capsys, monkeypatch):
    """``config.json`` + ``model.safetensors`` (``export --format hub``, ``save_pretrained``) is one of the folders
    ``embed --models-dir`` opens; its ``--help`` and docs/commands.md name every kind find_bilm looks for."""
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(WORDS), embedding_dim=8, hidden_size=8, cutoffs=(5,), dropout=0.0)).eval()
    bilm.vocab = Vocabulary(WORDS)
    bilm.save_pretrained(tmp_path / "saved")
    (tmp_path / "in.txt").write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n")
    assert run("embed", [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--all", "--models-dir",
                         str(tmp_path / "saved"), "--device", "cpu", "--quiet"]) == 0
    expected = vectors(ElmoEmbedder(bilm=bilm, vocab=Vocabulary(WORDS), device="cpu"))
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        for i, b in enumerate(expected):
            np.testing.assert_allclose(out[str(i)][...], b, atol=1e-6)
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit):
        run("embed", ["--help"])
    models_dir = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("--models-dir"))
    rows = [line.replace("`", "") for line in (ROOT / "docs" / "commands.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `embed` |")]
    assert len(rows) == 2
    for kind in BILM_FILES:
        assert kind in models_dir and all(kind in row for row in rows), kind
