"""Your own corpus through the pre-training pipeline (``ELMO.py --train-file``, run in process): a text file and the same text as a CSV column train the same
model (the streamed reader itself is tested in process in tests/unit/data/test_stream.py; the flag errors in
tests/unit/pipelines/test_script_errors.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from support import make_rows, run_in_process

from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary

pytestmark = pytest.mark.slow


def write_text(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpus_lines(n: int = 300, seed: int = 3) -> list[str]:
    return [r[2] for r in make_rows(n, seed)]


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("own")
    lines = corpus_lines(300)
    write_text(root / "corpus.txt", lines[:260] + ["", "  "])
    write_text(root / "val.txt", lines[260:])
    with open(root / "corpus.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "body"])
        writer.writerows([i, t] for i, t in enumerate(lines[:260]))
    return root


OWN = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "1", "--quiet",
       "--stream-buffer", "800", "--precision", "fp32", "--threads", "1"]


def test_elmo_py_trains_on_a_text_file_and_on_the_same_text_as_a_csv_column(corpus_files, tmp_path):
    (tmp_path / "text").mkdir()
    # the text file with the directions side by side (each process streams the file), the CSV one after the other
    text = run_in_process("pretrain", tmp_path / "text", corpus_files, "--train-file", str(corpus_files / "corpus.txt"),
                          "--val-file", str(corpus_files / "val.txt"), *OWN, "--threads", "2",
                          "--concurrent-directions", "on")
    assert text == 0
    (tmp_path / "csv").mkdir()
    table = run_in_process("pretrain", tmp_path / "csv", corpus_files, "--train-file", str(corpus_files / "corpus.csv"),
                           "--text-column", "body", "--val-file", str(corpus_files / "val.txt"), *OWN)
    assert table == 0
    a, b = (json.loads((tmp_path / r / "results" / "lm.json").read_text()) for r in ("text", "csv"))
    assert a["documents"]["train"] == 260 and a["train_tokens"] == sum(len(tokenize(t)) for t in corpus_lines(300)[:260])
    assert a["val"] == b["val"] and np.isfinite(a["val"]["forward_perplexity"])  # same text, same model
    assert (a["concurrent_directions"], a["threads_per_direction"], b["concurrent_directions"]) == (True, 1, False)
    assert a["test"] == {}  # no --test-file: val only
    for name in ("word2idx.pkl", "forward.pt", "backward.pt", "bilstm.pt"):
        assert (tmp_path / "text" / "models" / name).is_file()
    vocab = Vocabulary.load_pickle(tmp_path / "text" / "models" / "word2idx.pkl")
    assert "striker" in vocab.stoi  # built from the file, not from AG News


def test_the_default_batch_adapts_to_the_lines_of_a_train_file_as_to_ag_news(tmp_path, capsys):
    """280 lines (about 5 % held out): without ``--batch-size`` the batch follows the rule AG News follows
    (``auto_batch_size``: batches of 8, at least N / 8 steps an epoch), not a fixed 64 (5 steps an epoch)."""
    corpus = write_text(tmp_path / "corpus.txt", corpus_lines(280, seed=4))
    at = OWN.index("--batch-size")
    flags = OWN[:at] + OWN[at + 2:]
    assert run_in_process("pretrain", tmp_path, tmp_path / "absent", "--train-file", str(corpus), *flags) == 0
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    documents = lm["documents"]["train"]
    assert 250 < documents < 280 and lm["config"]["batch_size"] == 8
    assert (f"batches: up to 8 documents ({documents} training documents: at least {-(-documents // 8)} steps per "
            "epoch; the smallest automatic batch, 8, cannot promise 250)") in capsys.readouterr().out
