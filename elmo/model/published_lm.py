"""Training the published (bilm-tf) ELMo architecture: :class:`~elmo.model.published.PublishedBiLM` plus a softmax
over the training vocabulary (``python -m elmo pretrain --architecture``).

Source: Peters et al. (2018) §3.1 and bilm-tf's ``bilm/training.py``: the forward LM reads ``<S> t_1 .. t_n`` and
predicts ``t_1 .. t_n </S>``, the backward LM the reverse; both read the one token layer and share **one softmax**
(``sampled``, :class:`~elmo.model.sampled_softmax.SampledSoftmax`, or ``adaptive``,
:class:`elmo.model.adaptive_softmax.AdaptiveSoftmax`: :data:`~elmo.model.bilm.SOFTMAXES`); the loss is the mean of the two directions' (bilm-tf's
``0.5 * (loss_fwd + loss_bwd)``), and held-out perplexities are exact. Unlike bilm-tf, sentences are read one at a
time from zero LSTM states, as :meth:`~elmo.model.published.PublishedBiLM.forward` reads them. Word ids are
:class:`~elmo.data.vocab.Vocabulary` ids (``<bos>`` ↔ ``<S>``, ``<eos>`` ↔ ``</S>``, ``<unk>`` ↔ ``<UNK>``); the
softmax is saved only in the model file (:func:`elmo.model.serialization.save_published_lm`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn

from ..data.vocab import BOS_ID, EOS_ID, PAD_ID
from ..errors import ElmoError
from .adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax
from .bilm import check_head, length_mask, reverse_padded
from .dropout import FastDropout
from .plan import HostPlan, host_plan
from .published import PublishedBiLM, PublishedBiLMConfig
from .sampled_softmax import BILM_TF_SAMPLES, SampledSoftmax

#: ``--softmax``'s default: the one that reached a given held-out perplexity sooner on the CPU
#: (lab/experiments.md, ``softmax_choice``)
DEFAULT_SOFTMAX = "adaptive"
DIRECTION_NAMES = ("forward", "backward")


@dataclass(frozen=True)
class PublishedSoftmaxConfig:
    """The training head of a :class:`PublishedBiLMWithSoftmax` (what bilm-tf's ``options.json`` keeps under its
    training keys ``n_tokens_vocab``, ``dropout``, ``n_negative_samples_batch``).

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
    """bilm-tf's initial weights (``bilm/training.py``): character embeddings U(-1, 1) (row 0, a masked token's,
    zero); convolutions U(-0.05, 0.05) for relu (Kim et al. 2015), N(0, 1/(width·char_dim)) for tanh, biases 0;
    highway ``W_carry``, ``W_transform`` and the projection N(0, 1/F), ``b_carry`` -2 (the carry gate starts mostly
    closed), other biases 0; LSTM weights Glorot-uniform over TF's ``W_0`` ``(I + P, 4H)`` and ``W_P_0`` ``(H, P)``
    (TF's default initialiser), bias 0 plus TF's forget-gate bias 1.0."""
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
    for lstm in (*bilm.forward_layers, *bilm.backward_layers):
        lstm.initialize(generator)
    return bilm


class PublishedBiLMWithSoftmax(nn.Module):
    """The published architecture with its training softmax (module docstring): ``bilm`` (a
    :class:`~elmo.model.published.PublishedBiLM`, what is exported and embedded with) and ``softmax`` shared by both
    directions.

    Args:
        bilm_config: the architecture (:class:`~elmo.model.published.PublishedBiLMConfig`); config: the training head
            (:class:`PublishedSoftmaxConfig`); seed: of :func:`bilm_tf_initialization`.

    Shapes: ``ids (B, T)`` int64 :class:`~elmo.data.vocab.Vocabulary` ids (the targets), ``lengths (B,)``, ``chars
    (B, T, 50)`` bilm-tf character ids (:func:`elmo.data.chars.bilm_tf_char_table`), no sentence boundaries.
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

    def targets(self, ids: torch.Tensor, lengths: torch.Tensor, direction: int) -> torch.Tensor:
        """The words one direction predicts, ``(B, T + 1)`` int64 in its reading order (module docstring),
        ``IGNORE_INDEX`` past ``n + 1``."""
        batch = ids.shape[0]
        full = torch.cat([ids.new_full((batch, 1), BOS_ID), ids, ids.new_full((batch, 1), PAD_ID)], dim=1)
        full[torch.arange(batch, device=ids.device), lengths + 1] = EOS_ID
        full = full if direction == 0 else reverse_padded(full, lengths + 2)
        return full[:, 1:].masked_fill(~length_mask(lengths + 1, ids.shape[1] + 1), IGNORE_INDEX)

    def _tops(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None,
              directions: Sequence[int], plan: HostPlan | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(top (n, P), targets (n,))`` of each direction's predicted positions, dropout applied in training
        (``plan``: the positions from the host, :func:`~elmo.model.plan.host_plan`, not a boolean mask)."""
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
        """The :class:`~elmo.model.plan.HostPlan` of a batch from its host copies ``{"ids", "lengths",
        "chars"}`` (CPU tensors), on this model's device (:func:`~elmo.model.plan.step_loss` calls it).

        Raises:
            ElmoError: a copy missing or not on the CPU; a target outside the vocabulary.
        """
        missing = [k for k in ("ids", "lengths", "chars") if k not in host]
        if missing:
            raise ElmoError(f"PublishedBiLMWithSoftmax.host_plan: the batch's host copy has no {', '.join(missing)}")
        adaptive = isinstance(self.softmax, AdaptiveSoftmax)
        plan = host_plan(host["ids"], host["lengths"], host["chars"], self.bilm.host_boundary_chars,
                         self.bilm.words_per_pass, self.bilm.token_encoder.max_width,
                         tuple(self.softmax.cutoffs) if adaptive else None)
        return plan.to(self.bilm.boundary_chars.device)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                directions: Sequence[int] = (0, 1), plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """Training loss (and, in eval mode, the exact held-out one). ``plan``: the batch's :meth:`host_plan` (from
        its CPU copies, the trainer's ``Objective.host_keys``): everything that depends on the batch's shape is then
        known without reading the device, and nothing is read back (with the adaptive softmax; the sampled one draws
        its candidates on the device); the same loss and gradients bit for bit.

        Returns:
            ``(loss, n)``: the mean over ``directions`` of each direction's mean negative log-likelihood, nats per
            predicted word (in eval mode exact: ``exp(loss)`` is the batch's perplexity; in training the sampled
            softmax's estimate), and ``n = sum(lengths + 1)``, the words each direction predicts.

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

    @torch.no_grad()
    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                         direction: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """One direction's top state ``(n, P)`` float32 at each of its ``n`` predicted positions and the word ids
        ``(n,)`` it predicts there (the input of :meth:`vocabulary_log_probs`)."""
        [(top, targets)] = self._tops(ids, lengths, chars, [direction])
        return top.float(), targets

    @torch.no_grad()
    def vocabulary_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities ``(n, V)`` float32 of every word after each of the ``n`` states ``(n, P)``."""
        return self.softmax.log_prob(states)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                  direction: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact full-vocabulary log-probabilities ``(n, V)`` float32 of one direction's ``n`` predicted words and
        their ids ``(n,)``."""
        states, targets = self.predicted_states(ids, lengths, chars, direction)
        return self.vocabulary_log_probs(states), targets

    def direction(self, name: str) -> "PublishedDirection":
        """One direction as a language model of its own (:class:`PublishedDirection`): ``"forward"`` or ``"backward"``."""
        return PublishedDirection(self, DIRECTION_NAMES.index(name))


class PublishedDirection(nn.Module):
    """One direction of a :class:`PublishedBiLMWithSoftmax` with the interface :mod:`elmo.training.evaluation` reads
    from a :class:`~elmo.model.bilm.LanguageModel` (``direction``, ``forward`` → ``(loss, n)``, ``log_probs``,
    ``predicted_states``, ``vocabulary_log_probs``):
    the per-direction held-out perplexities. Runs only that direction's LSTMs."""

    def __init__(self, model: PublishedBiLMWithSoftmax, direction: int):
        super().__init__()
        self.model, self.index, self.direction = model, direction, DIRECTION_NAMES[direction]

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
        """``(mean NLL, n)`` of this direction (:meth:`PublishedBiLMWithSoftmax.forward`)."""
        return self.model(ids, lengths, chars, [self.index])

    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor,
                  chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`PublishedBiLMWithSoftmax.log_probs` of this direction."""
        return self.model.log_probs(ids, lengths, chars, self.index)

    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor,
                         chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`PublishedBiLMWithSoftmax.predicted_states` of this direction."""
        return self.model.predicted_states(ids, lengths, chars, self.index)

    def vocabulary_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """:meth:`PublishedBiLMWithSoftmax.vocabulary_log_probs` (the directions share the softmax)."""
        return self.model.vocabulary_log_probs(states)
