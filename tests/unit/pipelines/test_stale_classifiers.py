"""Which classifier files a new biLM leaves without the biLM they were trained on (``stale_classifiers``), and where
they go (``Outputs.stale``): on files the test writes, no training (end to end: tests/integration/
test_stale_classifiers.py)."""

from __future__ import annotations

from pathlib import Path

from elmo.artifacts import Outputs, payload, save_checkpoint
from elmo.model.bilm_config import BiLMConfig
from elmo.pipelines.pretraining import PretrainArgs, stale_classifiers

PUBLISHED = BiLMConfig.bilm_tf()  # the published architecture written (its default size)


def classifier(path: Path, **record) -> Path:
    save_checkpoint(payload("classifier", bilm_fingerprint="0" * 16, **record), path)
    return path


def test_the_classifiers_of_the_replaced_bilm_are_stale_and_the_others_are_not(tmp_path):
    models = tmp_path / "models"
    config = PretrainArgs(models_dir=str(models))
    assert stale_classifiers(config, None) == []  # no folder yet
    ours = classifier(models / "classifier.pt")  # trained on the folder's bilstm.pt (records no biLM)
    on_published = classifier(models / "classifier_frozen_lambda.pt", bilm_source=str(models / "published_lm.pt"))
    on_folder = classifier(models / "classifier_gated.pt", bilm_source=str(models / "bilm"))  # save_pretrained
    elsewhere = classifier(models / "classifier_learned_function.pt",
                           bilm_tf={"options_file": str(tmp_path / "o.json"), "weight_file": str(tmp_path / "w.hdf5")})
    (models / "classifier_notes.pt").write_text("not a checkpoint")  # left alone
    (models / "classifier.pt.stale").write_bytes(b"")  # an earlier one set aside: not a classifier file any more
    assert Outputs(models=models).classifiers() == sorted([ours, on_published, on_folder, elsewhere,
                                                           models / "classifier_notes.pt"])
    (models / "bilm").mkdir()
    (models / "bilm" / "config.json").write_text("{}")
    (models / "bilm" / "model.safetensors").write_bytes(b"")
    assert stale_classifiers(config, None) == [ours, on_folder]  # ELMO.py writes the folder beside bilstm.pt
    (models / "bilstm.pt").write_bytes(b"")
    assert stale_classifiers(config, PUBLISHED) == [on_published, on_folder]  # ours still loads on bilstm.pt
    config.overwrite = True  # --architecture --overwrite deletes bilstm.pt too
    assert stale_classifiers(config, PUBLISHED) == [ours, on_published, on_folder]
    (models / "bilstm.pt").unlink()
    config.overwrite = False
    assert stale_classifiers(config, PUBLISHED) == [ours, on_published, on_folder]  # no bilstm.pt: loads on the new


def test_a_stale_file_never_replaces_an_earlier_one(tmp_path):
    path = tmp_path / "classifier.pt"
    assert Outputs.stale(path) == tmp_path / "classifier.pt.stale"
    (tmp_path / "classifier.pt.stale").write_bytes(b"")
    assert Outputs.stale(path) == tmp_path / "classifier.pt.stale.2"
    (tmp_path / "classifier.pt.stale.2").write_bytes(b"")
    assert Outputs.stale(path) == tmp_path / "classifier.pt.stale.3"
