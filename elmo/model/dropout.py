"""Dropout with a cheaper random mask on the CPU: two 15-bit draws from every 32-bit random integer against a
threshold, instead of PyTorch's ``bernoulli_(1 - p)`` or one float per element (measurements: lab/performance.md); on
CUDA :func:`torch.nn.functional.dropout` as is.
"""

from __future__ import annotations

import torch
from torch import nn

#: random bits behind each element's keep-or-drop draw on the CPU: ``p`` acts rounded to a multiple of 2^-15
MASK_BITS = 15


class FastDropout(nn.Dropout):
    """:class:`torch.nn.Dropout` (Srivastava et al. 2014) with an integer-threshold mask on the CPU.

    In training each element is kept independently with probability ``1 - p'`` and scaled by ``1 / (1 - p')``, else
    zeroed, where ``p' = round(p · 2^15) / 2^15`` on the CPU (0.1 acts as 0.100006; the expectation of every element
    is kept exactly) and ``p' = p`` on other devices; identity in eval mode or with ``p = 0``. Each draw is 15 bits of
    an int32 from the global generator (two draws per integer), so ``torch.manual_seed`` makes it repeat exactly.

    Shapes: any ``x``; returns a tensor of ``x``'s shape and dtype.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        scale = 1 << MASK_BITS
        dropped = round(self.p * scale)  # draws below this are dropped
        if dropped >= scale:
            return torch.zeros_like(x)
        if dropped == 0:
            return x
        # random_() fills an int32 with 31 random bits: its two 16-bit halves each hold 15 independent ones
        bits = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_()
        draws = bits.view(torch.int16)[:x.numel()].view(x.shape) & (scale - 1)
        return x * (draws >= dropped).to(x.dtype).mul_(scale / (scale - dropped))
