"""Keep the best epoch's weights by a validation metric; stop after ``patience`` epochs without improvement."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class EarlyStopping:
    """Tracks the best validation value and a copy of the weights that reached it: ``patience``, stop after this many
    epochs in a row without improvement (>= 1); ``maximize``: whether a larger monitored value is better (macro-F1) or a
    smaller one (perplexity); ``best_epoch``, ``best_value``, ``best_state``: the best epoch so far (1-based), its value
    and a copy of its ``state_dict`` (0, NaN and ``None`` before the first epoch); ``stale``: epochs since the last
    improvement."""

    patience: int
    maximize: bool
    best_epoch: int = 0
    best_value: float = float("nan")
    stale: int = 0
    best_state: dict[str, torch.Tensor] | None = None

    def update(self, epoch: int, value: float, model: nn.Module) -> bool:
        """Record the validation ``value`` of 1-based ``epoch`` and return whether it improves on the best so far (the
        first epoch always does), copying the weights if so."""
        improved = math.isnan(self.best_value) or (value > self.best_value if self.maximize else value < self.best_value)
        if improved:
            self.best_epoch, self.best_value, self.stale = epoch, value, 0
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            self.stale += 1
        return improved

    @property
    def should_stop(self) -> bool:
        """Whether ``patience`` epochs have passed without improvement."""
        return self.stale >= self.patience

    def restore_best(self, model: nn.Module) -> None:
        """Load the best epoch's weights into ``model`` (no-op before the first epoch)."""
        if self.best_state is not None:
            model.load_state_dict(self.best_state)

    def state(self) -> dict[str, Any]:
        """What a training checkpoint stores (plain values and tensors)."""
        return {"best_epoch": self.best_epoch, "best_value": self.best_value, "best_state": self.best_state,
                "stale": self.stale}

    def load(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.best_epoch, self.best_value = state["best_epoch"], state["best_value"]
        self.best_state, self.stale = state["best_state"], state["stale"]
