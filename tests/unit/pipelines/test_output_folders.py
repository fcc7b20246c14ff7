"""Write only where told: a training command given ``--models-dir M`` alone writes its results and plots into
``M/results`` and ``M/images``, nothing into the working folder (``pretrain``, then ``classify`` and ``baselines``
reading the biLM from ``M``); given none of the three folder flags, ``models/``, ``results/`` and ``images/``."""

from __future__ import annotations

from pathlib import Path

from elmo.artifacts import Outputs
from elmo.cli import run
from elmo.pipelines.common import CommonArgs


def test_folders_not_given_follow_the_first_given():
    assert Outputs.of() == Outputs() == CommonArgs().outputs == Outputs(Path("models"), Path("results"), Path("images"))
    assert Outputs.of("m") == Outputs(Path("m"), Path("m/results"), Path("m/images"))
    assert Outputs.of(None, "r") == Outputs(Path("r/models"), Path("r"), Path("r/images"))
    assert Outputs.of(None, None, "i") == Outputs(Path("i/models"), Path("i/results"), Path("i"))
    assert Outputs.of("m", None, "i") == Outputs(Path("m"), Path("m/results"), Path("i"))
    assert CommonArgs(results_dir="r", images_dir="i").outputs == Outputs(Path("r/models"), Path("r"), Path("i"))


def test_runs_given_only_models_dir_leave_the_working_folder_untouched(tmp_path, tiny_agnews, monkeypatch, capsys):
    cwd, models = tmp_path / "cwd", tmp_path / "run"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    common = ["--data-dir", str(tiny_agnews), "--models-dir", str(models), "--epochs", "1", "--threads", "1"]
    assert run("pretrain", [*common, "--embedding-dim", "16", "--hidden-size", "16", "--max-docs", "120"]) == 0
    assert f"output folders: models {models}, results {models / 'results'}, plots {models / 'images'}\n" \
        in capsys.readouterr().out
    assert run("classify", [*common, "--mixes", "frozen_lambda", "--encoder-hidden", "8", "--token-embedding-dim", "8",
                            "--max-docs", "120", "--quiet"]) == 0
    assert run("baselines", [*common, "--methods", "tfidf_logreg", "--max-docs", "120", "--quiet"]) == 0
    assert list(cwd.iterdir()) == []
    assert {p.name for p in (models / "results").iterdir()} == {"lm.json", "classification.json", "baselines.json"}
    assert {"lm_loss.png", "lm_confusion_forward.png", "confusion_frozen_lambda.png", "confusion_tfidf_logreg.png"} \
        <= {p.name for p in (models / "images").iterdir()}
    assert (models / "bilstm.pt").is_file() and (models / "classifier.pt").is_file()
