"""The learning curve end to end on the tiny corpus (python -m lab study --labelled-fractions): the real
classify and baselines commands at two shares of the labelled documents, what each learns from all the text,
the JSON, and a second run that resumes with nothing left to do."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from support import CLASSIFY

from elmo.data.agnews import labelled_draw, load_agnews
from lab.learning_curve import CURVE_METHODS, aggregate_curve, plan_curve
from lab.study import StudyArgs, run_parts


def run_curve(config: StudyArgs) -> dict:
    """``python -m lab study --labelled-fractions ...`` (run_parts, then aggregate_curve), with the tiny corpus's
    baseline sizes added to the baselines parts (``--extra-flags`` goes to every part, and classify has no such flags)."""
    parts = plan_curve(config)
    for part in parts:
        if part.name.startswith("baselines"):
            part.argv += ["--static-dim", "8", "--w2v-epochs", "2"]
    run_parts(config, parts)
    return aggregate_curve(config)

pytestmark = pytest.mark.slow


def test_curve_trains_on_a_share_of_the_labels_and_learns_representations_from_all_the_text(small_pipeline, tmp_path,
                                                                                          monkeypatch, capsys):
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # Word2Vec's vocabulary order, as in support.run_script
    models = tmp_path / "runs" / "seed_0" / "models"
    models.mkdir(parents=True)
    for name in ("bilstm.pt", "word2idx.pkl"):
        shutil.copy(small_pipeline.out / "models" / name, models / name)
    config = StudyArgs(seeds=(0,), runs_dir=str(tmp_path / "runs"), data_dir=str(small_pipeline.data),
                       out=str(tmp_path / "curve.json"), parts=("classify", "baselines"),
                       labelled_fractions=(0.5, 1.0), extra_flags=" ".join(CLASSIFY))
    out = run_curve(config)
    assert list(out["sizes"]) == ["0.5", "1"] and set(out["sizes"]["0.5"]["methods"]) == set(CURVE_METHODS)
    train = load_agnews(small_pipeline.data)[0]
    assert out["sizes"]["0.5"]["labelled_documents"] == [len(labelled_draw(train.labels, 0.5, 0))]
    assert out["sizes"]["1"]["labelled_documents"] == [len(train)]
    assert json.loads((tmp_path / "curve.json").read_text())["sizes"]["0.5"]["seeds"] == [0]
    half, full = tmp_path / "runs" / "seed_0" / "labelled_0.5", tmp_path / "runs" / "seed_0"
    half_cls = json.loads((half / "results" / "classification.json").read_text())
    assert half_cls["config"]["labelled_fraction"] == 0.5 and "frozen_lambda" not in half_cls
    # Word2Vec and TF-IDF's vocabulary come from all the training text, whatever share of it is labelled
    vectors = [torch.load(d / "models" / "word2vec.pt", weights_only=True)["vectors"] for d in (half, full)]
    assert torch.equal(*vectors)
    features = [json.loads((d / "results" / "baselines.json").read_text())["tfidf_logreg"]["features"] for d in (half, full)]
    assert features[0] == features[1]
    capsys.readouterr()
    parts_json = (tmp_path / "runs" / "parts.json").read_text()
    again = run_curve(config)  # resumes: every part is done
    assert (tmp_path / "runs" / "parts.json").read_text() == parts_json  # nothing ran again
    assert again["sizes"]["0.5"]["methods"]["word2vec"]["test_accuracy"] == out["sizes"]["0.5"]["methods"]["word2vec"]["test_accuracy"]


def test_the_labelled_share_is_the_same_documents_whatever_text_the_representations_learn_from(small_pipeline,
                                                                                             tmp_path):
    from support import write_csv

    from elmo.pipelines.classification import ClassifyArgs
    from elmo.pipelines.task import prepare

    extra = write_csv(tmp_path / "extra.csv", [("alpha beta gamma delta epsilon zeta",), ("eta theta iota kappa",)],
                      header=["text"])
    def prepared(**text_flags):
        out = tmp_path / "out"
        return prepare(ClassifyArgs(data_dir=str(small_pipeline.data), models_dir=str(small_pipeline.out / "models"),
                                    results_dir=str(out / "results"), images_dir=str(out / "images"), threads=1,
                                    quiet=True, labelled_fraction=0.5, seed=0, **text_flags))

    every = load_agnews(small_pipeline.data)[0]
    full, quarter = prepared(), prepared(text_fraction=0.25, extra_text=(str(extra),))
    assert len(quarter.text) == round(0.25 * len(every)) + 2
    assert len(full.corpora["train"]) == len(labelled_draw(every.labels, 0.5, 0)) < len(every)
    # the same labelled documents, drawn from all the training split: none from outside the pre-training text's
    # share is lost, and no unlabelled extra row is drawn
    assert quarter.corpora["train"].texts == full.corpora["train"].texts
    assert (quarter.corpora["train"].labels >= 0).all()
