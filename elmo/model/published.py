"""The original ELMo biLM of bilm-tf (Peters et al. 2018), the architecture of the published ELMo weights.

The published models (AllenNLP's ``elmo_2x4096_512_2048cnn_2xhighway`` and its smaller siblings) are bilm-tf's
character-input biLM; :mod:`elmo.model.published_io` reads their files into :class:`PublishedBiLM`, which computes
the reference implementation's vectors (``docs/published_elmo.md``, "What exact means here"). Per token:

1. **Token layer** (:class:`CharTokenEncoder`): bilm-tf character ids (:func:`elmo.data.chars.bilm_tf_char_ids`)
   → character embedding → convolutions, each max-pooled, then ``char_cnn.activation`` → highway layers in
   TensorFlow's form ``y = g ⊙ relu(W_t x + b_t) + (1 − g) ⊙ x``, ``g = σ(W_c x + b_c)`` → a linear projection
   to ``projection_dim``. One token layer serves both directions: ``h_0 = [x; x]``.
2. **LSTM layers** (:class:`ProjectedLSTM`), per direction: TensorFlow's ``LSTMCell`` with ``num_proj`` (forget
   bias + 1.0, cell clipped to ``±cell_clip``, output projected and clipped to ``±proj_clip``); with
   ``use_skip_connections`` every layer but the first adds its input to its output.
3. **Sentence boundaries**: ``<S>`` and ``</S>`` are added around every sentence before the LSTMs and removed from
   the output.

:meth:`PublishedBiLM.forward` is stateless (zero LSTM states for every sentence); bilm-tf and AllenNLP are
*stateful* (row r's final states start row r of the next batch): :meth:`PublishedBiLM.contextual` with
``carry=True`` takes and returns those states (``ElmoEmbedder(stateful=True)``). ``nn.LSTM`` cannot clip its cell,
so :class:`ProjectedLSTM` is written out, with the input products of all steps in one matrix product; without
clipping (``pretrain --lstm fused``) it runs on PyTorch's fused LSTM kernel instead, stateful use included.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from ..data.chars import TF_BOS, TF_EOS, TF_MAX_CHARS, TF_NUM_CHARS, TF_PAD_CHAR, bilm_tf_char_table
from ..errors import ElmoError
from .bilm import CHUNK_SIZE, length_mask, reverse_padded, step_chunks
from .hub import HubMixin
from .lstm import autocast_dtype, casts_for_kernel
from .published_plan import HostPlan, WordPlan, device_reading_plan, word_plan

#: the character CNN of every published model (widths 1-7, 2048 filters)
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}
ONEDNN_MIN_WORK = 1 << 20
WORDS_PER_PASS = 256
_ONEDNN = hasattr(torch.ops, "mkldnn") and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
    and torch.backends.mkldnn.is_available()
_PACK = _ONEDNN and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


@dataclass(frozen=True)
class PublishedBiLMConfig:
    """bilm-tf's hyperparameters (its ``options.json``, read by :func:`elmo.model.published_io.read_options`).

    Attributes:
        char_dim: ``char_cnn.embedding.dim``; filters: ``char_cnn.filters`` ``(width, count)`` pairs;
        num_highway: ``char_cnn.n_highway``; max_chars: ``char_cnn.max_characters_per_token``;
        activation: ``char_cnn.activation`` (``relu`` or ``tanh``); n_characters: ``char_cnn.n_characters``
            (261 when training, 262 with the padding id; the weights have 261 rows either way);
        hidden_size: ``lstm.dim`` (cells); projection_dim: ``lstm.projection_dim`` (= the token width);
        num_layers: ``lstm.n_layers``; cell_clip, proj_clip: ``lstm.cell_clip``, ``lstm.proj_clip``
            (``None`` = no clipping, as is 0, stored as ``None``; both off: the fused LSTM kernel, :class:`ProjectedLSTM`);
            use_skip_connections: ``lstm.use_skip_connections``;
        weights_digest: a hash of the weights (set by the loader) so that classifiers only load onto them.

    Raises:
        ElmoError: a value outside what is supported, naming the option.
    """

    char_dim: int = 16
    filters: tuple[tuple[int, int], ...] = field(default=PUBLISHED_FILTERS)
    num_highway: int = 2
    max_chars: int = TF_MAX_CHARS
    activation: str = "relu"
    hidden_size: int = 4096
    projection_dim: int = 512
    num_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    n_characters: int = TF_NUM_CHARS
    weights_digest: str = ""

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        sizes = {"char_cnn.embedding.dim": self.char_dim, "char_cnn.n_highway": self.num_highway + 1,
                 "lstm.dim": self.hidden_size, "lstm.projection_dim": self.projection_dim,
                 "lstm.n_layers": self.num_layers}
        for name, value in sizes.items():
            if value < 1:
                raise ElmoError(f"{name} must be positive, got {value - (name == 'char_cnn.n_highway')}")
        if not self.filters or any(w < 1 or n < 1 for w, n in self.filters):
            raise ElmoError(f"char_cnn.filters must be non-empty [width, count] pairs, got {list(self.filters)}")
        if not 3 <= self.max_chars or max(w for w, _ in self.filters) > self.max_chars:
            raise ElmoError(f"char_cnn.max_characters_per_token {self.max_chars} must be >= 3 and >= the widest "
                            f"filter ({max(w for w, _ in self.filters)})")
        if self.activation not in ACTIVATIONS:
            raise ElmoError(f"char_cnn.activation {self.activation!r} is not supported (use {' or '.join(ACTIVATIONS)})")
        if self.n_characters not in (261, 262):
            raise ElmoError(f"char_cnn.n_characters must be 261 or 262 (bilm-tf's byte vocabulary), got {self.n_characters}")
        if self.projection_dim > self.hidden_size:
            raise ElmoError(f"lstm.projection_dim ({self.projection_dim}) must not exceed lstm.dim ({self.hidden_size})")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value == 0:  # AllenNLP's reading of 0: no clipping
                object.__setattr__(self, name, None)
            elif value is not None and not value > 0:
                raise ElmoError(f"lstm.{name} must be positive, 0 or null (no clipping), got {value}")

    @property
    def output_size(self) -> int:
        """Width of the token vectors and of each LSTM layer's output per direction (``projection_dim``)."""
        return self.projection_dim

    @property
    def n_filters(self) -> int:
        """Width of the concatenated max-pooled convolutions (2048 in the published models)."""
        return sum(n for _, n in self.filters)

    @property
    def chars_per_token(self) -> int:
        """Characters per token of ``chars`` (batches always carry them: this biLM reads characters only)."""
        return self.max_chars

    @property
    def char_scheme(self) -> str:
        """The character numbering of ``chars``: bilm-tf's (:func:`elmo.data.chars.bilm_tf_char_ids`)."""
        return "bilm_tf"


#: the published ELMo architectures (AllenNLP's file names without ``elmo_`` and the suffixes), by the name
#: ``python -m elmo pretrain --architecture`` takes: the same char CNN (2048 filters, widths 1-7, 16-dim character
#: embeddings, 50 characters per token), cell_clip and proj_clip 3, skip connections; the LSTM sizes and highway
#: layers differ (https://allennlp.org/elmo)
PUBLISHED_ARCHITECTURES = {
    "elmo-small": ("2x1024_128_2048cnn_1xhighway", PublishedBiLMConfig(hidden_size=1024, projection_dim=128, num_highway=1)),
    "elmo-medium": ("2x2048_256_2048cnn_1xhighway", PublishedBiLMConfig(hidden_size=2048, projection_dim=256, num_highway=1)),
    "elmo-original": ("2x4096_512_2048cnn_2xhighway", PublishedBiLMConfig()),
}


def compute_dtype(device_type: str) -> torch.dtype:
    """The autocast dtype on ``device_type`` when autocast is on there (:func:`~elmo.model.lstm.autocast_dtype`),
    else float32."""
    return autocast_dtype(device_type) or torch.float32


def matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           add: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias + add`` in ``weight``'s dtype, returned in float32.

    Args:
        x: ``(..., K)`` float; weight: ``(N, K)``; bias: ``(N,)`` float32; add: ``(..., N)`` float32.

    fp32 on the CPU without autograd runs through oneDNN (``mkldnn._linear_pointwise``, with ``add`` as a
    fused post-op) when the product has at least :data:`ONEDNN_MIN_WORK` multiply-adds, or always when the
    weight is packed (:func:`pack_weight`); everything else goes through ``F.linear``
    (measurements: lab/performance.md).
    """
    if weight.is_mkldnn or weight.dtype == torch.float32 and x.is_cpu and _ONEDNN \
            and x.numel() * weight.shape[0] >= ONEDNN_MIN_WORK \
            and not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (weight, x, bias, add))):
        x = x.float().contiguous()
        if add is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(x, add.contiguous(), weight, bias, "add")
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    y = F.linear(x.to(weight.dtype), weight)
    if bias is not None:
        y = torch.add(bias, y)  # fp32 + bf16/fp16: the cast happens inside the addition, in one pass
    if add is not None:
        y = torch.add(add, y)
    return y.float()


def pack_weight(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """``weight (N, K)`` float32 reordered once into oneDNN's blocked layout for products with about ``rows``
    rows (an opaque ``torch._mkldnn`` tensor that only :func:`matmul` reads), so that oneDNN does not reorder it
    at every call. Returns ``weight`` unchanged where oneDNN's reorder is unavailable."""
    if not _PACK:
        return weight
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), max(1, rows))


def _clip(x: torch.Tensor, value: float | None) -> torch.Tensor:
    """``x`` clamped to ``±value`` (in place when autograd does not need ``x``); ``None``: unchanged."""
    if value is None:
        return x
    return x.clamp(-value, value) if x.requires_grad else x.clamp_(-value, value)


def cached(cache: dict, name: str, sources: list[torch.Tensor | None], dtype: torch.dtype,
           make: Callable[[], list[torch.Tensor | None]]) -> list[torch.Tensor | None]:
    """``make()`` — tensors derived from the parameters ``sources`` in ``dtype`` (cast, merged) — kept in
    ``cache[name]`` until ``dtype`` or one of ``sources`` changes (replaced, or in place through an operation that
    bumps its version counter; a :class:`CachedWeights` module also empties it on every ``train()`` / ``eval()``);
    rebuilt every call while autograd needs the gradient through them (training, fine-tuning)."""
    live = [t for t in sources if t is not None]
    if torch.is_grad_enabled() and any(t.requires_grad for t in live):
        return make()
    key = (dtype, tuple((t.data_ptr(), t._version) for t in live))
    if cache.get(name, (None,))[0] != key:
        with torch.no_grad():
            cache[name] = (key, make())
    return cache[name][1]


class CachedWeights(nn.Module):
    """A module keeping weights derived from its parameters in ``self._cache`` (:func:`cached`), emptied whenever
    the module (or a parent) is put in training or eval mode: fused optimisers (``torch.optim.Adam(fused=True)``,
    what :func:`elmo.training.trainer.fit` uses) update parameters in place without bumping their version counter,
    so the cache key alone would not see an optimiser step; training loops switch modes around every validation."""

    def __init__(self):
        super().__init__()
        self._cache: dict = {}

    def train(self, mode: bool = True) -> "CachedWeights":
        self._cache.clear()
        return super().train(mode)


class CharTokenEncoder(CachedWeights):
    """bilm-tf's token layer: characters → embedding → convolutions + max-pool + activation → highway →
    projection (step 1 of the module docstring).

    Args:
        config: :class:`PublishedBiLMConfig`.

    Parameters keep the layout of ``nn.Conv1d`` / ``nn.Linear`` (``convs.i``, ``highways.k`` = [transform;
    carry], ``projection``). Each distinct spelling is encoded once (``torch.unique``), words are sorted by length
    and encoded :data:`WORDS_PER_PASS` at a time, each pass cut to its longest word plus the widest filter, and the
    convolutions of all widths are one matrix product over character windows (kernels zero-padded to the widest,
    windows past the input masked): the same result up to float rounding.
    """

    def __init__(self, config: PublishedBiLMConfig):
        super().__init__()
        self.activation = ACTIVATIONS[config.activation]
        self.max_width = max(w for w, _ in config.filters)
        self.char_embedding = nn.Embedding(TF_NUM_CHARS, config.char_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(config.char_dim, n, w) for w, n in config.filters)
        width = config.n_filters
        self.highways = nn.ModuleList(nn.Linear(width, 2 * width) for _ in range(config.num_highway))  # [transform; carry]
        self.projection = nn.Linear(width, config.projection_dim) if width != config.projection_dim else None
        widths = torch.cat([torch.full((n,), w) for w, n in config.filters])
        self.register_buffer("filter_widths", widths, persistent=False)

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
        """Token vectors of ``chars``.

        Args:
            chars: ``(N, C)`` int64 (bilm-tf ids); words_per_pass: the most distinct spellings encoded at a time
                (:meth:`encode_distinct`), which bounds the convolutions' ``(words · C, filters)`` activations;
            plan: the distinct spellings and passes worked out on the host
                (:func:`~elmo.model.published_plan.word_plan`): the same vectors, nothing read from the device.

        Returns:
            ``(N, projection_dim)`` float32 token vectors.
        """
        if plan is not None:
            dtype = compute_dtype(chars.device.type)
            with torch.autocast(chars.device.type, enabled=False), record_function("elmo.token_layer"):
                weights = self.weights(dtype)
                parts = [self.encode_distinct(plan.distinct[rows], weights, width) for rows, width in plan.passes]
            return torch.cat(parts).index_select(0, plan.gather)
        unique, inverse = torch.unique(chars, dim=0, return_inverse=True)
        order = torch.argsort(((unique != TF_PAD_CHAR) & (unique != 0)).sum(dim=1), stable=True)
        dtype = compute_dtype(chars.device.type)
        with torch.autocast(chars.device.type, enabled=False), record_function("elmo.token_layer"):
            weights = self.weights(dtype)
            parts = [self.encode_distinct(unique[rows], weights) for rows in order.split(max(1, words_per_pass))]
        # index_select, not indexing: its backward adds the repeated rows in index order, so a multi-threaded CPU run
        # repeats exactly (an index's backward adds them with atomics, in whatever order the threads reach them)
        return torch.cat(parts).index_select(0, torch.argsort(order)[inverse])

    def encode_distinct(self, chars: torch.Tensor, weights: list[torch.Tensor | None],
                        keep: int | None = None) -> torch.Tensor:
        """Token vectors ``(N, projection_dim)`` float32 of ``chars (N, C)`` with :meth:`weights`, reading the first
        ``keep`` columns (default: found on the device, the last real character's + 1 + the widest filter)."""
        embedding, conv, *mats = weights
        full = chars.shape[1]
        if keep is None:
            real = ((chars != TF_PAD_CHAR) & (chars != 0)).any(dim=0).nonzero()
            keep = min(full, (int(real.max()) + 1 if len(real) else 0) + self.max_width)
        tail = chars.new_full((len(chars), self.max_width - 1), TF_PAD_CHAR)
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
        return x if self.projection is None else matmul(x, mats[-1], self.projection.bias.float())


class ProjectedLSTM(CachedWeights):
    """One direction of one layer: TensorFlow's ``LSTMCell(num_proj, cell_clip, proj_clip)`` (step 2 of the
    module docstring), over a whole time-major batch.

    Args:
        input_size: I; hidden_size: H cells; projection_dim: P outputs (``P == H``: no projection);
        cell_clip, proj_clip: clipping bounds or ``None``.

    Parameters (our layout; :mod:`elmo.model.published_io` converts TF's): ``input_weight (4H, I)``,
    ``recurrent_weight (4H, P)``, ``bias (4H,)`` (forget bias + 1 included), gate blocks in the order
    (i, f, o, j) so the three sigmoid gates are contiguous; ``projection (P, H)``. ``tf_bias`` (a buffer outside
    the state dict, ``None`` unless loaded from a file) keeps TF's ``B`` as read, so that writing the layer back
    (:func:`elmo.model.published_io.tf_bias`) gives the file's values bit for bit.

    Without clipping (both bounds ``None``) the layer runs on PyTorch's fused LSTM kernel (:meth:`fused_forward`,
    ``torch.lstm`` with ``proj_size``: cuDNN on CUDA, ATen's C++ recurrence on the CPU), the same parameters mapped
    onto its weights (:meth:`fused_weights`); with clipping, which that kernel cannot do, on the per-step loop.
    ``fused = False`` runs the loop without clipping too (the two agree to float rounding). :attr:`compute_dtype`:
    the dtype the last call's recurrence computed in (the loop's products, the fused kernel's output), ``None``
    before the first call (:func:`elmo.model.lstm.lstm_compute_dtypes`).
    """

    compute_dtype: torch.dtype | None = None

    def __init__(self, input_size: int, hidden_size: int, projection_dim: int, cell_clip: float | None,
                 proj_clip: float | None):
        super().__init__()
        self.hidden_size, self.output_size = hidden_size, projection_dim
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.fused = cell_clip is None and proj_clip is None
        self.input_weight = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.recurrent_weight = nn.Parameter(torch.empty(4 * hidden_size, projection_dim))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.projection = nn.Parameter(torch.empty(projection_dim, hidden_size)) if projection_dim < hidden_size else None
        self.register_buffer("tf_bias", None, persistent=False)  # TF's B as loaded (see the class docstring)

    def weights(self, dtype: torch.dtype, rows: int = 64) -> list[torch.Tensor | None]:
        """``[input_weight, recurrent_weight, projection]`` in ``dtype``: cast once and cached while the
        parameters are unchanged (autocast would cast them again at every step). In float32 on a CPU without
        autograd, they are packed for oneDNN (:func:`pack_weight`; ``rows`` = the batch size, the rows of
        the per-step products)."""
        params = [self.input_weight, self.recurrent_weight, self.projection]
        if dtype == self.input_weight.dtype:
            if not (_PACK and dtype == torch.float32 and self.input_weight.is_cpu) \
                    or torch.is_grad_enabled() and self.input_weight.requires_grad:
                return params
            return cached(self._cache, "packed", params, dtype, lambda: [
                pack_weight(params[0], 32 * rows), pack_weight(params[1], rows),
                None if params[2] is None else pack_weight(params[2], rows)])
        return cached(self._cache, "weights", params, dtype, lambda: [p if p is None else p.to(dtype) for p in params])

    def forward(self, x: torch.Tensor, active: list[int], state: tuple[torch.Tensor, torch.Tensor] | None = None,
                chunk_size: int | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run the layer over a time-major batch whose rows are sorted by length, longest first.

        Args:
            x: ``(S, B, I)`` inputs; active: ``active[t]`` = rows still running at step t (non-increasing,
                ``len(active) <= S``); state: initial ``(h (B, P), c (B, H))`` float32, zeros when ``None``;
                chunk_size: ``None`` (the input products of all steps at once) or the most positions whose input
                products are computed at a time (:func:`elmo.model.bilm.step_chunks`), the recurrence going on from
                chunk to chunk: the same outputs (to float rounding).

        Returns:
            ``(outputs (S, B, P), (h, c))`` float32: outputs are zero where a row has ended; ``(h, c)`` is each
            row's state after its last step (or its initial state if it ran no step). Differentiable (training).

        Raises:
            ElmoError: ``chunk_size`` < 1.
        """
        if self.fused and self.cell_clip is None and self.proj_clip is None:
            return self.fused_forward(x, active, state, chunk_size)
        steps, batch, _ = x.shape
        hidden = self.hidden_size
        dtype = compute_dtype(x.device.type)
        with torch.autocast(x.device.type, enabled=False):
            w_in, w_rec, w_proj = self.weights(dtype, batch)
            self.compute_dtype = w_rec.dtype  # the recurrence's products: its kernels' dtype
            h, c = state if state is not None else (x.new_zeros(batch, self.output_size, dtype=torch.float32),
                                                    x.new_zeros(batch, hidden, dtype=torch.float32))
            out = x.new_zeros(steps, batch, self.output_size, dtype=torch.float32)
            grad = torch.is_grad_enabled() and (x.requires_grad or self.input_weight.requires_grad)
            steps_out: list[torch.Tensor] = []  # training: each step's output, padded and stacked at the end
            # Per-step pieces come from unbind and split, not from indexing the whole tensor at every step: the
            # backward of an index allocates and zero-fills a gradient of the whole tensor once per step (quadratic
            # in the steps), that of unbind and split assembles one gradient once.
            x_steps = x.unbind(0)
            # Training: the recurrent weight's gradient in one product over all the steps of a chunk
            # (RecurrentWeightGradient) instead of a (4H, B) x (B, P) product and an addition per step.
            deferred = grad and w_rec.requires_grad
            w_step = w_rec.detach() if deferred else w_rec
            # fp32 training on the CPU: each step's products (recurrent and projection) and their backward through
            # oneDNN with packed weights, and the projection's gradient, like the recurrent one, once per chunk
            fast = deferred and _PACK and w_step.dtype == torch.float32 and x.is_cpu
            step_weights = (pack_weight(w_step, batch), pack_weight(w_step.t(), batch)) if fast else None
            proj_weights = (pack_weight(w_proj.detach(), batch), pack_weight(w_proj.detach().t(), batch)) \
                if fast and w_proj is not None and w_proj.requires_grad else None
            for first, last in step_chunks(active, chunk_size):
                with record_function("elmo.lstm_input_products"):  # only the positions that run (no padding)
                    packed = torch.cat([x_steps[t][:active[t]] for t in range(first, last)]) if last > first else x[:0, 0]
                    gates_all = self._input_gates(packed, w_in)
                    tape = StepTape([], [], [])  # filled below, read by the backward pass
                    if deferred:
                        gates_all = RecurrentWeightGradient.apply(gates_all, w_rec, w_proj if proj_weights else None,
                                                                  tape)
                    gates_step = gates_all.split(active[first:last])
                for t, gates_x in zip(range(first, last), gates_step):
                    n = active[t]
                    g = DeferredProduct.apply(h[:n], gates_x, *step_weights, None) if step_weights \
                        else self._step_gates(h[:n], w_step, gates_x)
                    if deferred:
                        tape.states.append(h[:n].detach())
                    i, f, o = torch.sigmoid(g[:, : 3 * hidden]).chunk(3, dim=1)
                    cell = _clip(torch.addcmul(f * c[:n], i, torch.tanh(g[:, 3 * hidden:])), self.cell_clip)
                    h_new = o * torch.tanh(cell)
                    if proj_weights:
                        tape.cells.append(h_new.detach())
                        h_new = _clip(DeferredProduct.apply(h_new, None, *proj_weights, tape.projection_grads),
                                      self.proj_clip)
                    elif w_proj is not None:
                        h_new = _clip(matmul(h_new, w_proj), self.proj_clip)
                    if grad:  # no in-place writes into one tensor, whose backward would copy it at every step
                        steps_out.append(F.pad(h_new, (0, 0, 0, batch - n)))
                    else:
                        out[t, :n] = h_new
                    h = h_new if n == batch else torch.cat([h_new, h[n:]])
                    c = cell if n == batch else torch.cat([cell, c[n:]])
                del packed, gates_all, gates_step  # before the next chunk's products: one chunk's alive at a time
                gates_x = None  # noqa: F841 (the last step's piece is a view of the whole chunk's products)
            if steps_out:
                out = torch.cat([torch.stack(steps_out), out[len(steps_out):]])
        return out, (h, c)

    def fused_weights(self, dtype: torch.dtype) -> list[torch.Tensor]:
        """``nn.LSTM(proj_size=P)``'s weights of this layer in ``dtype``: ``[weight_ih (4H, I), weight_hh (4H, P),
        bias_ih (4H,), bias_hh (4H,), weight_hr (P, H)]`` (no ``weight_hr`` when ``P == H``), gate blocks reordered
        from ours (i, f, o, j) to PyTorch's (i, f, g, o), ``bias`` (forget bias + 1 included) as ``bias_ih`` and
        ``bias_hh`` zero. Differentiable: the gradients reach :attr:`input_weight`, :attr:`recurrent_weight`,
        :attr:`bias` and :attr:`projection`; cached (:func:`cached`) while autograd does not need them."""
        cells = self.hidden_size

        def make() -> list[torch.Tensor]:
            def gates(w: torch.Tensor) -> torch.Tensor:
                return torch.cat([w[:2 * cells], w[3 * cells:], w[2 * cells:3 * cells]]).to(dtype)
            flat = [gates(self.input_weight), gates(self.recurrent_weight), gates(self.bias),
                    self.bias.new_zeros(4 * cells, dtype=dtype)]
            return flat if self.projection is None else [*flat, self.projection.to(dtype)]
        sources = [self.input_weight, self.recurrent_weight, self.bias, self.projection]
        return cached(self._cache, "fused", sources, dtype, make)

    def fused_forward(self, x: torch.Tensor, active: list[int], state: tuple[torch.Tensor, torch.Tensor] | None = None,
                      chunk_size: int | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`forward` without clipping on PyTorch's fused LSTM kernel (``torch.lstm`` over a packed sequence:
        step t holds the ``active[t]`` rows still running, so padding is never read and each row's final state is
        the one after its last step). Same arguments, returns and errors as :meth:`forward`; chunks of at most
        ``chunk_size`` positions run one after the other, the states carried between them. Under autocast the
        products run in its dtype (the weights mapped and cast once a call), the cell state in float32 on the CPU as
        in the loop (cuDNN keeps it in the autocast dtype, and is called with autocast off, every tensor cast to that
        dtype: autocast's own rule for cuDNN's RNNs would run them in float16); states and outputs are returned in
        float32. :attr:`compute_dtype` records the kernel's output dtype."""
        steps, batch, _ = x.shape
        dtype = compute_dtype(x.device.type)
        h, c = state if state is not None else (x.new_zeros(batch, self.output_size, dtype=torch.float32),
                                                x.new_zeros(batch, self.hidden_size, dtype=torch.float32))
        flat = self.fused_weights(dtype)
        cast = casts_for_kernel(x.device.type)
        train = torch.is_grad_enabled() and (x.requires_grad or self.input_weight.requires_grad)
        x_steps, outputs = x.unbind(0), []
        for first, last in step_chunks(active, chunk_size):
            if last == first:
                continue
            rows = active[first]
            sizes = torch.tensor(active[first:last])
            packed = torch.cat([x_steps[t][:active[t]] for t in range(first, last)])
            packed = packed.to(dtype) if cast else packed
            with warnings.catch_warnings():  # the weights are mapped at every call by design; oneDNN has no projection
                warnings.filterwarnings("ignore", "RNN module weights are not part of single contiguous chunk")
                warnings.filterwarnings("ignore", "LSTM with projections is not supported with oneDNN")
                # on CUDA with autocast off and every tensor in the dtype (autocast's cuDNN rule would use float16)
                with torch.autocast(x.device.type, enabled=False) if cast else contextlib.nullcontext():
                    y, h_n, c_n = torch.lstm(packed, sizes, (h[None, :rows].to(dtype),
                                                             c[None, :rows].to(dtype) if cast else c[None, :rows]),
                                             flat, True, 1, 0.0, train, False)
            self.compute_dtype = y.dtype
            y = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.PackedSequence(y.float(), sizes))[0]
            outputs.append(F.pad(y, (0, 0, 0, batch - rows)))
            h, c = torch.cat([h_n[0].float(), h[rows:]]), torch.cat([c_n[0].float(), c[rows:]])
        out = torch.cat(outputs) if outputs else x.new_zeros(0, batch, self.output_size, dtype=torch.float32)
        return F.pad(out, (0, 0, 0, 0, 0, steps - len(out))), (h, c)

    def _input_gates(self, x: torch.Tensor, w_in: torch.Tensor) -> torch.Tensor:
        """``x @ W_x + b`` of all time steps in one product: ``(S·B, 4H)``, float32 (bias included) or, in a
        lower precision, that precision without the bias (added per step, saving a pass over the whole)."""
        if w_in.dtype == torch.float32:
            return matmul(x, w_in, self.bias)
        return F.linear(x.to(w_in.dtype), w_in)

    def _step_gates(self, h: torch.Tensor, w_rec: torch.Tensor, gates_x: torch.Tensor) -> torch.Tensor:
        """Gate pre-activations ``(n, 4H)`` float32 of one step: ``gates_x + h @ W_h`` (+ the bias in a lower
        precision, where the product and the addition are one ``addmm`` and the bias add casts to float32)."""
        if w_rec.dtype == torch.float32:
            return matmul(h, w_rec, add=gates_x)
        return torch.add(self.bias, torch.addmm(gates_x, h.to(w_rec.dtype), w_rec.t()))


@dataclass
class StepTape:
    """What the steps of a chunk leave for :class:`RecurrentWeightGradient`'s backward: ``states``, the ``h (n, P)``
    each step multiplied the recurrent weight with; ``cells``, the ``o * tanh(c) (n, H)`` it projected (only when the
    projection goes through :class:`DeferredProduct`); ``projection_grads``, the gradients of those projections
    ``(n, P)``, appended by the backward pass, last step first."""

    states: list[torch.Tensor]
    cells: list[torch.Tensor]
    projection_grads: list[torch.Tensor]


class RecurrentWeightGradient(torch.autograd.Function):
    """Identity on the gate pre-activations ``G`` of a chunk's steps, ``(positions, 4H)`` in step order, whose backward
    also gives the recurrent weight's gradient ``dG^T @ Hs`` in one product, ``Hs`` being the states the steps
    multiplied the weight with (``tape.states``, ``(positions, P)``, appended during the recurrence, which uses the
    weight detached); likewise the projection's, ``dP^T @ Ms`` from ``tape``, when ``projection`` is given. A step's
    gates are ``G_t + h_t W^T``, so the gradient of ``G_t`` is that of the step's product and ``dW = Σ_t dG_t^T h_t``:
    one ``(4H, positions) x (positions, P)`` product instead of one with an inner dimension of the batch, and an
    accumulation, per step. This backward runs after every step's (each step reads ``G``), so the tape is complete.
    The same sums in another order: equal to float rounding.
    """

    @staticmethod
    def forward(ctx, gates: torch.Tensor, weight: torch.Tensor, projection: torch.Tensor | None,
                tape: StepTape) -> torch.Tensor:
        ctx.tape, ctx.dtypes = tape, (weight.dtype, None if projection is None else projection.dtype)
        return gates.view_as(gates)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, None]:
        tape = ctx.tape
        d_weight = grad.t().mm(torch.cat(tape.states).to(grad.dtype)).to(ctx.dtypes[0])
        d_projection = None
        if ctx.dtypes[1] is not None:
            d_out = torch.cat(tape.projection_grads[::-1])
            d_projection = d_out.t().mm(torch.cat(tape.cells).to(d_out.dtype)).to(ctx.dtypes[1])
        return grad, d_weight, d_projection, None


class DeferredProduct(torch.autograd.Function):
    """``x @ W^T (+ add)`` of one fp32 training step through oneDNN with ``W`` packed (:func:`pack_weight`), forward
    and backward (``dx = dy @ W`` with ``W^T`` packed); no gradient for ``W``, which :class:`RecurrentWeightGradient`
    gives for all the steps at once: ``dy`` is appended to ``sink`` when one is given (the projection), and is the
    gradient of ``add`` otherwise (the recurrent product, whose ``add`` is the step's input gates). Shapes:
    ``x (n, K)``, ``add (n, N)`` or ``None``; ``weight`` the packed ``(N, K)``, ``weight_t`` the packed ``(K, N)``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, add: torch.Tensor | None, weight: torch.Tensor, weight_t: torch.Tensor,
                sink: list[torch.Tensor] | None) -> torch.Tensor:
        ctx.weight_t, ctx.sink = weight_t, sink
        if add is None:
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, None, "none", [], "")
        return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), add.contiguous(), weight, None, "add")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, None, None, None]:
        grad = grad.contiguous()
        if ctx.sink is not None:
            ctx.sink.append(grad)
        dx = torch.ops.mkldnn._linear_pointwise(grad, ctx.weight_t, None, "none", [], "")
        return dx, (grad if ctx.needs_input_grad[1] else None), None, None, None


#: LSTM states of a published biLM: ``[(h, c)]`` for the forward layers 1..L then the backward ones,
#: ``h (B, projection_dim)``, ``c (B, hidden_size)`` float32, row b = batch row b.
States = list[tuple[torch.Tensor, torch.Tensor]]


def weights_digest(module: nn.Module) -> str:
    """A short hash of a module's weights (names, shapes and the first 4,096 values of each), which identifies a
    published biLM in :attr:`PublishedBiLMConfig.weights_digest` so that a classifier only loads onto it."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        values = tensor.detach().float().reshape(-1)[:4096].cpu().numpy()
        digest.update(f"{name}{tuple(tensor.shape)}".encode() + values.tobytes())
    return digest.hexdigest()[:16]


class PublishedBiLM(nn.Module, HubMixin):
    """bilm-tf's biLM with the interface of :class:`elmo.model.bilm.BiLM` that :class:`~elmo.model.elmo.Elmo`,
    the layer cache and the embedder use (``num_layers``, ``output_dim``, ``forward``, ``token_layer``,
    ``lstm_layers``, ``layer_groups``, ``config``). Load the published weights with
    :func:`elmo.model.published_io.load_published_bilm`; ``save_pretrained`` / ``from_pretrained``
    (:class:`~elmo.model.hub.HubMixin`) write and read it as a folder.

    Args:
        config: :class:`PublishedBiLMConfig`.

    Shapes: ``ids (B, T)`` (ignored but for ``Elmo``'s default lengths: this biLM has no word vocabulary),
    ``lengths (B,)``, ``chars (B, T, C)`` in bilm-tf's numbering *without* the sentence boundaries;
    layers ``(L + 1, B, T, D)`` with ``D = 2 × projection_dim`` (1024 for the Original model).

    Attributes:
        chunk_size: long sentences in bounded memory (:data:`elmo.model.bilm.CHUNK_SIZE` by default; ``None`` =
            off): at most ``min(chunk_size, WORDS_PER_PASS)`` distinct words through the token layer at a time, and
            the LSTMs' input products over at most ``chunk_size`` positions at a time (:meth:`ProjectedLSTM.forward`);
            the same vectors (to float rounding). Not part of the weights file.
    """

    hub_kind = "published_bilm"

    #: reads text as written (the published models are case-sensitive); the task's vocabulary is built from it
    cased = True

    def bilm_tf_blockers(self) -> list[str]:
        """Why bilm-tf's files cannot hold this biLM: never (:meth:`elmo.model.bilm.BiLM.bilm_tf_blockers`)."""
        return []

    def __init__(self, config: PublishedBiLMConfig):
        super().__init__()
        self.config = config
        self.chunk_size: int | None = CHUNK_SIZE
        # the files it was loaded from: bilm-tf's options and weight files, or a published_lm.pt (one path)
        self.source: tuple[str, ...] | None = None  # as BiLM.source
        self.token_encoder = CharTokenEncoder(config)
        sizes = (config.projection_dim, config.hidden_size, config.projection_dim, config.cell_clip, config.proj_clip)
        self.forward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        self.backward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        boundaries = torch.from_numpy(bilm_tf_char_table([TF_BOS, TF_EOS], config.max_chars)).long()
        self.register_buffer("boundary_chars", boundaries, persistent=False)
        self.host_boundary_chars = boundaries  # stays on the host (a training step's plan: published_plan.host_plan)

    @property
    def num_layers(self) -> int:
        """Number of ELMo layers, L + 1 (token layer included)."""
        return self.config.num_layers + 1

    @property
    def output_dim(self) -> int:
        """Width D of every ELMo layer: 2 × ``projection_dim``."""
        return 2 * self.config.projection_dim

    def hub_config(self) -> dict:
        """``{"config": PublishedBiLMConfig as a dict}``, its ``weights_digest`` left out (computed when loaded)."""
        return {"config": {k: v for k, v in asdict(self.config).items() if k != "weights_digest"}}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: object) -> "PublishedBiLM":
        """Inverse of :meth:`hub_config` (``vocab``, the training vocabulary if any, is not part of the biLM)."""
        return cls(PublishedBiLMConfig(**config["config"]))

    def loaded(self, folder: Path) -> None:
        """After ``from_pretrained``: the weights' digest and ``source`` (the folder)."""
        self.config, self.source = replace(self.config, weights_digest=weights_digest(self)), (str(folder.resolve()),)

    def describe(self) -> str:
        """The model card's paragraph."""
        c = self.config
        clip = "no clipping" if c.cell_clip is None and c.proj_clip is None else \
            f"cell clip {c.cell_clip}, projection clip {c.proj_clip}"
        return (f"The published ELMo architecture (bilm-tf; Peters et al. 2018): a character CNN ({c.n_filters} filters, "
                f"{c.num_highway} highway layers), {c.num_layers} LSTM layers per direction of {c.hidden_size} cells "
                f"projected to {c.projection_dim} ({clip}), residual connections {'on' if c.use_skip_connections else 'off'}. "
                f"Each token gets {self.num_layers} layers of {self.output_dim} numbers; "
                f"{self.parameter_count():,} parameters.")

    @property
    def words_per_pass(self) -> int:
        """The most distinct words through the character CNN at a time: ``min(chunk_size, WORDS_PER_PASS)``."""
        return WORDS_PER_PASS if self.chunk_size is None else min(WORDS_PER_PASS, self.chunk_size)

    def token_vectors(self, chars: torch.Tensor, plan: WordPlan | None = None) -> torch.Tensor:
        """Context-free token vectors ``(..., projection_dim)`` float32 of ``chars (..., C)`` (the token layer x),
        at most :attr:`words_per_pass` distinct words through the character CNN at a time (``plan``: as
        :meth:`CharTokenEncoder.forward`)."""
        flat = chars.reshape(-1, chars.shape[-1])
        return self.token_encoder(flat, self.words_per_pass, plan).reshape(*chars.shape[:-1], -1)

    def forward(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """ELMo layers of every token, stateless (zero initial states for every sentence).

        Returns:
            ``(L + 1, B, T, D)`` float32: layer 0 = ``[x; x]``, layer j = both directions' LSTM layer j;
            zero at padded positions.

        Raises:
            ElmoError: ``chars`` missing.
        """
        return self.contextual(self.token_vectors(self._chars(chars)), lengths)[0]

    def lstm_layers(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """Layers 1..L of :meth:`forward`, ``(L, B, T, D)`` (what :mod:`elmo.inference.layer_cache` stores)."""
        return self.forward(ids, lengths, chars)[1:]

    def token_layer(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """Layer 0 of :meth:`forward` without running the LSTMs: ``[x; x]`` ``(B, T, D)``, zero at padding."""
        x = self.token_vectors(self._chars(chars))
        return torch.cat([x, x], dim=-1) * length_mask(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype)

    @staticmethod
    def _chars(chars: torch.Tensor | None) -> torch.Tensor:
        if chars is None:
            raise ElmoError("a published (bilm-tf) biLM reads characters: pass chars (B, T, C) in bilm-tf's numbering "
                            "(elmo.data.chars.bilm_tf_char_table)")
        return chars

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """Parameters from the top down (fine-tuning): ``[LSTM layer L of both directions, .., layer 1,
        the token encoder]``."""
        groups = [[*f.parameters(), *b.parameters()] for f, b in zip(self.forward_layers, self.backward_layers)]
        return [*reversed(groups), list(self.token_encoder.parameters())]

    def contextual(self, x: torch.Tensor, lengths: torch.Tensor, states: States | None = None,
                   carry: bool = False, boundaries: bool = False) -> tuple[torch.Tensor, States | None]:
        """ELMo layers from token vectors: adds ``<S>`` / ``</S>``, runs both LSTM stacks, removes the boundaries
        (unless ``boundaries``).

        Args:
            x: ``(B, T, P)`` token vectors (:meth:`token_vectors`), right-padded; lengths: ``(B,)`` int64
                (0 allowed: the row reads ``<S> </S>`` only); on the host (a CPU tensor, whatever the device) the
                reading plan is made there and nothing is read back from the device
                (:func:`~elmo.model.published_plan.device_reading_plan`).
            states: initial :data:`States` (rows = batch rows); ``None`` = zeros.
            carry: read every sentence to its end (``</S>`` forward, ``<S>`` backward) and return the final
                states (stateful use); otherwise those last steps are skipped (their outputs are dropped).
            boundaries: keep ``<S>`` and ``</S>`` in the layers, as AllenNLP's ``_ElmoBiLm`` returns them (every
                sentence read to its end, as with ``carry``): ``(L + 1, B, T + 2, D)``, row b's ``<S>`` at 0, its
                tokens at ``1..n``, its ``</S>`` at ``n + 1``.

        Returns:
            ``(layers (L + 1, B, T, D), final states or None)`` (``T + 2`` positions with ``boundaries``); layers zero
            at padded positions.

        Raises:
            ElmoError: :attr:`chunk_size` < 1.
        """
        batch, longest = x.shape[:2]
        to_end = carry or boundaries  # every step read, the last ones (</S> forward, <S> backward) included
        host = lengths.device.type == "cpu"  # then the plan is made on the host: nothing read from the device
        read = (lengths.numpy().astype(np.int64) + (2 if to_end else 1)) if host else None
        lengths = lengths.to(x.device)
        full, sentence = self._with_boundaries(x, lengths, self.boundary_plan(x.device) if host else None)
        order, restore, active = device_reading_plan(read, x.device) if host else \
            _reading_plan(sentence if to_end else sentence - 1)
        depth, width = self.config.num_layers, x.shape[-1]
        first, span = (0, longest + 2) if boundaries else (1, longest)  # the positions of full kept
        layers = x.new_empty(depth + 1, batch, span, 2 * width, dtype=torch.float32)  # filled as computed
        layers[0, ..., :width] = full if boundaries else x
        layers[0, ..., width:] = full if boundaries else x
        finals: States = []
        for d, stack in enumerate((self.forward_layers, self.backward_layers)):
            inputs = full if d == 0 else reverse_padded(full, sentence)
            initial = None if states is None else [(h[order], c[order]) for h, c in states[d * depth:(d + 1) * depth]]
            hs, ends = self._stack(stack, inputs[order].transpose(0, 1), active, initial)
            del inputs
            for j in range(1, depth + 1):  # each layer written into its half and dropped: no second copy of them all
                h = hs.pop(0).transpose(0, 1)[restore]
                h = h if d == 0 else reverse_padded(h, sentence)
                layers[j, ..., d * width:(d + 1) * width] = h[:, first:first + span]
            finals += [(h[restore], c[restore]) for h, c in ends]
        kept = length_mask(sentence, span) if boundaries else length_mask(lengths, longest)
        return layers.mul_(kept.unsqueeze(-1).float()), finals if carry else None

    def reading_states(self, chars: torch.Tensor, lengths: torch.Tensor, directions: Sequence[int] = (0, 1),
                       dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
                       plan: HostPlan | None = None) -> list[torch.Tensor]:
        """The top LSTM layer of each direction in its own reading order: what the language-model softmax reads
        (training and held-out perplexity, :class:`elmo.model.published_lm.PublishedBiLMWithSoftmax`). Differentiable
        through the LSTMs, the highway layers, the projection and the character CNN.

        Args:
            chars: ``(B, T, C)`` bilm-tf character ids without the sentence boundaries; lengths: ``(B,)`` int64;
            directions: which stacks run, 0 = forward, 1 = backward; dropout: applied to every LSTM layer's input
                (bilm-tf's ``DropoutWrapper(input_keep_prob)`` in training; the residual connection adds the
                dropped input, as TF's wrapper order does), ``None`` = none; plan: the batch's
                :class:`~elmo.model.published_plan.HostPlan` on the device: the same states, nothing read back.

        Returns:
            One ``(B, T + 1, P)`` float32 tensor per entry of ``directions``: forward position k is the state after
            reading ``<S> t_1 .. t_k`` (it predicts ``t_{k+1}``, ``</S>`` at ``k = n``); backward position k after
            reading ``</S> t_n .. t_{n-k+1}`` (it predicts ``t_{n-k}``, ``<S>`` at ``k = n``). Zero past ``n``.

        Raises:
            ElmoError: ``chars`` missing.
        """
        x = self.token_vectors(self._chars(chars), None if plan is None else plan.words)
        lengths = lengths.to(x.device)
        full, sentence = self._with_boundaries(x, lengths, None if plan is None else plan.boundaries)
        order, restore, active = _reading_plan(sentence - 1) if plan is None else (plan.order, plan.restore, plan.active)
        states = []
        for d in directions:
            inputs = full if d == 0 else reverse_padded(full, sentence)
            top = self._stack((self.forward_layers, self.backward_layers)[d], inputs[order].transpose(0, 1), active,
                              None, dropout)[0][-1]
            states.append(top.transpose(0, 1)[restore][:, :x.shape[1] + 1])
        return states

    def boundary_plan(self, device: torch.device) -> WordPlan:
        """The :class:`~elmo.model.published_plan.WordPlan` of the ``<S>``, ``</S>`` spellings on ``device`` (made on
        the host once per device)."""
        plans, key = self.__dict__.setdefault("_boundary_plans", {}), (device, self.words_per_pass)
        if key not in plans:
            plans[key] = word_plan(self.host_boundary_chars.numpy(), self.words_per_pass,
                                   self.token_encoder.max_width).to(device)
        return plans[key]

    def _with_boundaries(self, x: torch.Tensor, lengths: torch.Tensor,
                         plan: WordPlan | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``<S> x_1 .. x_n </S>``, right-padded ``(B, T + 2, P)`` float32, and the lengths ``n + 2``."""
        batch, longest, width = x.shape
        bounds = self.token_vectors(self.boundary_chars.to(x.device), plan)
        mask = length_mask(lengths, longest).unsqueeze(-1)
        end = torch.zeros(batch, 1, width, device=x.device)
        full = torch.cat([bounds[0].expand(batch, 1, -1), x.float() * mask, end], dim=1)
        full[torch.arange(batch, device=x.device), lengths + 1] = bounds[1]
        return full, lengths + 2

    def _stack(self, layers: nn.ModuleList, x: torch.Tensor, active: list[int], states: States | None,
               dropout: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[list[torch.Tensor], States]:
        """One direction's LSTM layers over time-major ``x (S, B, P)``: outputs ``[(S, B, P)] * L`` (skip
        connections added) and each layer's final ``(h, c)``; ``dropout`` on every layer's input."""
        outputs, finals = [], []
        for j, layer in enumerate(layers):
            x = x if dropout is None else dropout(x)
            h, final = layer(x, active, None if states is None else states[j], self.chunk_size)
            x = h + x if self.config.use_skip_connections and j > 0 else h
            outputs.append(x)
            finals.append(final)
        return outputs, finals


def _reading_plan(read: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """How a batch whose row b reads ``read[b]`` steps runs: ``(order, restore, active)``: the rows sorted longest
    first (each step then runs a prefix of them), the inverse permutation, and the rows running at each step."""
    return device_reading_plan(read.cpu().numpy(), read.device)  # the one read: the lengths
