"""The published biLM's LSTM without clipping on PyTorch's fused kernel (``ProjectedLSTM.fused_forward``) against the
per-step loop (``fused = False``): the same layers, final states and gradients in fp32, both directions, ragged
lengths, two layers with the residual connection, carried states and chunking; the weights mapped onto
``nn.LSTM``'s layout; bf16 autocast; which layers run fused."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from elmo.model.bilm import BiLM
from elmo.model.bilm_config import PUBLISHED_ARCHITECTURES, BiLMConfig
from elmo.model.lstm import ProjectedLSTM
from elmo.model.published_io import config_from_options, options_of
from lab.bench.published import random_weights

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, max_chars=10, hidden_size=24,
                           projection_dim=8, num_layers=2, cell_clip=None, proj_clip=None)


def tiny_bilm(seed: int = 0) -> BiLM:
    """:data:`TINY` with random weights and a random LSTM bias (so the gate mapping shows in the bias too)."""
    bilm, generator = random_weights(BiLM(TINY), seed), torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers):
            layer.bias.normal_(generator=generator)
    return bilm


def set_fused(bilm: BiLM, fused: bool) -> None:
    for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers):
        layer.fused = fused


def layers_states_and_gradients(bilm: BiLM, x: torch.Tensor, lengths: torch.Tensor, states, fused: bool):
    """:meth:`BiLM.contextual` with ``carry=True`` from ``states`` (both directions' layers, their final
    states), and the gradients of a weighted sum of them with respect to ``x``, the initial states and every
    parameter."""
    set_fused(bilm, fused)
    bilm.zero_grad()
    x = x.clone().requires_grad_()
    states = [(h.clone().requires_grad_(), c.clone().requires_grad_()) for h, c in states]
    layers, finals = bilm.contextual(x, lengths, states, carry=True)
    weights = torch.linspace(-1, 1, layers.numel()).view_as(layers)
    loss = (layers * weights).sum() + sum((h * h.detach()).sum() + (c * c.detach()).sum() for h, c in finals)
    loss.backward()
    grads = {"x": x.grad, **{f"state {i} {k}": s.grad for i, pair in enumerate(states) for k, s in zip("hc", pair)},
             **{name: p.grad.clone() for name, p in bilm.named_parameters() if p.grad is not None}}
    return layers.detach(), [t.detach() for pair in finals for t in pair], grads


@pytest.mark.parametrize("chunk_size", [None, 5])
def test_fused_lstm_gives_the_loops_layers_states_and_gradients(chunk_size):
    bilm = tiny_bilm()
    bilm.chunk_size = chunk_size
    generator = torch.Generator().manual_seed(2)
    lengths = torch.tensor([3, 7, 0, 5, 1])  # ragged, unsorted, an empty sentence
    x = torch.randn(5, 7, TINY.output_size, generator=generator)
    states = [(torch.randn(5, TINY.output_size, generator=generator), torch.randn(5, TINY.hidden_size, generator=generator))
              for _ in range(2 * TINY.num_layers)]
    fused, loop = (layers_states_and_gradients(bilm, x, lengths, states, f) for f in (True, False))
    assert torch.equal(fused[0][:, 2], torch.zeros_like(fused[0][:, 2]))  # padding and the empty sentence stay zero
    assert (fused[0] - loop[0]).abs().max() <= 1e-5 and fused[0][1:].abs().max() > 0.1
    for a, b in zip(fused[1], loop[1]):
        assert (a - b).abs().max() <= 1e-5
    assert fused[2].keys() == loop[2].keys() and len(loop[2]) == len(list(bilm.parameters())) + 1 + 4 * TINY.num_layers
    for name in loop[2]:
        assert (fused[2][name] - loop[2][name]).abs().max() <= 1e-5, name
        assert loop[2][name].abs().max() > 0, name  # every parameter and input gets a gradient
    set_fused(bilm, True)
    with torch.no_grad():  # inference: the weights mapped once and cached, the same layers
        assert (bilm.contextual(x, lengths, states, carry=True)[0] - loop[0]).abs().max() <= 1e-5


def test_the_fused_path_reads_the_loops_training_states_with_dropout_and_both_directions():
    bilm = tiny_bilm(3)
    chars = torch.randint(5, 200, (4, 6, TINY.max_chars), generator=torch.Generator().manual_seed(4))
    lengths = torch.tensor([6, 2, 4, 1])
    runs = []
    for fused in (True, False):
        set_fused(bilm, fused)
        bilm.zero_grad()
        torch.manual_seed(5)
        states = bilm.reading_states(chars, lengths, (0, 1), nn.Dropout(0.2))
        sum((s * s).sum() for s in states).backward()
        runs.append((states, [p.grad.clone() for p in bilm.parameters()]))
    for a, b in zip(runs[0][0], runs[1][0]):
        assert (a - b).abs().max() <= 1e-5
    for a, b in zip(runs[0][1], runs[1][1]):
        assert (a - b).abs().max() <= 1e-5


def test_fused_weights_are_nn_lstms_layout_of_our_parameters():
    layer = tiny_bilm().forward_lm.layers[1]
    lstm = nn.LSTM(TINY.output_size, TINY.hidden_size, proj_size=TINY.output_size)
    with torch.no_grad():
        for name, weight in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"),
                                layer.fused_weights(torch.float32)):
            getattr(lstm, name).copy_(weight)
        x = torch.randn(6, 3, TINY.output_size, generator=torch.Generator().manual_seed(6))
        layer.fused = False
        ours = layer(x, [3] * 6)[0]
    assert (lstm(x)[0].detach() - ours).abs().max() <= 1e-5
    assert layer.state_dict().keys() == {"input_weight", "recurrent_weight", "bias", "projection"}  # one layout


def test_rows_that_run_no_step_keep_their_initial_state():
    layer = tiny_bilm().backward_lm.layers[0]
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(4, 3, TINY.output_size, generator=generator)
    state = (torch.randn(3, TINY.output_size, generator=generator), torch.randn(3, TINY.hidden_size, generator=generator))
    with torch.no_grad():
        fused = layer(x, [2, 1], state)
        layer.fused = False
        loop = layer(x, [2, 1], state)
    assert fused[0].shape == (4, 3, TINY.output_size) and (fused[0][2:] == 0).all() and (fused[0][:, 2] == 0).all()
    assert torch.equal(fused[1][0][2], state[0][2]) and torch.equal(fused[1][1][2], state[1][2])
    for a, b in zip((fused[0], *fused[1]), (loop[0], *loop[1])):
        assert (a - b).abs().max() <= 1e-5


@pytest.mark.cpu_features
def test_bf16_autocast_runs_the_products_in_bf16_and_stays_close_to_the_loop():
    bilm = tiny_bilm(8)
    x = torch.randn(3, 9, TINY.output_size, generator=torch.Generator().manual_seed(9))
    lengths = torch.tensor([9, 4, 6])
    results = {}
    for fused in (True, False):
        set_fused(bilm, fused)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            results[fused] = bilm.contextual(x, lengths, carry=True)
    with torch.no_grad():
        exact = bilm.contextual(x, lengths)[0]
    layers, finals = results[True]
    assert layers.dtype == torch.float32 and all(t.dtype == torch.float32 for pair in finals for t in pair)
    assert 0 < (layers - exact).abs().max() < 0.05  # computed in bf16, not silently in fp32
    assert (layers - results[False][0]).abs().max() < 0.05


@pytest.mark.cpu_features
@pytest.mark.parametrize("grad", [False, True])
def test_where_it_casts_for_the_kernel_every_tensor_reaches_it_in_bf16_with_autocast_off(monkeypatch, grad):
    """CUDA's branch, driven on the CPU: the packed input, both states and the weights reach ``torch.lstm`` in the
    autocast dtype with autocast off (an fp32 input beside bf16 states is refused by the kernel), in training too."""
    import elmo.model.lstm as lstm
    monkeypatch.setattr(lstm, "casts_for_kernel", lambda device_type: True)
    kernel, seen = torch.lstm, []

    def spy(packed, sizes, states, weights, *rest):
        seen.append((torch.is_autocast_enabled("cpu"), {t.dtype for t in (packed, *states, *weights)}))
        return kernel(packed, sizes, states, weights, *rest)
    monkeypatch.setattr(torch, "lstm", spy)
    bilm = tiny_bilm(8)
    x = torch.randn(3, 9, TINY.output_size, generator=torch.Generator().manual_seed(9), requires_grad=grad)
    lengths = torch.tensor([9, 4, 6])
    with torch.set_grad_enabled(grad), torch.autocast("cpu", dtype=torch.bfloat16):
        layers, _ = bilm.contextual(x, lengths)
    assert len(seen) == 2 * TINY.num_layers, seen
    assert all(not enabled and dtypes == {torch.bfloat16} for enabled, dtypes in seen), seen
    assert {layer.compute_dtype for layer in (*bilm.forward_lm.layers, *bilm.backward_lm.layers)} == {torch.bfloat16}
    with torch.no_grad():
        exact = bilm.contextual(x.detach(), lengths)[0]
    assert layers.dtype == torch.float32 and 0 < (layers.detach() - exact).abs().max() < 0.05
    if grad:
        layers.sum().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()


def test_which_layers_run_fused():
    assert not any(layer.fused for layer in BiLM(PUBLISHED_ARCHITECTURES["elmo-small"][1]).forward_lm.layers)
    assert all(layer.fused for layer in BiLM(TINY).backward_lm.layers)
    one_clip = BiLM(replace(TINY, proj_clip=3.0))
    assert not any(layer.fused for layer in one_clip.forward_lm.layers)
    options = options_of(TINY)
    options["lstm"].update(cell_clip=0, proj_clip=0)  # AllenNLP's reading of 0: no clipping
    zero = config_from_options(options)
    assert zero.cell_clip is None and zero.proj_clip is None and options_of(zero)["lstm"]["cell_clip"] is None
    layer = ProjectedLSTM(4, 8, 4, 3.0, 3.0)
    layer.fused = True  # a clipped layer never takes the fused kernel, which cannot clip
    with torch.no_grad():
        for p in layer.parameters():
            p.fill_(0.0 if p is not layer.input_weight else 5.0)  # every gate open: the cell grows by 1 a step
        _, (_, c) = layer(torch.ones(5, 1, 4), [1] * 5)
    assert torch.equal(c, torch.full_like(c, 3.0))
