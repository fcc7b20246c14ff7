"""Pinned metrics: the tiny-corpus run of both scripts must keep giving the numbers it was recorded with
(behaviour must not change when code only moves).

tests/fixtures/pinned_metrics.json is recorded by ``python tests/record_pinned_metrics.py`` with the current
defaults (biLM: residual connection, lr 4e-3 with warm-up, dropout 0.1; the gated learned function; the 16-bit
layer cache), on a 2-core AMD EPYC
with AVX512-BF16, in fp32 with one thread, by ``ELMO.py --max-docs 2000 --epochs 1`` and ``classification.py``
(both at their default sizes otherwise, ``--precision fp32 --threads 1``, ``PYTHONHASHSEED=0``) on the corpus of
``support.write_tiny_agnews`` (``make_rows(240, seed=1)`` / ``make_rows(80, seed=2)``). Another CPU model may round its fp32 kernels differently (other SIMD widths, other summation
orders), so the comparison allows what such rounding moves, and no more:

* perplexities and per-epoch training losses: relative 2e-4 (measured differences between CPUs are below 1e-5;
  a changed computation, such as another initialisation, batch order, dropout draw, or loss weighting, moves
  them by percents);
* accuracies and F1 on 80 test / 12 validation documents: 1/80 absolute, i.e. one test document may flip;
* the number of epochs each layer mix trained (early stopping on validation F1) exactly.
"""

from __future__ import annotations

import json

import pytest
from support import ROOT

from elmo.model.mix import LAYER_MIXES

pytestmark = pytest.mark.slow

EXPECTED = json.loads((ROOT / "tests" / "fixtures" / "pinned_metrics.json").read_text())
RTOL = 2e-4
ATOL_SHARE = 1 / 80


def test_the_fixture_holds_every_pinned_value():
    assert set(EXPECTED["lm"]) == {f"{s}_{d}_perplexity" for s in ("val", "test") for d in ("forward", "backward")}
    assert set(EXPECTED["classification"]) == set(LAYER_MIXES)
    for pinned in EXPECTED["classification"].values():
        assert set(pinned) == {"test_accuracy", "test_f1", "val_f1", "train_loss"} and len(pinned["train_loss"]) >= 3


def test_language_model_perplexities_are_the_pinned_ones(pinned_run):
    lm = pinned_run.lm
    got = {f"{s}_{d}_perplexity": lm[s][f"{d}_perplexity"] for s in ("val", "test") for d in ("forward", "backward")}
    assert got == pytest.approx(EXPECTED["lm"], rel=RTOL)
    assert lm["documents"] == {"train": 228, "val": 12, "test": 80} and lm["config"]["precision"] == "fp32"


@pytest.mark.parametrize("mix", LAYER_MIXES)
def test_classifier_metrics_and_training_losses_are_the_pinned_ones(pinned_run, mix):
    result, pinned = pinned_run.cls[mix], EXPECTED["classification"][mix]
    losses = [row["train_loss"] for row in result["history"]]
    assert len(losses) == len(pinned["train_loss"])  # the same epochs, early stopping included
    assert losses == pytest.approx(pinned["train_loss"], rel=RTOL)
    assert result["test"]["accuracy"] == pytest.approx(pinned["test_accuracy"], abs=ATOL_SHARE)
    assert result["test"]["f1"] == pytest.approx(pinned["test_f1"], abs=ATOL_SHARE)
    assert result["val"]["f1"] == pytest.approx(pinned["val_f1"], abs=ATOL_SHARE)
