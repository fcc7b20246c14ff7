"""The three layer-mix settings: the formula, and which weights train."""

from __future__ import annotations

import pytest
import torch

from elmo.errors import ElmoError
from elmo.model.mix import LAYER_MIXES, GatedLayerMix, LearnedLayerFunction, ScalarMix, build_mix, mix_summary


def layers(seed: int = 0) -> torch.Tensor:
    return torch.randn(3, 2, 5, 6, generator=torch.Generator().manual_seed(seed))


def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    mix = ScalarMix(3, weights=torch.tensor([0.5, -1.0, 2.0]), gamma=1.7)
    h = layers()
    lam = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0)
    expected = 1.7 * (lam[0] * h[0] + lam[1] * h[1] + lam[2] * h[2])
    assert torch.allclose(mix(h), expected, atol=1e-6)
    assert sum(mix.lambdas()) == pytest.approx(1.0)


def one_step(module: torch.nn.Module) -> None:
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params or [torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    loss = (module(layers()) * layers(1)[0]).sum()
    opt.zero_grad()
    if params:
        loss.backward()
    opt.step()


def test_trainable_lambda_weights_and_gamma_change():
    mix = build_mix("trainable_lambda", 3, 6)
    before = (mix.weights.detach().clone(), mix.gamma.detach().clone())
    one_step(mix)
    assert not torch.equal(before[0], mix.weights) and not torch.equal(before[1], mix.gamma)


def test_frozen_lambda_weights_are_random_from_the_seed_and_never_change():
    mix = build_mix("frozen_lambda", 3, 6, seed=5)
    assert not mix.weights.requires_grad and not mix.gamma.requires_grad
    assert torch.equal(mix.weights, build_mix("frozen_lambda", 3, 6, seed=5).weights)
    assert not torch.equal(mix.weights, build_mix("frozen_lambda", 3, 6, seed=6).weights)
    before = mix.weights.detach().clone()
    one_step(mix)
    assert torch.equal(before, mix.weights) and mix.gamma.item() == 1.0
    assert mix_summary(mix)["lambdas"] == pytest.approx(torch.softmax(before, 0).tolist())


def test_mlp_learned_function_trains_and_keeps_the_width():
    f = build_mix("learned_function", 3, 6, learned_function="mlp")
    assert isinstance(f, LearnedLayerFunction) and f(layers()).shape == (2, 5, 6)
    before = [p.detach().clone() for p in f.parameters()]
    one_step(f)
    assert all(not torch.equal(a, b) for a, b in zip(before, f.parameters()))
    assert mix_summary(f) == {"lambdas": None, "gamma": None}


@pytest.mark.parametrize("kind", ["gate", "mlp"])
def test_learned_function_is_per_token(kind):
    f = build_mix("learned_function", 3, 6, learned_function=kind)
    with torch.no_grad():  # move the gate off its zero start so that it reads the layers
        for p in f.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    h = layers()
    changed = h.clone()
    changed[:, 0, 1] += 1.0  # change one token of one document
    diff = (f(h) - f(changed)).abs().sum(-1)
    assert diff[0, 1] > 0 and diff.sum() == diff[0, 1]


def test_unknown_setting():
    assert len(LAYER_MIXES) == 3
    with pytest.raises(ElmoError, match="unknown layer mix"):
        build_mix("average", 3, 6)


@pytest.mark.parametrize("setting", LAYER_MIXES)
def test_layer_norm_makes_the_mix_blind_to_each_layers_scale(setting):
    h = layers()
    scaled = h * torch.tensor([10.0, 0.5, 3.0]).view(3, 1, 1, 1) + 5.0
    mix = build_mix(setting, 3, 6, seed=1, layer_norm=True)
    torch.testing.assert_close(mix(scaled), mix(h), atol=1e-3, rtol=1e-3)
    plain = build_mix(setting, 3, 6, seed=1)
    plain.load_state_dict(mix.state_dict())
    assert not torch.allclose(plain(scaled), plain(h), atol=1e-2)


def test_layer_norm_keeps_padding_zero():
    h = layers()
    h[:, :, -2:] = 0.0  # two padded positions
    out = build_mix("trainable_lambda", 3, 6, layer_norm=True)(h)
    assert not out[:, -2:].any()


def test_gated_mix_is_the_default_learned_function_and_starts_as_the_uniform_scalar_mix():
    gate = build_mix("learned_function", 3, 6)
    assert isinstance(gate, GatedLayerMix)
    h = layers()
    assert torch.allclose(gate(h), ScalarMix(3)(h), atol=1e-6)  # w = 0, γ = 1, gate output 0
    assert torch.allclose(gate.token_weights(h), torch.full((2, 5, 3), 1 / 3))


def test_gated_mix_contains_any_scalar_mix_and_learns_token_wise_weights():
    w = torch.tensor([0.3, -1.2, 0.8])
    gate = GatedLayerMix(3, 6)
    with torch.no_grad():
        gate.weights.copy_(w)
        gate.gamma.fill_(1.4)
    h = layers()
    assert torch.allclose(gate(h), ScalarMix(3, weights=w, gamma=1.4)(h), atol=1e-6)
    for _ in range(3):
        one_step(gate)
    a = gate.token_weights(h).detach()
    assert torch.allclose(a.sum(-1), torch.ones(2, 5), atol=1e-6)
    assert float((a - a[0, 0]).abs().max()) > 1e-4  # no longer one set of weights for every token
    assert mix_summary(gate)["gamma"] != 1.4 and len(mix_summary(gate)["lambdas"]) == 3


def test_unknown_learned_function_kind_is_an_error():
    with pytest.raises(ElmoError, match="learned function"):
        build_mix("learned_function", 3, 6, learned_function="attention")
