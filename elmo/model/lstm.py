"""The project's two LSTM cells behind one call shape (docs/architecture.md), their compute dtype and chunking.

On CUDA, autocast runs every cuDNN RNN in float16 whatever the autocast dtype (PyTorch's ``_cudnn_rnn`` autocast
rule), so ``--precision bf16`` would train the LSTMs in fp16 without a gradient scaler: :class:`AutocastLSTM` casts
input, states and weights to the autocast dtype itself there and calls cuDNN with autocast off (:func:`casts_for_kernel`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from ..errors import ElmoError


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast computes matrix products in on ``device_type`` now, or ``None`` when it is off there."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


def casts_for_kernel(device_type: str) -> bool:
    """Whether an LSTM on ``device_type`` casts to the autocast dtype itself, autocast off (not on a CPU; see above)."""
    return device_type != "cpu"


class AutocastLSTM(nn.LSTM):
    """``nn.LSTM`` (same arguments, parameters and state-dict keys) whose kernel computes in the autocast dtype on every
    device (module docstring): on CUDA through :meth:`forward_in`; on a CPU (autocast's own choice: oneDNN's bf16
    kernels, or for a projection ATen's recurrence with bf16 products), outside autocast and for packed input the call
    is ``nn.LSTM``'s, unchanged. ``forward(input (B, T, I) when batch_first, hx=None)`` returns ``(output (B, T, D·P),
    (h_n, c_n))``, in the compute dtype under autocast. :attr:`compute_dtype`: the last call's output (kernel) dtype,
    read from the tensors (:func:`lstm_compute_dtypes` collects them for the runs' JSON), ``None`` before the first call.
    """

    compute_dtype: torch.dtype | None = None

    def forward(self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None):  # noqa: A002
        dtype = autocast_dtype(input.device.type) if isinstance(input, torch.Tensor) else None
        output, state = super().forward(input, hx) if dtype is None or not casts_for_kernel(input.device.type) else \
            self.forward_in(dtype, input, hx)
        self.compute_dtype = (output.data if isinstance(output, nn.utils.rnn.PackedSequence) else output).dtype
        return output, state

    def forward_in(self, dtype: torch.dtype, input: torch.Tensor,  # noqa: A002
                   hx: tuple[torch.Tensor, torch.Tensor] | None = None):
        """The LSTM computing in ``dtype`` on any device (input, states and weights cast, the kernel called with autocast
        off): batched 3-d ``input`` (else ValueError) → ``(output, (h_n, c_n))`` in ``dtype``."""
        if input.dim() != 3:
            raise ValueError(f"AutocastLSTM.forward_in takes batched input (3-d), got {input.dim()}-d")
        if hx is None:
            batch = input.shape[0 if self.batch_first else 1]
            layers = self.num_layers * (2 if self.bidirectional else 1)
            hx = (input.new_zeros(layers, batch, self.proj_size or self.hidden_size, dtype=dtype),
                  input.new_zeros(layers, batch, self.hidden_size, dtype=dtype))
        with torch.autocast(input.device.type, enabled=False):
            weights = [w.to(dtype) for w in self._flat_weights]
            output, h_n, c_n = torch._VF.lstm(input.to(dtype), (hx[0].to(dtype), hx[1].to(dtype)), weights, self.bias,
                                              self.num_layers, float(self.dropout), self.training, self.bidirectional,
                                              self.batch_first)
        return output, (h_n, c_n)


def lstm_compute_dtypes(model: nn.Module) -> dict[str, str]:
    """``{module name: dtype}`` of the last call of every :class:`AutocastLSTM` and :class:`ProjectedLSTM` in ``model``
    that has run, e.g. ``{"forward_lm.layers.0": "bfloat16"}``; empty when none has."""
    return {name: str(module.compute_dtype).removeprefix("torch.") for name, module in model.named_modules()
            if getattr(module, "compute_dtype", None) is not None and isinstance(module.compute_dtype, torch.dtype)}


def summary_dtype(dtypes: dict[str, str]) -> str | dict[str, str] | None:
    """The one dtype name of :func:`lstm_compute_dtypes`' mapping if all agree, else the mapping (``None`` if empty)."""
    values = set(dtypes.values())
    return None if not values else values.pop() if len(values) == 1 else dict(dtypes)


#: the multiply-adds from which an fp32 product on the CPU goes through oneDNN (:func:`matmul`)
ONEDNN_MIN_WORK = 1 << 20
_ONEDNN = hasattr(torch.ops, "mkldnn") and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
    and torch.backends.mkldnn.is_available()
_PACK = _ONEDNN and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def step_chunks(rows_per_step: Sequence[int], chunk_size: int | None) -> list[tuple[int, int]]:
    """How the S steps of ``rows_per_step`` (the batch rows, i.e. positions, computed at each step) are cut into chunks
    of at most ``chunk_size`` positions (rows × steps; ``None``: never) for the long-sentence path: consecutive
    ``(first, last)`` step ranges covering ``range(S)``, ``[(0, S)]`` (also for ``S == 0``) unless ``S > chunk_size``,
    a step with more rows alone. Raises ElmoError for ``chunk_size`` < 1."""
    if chunk_size is not None and chunk_size < 1:
        raise ElmoError(f"chunk_size must be a positive number of positions (or None), got {chunk_size}",
                        field="chunk_size")
    steps = len(rows_per_step)
    if chunk_size is None or steps <= chunk_size:
        return [(0, steps)]
    spans, first, used = [], 0, 0
    for t, rows in enumerate(rows_per_step):
        if t > first and used + rows > chunk_size:
            spans.append((first, t))
            first, used = t, 0
        used += rows
    spans.append((first, steps))
    return spans


def compute_dtype(device_type: str) -> torch.dtype:
    """The autocast dtype on ``device_type`` when autocast is on there (:func:`autocast_dtype`), else float32."""
    return autocast_dtype(device_type) or torch.float32


def matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           add: torch.Tensor | None = None) -> torch.Tensor:
    """``x (..., K) @ weight (N, K).T + bias (N,) + add (..., N)`` in ``weight``'s dtype, returned in float32 (``x``
    float; ``bias``, ``add`` float32). fp32 on the CPU without autograd runs on oneDNN (``mkldnn._linear_pointwise``,
    ``add`` a fused post-op) from :data:`ONEDNN_MIN_WORK` multiply-adds, or always with a packed weight
    (:func:`pack_weight`); the rest on ``F.linear`` (measurements: lab/performance.md)."""
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
    """``weight (N, K)`` float32 reordered once, not at every call, into oneDNN's layout for products of about ``rows``
    rows (an opaque ``torch._mkldnn`` tensor only :func:`matmul` reads); unchanged where oneDNN cannot reorder."""
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
    """``make()`` (tensors derived in ``dtype`` from the parameters ``sources``), kept in ``cache[name]`` until
    ``dtype`` or a source changes (replaced, or its version counter bumped; see also :class:`CachedWeights`); rebuilt
    every call while autograd needs the gradient through them (training, fine-tuning)."""
    live = [t for t in sources if t is not None]
    if torch.is_grad_enabled() and any(t.requires_grad for t in live):
        return make()
    key = (dtype, tuple((t.data_ptr(), t._version) for t in live))
    if cache.get(name, (None,))[0] != key:
        with torch.no_grad():
            cache[name] = (key, make())
    return cache[name][1]


class CachedWeights(nn.Module):
    """A module whose ``self._cache`` (:func:`cached`) empties on every ``train()`` / ``eval()``, its parents' included:
    fused optimisers (``Adam(fused=True)``, as in :func:`elmo.training.trainer.fit`) update parameters without bumping
    their version counter, and training loops switch modes around every validation."""

    def __init__(self):
        super().__init__()
        self._cache: dict = {}

    def train(self, mode: bool = True) -> "CachedWeights":
        self._cache.clear()
        return super().train(mode)


class ProjectedLSTM(CachedWeights):
    """One direction of one layer over a whole time-major batch: TensorFlow's ``LSTMCell(num_proj, cell_clip,
    proj_clip)`` (step 2 of :mod:`elmo.model.bilm`'s docstring) of ``input_size`` I, ``hidden_size`` H cells,
    ``projection_dim`` P outputs (``P == H``: no projection), clipping bounds ``cell_clip``, ``proj_clip`` or ``None``.

    Parameters (our layout; :mod:`elmo.model.published_io` converts TF's): ``input_weight (4H, I)``, ``recurrent_weight
    (4H, P)``, ``bias (4H,)`` (forget bias + 1 included), gate blocks in the order (i, f, o, j) so the three sigmoid
    gates are contiguous; ``projection (P, H)``. The buffer ``tf_bias`` (not in the state dict; ``None`` unless loaded
    from a file) keeps TF's ``B`` as read, so :func:`elmo.model.published_io.tf_bias` writes it back bit for bit.

    Without clipping the layer runs on PyTorch's fused LSTM kernel (:meth:`fused_forward`), which cannot clip; with
    clipping or ``fused = False``, on the per-step loop (the two agree to float rounding). :attr:`compute_dtype`
    (:func:`lstm_compute_dtypes`): the last call's recurrence dtype (loop products, fused output), ``None`` before.
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

    def initialize(self, generator: torch.Generator | None = None) -> "ProjectedLSTM":
        """bilm-tf's initial weights (TF's default initialiser) from ``generator`` (``None``: the global one), returning
        the layer: Glorot-uniform over TF's ``W_0 (I + P, 4H)`` and ``W_P_0 (H, P)``, bias 0 + TF's forget bias 1.0."""
        def uniform(p: torch.Tensor, bound: float) -> None:
            p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)

        cells, inputs = self.hidden_size, self.input_weight.shape[1] + self.recurrent_weight.shape[1]
        with torch.no_grad():
            for p in (self.input_weight, self.recurrent_weight):
                uniform(p, math.sqrt(6.0 / (inputs + 4 * cells)))
            if self.projection is not None:
                uniform(self.projection, math.sqrt(6.0 / (cells + self.output_size)))
            self.bias.zero_()
            self.bias[cells:2 * cells].fill_(1.0)  # our gate order (i, f, o, j): TF's forget bias
        return self

    def weights(self, dtype: torch.dtype, rows: int = 64) -> list[torch.Tensor | None]:
        """``[input_weight, recurrent_weight, projection]`` in ``dtype``, cached (autocast would cast at every step); in
        float32 on a CPU without autograd, packed for oneDNN (:func:`pack_weight`; ``rows``: the batch size)."""
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
        """The layer over time-major ``x (S, B, I)``, rows sorted longest first: ``active[t]`` rows still run at step t
        (non-increasing, ``len(active) <= S``); ``state``: initial ``(h (B, P), c (B, H))`` float32, zeros when ``None``;
        ``chunk_size``: the most positions whose input products are computed at once (:func:`step_chunks`, which raises
        ElmoError below 1; ``None``: all steps), the recurrence carried across chunks (same outputs to float rounding).
        Returns ``(outputs (S, B, P), (h, c))`` float32, differentiable: outputs zero where a row has ended, ``(h, c)``
        each row's state after its last step (its initial state if it ran none)."""
        steps, batch, _ = x.shape
        hidden = self.hidden_size
        h, c = state if state is not None else (x.new_zeros(batch, self.output_size, dtype=torch.float32),
                                                x.new_zeros(batch, hidden, dtype=torch.float32))
        if self.fused and self.cell_clip is None and self.proj_clip is None:
            return self.fused_forward(x, active, (h, c), chunk_size)
        dtype = compute_dtype(x.device.type)
        with torch.autocast(x.device.type, enabled=False):
            w_in, w_rec, w_proj = self.weights(dtype, batch)
            self.compute_dtype = w_rec.dtype  # the recurrence's products: its kernels' dtype
            out = x.new_zeros(steps, batch, self.output_size, dtype=torch.float32)
            grad = torch.is_grad_enabled() and (x.requires_grad or self.input_weight.requires_grad)
            steps_out: list[torch.Tensor] = []  # training: each step's output, padded and stacked at the end
            # Per-step pieces from unbind and split, not indexing: an index's backward zero-fills a gradient of the
            # whole tensor at every step (quadratic in the steps); theirs assembles one gradient once.
            x_steps = x.unbind(0)
            # Training: the recurrent weight's gradient in one product per chunk (RecurrentWeightGradient)
            deferred = grad and w_rec.requires_grad
            w_step = w_rec.detach() if deferred else w_rec
            # fp32 CPU training: step products and backward on oneDNN, packed; the projection's gradient per chunk
            fast = deferred and _PACK and w_step.dtype == torch.float32 and x.is_cpu
            step_weights = (pack_weight(w_step, batch), pack_weight(w_step.t(), batch)) if fast else None
            proj_weights = (pack_weight(w_proj.detach(), batch), pack_weight(w_proj.detach().t(), batch)) \
                if fast and w_proj is not None and w_proj.requires_grad else None
            # Inference in bf16/fp16 with a projection: h stays in the products' dtype between steps, as the projection
            # returns it (the values cast to float32 and back: two kernels a step fewer); outputs and states in float32.
            # Not in training, where h's two gradients must add up in float32 before the cast, as they do here.
            low = w_proj is not None and w_proj.dtype != torch.float32 and not grad
            h = h.to(w_proj.dtype) if low else h
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
                    if step_weights:
                        g = DeferredProduct.apply(h[:n], gates_x, *step_weights, None)
                    elif w_step.dtype == torch.float32:
                        g = matmul(h[:n], w_step, add=gates_x)
                    else:  # lower precision: one addmm, + the fp32 bias _input_gates left out
                        g = torch.add(self.bias, torch.addmm(gates_x, h[:n].to(w_step.dtype), w_step.t()))
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
                        h_new = _clip(F.linear(h_new.to(w_proj.dtype), w_proj) if low else matmul(h_new, w_proj),
                                      self.proj_clip)
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
        return out, (h.float(), c)

    def fused_weights(self, dtype: torch.dtype) -> list[torch.Tensor]:
        """This layer as ``nn.LSTM(proj_size=P)``'s weights in ``dtype``: ``[weight_ih (4H, I), weight_hh (4H, P),
        bias_ih (4H,) = bias, bias_hh (4H,) zero, weight_hr (P, H)]`` (no ``weight_hr`` when ``P == H``), gate blocks
        reordered from (i, f, o, j) to PyTorch's (i, f, g, o). Differentiable, else cached (:func:`cached`)."""
        cells = self.hidden_size

        def make() -> list[torch.Tensor]:
            def gates(w: torch.Tensor) -> torch.Tensor:
                return torch.cat([w[:2 * cells], w[3 * cells:], w[2 * cells:3 * cells]]).to(dtype)
            flat = [gates(self.input_weight), gates(self.recurrent_weight), gates(self.bias),
                    self.bias.new_zeros(4 * cells, dtype=dtype)]
            return flat if self.projection is None else [*flat, self.projection.to(dtype)]
        sources = [self.input_weight, self.recurrent_weight, self.bias, self.projection]
        return cached(self._cache, "fused", sources, dtype, make)

    def fused_forward(self, x: torch.Tensor, active: list[int], state: tuple[torch.Tensor, torch.Tensor],
                      chunk_size: int | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`forward` (``state`` given) without clipping, on ``torch.lstm`` over a packed sequence (cuDNN on CUDA,
        ATen's recurrence on the CPU): padding is never read, chunks run one after the other. Under autocast the products
        run in its dtype, the cell state in float32 on the CPU as in the loop and in the autocast dtype on CUDA (called as
        by :meth:`AutocastLSTM.forward_in`); states and outputs are returned in float32."""
        steps, batch, _ = x.shape
        dtype = compute_dtype(x.device.type)
        h, c = state
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
        """``x @ W_x + b`` of all steps ``(S·B, 4H)``: float32, or a lower precision without ``b`` (added per step)."""
        if w_in.dtype == torch.float32:
            return matmul(x, w_in, self.bias)
        return F.linear(x.to(w_in.dtype), w_in)


def projected_stack(layers: Sequence["ProjectedLSTM"], x: torch.Tensor, active: list[int],
                    states: list[tuple[torch.Tensor, torch.Tensor]] | None, residual: bool, chunk_size: int | None = None,
                    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None
                    ) -> tuple[list[torch.Tensor], list[tuple[torch.Tensor, torch.Tensor]]]:
    """One direction's :class:`ProjectedLSTM` layers over ``x`` (``x``, ``active``, ``chunk_size``: as
    :meth:`ProjectedLSTM.forward`; ``states``: each layer's initial ``(h, c)`` or ``None``): the outputs ``[(S, B, P)] *
    L``, with ``residual`` every layer but the first adding its input, and each layer's final ``(h, c)``. ``dropout``
    applies to every layer's input (the residual adds the dropped input, as bilm-tf's wrapper order does)."""
    outputs, finals = [], []
    for j, layer in enumerate(layers):
        x = x if dropout is None else dropout(x)
        h, final = layer(x, active, None if states is None else states[j], chunk_size)
        x = h + x if residual and j > 0 else h
        outputs.append(x)
        finals.append(final)
    return outputs, finals


@dataclass
class StepTape:
    """What a chunk's steps leave for :class:`RecurrentWeightGradient`'s backward: ``states``, each step's ``h (n, P)``
    multiplied with the recurrent weight; ``cells``, each ``o * tanh(c) (n, H)`` projected through
    :class:`DeferredProduct`; ``projection_grads``, their gradients ``(n, P)``, appended last step first."""

    states: list[torch.Tensor]
    cells: list[torch.Tensor]
    projection_grads: list[torch.Tensor]


class RecurrentWeightGradient(torch.autograd.Function):
    """Identity on a chunk's gate pre-activations ``G (positions, 4H)`` in step order, whose backward also gives the
    recurrent weight's gradient (the steps use it detached): a step's gates are ``G_t + h_t W^T``, so ``dW = Σ_t dG_t^T
    h_t = dG^T @ Hs`` (``Hs``: ``tape.states``), one ``(4H, positions) x (positions, P)`` product instead of a product
    and an accumulation per step; likewise the projection's, ``dP^T @ Ms``, when ``projection`` is given. This backward
    runs after every step's (each reads ``G``): the tape is complete. Same sums, other order: equal to rounding."""

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
    """``x (n, K) @ W^T (+ add (n, N))`` of one fp32 training step on oneDNN, forward and backward (``dx = dy @ W``),
    ``weight`` (``W (N, K)``) and ``weight_t`` (``W^T``) packed (:func:`pack_weight`). No gradient for ``W``
    (:class:`RecurrentWeightGradient` gives it per chunk): ``dy`` goes to ``sink`` if given (the projection), else is
    the gradient of ``add`` (the recurrent product's, ``add`` being the step's input gates)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, add: torch.Tensor | None, weight: torch.Tensor, weight_t: torch.Tensor,
                sink: list[torch.Tensor] | None) -> torch.Tensor:
        ctx.weight_t, ctx.sink = weight_t, sink
        return matmul(x, weight, add=add)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, None, None, None]:
        grad = grad.contiguous()
        if ctx.sink is not None:
            ctx.sink.append(grad)
        return matmul(grad, ctx.weight_t), (grad if ctx.needs_input_grad[1] else None), None, None, None
