"""``python -m elmo finetune`` (elmo.pipelines.finetuning), in process, on the bilm-tf fixture biLM and a few hundred
AG-News-like sentences: the held-out perplexity falls, the ELMo vectors change, the export round-trips through
ElmoEmbedder; bad flags and files stop with exit status 2 and a message naming them."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from published_reference import OPTIONS, WEIGHTS
from support import make_rows, run_in_process, write_csv

from elmo import ElmoEmbedder
from elmo.cli import run
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.serialization import save_bilm

#: a few steps: 380 training lines in batches of 32 (12 steps an epoch), 2 epochs, fp32 so the numbers are exact
FLAGS = ["--threads", "1", "--precision", "fp32", "--quiet", "--epochs", "2", "--batch-size", "32",
         "--softmax-samples", "40", "--lr", "1e-3", "--softmax-lr", "3e-3", "--warmup-steps", "0"]
SENTENCES = [["Minister", "Zorgblatt", "said", "the", "quarterly", "profit", "fell", "."], ["Goal", "!"]]  # OOV word


def domain_text(folder, rows: int = 400):
    """``folder/domain.csv`` (a ``text`` column of AG-News-like descriptions, case kept) and its ``test.txt``."""
    write_csv(folder / "domain.csv", [(r[2],) for r in make_rows(rows, seed=5)], header=["text"])
    (folder / "test.txt").write_text("\n".join(r[2] for r in make_rows(60, seed=6)) + "\n", encoding="utf-8")
    return folder / "domain.csv", folder / "test.txt"


def biLM_files(tmp_path):
    """Copies of the fixture biLM (no test may write next to the repository's fixtures)."""
    folder = tmp_path / "published"
    folder.mkdir()
    return shutil.copy(OPTIONS, folder / "options.json"), shutil.copy(WEIGHTS, folder / "weights.hdf5")


def test_finetune_lowers_the_held_out_perplexity_and_exports_the_changed_bilm(tmp_path):
    train, test = domain_text(tmp_path)
    options, weights = biLM_files(tmp_path)
    status = run_in_process("finetune", tmp_path, tmp_path / "absent", "--options-file", str(options),
                            "--weight-file", str(weights), "--train-file", str(train), "--text-column", "text",
                            "--test-file", str(test), *FLAGS)
    assert status == 0
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    for split in ("val", "test"):
        for d in ("forward", "backward"):
            before, after = lm["before"][split][f"{d}_perplexity"], lm[split][f"{d}_perplexity"]
            assert np.isfinite(before) and after < before, (split, d, before, after)
    assert lm["finetune"]["softmax_init"]["method"] == "token-layer" and lm["softmax"] == "sampled"
    assert lm["vocab_size"] > 40 and not (tmp_path / "models" / "checkpoints").exists()
    model = BiLM.from_pretrained(tmp_path / "models" / "bilm")
    vocab = model.vocab
    assert "Minister" in vocab.stoi and len(vocab) == lm["vocab_size"]  # the domain's vocabulary, case kept

    assert run("export", ["--models-dir", str(tmp_path / "models"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split()[3:] == vocab.itos[4:]
    own = ElmoEmbedder(bilm=model, device="cpu").embed_batch(SENTENCES)
    exported = ElmoEmbedder(options_file=tmp_path / "out" / "options.json", weight_file=tmp_path / "out" / "weights.hdf5",
                            device="cpu").embed_batch(SENTENCES)
    published = ElmoEmbedder(options_file=options, weight_file=weights, device="cpu").embed_batch(SENTENCES)
    for a, b, c in zip(own, exported, published):
        assert a.shape == b.shape == c.shape == (3, len(c[0]), 32)
        assert np.abs(a - b).max() <= 1e-5  # the export round-trips (fp32)
        assert np.abs(b - c).max() > 1e-3  # and fine-tuning changed every layer's vectors
        assert all(np.abs(b[k] - c[k]).max() > 1e-3 for k in range(3))

    # any biLM of the published architecture, given alone: here the models folder the run above wrote
    status = run_in_process("finetune", tmp_path / "again", tmp_path / "absent", "--options-file", str(tmp_path / "models"),
                            "--train-file", str(train), "--text-column", "text", *FLAGS, "--epochs", "1")
    assert status == 0
    again = json.loads((tmp_path / "again" / "results" / "lm.json").read_text())
    assert again["finetune"]["options_file"] == str(tmp_path / "models") and again["finetune"]["weight_file"] is None
    assert again["val"]["forward_perplexity"] < again["before"]["val"]["forward_perplexity"]


@pytest.mark.parametrize("argv, message", [
    ([], "--options-file OPTIONS.json --weight-file WEIGHTS.hdf5"),
    (["--options-file", "MISSING"], "--options-file: "),
    (["--options-file", "OURS", "--softmax-init", "random"], "--softmax-init: OURS/bilstm.pt is our biLM, which keeps its "
                                                             "own softmax per direction"),
    (["--options-file", "OURS", "--models-dir", "OURS"], "OURS/bilstm.pt is the same file as --options-file (bilstm.pt)"),
    (["--options-file", "OPTIONS", "--weight-file", "MISSING"], "--weight-file: "),
    (["--options-file", "MISSING", "--weight-file", "WEIGHTS"], "--options-file: "),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--train-file", "MISSING"], "missing.hdf5: file not found"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--train-file", "TRAIN"], "--text-column"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--softmax", "adaptive"], "--softmax-init token-layer"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--val-file", "TRAIN"], "--val-file goes with --train-file"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--softmax-lr", "0"], "--softmax-lr must be positive"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--lr-gamma", "2"], "--lr-gamma must be in (0, 1]"),
    (["--options-file", "OPTIONS", "--weight-file", "WEIGHTS", "--train-file", "TRAIN", "--text-column", "text",
      "--results-dir", "PUBLISHED"], "the same file as --train-file"),
])
def test_bad_flags_and_files_stop_with_status_2_and_a_message_naming_them(tmp_path, capsys, argv, message):
    options, weights = biLM_files(tmp_path)
    train, _ = domain_text(tmp_path, rows=8)
    (tmp_path / "published" / "lm.json").write_text("{}")
    ours = tmp_path / "ours"
    words = [*SPECIALS, "the"]
    save_bilm(BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=4, hidden_size=4, cutoffs=(2,))), Vocabulary(words),
              ours / "bilstm.pt", {})
    paths = {"OPTIONS": str(options), "WEIGHTS": str(weights), "MISSING": str(tmp_path / "missing.hdf5"), "OURS": str(ours),
             "TRAIN": str(train), "PUBLISHED": str(tmp_path / "published")}
    if "PUBLISHED" in argv:  # lm.json written over the training text
        paths["TRAIN"] = str(tmp_path / "published" / "lm.json")
    argv = [paths.get(a, a) for a in argv]
    models = [] if "--models-dir" in argv else ["--models-dir", str(tmp_path / "models")]
    assert run("finetune", ["--data-dir", str(tmp_path / "absent"), *models, "--quiet", "--threads", "1", *argv]) == 2
    err = capsys.readouterr().err
    message = message.replace("OURS", str(ours))
    assert err.startswith("error: ") and message in err and "Traceback" not in err, err
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_finetune_continues_our_bilm_on_its_own_vocabulary_and_writes_it_as_pretrain_does(tmp_path):
    """Our ``bilstm.pt`` given alone: each direction trained further on the domain text over the biLM's own vocabulary
    and softmaxes; the held-out perplexity falls, the seed's four files are written, the biLM rebuilds from them and
    its layers changed, and the input folder is left as it was."""
    from support import write_tiny_agnews

    from elmo.model.serialization import load_bilm

    data = write_tiny_agnews(tmp_path / "data")
    assert run_in_process("pretrain", tmp_path / "first", data, "--hidden-size", "12", "--epochs", "1",
                          "--max-docs", "120", "--init-embeddings", "none", "--quiet", "--threads", "1") == 0
    first = tmp_path / "first" / "models"
    written = {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()}
    train, test = domain_text(tmp_path)
    flags = [f for f in FLAGS if f not in ("--softmax-samples", "40")]
    status = run_in_process("finetune", tmp_path / "tuned", data, "--options-file", str(first), "--train-file",
                            str(train), "--text-column", "text", "--test-file", str(test), *flags)
    assert status == 0
    lm = json.loads((tmp_path / "tuned" / "results" / "lm.json").read_text())
    for split in ("val", "test"):
        for d in ("forward", "backward"):
            before, after = lm["before"][split][f"{d}_perplexity"], lm[split][f"{d}_perplexity"]
            assert np.isfinite(before) and after < before, (split, d, before, after)
    models = tmp_path / "tuned" / "models"
    assert sorted(p.name for p in models.iterdir()) == ["backward.pt", "bilm", "bilstm.pt", "forward.pt", "word2idx.pkl"]
    old, vocab, _ = load_bilm(first / "bilstm.pt")
    tuned, tuned_vocab, meta = load_bilm(models / "bilstm.pt")
    assert tuned_vocab.itos == vocab.itos == Vocabulary.load_pickle(models / "word2idx.pkl").itos  # its own vocabulary
    assert meta["card"]["command"].startswith("python -m elmo finetune")
    ids = torch.tensor([vocab.encode(["the", "market", "rallied"])])
    with torch.no_grad():
        change = (tuned.eval()(ids, torch.tensor([3])) - old.eval()(ids, torch.tensor([3]))).abs().amax(dim=(1, 2, 3))
    assert (change > 1e-4).all()  # every layer of the biLM moved
    assert {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()} == written
