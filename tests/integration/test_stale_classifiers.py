"""Re-running ``ELMO.py`` into a models folder that holds classifiers: they were trained on the biLM the run replaces,
so the run says so in one line at its start and, once the new biLM is saved, renames them to ``<name>.stale`` (never
deleted); a run that fails first leaves every file as it was. ``--quiet`` keeps that line, the output folders and
the final table, and drops the per-epoch lines."""

from __future__ import annotations

import pytest
from support import CLASSIFY, SMALL, make_rows, run_in_process, run_script, write_csv, write_tiny_agnews

from elmo.cli import run as cli_run

pytestmark = pytest.mark.slow

TINY = [*SMALL, "--epochs", "1"]  # --quiet, one thread
CLASSIFIERS = ("classifier.pt", "classifier_frozen_lambda.pt")


def test_a_new_bilm_sets_the_classifiers_of_the_previous_one_aside_once_it_is_saved(tmp_path, capsys):
    old_text = write_tiny_agnews(tmp_path / "old")
    new_text = tmp_path / "new"  # other documents: another biLM
    write_csv(new_text / "train.csv", make_rows(240, seed=7))
    write_csv(new_text / "test.csv", make_rows(80, seed=8))
    out, models = tmp_path / "run", tmp_path / "run" / "models"

    assert run_in_process("pretrain", out, old_text, *TINY) == 0
    first = capsys.readouterr()
    # --quiet: the output folders, the data and batch lines and the final table, no per-epoch line
    assert f"output folders: models {models}, results {out / 'results'}, plots {out / 'images'}" in first.out
    assert "batches: up to 16 documents" in first.out and "data: " in first.out
    assert "direction   val ppl" in first.out and "forward LM: val perplexity" in first.out
    assert " epoch 1:" not in first.out and "note:" not in first.err  # no classifier yet
    assert run_in_process("classify", out, old_text, *CLASSIFY, "--epochs", "1", "--mixes", "frozen_lambda") == 0
    classified = capsys.readouterr().out
    assert "mix                 split  accuracy" in classified and " epoch 1:" not in classified
    before = {name: (models / name).read_bytes() for name in (*CLASSIFIERS, "bilstm.pt")}

    assert run_in_process("pretrain", out, new_text, *TINY, "--extra-text", str(tmp_path / "missing.csv")) == 2
    failed = capsys.readouterr().err
    assert "Traceback" not in failed
    note, error = failed.splitlines()
    assert note == (f"note: {models} holds classifier files trained on the biLM this run replaces (classifier.pt, "
                    "classifier_frozen_lambda.pt); once the new biLM is saved they are renamed to <name>.stale (a run "
                    "that stops before leaves them as they are); then train new ones with `python classification.py "
                    f"--models-dir {models}`")
    assert error.startswith("error: ") and "missing.csv" in error
    assert {name: (models / name).read_bytes() for name in before} == before  # all as it was
    assert not list(models.glob("*.stale*"))

    second = run_script("ELMO.py", out, new_text, *TINY)
    assert second.returncode == 0, second.stderr
    assert second.stderr.splitlines()[0] == note  # said at the start
    assert ("note: renamed the classifier files of the previous biLM in "
            f"{models}: classifier.pt -> classifier.pt.stale, classifier_frozen_lambda.pt -> "
            "classifier_frozen_lambda.pt.stale") in second.stderr
    assert "direction   val ppl" in second.stdout and " epoch 1:" not in second.stdout
    assert (models / "bilstm.pt").read_bytes() != before["bilstm.pt"]
    assert not list(models.glob("classifier*.pt"))
    assert {name: (models / f"{name}.stale").read_bytes() for name in CLASSIFIERS} == \
        {name: before[name] for name in CLASSIFIERS}  # moved, not changed
    assert cli_run("predict", ["--models-dir", str(models), "--text", "the match"]) == 2
    err = capsys.readouterr().err
    assert "classifier.pt not found: train it with `python classification.py" in err and "different biLM" not in err
