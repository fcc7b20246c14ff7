"""A training command refuses a ``--models-dir`` that holds a different model (another kind, or for ``pretrain
--architecture`` and ``finetune`` another architecture) with one line naming the file, before it writes anything;
its own earlier output, ``--resume`` and ``--overwrite`` (which deletes the other model's files) are allowed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support import write_published_lm

from elmo.artifacts import Outputs
from elmo.cli import run
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.published_io import options_of, save_published_bilm
from elmo.model.serialization import find_bilm
from elmo.pipelines.pretraining import PretrainArgs, check_files, overwritten_models

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
WIDER = replace(TINY, hidden_size=32)


def published_lm(folder, config: BiLMConfig = TINY, legacy: bool = False):
    """The published architecture sized ``config`` (random weights) as ``pretrain --architecture`` writes it into
    ``folder``: a ``save_pretrained`` folder, or (``legacy``) an earlier version's ``published_lm.pt``."""
    vocab = Vocabulary(list(SPECIALS) + ["The", "market"])
    model = BiLM(replace(config, vocab_size=len(vocab)))
    if legacy:
        write_published_lm(model, vocab, Outputs(models=folder).published_lm)
    else:
        model.vocab = vocab
        model.save_pretrained(Outputs(models=folder).pretrained_dir)


def options_file(path, config: BiLMConfig = TINY) -> str:
    path.write_text(json.dumps(options_of(config)))
    return str(path)


def flags(folder, data, *extra: str) -> list[str]:
    return ["--data-dir", str(data), "--models-dir", str(folder), "--epochs", "1", "--threads", "1", "--quiet", *extra]


@pytest.mark.parametrize("held, command, named", [
    ("published_lm", "pretrain", "published_lm.pt (pretrain --architecture's or finetune's biLM, a different model)"),
    ("bilstm", "pretrain --architecture", "bilstm.pt (ELMO.py's biLM, a different model)"),
    ("pretrained", "pretrain", "config.json + {folder}/model.safetensors (a file that does not load)"),
    ("bilm_tf", "pretrain --architecture", "options.json + {folder}/weights.hdf5 (bilm-tf's files"),
    ("published folder", "pretrain", "README.md (a save_pretrained model (published_lm), a different model)"),
    ("wider published_lm", "pretrain --architecture", "published_lm.pt (a biLM of another architecture)"),
    ("wider published folder", "pretrain --architecture", "README.md (a biLM of another architecture)"),
    ("broken published_lm", "pretrain --architecture", "published_lm.pt (a file that does not load)"),
    ("pretrained", "pretrain --architecture", "model.safetensors (a file that does not load)"),
    ("published_bilm folder", "pretrain --architecture",
     "README.md (a save_pretrained model (published_bilm), a different model)"),
    ("bilstm", "finetune", "bilstm.pt (ELMO.py's biLM, a different model)"),
])
def test_a_models_dir_holding_a_different_model_is_refused_naming_its_file(tmp_path, tiny_agnews, capsys, held,
                                                                           command, named):
    folder = tmp_path / "models"
    folder.mkdir()
    if held in ("published_lm", "wider published_lm", "published folder", "wider published folder"):
        published_lm(folder, WIDER if held.startswith("wider") else TINY, legacy="folder" not in held)
    elif held == "published_bilm folder":
        BiLM(TINY).save_pretrained(Outputs(models=folder).pretrained_dir)
    else:
        files = {"bilstm": ["bilstm.pt"], "pretrained": ["config.json", "model.safetensors"],
                 "bilm_tf": ["options.json", "weights.hdf5"], "broken published_lm": ["published_lm.pt"]}[held]
        for name in files:
            (folder / name).write_bytes(b"a model")
    before = sorted(p.name for p in folder.iterdir())
    extra = {"pretrain": [], "pretrain --architecture": ["--architecture", options_file(tmp_path / "arch.json")]}
    if command == "finetune":
        save_published_bilm(BiLM(TINY), tmp_path / "o.json", tmp_path / "w.hdf5")
        argv = ["--options-file", str(tmp_path / "o.json"), "--weight-file", str(tmp_path / "w.hdf5")]
    else:
        argv = extra[command]
    assert run(command.split()[0], flags(folder, tiny_agnews, *argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --models-dir {folder} holds {folder}/"), err
    assert named.format(folder=folder) in err and "--overwrite" in err, err
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written, not even the results folder


def test_its_own_earlier_output_resume_and_overwrite_are_allowed(tmp_path, tiny_agnews):
    folder, arch = tmp_path / "models", options_file(tmp_path / "arch.json")
    published_lm(folder, legacy=True)
    assert run("pretrain", flags(folder, tiny_agnews, "--architecture", arch, "--max-docs", "60")) == 0  # same
    assert not (folder / "published_lm.pt").exists() and find_bilm(folder).kind == "pretrained"  # the folder replaced it
    assert run("pretrain", flags(folder, tiny_agnews, "--architecture", arch, "--max-docs", "60")) == 0  # its own folder
    (folder / "bilstm.pt").write_bytes(b"ELMO.py's biLM")
    assert run("pretrain", flags(folder, tiny_agnews, "--architecture", arch, "--max-docs", "60")) == 2
    check_files(PretrainArgs(models_dir=str(folder), data_dir=str(tiny_agnews), architecture=arch, resume=True))
    assert run("pretrain", flags(folder, tiny_agnews, "--architecture", arch, "--max-docs", "60", "--overwrite")) == 0
    assert not (folder / "bilstm.pt").exists() and find_bilm(folder).kind == "pretrained"  # opens as the new model
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "bilstm.pt").write_bytes(b"an earlier ELMO.py run")
    check_files(PretrainArgs(models_dir=str(ours), data_dir=str(tiny_agnews), hidden_size=8, embedding_dim=8))
    with pytest.raises(ElmoError, match="bilstm.pt"):
        check_files(PretrainArgs(models_dir=str(ours), data_dir=str(tiny_agnews), architecture=arch))


def test_overwrite_never_deletes_an_input_file(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("options.json", "weights.hdf5", "config.json", "model.safetensors"):
        (folder / name).write_bytes(b"x")
    config = PretrainArgs(models_dir=str(folder), overwrite=True)
    deleted = overwritten_models(config, None, keep=[folder / "options.json", folder / "weights.hdf5"])
    assert sorted(p.name for p in deleted) == ["config.json", "model.safetensors"]  # what write_outputs deletes
