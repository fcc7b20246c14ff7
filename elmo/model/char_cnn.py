"""The character-level token encoder of the paper's biLM (Peters et al. 2018, §3.1; Józefowicz et al. 2016).

With ``--token-encoder char`` each token's representation x_k is computed from its characters (the word's UTF-8
bytes with word-boundary marks, :mod:`elmo.data.chars`) instead of looked up in a word table, so *every* word, OOV
included, gets its own vector; the output softmax still predicts words of the word vocabulary.

Encoder (:class:`CharCNN`): character embedding → 1-d convolutions of several widths, each max-pooled over the word
→ ReLU → highway layers (Srivastava et al. 2015) → linear projection to the token width → layer normalisation. The
last step is ours, not the paper's: it keeps x_k at the unit scale of the word embeddings, where unnormalised ReLU
features saturated the LSTM gates (docs/commands.md). The default sizes (widths 1-5, 384 filters, 1
highway layer) are smaller than the paper's (widths 1-7, 2048 filters, 2 highway layers), sized for a CPU.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ..data.chars import CHAR_PAD, NUM_CHARS
from ..errors import ElmoError

DEFAULT_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 128))


class Highway(nn.Module):
    """y = g ⊙ ReLU(W_h x) + (1 − g) ⊙ x with g = σ(W_g x), per layer (Srivastava et al. 2015).

    Args:
        dim: input and output width; num_layers: stacked highway layers (>= 0).
    """

    def __init__(self, dim: int, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(num_layers))
        for layer in self.layers:  # carry the input at first (gate bias 1, as bilm-tf / AllenNLP)
            nn.init.constant_(layer.bias[dim:], 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x ``(..., dim)``. Returns the same shape."""
        for layer in self.layers:
            transform, gate = layer(x).chunk(2, dim=-1)
            g = torch.sigmoid(gate)
            x = g * torch.relu(transform) + (1 - g) * x
        return x


class CharCNN(nn.Module):
    """Token vectors from characters: embedding → convolutions + max-pool → highway → projection → layer
    norm (§3.1; the layer norm is ours, see the module docstring).

    Each distinct spelling in a batch is encoded once (``torch.unique`` over the character rows), so
    the cost scales with the number of distinct words per batch, not with the number of tokens.

    Args:
        output_dim: width of the token vector (the LM's ``embedding_dim``).
        char_dim: character embedding width.
        filters: ``(width, number of filters)`` pairs.
        num_highway: highway layers over the concatenated filter outputs.
        max_chars: C, the character positions per token (must be >= the widest filter).

    Raises:
        ElmoError: empty ``filters`` or a filter wider than ``max_chars``.
    """

    def __init__(self, output_dim: int, char_dim: int = 16, filters: Sequence[Sequence[int]] = DEFAULT_FILTERS,
                 num_highway: int = 1, max_chars: int = 20):
        super().__init__()
        filters = [(int(w), int(n)) for w, n in filters]
        if not filters or any(w < 1 or n < 1 for w, n in filters):
            raise ElmoError(f"char CNN filters must be non-empty (width, count) pairs, got {filters}")
        if max(w for w, _ in filters) > max_chars:
            raise ElmoError(f"the widest char filter ({max(w for w, _ in filters)}) exceeds max_chars ({max_chars})",
                            field="max_chars")
        self.max_chars = max_chars
        self.char_embedding = nn.Embedding(NUM_CHARS, char_dim, padding_idx=CHAR_PAD)
        self.convs = nn.ModuleList(nn.Conv1d(char_dim, n, w) for w, n in filters)
        width = sum(n for _, n in filters)
        self.highway = Highway(width, num_highway)
        self.projection = nn.Linear(width, output_dim)
        self.norm = nn.LayerNorm(output_dim)

    def encode_words(self, chars: torch.Tensor) -> torch.Tensor:
        """Args: chars ``(N, C)`` int64 character ids. Returns ``(N, output_dim)`` token vectors."""
        x = self.char_embedding(chars).transpose(1, 2)  # (N, char_dim, C)
        pooled = [torch.relu(conv(x).amax(dim=-1)) for conv in self.convs]
        return self.norm(self.projection(self.highway(torch.cat(pooled, dim=-1))))

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """Args: chars ``(B, T, C)`` int64. Returns ``(B, T, output_dim)``; an all-zero (padding) row gives
        a constant vector that callers mask."""
        if chars.shape[-1] != self.max_chars:
            raise ElmoError(f"expected {self.max_chars} character positions per token, got {chars.shape[-1]}")
        flat = chars.reshape(-1, chars.shape[-1])
        unique, inverse = torch.unique(flat, dim=0, return_inverse=True)
        # index_select: its backward is deterministic on a multi-threaded CPU (CharTokenEncoder.forward says why)
        return self.encode_words(unique).index_select(0, inverse).reshape(*chars.shape[:-1], -1)

