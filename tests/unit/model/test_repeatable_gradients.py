"""Gradients that repeat bit for bit on a multi-threaded CPU: where a layer picks rows of a tensor with repeated ids
(the character encoders' distinct spellings, the sampled softmax's target rows), the backward pass must add the
repeated rows in a fixed order (``index_select``), not in the order two threads reach them (an index's backward)."""

from __future__ import annotations

import pytest
import torch

from elmo.model.char_cnn import CharEncoder
from elmo.model.sampled_softmax import SampledSoftmax

WORDS, POSITIONS = 20, 4000  # 4000 x 64 gradient values (above ATen's grain size: two threads share the work), few rows


def gradients_repeat(module: torch.nn.Module, loss, runs: int = 4) -> bool:
    """Whether ``runs`` backward passes of ``loss(module)`` give bit-identical parameter gradients on two threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(runs):
            module.zero_grad()
            loss(module).backward()
            grads.append([p.grad.clone() for p in module.parameters() if p.grad is not None])
    finally:
        torch.set_num_threads(threads)
    return all(torch.equal(a, b) for other in grads[1:] for a, b in zip(grads[0], other))


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(0, WORDS, (POSITIONS,), generator=torch.Generator().manual_seed(0))


def test_the_published_token_layer_and_the_sampled_softmax_repeat_their_gradients(ids):
    torch.manual_seed(0)
    encoder = CharEncoder(64, char_dim=8, filters=((1, 32), (2, 32)), num_highway=1, max_chars=50, numbering="bilm_tf")
    spellings = torch.randint(1, 200, (WORDS, 50), generator=torch.Generator().manual_seed(1))
    weights = torch.randn(POSITIONS, 64, generator=torch.Generator().manual_seed(2))
    assert gradients_repeat(encoder, lambda m: (m(spellings[ids]) * weights).sum())
    softmax = SampledSoftmax(64, WORDS, samples=20)
    hidden = torch.randn(POSITIONS, 64, generator=torch.Generator().manual_seed(3))
    assert gradients_repeat(softmax, lambda m: m.sampled_logits(hidden, ids, torch.Generator().manual_seed(4)).sum())


def test_our_character_encoder_repeats_its_gradients(ids):
    torch.manual_seed(0)
    encoder = CharEncoder(64, char_dim=8, filters=((1, 32), (2, 32)), num_highway=1, max_chars=12, layer_norm=True)
    spellings = torch.randint(1, 60, (WORDS, 12), generator=torch.Generator().manual_seed(1))
    weights = torch.randn(1, POSITIONS, 64, generator=torch.Generator().manual_seed(2))
    assert gradients_repeat(encoder, lambda m: (m(spellings[ids].unsqueeze(0)) * weights).sum())
