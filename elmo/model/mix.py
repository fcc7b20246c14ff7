"""Combining the biLM layers h_0, h_1, h_2 into one ELMo vector per token by one of :data:`LAYER_MIXES` (docs/method.md):
``trainable_lambda`` (:class:`ScalarMix`, AllenNLP's, w and γ trained), ``frozen_lambda`` (the same sum with w drawn
once from N(0, 1) by the seed and never trained, γ fixed at 1) or ``learned_function`` (``--learned-function``:
``gate``, :class:`GatedLayerMix`, or ``mlp``, :class:`LearnedLayerFunction`). With ``layer_norm=True``
(``--layer-norm``, the paper's §3.2 remark) each layer is first normalised per token (:func:`normalize_layers`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ElmoError

#: the layer mixes (``ClassifierConfig.mix``, ``classification.py --mixes``)
LAYER_MIXES = ("trainable_lambda", "frozen_lambda", "learned_function")
#: the kinds of ``learned_function`` (``--learned-function``)
LEARNED_FUNCTIONS = ("gate", "mlp")
#: hidden width of :class:`GatedLayerMix`'s gate network
GATE_HIDDEN = 64


def normalize_layers(layers: torch.Tensor) -> torch.Tensor:
    """Per-token layer normalisation without affine parameters: ``layers (L+1, B, T, D)`` → the same shape, each
    ``(j, b, t)`` vector shifted and scaled to mean 0 and variance 1 over D (an all-zero padded vector stays zero), so
    that a sentence's vector does not depend on the rest of its batch."""
    return F.layer_norm(layers, layers.shape[-1:])


def normalize_layers_over_batch(layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """AllenNLP's layer normalisation (``ScalarMix(do_layer_norm=True)``, allennlp/modules/scalar_mix.py), used by
    :class:`~elmo.model.elmo.Elmo` for AllenNLP's call: one mean and variance per layer over all the batch's unmasked
    positions and features, so a sentence's vectors depend on its batch (:func:`normalize_layers`: per token).
    ``layers (L+1, B, T, D)``; ``mask (B, T)`` bool, True at the positions counted (at least one). Returns the same
    shape, ``(h - mean) / sqrt(variance + tiny)`` per layer with AllenNLP's ``tiny`` (1e-13; 1e-4 in float16); masked
    positions are transformed too (``-mean / sd`` where h is zero), as in AllenNLP."""
    keep = mask.unsqueeze(-1).to(layers.dtype)  # (B, T, 1)
    count = mask.sum() * layers.shape[-1]
    masked = layers * keep
    mean = masked.sum(dim=(1, 2, 3), keepdim=True) / count
    variance = (((masked - mean) * keep) ** 2).sum(dim=(1, 2, 3), keepdim=True) / count
    return (layers - mean) / torch.sqrt(variance + (1e-4 if layers.dtype == torch.float16 else 1e-13))


class ScalarMix(nn.Module):
    """γ · Σ_j softmax(w)_j · h_j (Peters et al. 2018, eq. 1) over ``num_layers`` L + 1 layers, each first normalised
    per token with ``layer_norm`` (:func:`normalize_layers`; both arguments mean the same for every mix of this module),
    w and γ trained with ``trainable`` (``trainable_lambda``), else fixed (``frozen_lambda``). ``weights``: initial
    un-normalised w ``(num_layers,)``, zeros (the average) when ``None``, else ElmoError on the wrong shape; ``gamma``:
    initial γ."""

    def __init__(self, num_layers: int, trainable: bool = True, weights: torch.Tensor | None = None,
                 gamma: float = 1.0, layer_norm: bool = False):
        super().__init__()
        self.layer_norm = layer_norm
        w = torch.zeros(num_layers) if weights is None else torch.as_tensor(weights, dtype=torch.float32).clone()
        if w.shape != (num_layers,):
            raise ElmoError(f"ScalarMix expects {num_layers} weights, got shape {tuple(w.shape)}")
        self.weights = nn.Parameter(w, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(float(gamma)), requires_grad=trainable)

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """Args: layers ``(L+1, B, T, D)``. Returns ``(B, T, D)``."""
        if self.layer_norm:
            layers = normalize_layers(layers)
        lambdas = torch.softmax(self.weights, dim=0).to(layers.dtype)
        return self.gamma.to(layers.dtype) * torch.einsum("l,lbtd->btd", lambdas, layers)

    def lambdas(self) -> list[float]:
        """The normalised layer weights softmax(w), for logging."""
        return torch.softmax(self.weights.detach().float(), dim=0).tolist()


class LearnedLayerFunction(nn.Module):
    """f(h_0, .., h_L) = W_2 · GELU(W_1 · [h_0; ..; h_L] + b_1) + b_2 per token, ``dim`` (D) wide as each layer;
    ``num_layers``, ``layer_norm``: as for :class:`ScalarMix`."""

    def __init__(self, num_layers: int, dim: int, layer_norm: bool = False):
        super().__init__()
        self.layer_norm = layer_norm
        self.net = nn.Sequential(nn.Linear(num_layers * dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """Args: layers ``(L+1, B, T, D)``. Returns ``(B, T, D)``."""
        if self.layer_norm:
            layers = normalize_layers(layers)
        return self.net(torch.cat(list(layers), dim=-1))


class GatedLayerMix(ScalarMix):
    """Token-wise scalar mix: γ Σ_j a_{k,j} h_{k,j}, a_k = softmax(w + g([h_{k,0}; ..; h_{k,L}])), g (``(L+1)·D →
    hidden → L+1``, GELU) adding per-token logits to the global w (a trainable :class:`ScalarMix`'s w and γ); g's output
    layer and w start at zero and γ at 1 (the uniform average). ``dim``: layer width D; ``num_layers``, ``layer_norm``:
    as for :class:`ScalarMix`. :meth:`lambdas`: softmax(w), the layer weights of a token whose gate output is zero (the
    global part)."""

    def __init__(self, num_layers: int, dim: int, hidden: int = GATE_HIDDEN, layer_norm: bool = False):
        super().__init__(num_layers, layer_norm=layer_norm)
        self.gate = nn.Sequential(nn.Linear(num_layers * dim, hidden), nn.GELU(), nn.Linear(hidden, num_layers))
        nn.init.zeros_(self.gate[2].weight)
        nn.init.zeros_(self.gate[2].bias)

    def token_weights(self, layers: torch.Tensor) -> torch.Tensor:
        """The per-token layer weights a: ``(L+1, B, T, D)`` layers → ``(B, T, L+1)``, each row summing to 1."""
        if self.layer_norm:
            layers = normalize_layers(layers)
        logits = self.weights.to(layers.dtype) + self.gate(torch.cat(list(layers), dim=-1))
        return torch.softmax(logits.float(), dim=-1).to(layers.dtype)

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """Args: layers ``(L+1, B, T, D)``. Returns ``(B, T, D)``."""
        a = self.token_weights(layers)
        if self.layer_norm:
            layers = normalize_layers(layers)
        return self.gamma.to(layers.dtype) * torch.einsum("btl,lbtd->btd", a, layers)


def build_mix(mix: str, num_layers: int, dim: int, seed: int = 0, layer_norm: bool = False,
              learned_function: str = "gate") -> nn.Module:
    """The module of one layer ``mix`` of :data:`LAYER_MIXES` (module docstring): ``(L+1, B, T, D)`` layers →
    ``(B, T, D)``. ``dim``: layer width D; ``num_layers``, ``layer_norm``: as for :class:`ScalarMix`; ``seed`` draws the
    frozen weights of ``frozen_lambda`` (reproducible, logged in the results); ``learned_function``: the kind of
    ``learned_function``, one of :data:`LEARNED_FUNCTIONS`. Raises ElmoError on an unknown mix or kind.
    """
    if learned_function not in LEARNED_FUNCTIONS:
        raise ElmoError(f"unknown learned function {learned_function!r}; choose from {', '.join(LEARNED_FUNCTIONS)}")
    if mix == "trainable_lambda":
        return ScalarMix(num_layers, trainable=True, layer_norm=layer_norm)
    if mix == "frozen_lambda":
        weights = torch.randn(num_layers, generator=torch.Generator().manual_seed(seed))
        return ScalarMix(num_layers, trainable=False, weights=weights, layer_norm=layer_norm)
    if mix == "learned_function":
        kind = GatedLayerMix if learned_function == "gate" else LearnedLayerFunction
        return kind(num_layers, dim, layer_norm=layer_norm)
    raise ElmoError(f"unknown layer mix {mix!r}; choose from {', '.join(LAYER_MIXES)}")


def mix_summary(mix: nn.Module) -> dict:
    """``{"lambdas": [...] or None, "gamma": float or None}`` for results files."""
    if isinstance(mix, ScalarMix):  # GatedLayerMix too
        return {"lambdas": mix.lambdas(), "gamma": float(mix.gamma.detach())}
    return {"lambdas": None, "gamma": None}
