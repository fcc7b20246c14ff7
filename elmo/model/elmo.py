"""The ELMo layer for downstream models: a pre-trained biLM + one or more layer mixes (paper §3.2-3.3).

:class:`Elmo` is the piece a task model embeds, as AllenNLP's ``Elmo`` module: token ids (and, for a character
biLM, character ids) in; ``num_output_representations`` ELMo vectors per token out, each with its own layer mix
(:mod:`elmo.model.mix`), with optional per-token layer normalisation (§3.2), dropout, an L2 penalty on the mix
weights (§3.3, :meth:`Elmo.penalty`) and fine-tuning of the biLM (``requires_grad=True``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.vocab import PAD_ID, Vocabulary
from ..errors import ElmoError
from .bilm import BiLM
from .dropout import FastDropout
from .hub import HubMixin, from_nested_config, nested_config
from .mix import LAYER_MIXES, ScalarMix, build_mix
from .published import PublishedBiLM

#: the constructor's arguments that ``config.json`` holds (all but ``bilm``)
ELMO_ARGS = ("num_output_representations", "mix", "dropout", "do_layer_norm", "requires_grad", "seed", "learned_function")


class Elmo(nn.Module, HubMixin):
    """ELMo_k = mix(h_{k,0}, .., h_{k,L}) for every token k, with dropout (paper eq. 1). ``save_pretrained`` /
    ``from_pretrained`` (:class:`~elmo.model.hub.HubMixin`) write and read it, its biLM included, as a folder.

    Args:
        bilm: a trained :class:`~elmo.model.bilm.BiLM` (e.g. ``load_bilm("models/bilstm.pt")[0]``) or the
            published one, :class:`~elmo.model.published.PublishedBiLM` (``load_published_bilm(options, weights)``;
            stateless: every sentence starts from zero LSTM states).
        num_output_representations: how many ELMo vectors per token, each with its own mix (>= 1).
        mix: the layer mix, one of :data:`~elmo.model.mix.LAYER_MIXES`.
        dropout: dropout on each ELMo vector (training only).
        do_layer_norm: normalise each biLM layer per token before mixing (§3.2).
        requires_grad: fine-tune the biLM (its weights get gradients); ``False`` freezes it and runs
            it without autograd. The biLM always runs in eval mode (no LM dropout) either way.
        seed: draws the fixed weights of ``frozen_lambda`` (output i uses ``seed + i``).
        learned_function: the network of ``mix="learned_function"``: ``"gate"`` (token-wise scalar mix,
            :class:`~elmo.model.mix.GatedLayerMix`) or ``"mlp"`` (:class:`~elmo.model.mix.LearnedLayerFunction`).

    Raises:
        ElmoError: unknown ``mix`` or ``learned_function``, ``num_output_representations < 1`` or ``dropout`` outside [0, 1).

    Shapes: ``ids (B, T)``, ``lengths (B,)``, ``chars (B, T, C)``; every ELMo vector ``(B, T, D)`` with
    ``D = bilm.output_dim`` (2 × the LSTM output width), zero at padded positions.
    """

    hub_kind = "elmo"

    def __init__(self, bilm: BiLM | PublishedBiLM, num_output_representations: int = 1, mix: str = "trainable_lambda",
                 dropout: float = 0.5, do_layer_norm: bool = False, requires_grad: bool = False, seed: int = 0,
                 learned_function: str = "gate"):
        super().__init__()
        if mix not in LAYER_MIXES:
            raise ElmoError(f"unknown layer mix {mix!r}; choose from {', '.join(LAYER_MIXES)}")
        if num_output_representations < 1:
            raise ElmoError(f"num_output_representations must be >= 1, got {num_output_representations}")
        if not 0.0 <= dropout < 1.0:
            raise ElmoError(f"ELMo dropout must be in [0, 1), got {dropout}")
        self.bilm = bilm
        self.requires_grad = requires_grad
        for p in self.bilm.parameters():
            p.requires_grad_(requires_grad)
        self.mixes = nn.ModuleList(build_mix(mix, bilm.num_layers, bilm.output_dim, seed=seed + i,
                                             layer_norm=do_layer_norm, learned_function=learned_function)
                                   for i in range(num_output_representations))
        self.dropout = FastDropout(dropout) if dropout else nn.Identity()  # p = 0 draws no random numbers

    @property
    def output_dim(self) -> int:
        """Width D of each ELMo vector."""
        return self.bilm.output_dim

    def hub_config(self) -> dict:
        """The constructor's arguments (``bilm``: its own config, :func:`~elmo.model.hub.nested_config`)."""
        return {**self._hub_mixin_config, "bilm": nested_config(self.bilm)}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: Vocabulary | None) -> "Elmo":
        """Inverse of :meth:`hub_config`."""
        return cls(from_nested_config(config["bilm"], vocab), **{k: v for k, v in config.items() if k in ELMO_ARGS})

    def describe(self) -> str:
        """The model card's paragraph."""
        return (f"An ELMo layer (Peters et al. 2018, eq. 1): {len(self.mixes)} weighted mix(es) of the layers of the biLM "
                f"below, each token's vector {self.output_dim} wide.\n\n{self.bilm.describe()}")

    def usage(self, repo_id: str) -> str:
        """The model card's code."""
        return (f"from elmo import Elmo\nelmo = Elmo.from_pretrained({repo_id!r})\n"
                "vectors = elmo(ids, lengths, chars)[\"elmo_representations\"][0]  # (B, T, D)")

    def train(self, mode: bool = True) -> "Elmo":
        """Train the mixes (and dropout); the biLM stays in eval mode."""
        super().train(mode)
        self.bilm.eval()
        return self

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None, chars: torch.Tensor | None = None,
                layers: torch.Tensor | None = None) -> dict[str, list[torch.Tensor] | torch.Tensor]:
        """ELMo vectors of a right-padded batch.

        Args:
            ids: ``(B, T)`` int64 word ids of the biLM's vocabulary, right-padded with 0 (``<pad>``).
            lengths: ``(B,)`` int64 true lengths; default: the count of non-padding ids per row.
            chars: ``(B, T, C)`` int64 character ids (:func:`elmo.data.chars.batch_char_ids`; bilm-tf's
                numbering for a published biLM, :func:`elmo.data.chars.bilm_tf_char_table`); required for a
                character biLM, ignored otherwise.
            layers: ``(L, B, T, D)`` precomputed LSTM layers h_1..h_L of this batch
                (:mod:`elmo.inference.layer_cache`, ``batch["layers"]``); the biLM's LSTMs are then not run, only its
                token layer h_0. Frozen biLM only.

        Returns:
            ``{"elmo_representations": [num_output_representations × (B, T, D)], "mask": (B, T) bool}``
            where mask is True at real tokens and the vectors are zero elsewhere.

        Raises:
            ElmoError: a row with no token (checked where ``lengths`` is on the host; on a GPU that check would wait
                for the device at every step, so the library's callers make it on the host: the corpora, the
                embedder and ``TextClassifier`` refuse empty texts before batching), ``ids`` not 2-d, ``chars``
                missing for a character biLM, or ``layers`` given to a biLM being fine-tuned.
        """
        if ids.dim() != 2:
            raise ElmoError(f"Elmo expects ids of shape (B, T), got {tuple(ids.shape)}")
        if lengths is None:
            lengths = (ids != PAD_ID).sum(dim=1)
        if lengths.device.type == "cpu" and bool((lengths < 1).any()):  # on a GPU a read: the callers check on the host
            raise ElmoError("Elmo got an empty sequence (a row with no token)")
        mask = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0) < lengths.unsqueeze(1)
        if layers is not None:
            if self.requires_grad:
                raise ElmoError("cached biLM layers cannot be used while fine-tuning the biLM")
            with torch.no_grad():
                h0 = self.bilm.token_layer(ids, lengths, chars)
            layers = torch.cat([h0.unsqueeze(0), layers])  # (L+1, B, T, D) in h0's dtype: cat casts as it copies
        else:
            with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
                layers = self.bilm(ids, lengths, chars)  # (L+1, B, T, D)
        keep = mask.unsqueeze(-1)
        reps = [self.dropout(mix(layers)).masked_fill(~keep, 0.0) for mix in self.mixes]
        return {"elmo_representations": reps, "mask": mask}

    def penalty(self) -> torch.Tensor:
        """Σ over trainable scalar mixes of ‖w‖² (the un-normalised weights; softmax(0) is the plain
        average, so the penalty pulls λ toward 1/(L+1); paper §3.3, as bilm-tf). 0 for other mixes.

        Returns:
            A scalar tensor; multiply by the coefficient λ and add it to the task loss.
        """
        terms = [(m.weights ** 2).sum() for m in self.mixes if isinstance(m, ScalarMix) and m.weights.requires_grad]
        return torch.stack(terms).sum() if terms else torch.zeros(())

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """The biLM's parameters from the top down, for discriminative learning rates and gradual
        unfreezing: ``[LSTM layer L of both directions, .., LSTM layer 1, both token encoders]``
        (the LM softmaxes are not part of ELMo and never get gradients)."""
        if isinstance(self.bilm, PublishedBiLM):
            return self.bilm.layer_groups()
        lms = (self.bilm.forward_lm, self.bilm.backward_lm)
        groups = [[p for lm in lms for p in lm.layers[j].parameters()] for j in reversed(range(len(lms[0].layers)))]
        groups.append([p for lm in lms for p in lm.embedding.parameters()])
        return groups
