"""The CPU dropout (elmo.model.dropout.FastDropout)."""

from __future__ import annotations

import pytest
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


def test_cpu_dropout_draws_are_unbiased_at_a_small_rate():
    torch.manual_seed(1)
    x = torch.ones(1001, 999)  # an odd number of elements: the last int32 draw is half used
    y = Dropout(0.1).train()(x)
    kept = (y != 0).float()
    assert abs(kept.mean().item() - (1 - 3277 / 32768)) < 0.002  # p = 0.1 acts as 3277 / 2^15
    assert y.mean().item() == pytest.approx(1.0, abs=0.003)  # the rescaling keeps the expectation
    # the two halves of every random int32 are independent draws: both keep at the same rate, uncorrelated
    pairs = kept.flatten()[: 2 * (kept.numel() // 2)].view(-1, 2)
    assert abs(pairs[:, 0].mean().item() - pairs[:, 1].mean().item()) < 0.003
    assert abs(torch.corrcoef(pairs.T)[0, 1].item()) < 0.01


def test_cpu_dropout_of_a_rate_below_one_draw_or_of_one():
    x = torch.randn(10, 10)
    assert torch.equal(Dropout(1e-6).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
