"""The language models' adaptive softmax (elmo.model.adaptive_softmax.AdaptiveSoftmax)."""

from __future__ import annotations

import pytest
import torch

from elmo.errors import ElmoError
from elmo.model.adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax


def softmax_and_batch(seed: int = 0, rows: int = 300, vocab: int = 500):
    torch.manual_seed(seed)
    softmax = AdaptiveSoftmax(32, vocab, (50, 150, 400), 2.0)
    states = torch.randn(rows, 32, requires_grad=True)
    targets = torch.randint(0, vocab, (rows,))
    targets[torch.rand(rows) < 0.2] = IGNORE_INDEX
    return softmax, states, targets


@pytest.mark.parametrize("seed", [0, 1])
def test_loss_and_gradients_equal_pytorchs_adaptive_softmax_on_the_kept_rows(seed):
    softmax, states, targets = softmax_and_batch(seed)
    loss, n = softmax.loss(states, targets)
    keep = targets != IGNORE_INDEX
    assert n == int(keep.sum())
    grads = torch.autograd.grad(loss, [states, *softmax.parameters()])
    reference = torch.nn.AdaptiveLogSoftmaxWithLoss.forward(softmax, states[keep], targets[keep]).loss
    expected = torch.autograd.grad(reference, [states, *softmax.parameters()])
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_a_batch_without_tail_words_or_without_any_word():
    softmax, states, _ = softmax_and_batch()
    head_only = torch.randint(0, 50, (states.shape[0],))
    loss, n = softmax.loss(states, head_only)
    reference = torch.nn.AdaptiveLogSoftmaxWithLoss.forward(softmax, states, head_only).loss
    assert n == states.shape[0] and loss.item() == pytest.approx(reference.item(), rel=1e-6)
    loss, n = softmax.loss(states, torch.full_like(head_only, IGNORE_INDEX))
    assert n == 0 and loss.item() == 0.0


@pytest.mark.cpu_features
def test_bf16_states_under_autocast_score_like_their_fp32_copy():
    softmax, states, targets = softmax_and_batch()
    low = states.detach().bfloat16()
    with torch.autocast("cpu", torch.bfloat16):
        loss, _ = softmax.loss(low, targets)
        reference, _ = softmax.loss(low.float(), targets)
    assert loss.dtype == torch.float32 and loss.item() == reference.item()


@pytest.mark.parametrize("bad", [500, -1])
def test_a_target_outside_the_vocabulary_is_named(bad):
    softmax, states, targets = softmax_and_batch()
    targets[3] = bad
    with pytest.raises(ElmoError, match=r"1 target\(s\) outside \[0, 500\)"):
        softmax.loss(states, targets)


def test_state_dict_keys_are_pytorchs():
    softmax, _, _ = softmax_and_batch()
    reference = torch.nn.AdaptiveLogSoftmaxWithLoss(32, 500, [50, 150, 400], div_value=2.0)
    assert softmax.state_dict().keys() == reference.state_dict().keys()
