"""One direction of a biLM as a language model (Peters et al. 2018, §3.1): :class:`LanguageModel`, a direction's LSTM
layers (ours: also its token encoder and softmax); :class:`PublishedLM`, bilm-tf's architecture over one direction or
both (its directions share the token layer and the softmax, :class:`~elmo.model.bilm.BiLM`); the :class:`Direction`
interface that training and evaluation read; and the sequence helpers both use (reversal within each row's length,
masks, sentence boundaries). Shapes: :class:`~elmo.model.bilm.BiLM`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import nn

from ..data.chars import word_char_ids
from ..data.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD_ID
from ..errors import ElmoError
from .adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax, cluster_counts
from .bilm_config import BiLMConfig
from .char_cnn import CharEncoder
from .dropout import FastDropout
from .hub import renamed_key
from .lstm import AutocastLSTM, CachedWeights, ProjectedLSTM, cached, compute_dtype, projected_stack, step_chunks
from .plan import HostPlan, device_reading_plan, predicted_positions
from .sampled_softmax import SampledSoftmax

DIRECTIONS = ("forward", "backward")
#: LSTM states of a biLM: ``[(h, c)]`` for the forward layers 1..L then the backward ones, ``h (B, output width)``,
#: ``c (B, cells)`` float32, row b = batch row b (stateful use: :meth:`~elmo.model.bilm.BiLM.contextual` with
#: ``carry=True``)
States = list[tuple[torch.Tensor, torch.Tensor]]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of a right-padded ``x (B, T)`` or ``(B, T, D)`` within ``lengths (B,)`` int64 (padding stays at
    the end; ``index[b, t] = lengths[b] - 1 - t`` for ``t < lengths[b]``, else ``t``); its own inverse. A 3-d ``x``
    moves whole ``D``-wide rows (``index_select``, backward ``index_add_``), several times faster than a per-element
    ``gather`` and its ``scatter_add_`` (lab/performance.md)."""
    positions, ends = torch.arange(x.shape[1], device=lengths.device).unsqueeze(0), lengths.unsqueeze(1)
    index = torch.where(positions < ends, ends - 1 - positions, positions)
    if x.dim() == 2:
        return x.gather(1, index)
    rows = index + torch.arange(0, x.shape[0] * x.shape[1], x.shape[1], device=index.device).unsqueeze(1)
    return x.flatten(0, 1).index_select(0, rows.flatten()).view_as(x)


def length_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """``(B, T)`` bool mask, True at real tokens."""
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def with_boundaries(x: torch.Tensor, lengths: torch.Tensor, bounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``<bos> x_1 .. x_n <eos>`` of right-padded token vectors ``x (B, T, W)``, ``bounds (2, W)`` the boundaries'
    vectors: ``(B, T + 2, W)`` float32, zero past ``<eos>``, and the lengths ``n + 2``
    (:meth:`~elmo.model.bilm.BiLM.contextual`, both architectures)."""
    batch, longest, width = x.shape
    mask = length_mask(lengths, longest).unsqueeze(-1)
    end = torch.zeros(batch, 1, width, device=x.device)
    full = torch.cat([bounds[0].float().expand(batch, 1, -1), x.float() * mask, end], dim=1)
    full[torch.arange(batch, device=x.device), lengths + 1] = bounds[1].float()
    return full, lengths + 2


class Direction(nn.Module):
    """The base of :class:`LanguageModel` and :class:`PublishedLM` (module docstring): training
    (:func:`~elmo.training.trainer.fit`) calls it for ``(mean NLL, n)``; held-out evaluation
    (:func:`~elmo.training.evaluation.evaluate_words`) reads ``predicted_states`` and :meth:`vocabulary_log_probs`,
    scored here from a subclass's ``config``, ``softmax`` and ``predicted_states`` (shapes: :class:`LanguageModel`'s)."""

    #: ``"forward"`` or ``"backward"``
    direction: str

    @property
    def vocab_size(self) -> int:
        """V, the words the softmax predicts (:attr:`BiLMConfig.vocab_size`)."""
        return self.config.vocab_size

    @torch.no_grad()
    def vocabulary_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities ``(n, V)`` float32 of every vocabulary word after each of :meth:`predicted_states`'
        ``(n, D)`` (the softmax's full distribution; bilm-tf's architecture: the one its directions share)."""
        return self.softmax.log_prob(states)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor,
                  chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact full-vocabulary log-probabilities of every predicted word (evaluation): ``(log_probs (n, V) float32,
        targets (n,) int64)`` over the batch's ``n`` predicted positions (:meth:`predicted_states`)."""
        states, targets = self.predicted_states(ids, lengths, chars)
        return self.vocabulary_log_probs(states), targets


class LanguageModel(CachedWeights, Direction):
    """One direction of the biLM, ``"forward"`` (predict the next word) or ``"backward"``, sized by ``config``
    (:class:`BiLMConfig`): token encoder → L unidirectional LSTM layers → softmax; of bilm-tf's architecture only the
    LSTM layers (module docstring). Methods take ``ids``, ``lengths`` and, for a character encoder, ``chars`` as
    :class:`~elmo.model.bilm.BiLM` (:func:`elmo.data.chars.word_char_ids` per token; the ids are then only prediction
    targets). Raises ElmoError: unknown ``direction``; ``chars`` missing for a character model.
    """

    def __init__(self, config: BiLMConfig, direction: str):
        super().__init__()
        if direction not in DIRECTIONS:
            raise ElmoError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.config, self.direction = config, direction
        if config.token_encoder == "char" and not config.shared_token_layer:
            self.embedding = CharEncoder(config.embedding_dim, config.char_dim, config.char_filters, config.num_highway,
                                         config.max_chars, layer_norm=True)
            start, _ = (BOS, EOS) if direction == "forward" else (EOS, BOS)
            self.register_buffer("start_chars", torch.tensor(word_char_ids(start, config.max_chars)), persistent=False)
        elif config.token_encoder == "word":  # bilm-tf's (``shared_token_layer``) is always "char"
            self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=PAD_ID)
        sizes = [config.embedding_dim] + [config.output_size] * config.num_layers
        # one LSTM per layer (not one multi-layer nn.LSTM), so every layer's states are exposed
        # bilm-tf's cells are filled by a loader or bilm_tf_initialization; ours clipped: bilm-tf's initialisation
        self.layers = nn.ModuleList(
            ProjectedLSTM(i, config.hidden_size, config.output_size, config.cell_clip, config.proj_clip)
            if config.shared_token_layer else
            ProjectedLSTM(i, config.hidden_size, config.output_size, config.cell_clip, config.proj_clip).initialize()
            if config.clipped else AutocastLSTM(i, config.hidden_size, batch_first=True, proj_size=config.proj_size)
            for i in sizes[:-1])
        self.dropout = FastDropout(config.dropout)
        if not config.shared_token_layer:
            self.softmax = SampledSoftmax(config.output_size, config.vocab_size, config.samples) \
                if config.softmax == "sampled" else \
                AdaptiveSoftmax(config.output_size, config.vocab_size, config.cutoffs, config.div_value)

    def targets(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The words this direction predicts, ``(B, T + 1)`` int64 in its reading order, of ``ids (B, T)`` and
        ``lengths (B,)``: forward ``t_1 .. t_n <eos>``, backward ``t_n .. t_1 <bos>``, ``IGNORE_INDEX`` past ``n + 1``."""
        batch = ids.shape[0]
        full = torch.cat([ids.new_full((batch, 1), BOS_ID), ids, ids.new_full((batch, 1), PAD_ID)], dim=1)
        full[torch.arange(batch, device=ids.device), lengths + 1] = EOS_ID
        full = full if self.direction == "forward" else reverse_padded(full, lengths + 2)
        return full[:, 1:].masked_fill(~length_mask(lengths + 1, ids.shape[1] + 1), IGNORE_INDEX)

    def reading_order(self, ids: torch.Tensor, lengths: torch.Tensor,
                      chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(inputs, targets, input_chars)`` in reading order, ``(B, T + 1)`` int64 each and ``(B, T + 1, C)`` or
        ``None``: the sequence this model reads and the words it must predict (:meth:`targets`), of ``lengths`` >= 1.
        Raises ElmoError: ``chars`` missing."""
        if self.config.token_encoder == "char" and chars is None:
            raise ElmoError("this biLM reads characters (BiLMConfig.token_encoder is 'char'): pass chars (B, T, C)")
        targets = self.targets(ids, lengths)
        if self.direction == "backward":
            ids = reverse_padded(ids, lengths)
            chars = None if chars is None else reverse_padded(chars, lengths)
        batch = ids.shape[0]
        inputs = torch.cat([ids.new_full((batch, 1), BOS_ID if self.direction == "forward" else EOS_ID), ids], dim=1)
        input_chars = torch.cat([self.start_chars.to(chars.device).expand(batch, 1, -1), chars], dim=1) \
            if self.config.token_encoder == "char" else None
        return inputs, targets, input_chars

    def states(self, inputs: torch.Tensor, input_chars: torch.Tensor | None = None,
               chunk_size: int | None = None) -> list[torch.Tensor]:
        """Token vectors and LSTM outputs ``[x, h_1, .., h_L]``, each ``(B, S, output_size)``, of :meth:`reading_order`'s
        ``inputs (B, S)`` and ``input_chars (B, S, C)`` (character encoder only), ``chunk_size`` as :meth:`read`; before
        dropout (which only feeds the next layer in training); with ``residual``, ``h_j`` (j >= 2) includes the skip
        connection ``+ h_{j-1}``. Raises ElmoError: ``chunk_size`` < 1."""
        tokens = input_chars if self.config.token_encoder == "char" else inputs
        return self.read(lambda a, b: self.embedding(tokens[:, a:b]), *inputs.shape, chunk_size)

    def read(self, vectors: Callable[[int, int], torch.Tensor], batch: int, steps: int, chunk_size: int | None = None,
             initial: States | None = None) -> list[torch.Tensor]:
        """``[x, h_1, .., h_L]`` as :meth:`states` over ``batch`` rows of ``steps`` token vectors in reading order,
        ``vectors(first, last)`` those positions' ``(B, last - first, E)``, at most ``chunk_size`` positions at a time
        (:attr:`~elmo.model.bilm.BiLM.chunk_size`, :func:`step_chunks`), from ``initial`` states, each layer's
        ``(h (B, output_size), c (B, hidden_size))`` (``None``: zeros; each row's final states: :meth:`read_to_ends`)."""
        spans = step_chunks([batch] * steps, chunk_size)
        outputs: list[torch.Tensor] = []
        carried = [None] * len(self.layers) if initial is None else \
            [(h.float(), c.float()) if self.config.clipped else (h.unsqueeze(0), c.unsqueeze(0)) for h, c in initial]
        for first, last in spans:
            x = vectors(first, last)
            pieces = [x]
            for j, lstm in enumerate(self.layers):
                if self.config.clipped:  # ProjectedLSTM: time-major, every row running every step
                    h, carried[j] = lstm(self.dropout(x).transpose(0, 1), [x.shape[0]] * x.shape[1], carried[j])
                    h = h.transpose(0, 1)
                else:
                    h, carried[j] = lstm(self.dropout(x), carried[j])
                x = h + x if self.config.residual and j > 0 else h
                pieces.append(x)
            if len(spans) == 1:
                outputs = pieces
                break
            if not outputs:  # filled chunk by chunk: no list of pieces to concatenate at the end
                outputs = [p.new_empty(batch, steps, p.shape[-1]) for p in pieces]
            for out, piece in zip(outputs, pieces):
                out[:, first:last] = piece
        return outputs

    def read_to_ends(self, x: torch.Tensor, lengths: torch.Tensor,
                     initial: States | None = None) -> list[torch.Tensor]:
        """:meth:`read` of ``x (B, S, E)`` whose row b reads its first ``lengths[b]`` positions (a CPU ``(B,)``
        tensor), each row's final states taken after its own last position (stateful use): the packed sequence of
        ``nn.LSTM``. Outputs zero past a row's end."""
        steps = x.shape[1]
        if self.config.clipped:  # the rows sorted longest first, each step running the rows not yet ended
            order, restore, active = device_reading_plan(lengths, x.device)
            states = None if initial is None else [(h[order].float(), c[order].float()) for h, c in initial]
            hs, ends = projected_stack(self.layers, x[order].transpose(0, 1), active, states, self.config.residual)
            return [x, *(h.transpose(0, 1)[restore] for h in hs)], [(h[restore], c[restore]) for h, c in ends]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, finals = [x], []
        for j, lstm in enumerate(self.layers):
            out, (h, c) = lstm(packed, None if initial is None else
                               tuple(t.unsqueeze(0).to(packed.data.dtype) for t in initial[j]))
            if self.config.residual and j > 0:
                out = out._replace(data=out.data + packed.data)
            packed = out
            outputs.append(nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=steps)[0])
            finals.append((h[0], c[0]))
        return outputs, finals

    def boundary_vectors(self) -> torch.Tensor:
        """``(2, E)``: this direction's token vectors of ``<bos>`` and ``<eos>`` (for
        :meth:`~elmo.model.bilm.BiLM.contextual`), cached while the token layer's weights are unchanged
        (:func:`~elmo.model.lstm.cached`)."""
        params = list(self.embedding.parameters())

        def make() -> list[torch.Tensor]:
            if self.config.token_encoder == "char":
                chars = torch.tensor([word_char_ids(w, self.config.max_chars) for w in (BOS, EOS)])
                return [self.embedding(chars.to(params[0].device).unsqueeze(0))[0]]
            return [self.embedding(torch.tensor([BOS_ID, EOS_ID], device=params[0].device))]
        return cached(self._cache, "boundaries", params, compute_dtype(params[0].device.type), make)[0]

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """Training loss ``(loss, n)``: mean negative log-likelihood in nats per predicted word (with the adaptive
        softmax, a normalised distribution, ``exp(loss)`` is the batch's perplexity) and the int ``n = sum(lengths + 1)``
        of predicted words (boundary word included): without ``plan``, the step's one read from the device
        (:meth:`~elmo.model.adaptive_softmax.AdaptiveSoftmax.loss`); with ``plan`` (the batch's :meth:`host_plan`) none."""
        inputs, targets, input_chars = self.reading_order(ids, lengths, chars)
        top, targets = self.dropout(self.states(inputs, input_chars)[-1]).flatten(0, 1), targets.flatten()
        if self.config.softmax == "sampled":
            kept = (targets != IGNORE_INDEX).nonzero()[:, 0] if plan is None else plan.kept
            loss = self.softmax(top.index_select(0, kept), targets.index_select(0, kept))
            return loss, int((lengths + 1).sum()) if plan is None else plan.units
        counts = None if plan is None else plan.cluster_counts[DIRECTIONS.index(self.direction)]
        loss, n = self.softmax.loss(top, targets, counts)
        return loss, n if plan is None else plan.units

    host_keys = ("ids", "lengths")  #: as :attr:`~elmo.model.bilm.BiLM.host_keys`

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan:
        """The :class:`~elmo.model.plan.HostPlan` (for :func:`~elmo.model.plan.step_loss`) of a batch from its CPU
        ``ids (B, T)`` and ``lengths (B,)``: the words predicted and this direction's words per softmax cluster
        (:func:`~elmo.model.adaptive_softmax.cluster_counts`; boundary word ``<eos>`` forward, ``<bos>`` backward).
        Raises ElmoError: a word id outside the vocabulary (a host copy missing: :func:`~elmo.model.plan.plan_batch`)."""
        ids, lengths = host["ids"], host["lengths"]
        units = int((lengths.numpy() + 1).sum())
        if self.config.softmax == "sampled":
            return HostPlan(units, None, kept=predicted_positions(lengths, ids.shape[1]))
        counts = cluster_counts(ids, lengths, EOS_ID if self.direction == "forward" else BOS_ID, self.softmax.cutoffs)
        return HostPlan(units, {DIRECTIONS.index(self.direction): counts})

    @torch.no_grad()
    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor,
                         chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The top layer's state at every predicted position and the word it predicts (evaluation; no dropout in eval
        mode): ``(states (n, D) float32, targets (n,) int64)`` over the batch's ``n = sum(lengths + 1)`` predicted
        positions, the input of :meth:`vocabulary_log_probs`."""
        inputs, targets, input_chars = self.reading_order(ids, lengths, chars)
        top = self.states(inputs, input_chars)[-1]
        keep = targets != IGNORE_INDEX
        return top[keep].float(), targets[keep]


class PublishedLM(Direction):
    """A :class:`~elmo.model.bilm.BiLM` of bilm-tf's architecture with its training head as a language model over
    ``directions`` (0 forward, 1 backward): what :func:`~elmo.training.trainer.fit` trains and, for one direction, the
    :class:`Direction` of per-direction held-out perplexities. Its state is the biLM's under ``bilm.``; a training
    checkpoint of an earlier version (the softmax beside the biLM, :meth:`~elmo.model.bilm.BiLM.renamed_state`) loads."""

    def __init__(self, bilm: nn.Module, directions: Sequence[int] = (0, 1)):
        super().__init__()
        self.bilm, self.directions = bilm, tuple(directions)
        self.direction = DIRECTIONS[self.directions[0]] if len(self.directions) == 1 else "both"
        self.host_keys, self.host_plan = bilm.host_keys, bilm.host_plan  # the plan's (elmo.model.plan)
        self._register_load_state_dict_pre_hook(_renamed_training_state)

    @property
    def config(self) -> BiLMConfig:
        """The biLM's :class:`BiLMConfig` (its training head's included)."""
        return self.bilm.config

    @property
    def softmax(self) -> nn.Module:
        """The training softmax the directions share."""
        return self.bilm.softmax

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """``(mean NLL, n)`` over :attr:`directions` (:meth:`~elmo.model.bilm.BiLM.loss`)."""
        return self.bilm.loss(ids, lengths, chars, self.directions, plan)

    @torch.no_grad()
    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor,
                         chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first direction's top states ``(n, P)`` float32 at its ``n`` predicted positions and their targets
        ``(n,)`` (:meth:`LanguageModel.predicted_states`)."""
        [(top, targets)] = self.bilm.predicted_tops(ids, lengths, chars, self.directions[:1])
        return top.float(), targets


def _renamed_training_state(state: dict[str, torch.Tensor], prefix: str, *_: Any) -> None:
    """:class:`PublishedLM`'s state-dict pre-hook: the keys of an earlier version's training checkpoint renamed in
    place (:meth:`~elmo.model.bilm.BiLM.renamed_state` under ``bilm.``)."""
    for key in [k for k in state if k.startswith(prefix)]:
        new = f"{prefix}bilm." + renamed_key(key[len(prefix):].removeprefix("bilm."))
        if new != key:
            state[new] = state.pop(key)
