"""The CPU dropout (elmo.model.dropout.FastDropout)."""

from __future__ import annotations

import torch

from elmo.model.dropout import FastDropout as Dropout


def test_cpu_dropout_keeps_1_minus_p_and_rescales():
    torch.manual_seed(0)
    drop = Dropout(0.25).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.005
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # gradient is the same scaled mask
    assert torch.equal(drop.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)


def test_cpu_dropout_repeats_with_the_seed():
    x = torch.randn(50, 40)
    torch.manual_seed(3)
    a = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    b = Dropout(0.5).train()(x)
    assert torch.equal(a, b)
