"""Dropout with a cheaper CPU mask: two 15-bit draws per 32-bit random integer compared with a threshold, instead of
PyTorch's ``bernoulli_(1 - p)`` (measurements: lab/performance.md); elsewhere :func:`torch.nn.functional.dropout`."""

from __future__ import annotations

import torch
from torch import nn

#: random bits behind each element's keep-or-drop draw on the CPU: ``p`` acts rounded to a multiple of 2^-15
MASK_BITS = 15


class FastDropout(nn.Dropout):
    """:class:`torch.nn.Dropout` (Srivastava et al. 2014) with the module docstring's integer-threshold mask on the CPU:
    in training each element is kept independently with probability ``1 - p'`` and scaled by ``1 / (1 - p')``, else
    zeroed, where ``p' = round(p · 2^15) / 2^15`` on the CPU (0.1 acts as 0.100006; each element's expectation stays
    exact) and ``p' = p`` elsewhere; identity in eval mode or with ``p = 0``. The draws come from the global generator,
    so ``torch.manual_seed`` repeats them exactly. ``x`` of any shape → a tensor of its shape and dtype."""

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
