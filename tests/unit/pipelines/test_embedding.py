"""``python -m elmo embed`` in process on a long line (elmo.pipelines.embedding): ``--chunk-size`` computes it in
chunks with the LSTM states carried across and writes the vectors of one pass; a bad ``--chunk-size`` is refused."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from published_reference import FIXTURES, OPTIONS, WEIGHTS

from elmo.cli import main
from elmo.model.bilm import CHUNK_SIZE
from elmo.pipelines.embedding import EmbedArgs

PUBLISHED = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS), "--device", "cpu", "--threads", "1", "--quiet"]


@pytest.fixture(autouse=True)
def keep_threads():
    """``embed`` sets torch's thread count for the process; put it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_a_long_line_in_chunks_is_written_with_the_vectors_of_one_pass(tmp_path):
    words = (FIXTURES / "vocab_test.txt").read_text(encoding="utf-8").strip().split("\n")
    long_line = " ".join(words[i] for i in np.random.default_rng(0).integers(0, len(words), 200))
    text = tmp_path / "doc.txt"
    text.write_text(f"the cat sat\n{long_line}\n", encoding="utf-8")
    assert EmbedArgs().chunk_size == CHUNK_SIZE
    outputs = {}
    for chunk in ("16", "100000"):
        outputs[chunk] = tmp_path / f"out_{chunk}.hdf5"
        assert main(["embed", str(text), str(outputs[chunk]), "--all", *PUBLISHED, "--chunk-size", chunk]) == 0
    with h5py.File(outputs["16"], "r") as chunked, h5py.File(outputs["100000"], "r") as whole:
        assert chunked["1"].shape == whole["1"].shape == (3, 200, 32)
        assert np.abs(chunked["1"][...] - whole["1"][...]).max() <= 1e-6  # float rounding of smaller products
        assert np.array_equal(chunked["0"][...], whole["0"][...])  # 3 tokens: the one-pass path


def test_a_chunk_size_below_1_is_refused(tmp_path, capsys):
    text = tmp_path / "doc.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", *PUBLISHED, "--chunk-size", "0"]) == 2
    assert "--chunk-size must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()


def test_one_of_all_top_and_average_is_required_and_help_and_the_errors_say_so(tmp_path, capsys, monkeypatch):
    """As in AllenNLP's ``elmo`` command, one of --all / --top / --average is required: --help shows them as a
    required choice (no default, no --no- form), and none or two of them is one line, exit 2, nothing written."""
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as done:
        main(["embed", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m elmo embed [-h] [options] (--all | --top | --average) input_file out" in out
    chosen = out.split("what to write (one is required):\n", 1)[1].splitlines()[:3]
    assert [line.split()[0] for line in chosen] == ["--all", "--top", "--average"], out
    assert not any("default" in line for line in chosen) and "--[no-]all" not in out and "--[no-]top" not in out
    text = tmp_path / "doc.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), *PUBLISHED]) == 2
    assert capsys.readouterr().err == ("error: one of --all, --top and --average is required: what to write (every "
                                       "layer, the top layer or their average)\n")
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--all", "--top", *PUBLISHED]) == 2
    assert capsys.readouterr().err == "error: give only one of --all, --top and --average, not --all and --top\n"
    assert not (tmp_path / "out.hdf5").exists()
