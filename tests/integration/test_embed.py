"""End to end with the published ELMo (tests/fixtures/bilm_tf): ``python -m elmo embed`` in AllenNLP's layout on the
fixture biLM and on our own, its errors, and ``classification.py --options-file/--weight-file``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from published_reference import FIXTURES, OPTIONS, WEIGHTS
from support import run_script, write_tiny_agnews

from elmo import ElmoEmbedder
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.serialization import save_bilm

pytestmark = pytest.mark.slow

PUBLISHED = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS)]


def elmo_command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m elmo <args> --threads 1``: the fixture biLM is tiny, and on a busy machine two threads wait on
    each other at every one of its small products (plumbing is tested here, not speed)."""
    return subprocess.run([sys.executable, "-m", "elmo", *args, "--threads", "1"], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def sentences() -> list[str]:
    rows = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))
    return [rows[k][i] for i in range(10) for k in range(3)] + [rows[0][0]]  # the last repeats line 0


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("embed") / "sentences.txt"
    path.write_text("\n".join(sentences()) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("output_format", ["all", "top", "average"])
def test_embed_writes_allennlps_layout_on_the_published_biLM(text_file, tmp_path, output_format):
    out = tmp_path / "out.hdf5"
    done = elmo_command("embed", str(text_file), str(out), f"--{output_format}", *PUBLISHED, "--batch-size", "4",
                        cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu").embed_batch([s.split() for s in sentences()])
    with h5py.File(out, "r") as f:
        assert set(f) == {str(i) for i in range(len(expected))} | {"sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0])
        for i, vectors in enumerate(expected):
            want = {"all": vectors, "top": vectors[-1], "average": vectors.mean(0)}[output_format]
            assert f[str(i)].shape == want.shape and f[str(i)].dtype == np.float32
            assert np.abs(f[str(i)][...] - want).max() < 1e-5
        if output_format == "top":  # line 0 is row 0 of bilm-tf's first batch
            with h5py.File(FIXTURES / "lm_embeddings_0.hdf5", "r") as ref:
                assert np.abs(f["0"][...] - np.concatenate(ref["0"][...], axis=-1)).max() < 1e-5
    assert index[sentences()[1]] == "1" and index[sentences()[0]] == str(len(expected) - 1)  # a duplicate: last wins
    assert len(index) == len(set(sentences()))
    assert not list(tmp_path.glob(".*tmp"))


def test_embed_stateful_and_forget_sentences(text_file, tmp_path):
    out = tmp_path / "out.hdf5"
    done = elmo_command("embed", str(text_file), str(out), "--top", *PUBLISHED, "--batch-size", "3", "--stateful",
                        "--forget-sentences", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with h5py.File(out, "r") as f, h5py.File(FIXTURES / "lm_embeddings_0.hdf5", "r") as ref:
        assert "sentence_to_index" not in f
        for i in range(10):  # line 3i is row 0 of bilm-tf's stateful batch i
            assert np.abs(f[str(3 * i)][...] - np.concatenate(ref[str(i)][...], axis=-1)).max() < 1e-5


def test_embed_on_our_own_biLM(text_file, tmp_path):
    words = list(SPECIALS) + sorted({w.lower() for s in sentences() for w in s.split()})
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=8, hidden_size=8, cutoffs=(20,), dropout=0.0)).eval()
    save_bilm(bilm, Vocabulary(words), tmp_path / "models" / "bilstm.pt", {})
    out = tmp_path / "ours.hdf5"
    done = elmo_command("embed", str(text_file), str(out), "--all", "--models-dir", str(tmp_path / "models"),
                        cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = ElmoEmbedder(str(tmp_path / "models"), device="cpu")
    with h5py.File(out, "r") as f:
        assert f["2"].shape == (3, len(sentences()[2].split()), 16)
        assert np.abs(f["2"][...] - ours.embed_sentence(sentences()[2].split())).max() < 1e-5


@pytest.mark.parametrize("content, flags, message", [
    ("a b\n\nc d\n", PUBLISHED + ["--all"], "line 2 is blank (sentence index 1)"),
    ("a b\n", PUBLISHED, "one of --all, --top and --average is required"),
    ("a b\n", ["--all", "--options-file", str(OPTIONS), "--weight-file", "missing.hdf5"], "weight file not found"),
    ("a b\n", ["--all"], "give the published ELMo"),
    (b"a \xff b\n", PUBLISHED + ["--all"], "not UTF-8"),
])
def test_embed_errors_are_one_line_and_exit_2(tmp_path, content, flags, message):
    path = tmp_path / "in.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = elmo_command("embed", str(path), str(tmp_path / "out.hdf5"), *flags, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.hdf5").exists()


def test_classification_runs_on_the_published_biLM_and_predicts(tmp_path):
    data = write_tiny_agnews(tmp_path / "data")
    done = run_script("classification.py", tmp_path / "run", data, "--options-file", str(OPTIONS),
                      "--weight-file", str(WEIGHTS), "--max-docs", "2000", "--epochs", "1", "--batch-size", "16",
                      "--encoder-hidden", "8", "--mixes", "trainable_lambda", "--threads", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results" / "classification.json").read_text())
    assert 0.0 <= results["trainable_lambda"]["test"]["accuracy"] <= 1.0
    assert results["config"]["weight_file"] == str(WEIGHTS)
    checkpoint = torch.load(tmp_path / "run" / "models" / "classifier.pt", weights_only=True)
    assert checkpoint["bilm_tf"]["weight_file"] == str(WEIGHTS.resolve()) and checkpoint["vocab"][:4] == list(SPECIALS)
    predicted = elmo_command("predict", "--models-dir", str(tmp_path / "run" / "models"), "--text",
                             "Stocks rallied after the bank raised its profit forecast.", cwd=tmp_path)
    assert predicted.returncode == 0, predicted.stderr
    assert predicted.stdout.split("\t")[0] in ("World", "Sports", "Business", "Sci/Tech")
    half = run_script("classification.py", tmp_path / "bad", data, "--options-file", str(OPTIONS), "--quiet")
    assert half.returncode == 2 and "--weight-file" in half.stderr
