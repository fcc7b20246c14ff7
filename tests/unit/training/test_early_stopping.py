"""Model selection on a validation metric (elmo.training.early_stopping.EarlyStopping)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from elmo.training.early_stopping import EarlyStopping


def model_with(value: float) -> nn.Linear:
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(value)
        model.bias.fill_(value)
    return model


def test_before_the_first_epoch_nothing_is_recorded_and_restore_is_a_no_op():
    stop = EarlyStopping(patience=2, maximize=True)
    assert stop.best_epoch == 0 and math.isnan(stop.best_value) and stop.best_state is None and not stop.should_stop
    model = model_with(3.0)
    stop.restore_best(model)
    assert torch.equal(model.weight, torch.full((1, 2), 3.0))


@pytest.mark.parametrize("maximize, values, improvements, best", [
    (True, [0.5, 0.7, 0.6, 0.7, 0.9], [True, True, False, False, True], (5, 0.9)),  # a tie is not an improvement
    (False, [40.0, 30.0, 35.0, 29.0], [True, True, False, True], (4, 29.0)),
    (True, [0.2, 0.1], [True, False], (1, 0.2)),
])
def test_update_reports_improvements_in_the_monitored_direction(maximize, values, improvements, best):
    stop = EarlyStopping(patience=10, maximize=maximize)
    got = [stop.update(epoch, value, model_with(float(epoch))) for epoch, value in enumerate(values, start=1)]
    assert got == improvements
    assert (stop.best_epoch, stop.best_value) == best
    assert torch.equal(stop.best_state["weight"], torch.full((1, 2), float(best[0])))  # that epoch's weights


def test_stale_epochs_count_up_reset_on_improvement_and_stop_at_patience():
    stop = EarlyStopping(patience=2, maximize=False)
    model = model_with(0.0)
    trace = []
    for epoch, value in enumerate([5.0, 6.0, 4.0, 4.5, 4.0], start=1):
        stop.update(epoch, value, model)
        trace.append((stop.stale, stop.should_stop))
    assert trace == [(0, False), (1, False), (0, False), (1, False), (2, True)]


def test_the_best_weights_are_a_copy_and_restore_best_loads_them():
    stop = EarlyStopping(patience=3, maximize=True)
    model = model_with(1.0)
    stop.update(1, 0.8, model)
    with torch.no_grad():
        model.weight.fill_(7.0)  # training goes on in place ...
    stop.update(2, 0.6, model)  # ... and gets worse
    assert torch.equal(stop.best_state["weight"], torch.full((1, 2), 1.0))  # not aliased to the live weights
    stop.restore_best(model)
    assert torch.equal(model.weight, torch.full((1, 2), 1.0)) and torch.equal(model.bias, torch.full((1,), 1.0))


def test_state_round_trips_through_a_checkpoint(tmp_path):
    stop = EarlyStopping(patience=2, maximize=True)
    stop.update(1, 0.4, model_with(1.0))
    stop.update(2, 0.3, model_with(2.0))
    torch.save(stop.state(), tmp_path / "state.pt")
    again = EarlyStopping(patience=2, maximize=True)
    again.load(torch.load(tmp_path / "state.pt", weights_only=True))
    assert (again.best_epoch, again.best_value, again.stale) == (1, 0.4, 1)
    assert torch.equal(again.best_state["weight"], stop.best_state["weight"])
    assert again.update(3, 0.35, model_with(3.0)) is False and again.should_stop  # continues where it left off
    model = model_with(9.0)
    again.restore_best(model)
    assert torch.equal(model.weight, torch.full((1, 2), 1.0))
