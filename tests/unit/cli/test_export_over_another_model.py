"""``python -m elmo export`` into a folder that already holds files of the names it writes: the same model's earlier
export is replaced, another model's is refused (one line naming the file, exit status 2, every file left as it was)
unless ``--overwrite``; for bilm-tf's files and for ``--format hub`` alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from elmo.cli import main
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.hub import load_pretrained
from elmo.model.published_io import load_published_bilm, save_published_bilm

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
WIDER = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=24, projection_dim=8)


def bilm_tf_files(folder: Path, seed: int, config: BiLMConfig = TINY) -> list[str]:
    """A random published biLM written as bilm-tf's files into ``folder``; its ``--options-file`` / ``--weight-file``."""
    torch.manual_seed(seed)
    bilm = BiLM(config).eval()
    for p in bilm.parameters():
        torch.nn.init.normal_(p, std=0.3)
    folder.mkdir()
    save_published_bilm(bilm, folder / "options.json", folder / "weights.hdf5")
    return ["--options-file", str(folder / "options.json"), "--weight-file", str(folder / "weights.hdf5")]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def refused(capsys, argv: list[str], out: Path, file: str, what: str) -> None:
    before = snapshot(out)
    assert main(["export", "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --out {out} holds {out / file} ({what}): choose another --out, or give --overwrite to "
                   "replace it\n")
    assert snapshot(out) == before


@pytest.fixture
def sources(tmp_path):
    return {"a": bilm_tf_files(tmp_path / "a", 0), "b": bilm_tf_files(tmp_path / "b", 1),
            "wider": bilm_tf_files(tmp_path / "wider", 0, WIDER)}


def test_bilm_tf_files_of_another_model_are_refused_unless_overwrite(tmp_path, sources, capsys):
    out = tmp_path / "out"
    assert main(["export", "--quiet", "--out", str(out), *sources["a"]]) == 0
    first = snapshot(out)
    assert main(["export", "--quiet", "--out", str(out), *sources["a"]]) == 0  # the same model: its own export
    assert snapshot(out) == first
    refused(capsys, ["--out", str(out), *sources["b"]], out, "weights.hdf5", "another biLM (other weights)")
    refused(capsys, ["--out", str(out), *sources["wider"]], out, "options.json", "a biLM of another architecture")
    assert main(["export", "--quiet", "--overwrite", "--out", str(out), *sources["b"]]) == 0
    b = load_published_bilm(*sources["b"][1::2]).state_dict()
    assert all(torch.equal(v, b[k]) for k, v in load_published_bilm(out / "options.json", out / "weights.hdf5")
               .state_dict().items())


def test_a_folder_with_a_file_export_did_not_write_is_refused(tmp_path, sources, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "vocab.txt").write_text("my own words\n", encoding="utf-8")
    refused(capsys, ["--out", str(out), *sources["a"]], out, "vocab.txt",
            "not a bilm-tf export (options.json or weights.hdf5 missing)")
    (out / "README.md").write_text("# my notes\n", encoding="utf-8")
    refused(capsys, ["--format", "hub", "--out", str(out), *sources["a"]], out, "vocab.txt",
            "not a folder save_pretrained wrote (config.json or model.safetensors missing)")


def test_a_hub_folder_of_another_model_is_refused_unless_overwrite(tmp_path, sources, capsys):
    out = tmp_path / "hub"
    assert main(["export", "--quiet", "--format", "hub", "--out", str(out), *sources["a"]]) == 0
    first, weights = snapshot(out), load_pretrained(out).state_dict()
    assert main(["export", "--quiet", "--format", "hub", "--out", str(out), *sources["a"]]) == 0
    again = snapshot(out)  # written again: the same files (safetensors orders its metadata as it likes)
    assert {k: v for k, v in again.items() if k != "model.safetensors"} == \
        {k: v for k, v in first.items() if k != "model.safetensors"}
    assert all(torch.equal(v, weights[k]) for k, v in load_pretrained(out).state_dict().items())
    refused(capsys, ["--format", "hub", "--out", str(out), *sources["b"]], out, "model.safetensors",
            "another published_bilm (other weights)")
    refused(capsys, ["--format", "hub", "--out", str(out), *sources["wider"]], out, "config.json",
            "another published_bilm (another configuration)")
    assert main(["export", "--quiet", "--format", "hub", "--overwrite", "--out", str(out), *sources["b"]]) == 0
    b = load_published_bilm(*sources["b"][1::2]).state_dict()
    assert all(torch.equal(v, b[k]) for k, v in load_pretrained(out).state_dict().items())


def test_a_hub_folder_of_another_kind_is_refused(tmp_path, sources, capsys):
    torch.manual_seed(0)
    words = [*SPECIALS, "the", "market"]
    ours = BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=8, hidden_size=8, cutoffs=(4,))).eval()
    ours.vocab = Vocabulary(words)
    out = tmp_path / "saved"
    ours.save_pretrained(out)  # Hugging Face's convention: save_pretrained writes where it is told
    assert json.loads((out / "config.json").read_text())["elmo_kind"] == "bilm"
    refused(capsys, ["--format", "hub", "--out", str(out), *sources["a"]], out, "config.json",
            "a model of another kind (bilm)")
    assert ours.saved_difference(out) is None
    assert main(["export", "--quiet", "--format", "hub", "--overwrite", "--out", str(out), *sources["a"]]) == 0
    assert json.loads((out / "config.json").read_text())["elmo_kind"] == "published_bilm"
    assert not (out / "vocab.txt").exists()  # the other model's vocabulary is not this one's
