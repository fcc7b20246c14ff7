"""Dropout with a cheaper random mask on the CPU: uniform numbers against a threshold instead of PyTorch's
``bernoulli_(1 - p)`` (measurements: lab/performance.md); on CUDA :func:`torch.nn.functional.dropout` as is.
"""

from __future__ import annotations

import torch
from torch import nn


class FastDropout(nn.Dropout):
    """:class:`torch.nn.Dropout` (Srivastava et al. 2014) with a uniform-threshold mask on the CPU.

    Same distribution: in training each element is kept independently with probability ``1 - p``
    and scaled by ``1 / (1 - p)``, else zeroed; identity in eval mode or with ``p = 0``. It draws
    from the same global generator, so ``torch.manual_seed`` makes it repeat exactly.

    Shapes: any ``x``; returns a tensor of ``x``'s shape and dtype.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        if self.p == 1.0:
            return torch.zeros_like(x)
        mask = (torch.rand(x.shape) >= self.p).to(x.dtype).mul_(1.0 / (1.0 - self.p))
        return x * mask
