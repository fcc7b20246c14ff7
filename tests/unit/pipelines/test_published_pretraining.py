"""``python -m elmo pretrain --architecture`` (elmo.pipelines.pretraining) and ``python -m elmo export --models-dir
MODELS_DIR --out OUT_DIR`` (elmo.pipelines.export), in process on the tiny corpus: the flag's values and errors, and the round trip
pretrain → export → ElmoEmbedder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from support import run_in_process, write_tiny_agnews

from elmo import ElmoEmbedder
from elmo.cli import run
from elmo.data.chars import batch_char_ids
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import PUBLISHED_ARCHITECTURES
from elmo.model.published_io import load_published_bilm, options_of
from elmo.pipelines.pretraining import PretrainArgs

TINY_OPTIONS = {"lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                         "use_skip_connections": True},
                "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1, "n_characters": 262,
                             "max_characters_per_token": 50, "activation": "relu"}}


def test_architecture_takes_the_published_names_or_an_options_file_and_refuses_anything_else(tmp_path, capsys):
    assert PretrainArgs().published_config() is None
    small = PretrainArgs(architecture="elmo-small").published_config()
    assert (small.hidden_size, small.output_size, small.num_highway, small.n_filters) == (1024, 128, 1, 2048)
    original = PretrainArgs(architecture="elmo-original").published_config()
    assert (original.hidden_size, original.output_size, original.num_highway) == (4096, 512, 2)
    assert set(PUBLISHED_ARCHITECTURES) == {"elmo-small", "elmo-medium", "elmo-original"}
    options = tmp_path / "options.json"
    options.write_text(json.dumps(TINY_OPTIONS))
    assert options_of(PretrainArgs(architecture=str(options)).published_config()) == TINY_OPTIONS
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**TINY_OPTIONS, "lstm": {"dim": 16}}))
    refusals = {("--architecture", "elmo-huge"): "--architecture must be elmo-small, elmo-medium, elmo-original",
                ("--architecture", str(broken)): f"--architecture {broken}: lstm.projection_dim is missing",
                ("--architecture", str(tmp_path / "none.json")): "options file not found",
                ("--architecture", "elmo-small", "--hidden-size", "32"):
                    "--architecture elmo-small with --hidden-size: lstm.projection_dim (128) must not exceed lstm.dim (32)",
                ("--architecture", "elmo-small", "--token-encoder", "word"): "--token-encoder word: --architecture "
                                                                              "elmo-small reads characters",
                ("--architecture", "elmo-small", "--embedding-dim", "64", "--proj-size", "32"):
                    "--embedding-dim (64) must equal the LSTM output width (32",
                ("--architecture", "elmo-small", "--num-layers", "0"): "--num-layers must be >= 1, got 0",
                ("--softmax", "sampled", "--softmax-samples", "0"): "--softmax-samples must be >= 1",
                ("--architecture", "elmo-small", "--softmax-samples", "0"): "--softmax-samples must be >= 1"}
    for argv, message in refusals.items():
        assert run("pretrain", [*argv, "--data-dir", str(tmp_path / "absent")]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err, (argv, err)
    with pytest.raises(ElmoError, match="--architecture"):
        PretrainArgs(architecture="small").check()


def test_the_size_flags_override_the_published_preset_and_default_to_it():
    preset = PUBLISHED_ARCHITECTURES["elmo-small"][1]
    assert PretrainArgs(architecture="elmo-small").published_config() == preset
    given = PretrainArgs(architecture="elmo-small", hidden_size=512, num_layers=3, residual=False, char_dim=8,
                         char_filters=("1:4", "3:8"), num_highway=0, max_chars=30, embedding_dim=64).published_config()
    assert (given.hidden_size, given.num_layers, given.residual, given.char_dim, given.char_filters,
            given.num_highway, given.max_chars, given.output_size) == (512, 3, False, 8, ((1, 4), (3, 8)), 0, 30, 64)
    assert (given.cell_clip, given.proj_clip, given.activation) == (3.0, 3.0, "relu")  # the preset's
    unprojected = PretrainArgs(architecture="elmo-small", hidden_size=96, proj_size=0, lstm="fused").published_config()
    assert (unprojected.output_size, unprojected.cell_clip, unprojected.proj_clip) == (96, None, None)
    # the same flags size our biLM; left out, our preset's
    ours = PretrainArgs(hidden_size=96, proj_size=32, softmax="sampled", softmax_samples=50).bilm_config(100)
    assert (ours.hidden_size, ours.proj_size, ours.embedding_dim, ours.softmax, ours.samples) == (96, 32, 32, "sampled", 50)
    default = PretrainArgs().bilm_config(100)
    assert (default.hidden_size, default.embedding_dim, default.num_layers, default.token_encoder, default.residual,
            default.softmax) == (256, 256, 2, "word", True, "adaptive")


def test_pretrain_export_and_embed_give_the_trained_models_layers(tmp_path):
    data = write_tiny_agnews(tmp_path / "data")
    options = tmp_path / "options.json"
    options.write_text(json.dumps(TINY_OPTIONS))
    status = run_in_process("pretrain", tmp_path, data, "--architecture", str(options), "--epochs", "1",
                            "--batch-size", "32", "--threads", "1", "--quiet", "--softmax", "sampled",
                            "--softmax-samples", "20", "--precision", "fp32")
    assert status == 0
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    for split in ("val", "test"):
        assert all(np.isfinite(lm[split][f"{d}_perplexity"]) for d in ("forward", "backward"))
    assert lm["softmax"] == "sampled" and lm["options"] == TINY_OPTIONS
    assert not (tmp_path / "models" / "checkpoints").exists() and not (tmp_path / "models" / "bilstm.pt").exists()
    model = BiLM.from_pretrained(tmp_path / "models" / "bilm")  # its save_pretrained folder
    vocab = model.vocab
    assert vocab.itos[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"] and "Minister" in vocab.stoi  # case kept
    assert run("export", ["--models-dir", str(tmp_path / "models"), "--out", str(tmp_path / "out")]) == 0
    lines = (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split()
    assert lines[:3] == ["<S>", "</S>", "<UNK>"] and lines[3:] == vocab.itos[4:]
    sentences = [["Minister", "Zorgblatt", "said", "the", "quarterly", "profit", "fell", "."], ["Goal", "!"]]  # OOV
    own = ElmoEmbedder(bilm=model, device="cpu").embed_batch(sentences)
    exported = ElmoEmbedder(options_file=tmp_path / "out" / "options.json", weight_file=tmp_path / "out" / "weights.hdf5",
                            device="cpu").embed_batch(sentences)
    for a, b in zip(own, exported):
        assert a.shape == (3, len(b[0]), 16) and np.abs(a - b).max() <= 1e-5


@pytest.mark.parametrize("flags, clips", [(["--lstm", "fused"], 3), ([], 0)])
def test_lstm_fused_trains_without_clipping_and_the_export_reads_back_the_same_layers(tmp_path, flags, clips):
    """``--lstm fused`` on a clipped architecture, or an options.json whose clips are 0: the model trains on the fused
    kernel, is written without clipping, and bilm-tf's files read back compute its layers."""
    data = write_tiny_agnews(tmp_path / "data")
    options = tmp_path / "options.json"
    options.write_text(json.dumps({**TINY_OPTIONS, "lstm": {**TINY_OPTIONS["lstm"], "cell_clip": clips, "proj_clip": clips}}))
    assert run_in_process("pretrain", tmp_path, data, "--architecture", str(options), *flags, "--epochs", "1",
                          "--batch-size", "32", "--threads", "1", "--quiet", "--softmax", "sampled",
                          "--softmax-samples", "20", "--precision", "fp32") == 0
    model = BiLM.from_pretrained(tmp_path / "models" / "bilm")
    assert run("export", ["--models-dir", str(tmp_path / "models"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    written = json.loads((tmp_path / "out" / "options.json").read_text())["lstm"]
    assert written["cell_clip"] is None and written["proj_clip"] is None
    loaded = load_published_bilm(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5")
    assert all(layer.fused for bilm in (model, loaded) for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers))
    sentences = [["Minister", "Zorgblatt", "said", "the", "quarterly", "profit", "fell", "."], ["Goal", "!"], ["a"]]
    chars, lengths = batch_char_ids(sentences, 50, "bilm_tf"), torch.tensor([len(s) for s in sentences])
    with torch.no_grad():
        ours, theirs = model(None, lengths, chars), loaded(None, lengths, chars)
    assert ours.shape == (3, 3, 8, 16) and (ours - theirs).abs().max() <= 1e-5 and ours[1:].abs().max() > 1e-2


def test_size_flags_override_an_options_file_end_to_end(tmp_path):
    """``--architecture options.json`` with size flags, the adaptive softmax and the fused cell: the model trained,
    written (its options) and exported has the flags' sizes, and the export computes its layers."""
    data = write_tiny_agnews(tmp_path / "data")
    options = tmp_path / "options.json"
    options.write_text(json.dumps(TINY_OPTIONS))
    assert run_in_process("pretrain", tmp_path, data, "--architecture", str(options), "--hidden-size", "12",
                          "--num-layers", "1", "--num-highway", "0", "--softmax", "adaptive", "--lstm", "fused",
                          "--epochs", "1", "--batch-size", "32", "--threads", "1", "--quiet", "--precision", "fp32") == 0
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert lm["softmax"] == "adaptive" and lm["options"]["lstm"] == {**TINY_OPTIONS["lstm"], "dim": 12, "n_layers": 1,
                                                                    "cell_clip": None, "proj_clip": None}
    assert lm["options"]["char_cnn"]["n_highway"] == 0
    model = BiLM.from_pretrained(tmp_path / "models" / "bilm")
    assert type(model.softmax).__name__ == "AdaptiveSoftmax" and len(model.forward_lm.layers) == 1
    assert run("export", ["--models-dir", str(tmp_path / "models"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    loaded = load_published_bilm(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5")
    sentences = [["Minister", "said", "."], ["Goal", "!"]]
    chars, lengths = batch_char_ids(sentences, 50, "bilm_tf"), torch.tensor([3, 2])
    with torch.no_grad():
        ours, theirs = model(None, lengths, chars), loaded(None, lengths, chars)
    assert ours.shape == (2, 2, 3, 16) and (ours - theirs).abs().max() <= 1e-5
