"""Training the published (bilm-tf) ELMo architecture (``python -m elmo pretrain --architecture``):
:class:`~elmo.model.published.PublishedBiLM` plus **one softmax** over the training vocabulary, shared by both
directions (:data:`~elmo.model.bilm.SOFTMAXES`: :class:`~elmo.model.sampled_softmax.SampledSoftmax` or
:class:`~elmo.model.adaptive_softmax.AdaptiveSoftmax`).

Source: Peters et al. (2018) §3.1 and bilm-tf's ``bilm/training.py``: the forward LM reads ``<S> t_1 .. t_n`` and
predicts ``t_1 .. t_n </S>``, the backward LM the reverse, both from the one token layer; the loss is the mean of the
two directions' (``0.5 * (loss_fwd + loss_bwd)``); held-out perplexities are exact. Unlike bilm-tf, each sentence is
read from zero LSTM states (:meth:`~elmo.model.published.PublishedBiLM.forward`). Word ids are
:class:`~elmo.data.vocab.Vocabulary` ids (``<bos>`` ↔ ``<S>``, ``<eos>`` ↔ ``</S>``, ``<unk>`` ↔ ``<UNK>``); the
softmax is saved only in the model's ``save_pretrained`` folder (``elmo_kind`` ``published_lm``, :mod:`elmo.model.hub`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from ..data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from ..errors import ElmoError
from .adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax
from .bilm import check_head, length_mask, reverse_padded
from .dropout import FastDropout
from .hub import HubMixin
from .plan import HostPlan, host_plan
from .published import PublishedBiLM, PublishedBiLMConfig
from .sampled_softmax import BILM_TF_SAMPLES, SampledSoftmax

#: ``--softmax``'s default: faster to a given held-out perplexity on the CPU (lab/experiments.md, ``softmax_choice``)
DEFAULT_SOFTMAX = "adaptive"
DIRECTION_NAMES = ("forward", "backward")


@dataclass(frozen=True)
class PublishedSoftmaxConfig:
    """The training head of a :class:`PublishedBiLMWithSoftmax` (bilm-tf's ``options.json`` training keys
    ``n_tokens_vocab``, ``dropout``, ``n_negative_samples_batch``).

    Attributes:
        vocab_size: V, the softmax's classes (the :class:`~elmo.data.vocab.Vocabulary` with its 4 specials).
        softmax: ``"sampled"`` or ``"adaptive"`` (:data:`~elmo.model.bilm.SOFTMAXES`).
        samples: sampled softmax: candidates per batch and direction (clipped to V).
        cutoffs, div_value: adaptive softmax: cluster boundaries (word ids) and tail shrink factor.
        dropout: on every LSTM layer's input and before the softmax, training only (bilm-tf: 0.1).

    Raises:
        ElmoError: a value out of range, naming the field.
    """

    vocab_size: int
    softmax: str = DEFAULT_SOFTMAX
    samples: int = BILM_TF_SAMPLES
    cutoffs: tuple[int, ...] = field(default=(1000, 5000, 15000))
    div_value: float = 4.0
    dropout: float = 0.1

    def __post_init__(self):
        object.__setattr__(self, "cutoffs", tuple(int(c) for c in self.cutoffs))
        if self.vocab_size < 5:
            raise ElmoError(f"PublishedSoftmaxConfig.vocab_size must be >= 5 (4 specials and a word), got {self.vocab_size}",
                            field="PublishedSoftmaxConfig.vocab_size")
        check_head("PublishedSoftmaxConfig", self.softmax, self.samples, self.dropout)


def bilm_tf_initialization(bilm: PublishedBiLM, generator: torch.Generator) -> PublishedBiLM:
    """``bilm`` with bilm-tf's initial weights (``bilm/training.py``), drawn in place from ``generator``: character
    embeddings U(-1, 1) (row 0, a masked token's, zero); convolutions U(-0.05, 0.05) for relu (Kim et al. 2015),
    N(0, 1/(width·char_dim)) for tanh, biases 0; highway ``W_carry``, ``W_transform`` and the projection N(0, 1/F),
    ``b_carry`` -2 (carry gate mostly closed), other biases 0; LSTM weights Glorot-uniform (TF's default) over TF's
    ``W_0`` ``(I + P, 4H)`` and ``W_P_0`` ``(H, P)``, bias 0 plus TF's forget-gate bias 1.0."""
    config, encoder = bilm.config, bilm.token_encoder

    def uniform(p: torch.Tensor, bound: float) -> None:
        p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)

    def normal(p: torch.Tensor, std: float) -> None:
        p.copy_(torch.randn(p.shape, generator=generator) * std)

    width = config.n_filters
    with torch.no_grad():
        uniform(encoder.char_embedding.weight, 1.0)
        encoder.char_embedding.weight[0].zero_()
        for (w, _), conv in zip(config.filters, encoder.convs):
            uniform(conv.weight, 0.05) if config.activation == "relu" else normal(conv.weight, (w * config.char_dim) ** -0.5)
            conv.bias.zero_()
        for highway in encoder.highways:
            normal(highway.weight, width ** -0.5)
            highway.bias.zero_()
            highway.bias[width:].fill_(-2.0)  # [transform; carry]
        if encoder.projection is not None:
            normal(encoder.projection.weight, width ** -0.5)
            encoder.projection.bias.zero_()
    for lstm in (lstm for stack in bilm.stacks() for lstm in stack):
        lstm.initialize(generator)
    return bilm


class PublishedBiLMWithSoftmax(nn.Module, HubMixin):
    """The published architecture with its training softmax (module docstring): ``bilm``, the exported and embedded
    :class:`~elmo.model.published.PublishedBiLM` (``bilm_config``: :class:`~elmo.model.published.PublishedBiLMConfig`),
    and ``softmax``, shared by both directions (``config``: :class:`PublishedSoftmaxConfig`); ``seed`` alone sets the
    initial weights (:func:`bilm_tf_initialization`). ``save_pretrained`` / ``from_pretrained``
    (:class:`~elmo.model.hub.HubMixin`) write and read it with its vocabulary: the folder ``pretrain --architecture``
    and ``finetune`` write.

    The methods take ``ids (B, T)`` int64 :class:`~elmo.data.vocab.Vocabulary` ids (the targets), ``lengths (B,)``,
    ``chars (B, T, 50)`` bilm-tf character ids (:func:`elmo.data.chars.bilm_tf_char_table`; required), no sentence
    boundaries; ``direction`` 0 (forward) or 1 (backward); ``plan``, the batch's :meth:`host_plan`.
    """

    def __init__(self, bilm_config: PublishedBiLMConfig, config: PublishedSoftmaxConfig, seed: int = 0):
        super().__init__()
        self.config = config
        self.bilm = bilm_tf_initialization(PublishedBiLM(bilm_config), torch.Generator().manual_seed(seed))
        self.dropout = FastDropout(config.dropout)
        width = bilm_config.projection_dim
        with torch.random.fork_rng(devices=[]):  # the initial weights are a function of ``seed`` alone
            torch.manual_seed(seed)
            self.softmax = SampledSoftmax(width, config.vocab_size, config.samples) if config.softmax == "sampled" \
                else AdaptiveSoftmax(width, config.vocab_size, config.cutoffs, config.div_value)

    hub_kind = "published_lm"

    def hub_config(self) -> dict[str, Any]:
        """``{"config": the biLM's config (as :class:`~elmo.model.published.PublishedBiLM` saves it), "softmax":
        PublishedSoftmaxConfig as a dict}`` (:class:`~elmo.model.hub.HubMixin`)."""
        return {**self.bilm.hub_config(), "softmax": asdict(self.config)}

    @classmethod
    def from_hub_config(cls, config: dict[str, Any], vocab: Vocabulary | None) -> "PublishedBiLMWithSoftmax":
        """Inverse of :meth:`hub_config`. Raises ElmoError: no vocabulary, or one of another size than the softmax."""
        model = cls(PublishedBiLMConfig(**config["config"]), PublishedSoftmaxConfig(**config["softmax"]))
        if vocab is None or len(vocab) != model.config.vocab_size:
            raise ElmoError(f"softmax.vocab_size is {model.config.vocab_size} but vocab.txt holds "
                            f"{'no vocabulary' if vocab is None else f'{len(vocab)} words'}")
        return model

    def loaded(self, folder: Path) -> None:
        """After ``from_pretrained``: the biLM inside gets the vocabulary and the card (its own ``loaded`` then sets
        its weights' digest and ``source``, the folder)."""
        self.bilm.vocab, self.bilm.card = self.vocab, self.card

    def describe(self) -> str:
        """The model card's paragraph: the biLM's, and the softmax it was trained with."""
        return (f"{self.bilm.describe()} Saved with the {self.config.softmax} softmax it was trained with, shared by "
                f"both directions, over a vocabulary of {self.config.vocab_size:,} words.")

    def targets(self, ids: torch.Tensor, lengths: torch.Tensor, direction: int) -> torch.Tensor:
        """One direction's targets ``(B, T + 1)`` int64 in its reading order, ``IGNORE_INDEX`` past ``n + 1``."""
        batch = ids.shape[0]
        full = torch.cat([ids.new_full((batch, 1), BOS_ID), ids, ids.new_full((batch, 1), PAD_ID)], dim=1)
        full[torch.arange(batch, device=ids.device), lengths + 1] = EOS_ID
        full = full if direction == 0 else reverse_padded(full, lengths + 2)
        return full[:, 1:].masked_fill(~length_mask(lengths + 1, ids.shape[1] + 1), IGNORE_INDEX)

    def _tops(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None,
              directions: Sequence[int], plan: HostPlan | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(top (n, P), targets (n,))`` of each direction's predicted positions, dropout applied in training; with
        ``plan`` the positions are :attr:`~elmo.model.plan.HostPlan.kept`, not a boolean mask."""
        lengths = lengths.to(ids.device)
        states = self.bilm.reading_states(chars, lengths, directions, self.dropout if self.training else None, plan)
        out = []
        for d, top in zip(directions, states):
            targets = self.targets(ids, lengths, d)
            if plan is None:
                keep = targets != IGNORE_INDEX
                out.append((self.dropout(top[keep]), targets[keep]))
            else:
                out.append((self.dropout(top.reshape(-1, top.shape[-1]).index_select(0, plan.kept)),
                            targets.reshape(-1).index_select(0, plan.kept)))
        return out

    #: the batch entries a training step's plan is made from, as they were on the host (``Objective.host_keys``)
    host_keys = ("ids", "lengths", "chars")

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan:
        """:func:`~elmo.model.plan.host_plan` of a batch's CPU copies of :attr:`host_keys`, on the host
        (:func:`~elmo.model.plan.step_loss` moves it to the batch's device).

        Raises:
            ElmoError: a copy missing or not on the CPU; a target outside the vocabulary.
        """
        missing = [k for k in ("ids", "lengths", "chars") if k not in host]
        if missing:
            raise ElmoError(f"PublishedBiLMWithSoftmax.host_plan: the batch's host copy has no {', '.join(missing)}")
        adaptive = isinstance(self.softmax, AdaptiveSoftmax)
        return host_plan(host["ids"], host["lengths"], host["chars"], self.bilm.host_boundary_chars,
                         self.bilm.words_per_pass, self.bilm.token_encoder.max_width,
                         tuple(self.softmax.cutoffs) if adaptive else None)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                directions: Sequence[int] = (0, 1), plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """Training loss ``(loss, n)``: the mean over ``directions`` of each direction's mean negative log-likelihood,
        nats per predicted word (in eval mode exact: ``exp(loss)`` is the batch's perplexity; in training the sampled
        softmax's estimate), and ``n = sum(lengths + 1)``, the words each direction predicts. With ``plan`` nothing is
        read back from the device (:func:`~elmo.model.plan.step_loss`); loss and gradients are the same bit for bit.

        Raises:
            ElmoError: ``chars`` missing.
        """
        losses = []
        for d, (top, targets) in zip(directions, self._tops(ids, lengths, chars, directions, plan)):
            if isinstance(self.softmax, SampledSoftmax):
                losses.append(self.softmax(top, targets))
            else:
                counts = None if plan is None else plan.cluster_counts[d]
                losses.append(self.softmax.loss(top, targets, counts)[0])
        return torch.stack(losses).mean(), int((lengths + 1).sum()) if plan is None else plan.units

    def direction(self, name: str) -> "PublishedDirection":
        """Direction ``"forward"`` or ``"backward"`` as a language model of its own (:class:`PublishedDirection`)."""
        return PublishedDirection(self, DIRECTION_NAMES.index(name))


class PublishedDirection(nn.Module):
    """One direction of a :class:`PublishedBiLMWithSoftmax` with the interface :mod:`elmo.training.evaluation` reads
    from a :class:`~elmo.model.bilm.LanguageModel` (``direction``, ``vocab_size``, ``forward`` → ``(loss, n)``, ``log_probs``,
    ``predicted_states``, ``vocabulary_log_probs``), for per-direction held-out perplexities; runs only its LSTMs."""

    def __init__(self, model: PublishedBiLMWithSoftmax, direction: int):
        super().__init__()
        self.model, self.index, self.direction = model, direction, DIRECTION_NAMES[direction]

    @property
    def vocab_size(self) -> int:
        """V, the words the shared softmax predicts (:attr:`PublishedSoftmaxConfig.vocab_size`)."""
        return self.model.config.vocab_size

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
        """``(mean NLL, n)`` of this direction (:meth:`PublishedBiLMWithSoftmax.forward`)."""
        return self.model(ids, lengths, chars, [self.index])

    @torch.no_grad()
    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor,
                         chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """This direction's top states ``(n, P)`` float32 at its ``n`` predicted positions and their targets ``(n,)``
        (:meth:`~elmo.model.bilm.LanguageModel.predicted_states`)."""
        [(top, targets)] = self.model._tops(ids, lengths, chars, [self.index])
        return top.float(), targets

    @torch.no_grad()
    def vocabulary_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities ``(n, V)`` float32 of every word after each of the ``n`` states ``(n, P)`` (the
        directions share the softmax)."""
        return self.model.softmax.log_prob(states)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor,
                  chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`vocabulary_log_probs` of :meth:`predicted_states`: ``(n, V)`` float32 and the ``n`` word ids."""
        states, targets = self.predicted_states(ids, lengths, chars)
        return self.vocabulary_log_probs(states), targets
