"""The character-level token encoder of both biLM architectures (Peters et al. 2018, §3.1; Józefowicz et al. 2016).

:class:`CharEncoder` gives every word, OOV included, its own token vector x_k: character embedding → 1-d convolutions
of several widths, each max-pooled over the word, then an activation → highway layers (Srivastava et al. 2015) in
TensorFlow's form ``y = g ⊙ relu(W_t x + b_t) + (1 − g) ⊙ x``, ``g = σ(W_c x + b_c)`` → a linear projection to the
token width → optionally a layer normalisation. Two configurations:

* **ours** (``BiLMConfig.token_encoder == "char"``, one encoder per direction): our numbering
  (:func:`elmo.data.chars.word_char_ids`), a layer normalisation (not the paper's) keeping x_k at the word embeddings'
  unit scale (unnormalised ReLU features saturated the LSTM gates), CPU-sized defaults (both: docs/commands.md).
* **bilm-tf's** (``BiLMConfig.shared_token_layer``, one encoder for both directions): bilm-tf's numbering
  (:func:`elmo.data.chars.bilm_tf_char_ids`), ``char_cnn.activation``, no normalisation, a projection only when the
  filters' width differs from the token width.

Each distinct spelling is encoded once (``torch.unique`` or a host plan), in passes; all filter widths are one matrix
product over character windows in the biLM's compute dtype, ``nn.Conv1d``'s result up to float rounding. Parameters keep
``nn.Conv1d`` / ``nn.Linear`` layouts: ``convs.i``, ``highways.k`` = [transform; carry], ``projection``, ``norm``.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from ..data.chars import CHAR_PAD, NUM_CHARS, TF_NUM_CHARS, TF_PAD_CHAR
from ..errors import ElmoError
from .lstm import CachedWeights, cached, compute_dtype, matmul
from .plan import WordPlan

DEFAULT_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 128))
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}
#: the most distinct spellings encoded at a time by default
WORDS_PER_PASS = 256
#: the most on a GPU, where each pass costs some 90 kernel launches forward and backward and its arithmetic is nearly
#: free: a training step of 1,024 windows of 20 words (about 6,000 spellings) in 2 passes instead of 24; a pass of the
#: Original's 2,048 filters holds (4,096 · 50, 2,048) activations, 0.8 GiB in bf16
WORDS_PER_PASS_GPU = 4096
#: character numberings (:data:`elmo.data.chars.CHAR_SCHEMES`): the number of character ids and the in-word padding id
NUMBERINGS = {"elmo": (NUM_CHARS, CHAR_PAD), "bilm_tf": (TF_NUM_CHARS, TF_PAD_CHAR)}
#: the prefix under which our encoder's files hold its highway layers (``highway.layers.k``)
LEGACY_HIGHWAYS = "highway.layers."


class CharEncoder(CachedWeights):
    """Token vectors ``output_dim`` wide from characters (module docstring): ``char_dim``-wide character embeddings,
    ``filters`` ``(width, count)`` pairs, ``num_highway`` highway layers, ``max_chars`` C character positions per token
    (>= the widest filter), ``numbering`` ``"elmo"`` (ours) or ``"bilm_tf"``, ``activation`` after the max-pool
    (``relu`` or ``tanh``), ``layer_norm``: a layer normalisation after the projection (ours). Raises ElmoError on empty
    ``filters``, a filter wider than ``max_chars``, an unknown numbering or activation."""

    def __init__(self, output_dim: int, char_dim: int = 16, filters: Sequence[Sequence[int]] = DEFAULT_FILTERS,
                 num_highway: int = 1, max_chars: int = 20, *, numbering: str = "elmo", activation: str = "relu",
                 layer_norm: bool = False):
        super().__init__()
        filters = [(int(w), int(n)) for w, n in filters]
        if not filters or any(w < 1 or n < 1 for w, n in filters):
            raise ElmoError(f"char CNN filters must be non-empty (width, count) pairs, got {filters}")
        if max(w for w, _ in filters) > max_chars:
            raise ElmoError(f"the widest char filter ({max(w for w, _ in filters)}) exceeds max_chars ({max_chars})",
                            field="max_chars")
        if numbering not in NUMBERINGS or activation not in ACTIVATIONS:
            raise ElmoError(f"CharEncoder: numbering must be one of {list(NUMBERINGS)} and activation one of "
                            f"{list(ACTIVATIONS)}, got {numbering!r} and {activation!r}")
        num_chars, self.pad_char = NUMBERINGS[numbering]
        self.max_chars, self.max_width, self.activation = max_chars, max(w for w, _ in filters), ACTIVATIONS[activation]
        self.char_embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(char_dim, n, w) for w, n in filters)
        width = sum(n for _, n in filters)
        self.highways = nn.ModuleList(nn.Linear(width, 2 * width) for _ in range(num_highway))  # [transform; carry]
        for layer in self.highways:  # carry the input at first (gate bias 1, as AllenNLP; bilm-tf's own init sets -2)
            nn.init.constant_(layer.bias[width:], 1.0)
        self.projection = nn.Linear(width, output_dim) if width != output_dim or layer_norm else None
        self.norm = nn.LayerNorm(output_dim) if layer_norm else None
        self.register_buffer("filter_widths", torch.cat([torch.full((n,), w) for w, n in filters]), persistent=False)
        if numbering == "elmo":
            self.register_state_dict_post_hook(_legacy_names)
            self.register_load_state_dict_pre_hook(_current_names)

    def weights(self, dtype: torch.dtype) -> list[torch.Tensor | None]:
        """``[embedding, merged conv weight (F, max_width * char_dim), highway weights.., projection]`` in
        ``dtype`` (biases stay float32), built once while the parameters are unchanged."""
        def make() -> list[torch.Tensor | None]:
            merged = torch.cat([F.pad(c.weight, (0, self.max_width - c.weight.shape[-1])).flatten(1) for c in self.convs])
            mats = [merged, *(h.weight for h in self.highways), None if self.projection is None else self.projection.weight]
            return [self.char_embedding.weight.to(dtype), *(m if m is None else m.to(dtype) for m in mats)]
        sources = [self.char_embedding.weight, *(c.weight for c in self.convs), *(h.weight for h in self.highways),
                   None if self.projection is None else self.projection.weight]
        return cached(self._cache, "weights", sources, dtype, make)

    def forward(self, chars: torch.Tensor, words_per_pass: int = WORDS_PER_PASS, plan: WordPlan | None = None) -> torch.Tensor:
        """Token vectors ``(..., output_dim)`` float32 of ``chars (..., C)`` int64 character ids (an all-zero row is a
        padded token: a constant vector that callers mask); raises ElmoError when ``C`` is not ``max_chars``.
        ``words_per_pass``: the most distinct spellings encoded at a time, bounding the convolutions' ``(words · C,
        filters)`` activations; ``plan``: the distinct spellings and passes worked out on the host
        (:func:`~elmo.model.plan.word_plan`, ``chars`` flat ``(N, C)``): the same vectors, nothing read back.
        """
        if chars.shape[-1] != self.max_chars:
            raise ElmoError(f"expected {self.max_chars} character positions per token, got {chars.shape[-1]}")
        flat = chars.reshape(-1, chars.shape[-1])
        dtype = compute_dtype(chars.device.type)
        with torch.autocast(chars.device.type, enabled=False), record_function("elmo.token_layer"):
            weights = self.weights(dtype)
            if plan is not None:
                parts = [self.encode_distinct(plan.distinct[rows], weights, width) for rows, width in plan.passes]
                gather = plan.gather
            else:
                unique, inverse = torch.unique(flat, dim=0, return_inverse=True)
                order = torch.argsort(((unique != self.pad_char) & (unique != 0)).sum(dim=1), stable=True)
                parts = [self.encode_distinct(unique[rows], weights) for rows in order.split(max(1, words_per_pass))]
                gather = torch.argsort(order)[inverse]
        # index_select, not indexing: its backward adds repeated rows in a fixed order, so threaded CPU runs repeat
        return torch.cat(parts).index_select(0, gather).reshape(*chars.shape[:-1], -1)

    def encode_distinct(self, chars: torch.Tensor, weights: list[torch.Tensor | None],
                        keep: int | None = None) -> torch.Tensor:
        """Token vectors ``(N, output_dim)`` float32 of ``chars (N, C)`` with :meth:`weights`, reading the first
        ``keep`` columns (default: found on the device, the last real character's + 1 + the widest filter)."""
        embedding, conv, *mats = weights
        full = chars.shape[1]
        if keep is None:
            real = ((chars != self.pad_char) & (chars != 0)).any(dim=0).nonzero()
            keep = min(full, (int(real.max()) + 1 if len(real) else 0) + self.max_width)
        tail = chars.new_full((len(chars), self.max_width - 1), self.pad_char)
        x = F.embedding(torch.cat([chars[:, :keep], tail], dim=1), embedding)  # (N, C' + w - 1, char_dim)
        windows = x.unfold(1, self.max_width, 1).flatten(2)  # (N, C', char_dim * w), channel-major as conv's weight
        bias = torch.cat([c.bias for c in self.convs]).float()
        y = matmul(windows.flatten(0, 1), conv, bias).view(len(chars), keep, -1)
        beyond = torch.arange(keep, device=y.device).unsqueeze(1) > full - self.filter_widths  # windows past column C
        x = self.activation(y.masked_fill(beyond, float("-inf")).amax(dim=1))
        for layer, weight in zip(self.highways, mats):
            transform, carry = matmul(x, weight, layer.bias.float()).chunk(2, dim=-1)
            gate = torch.sigmoid(carry)
            x = gate * torch.relu(transform) + (1 - gate) * x
        x = x if self.projection is None else matmul(x, mats[-1], self.projection.bias.float())
        return x if self.norm is None else F.layer_norm(x, x.shape[-1:], self.norm.weight, self.norm.bias,
                                                        self.norm.eps)


def _legacy_names(module: nn.Module, state: dict, prefix: str, metadata: dict) -> None:
    """State-dict post-hook of our encoder: ``highways.k`` written as :data:`LEGACY_HIGHWAYS` ``k``, in place."""
    for key in list(state):  # every key popped and put back in turn: the order stays
        new = prefix + LEGACY_HIGHWAYS + key[len(prefix) + 9:] if key.startswith(prefix + "highways.") else key
        state[new] = state.pop(key)


def _current_names(module: nn.Module, state: dict, prefix: str, *args) -> None:
    """Load pre-hook of our encoder: :data:`LEGACY_HIGHWAYS` ``k`` read as ``highways.k``."""
    for key in [k for k in state if k.startswith(prefix + LEGACY_HIGHWAYS)]:
        state[prefix + "highways." + key[len(prefix + LEGACY_HIGHWAYS):]] = state.pop(key)
