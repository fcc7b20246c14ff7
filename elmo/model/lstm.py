"""LSTMs that compute in the precision asked for, and a record of the dtype they computed in.

``torch.autocast`` does not decide an LSTM's dtype the same way on every device: on a CPU, ``nn.LSTM`` under bf16
autocast runs oneDNN's bf16 kernels, but on CUDA, autocast sends every cuDNN RNN through a cast to float16
whatever the autocast dtype (PyTorch's ``_cudnn_rnn`` autocast rule), so ``--precision bf16`` would train the LSTMs
in fp16 without a gradient scaler. :class:`AutocastLSTM` casts its input, states and weights to the autocast dtype
itself on CUDA and calls cuDNN with autocast off, so bf16 is bf16 there; on a CPU it leaves autocast's choice,
which is already bf16 (the CPU runs stay bit for bit what they were). Every LSTM of the project records the dtype its kernel computed in (:attr:`AutocastLSTM.compute_dtype`,
read from the tensors, not from a flag); :func:`lstm_compute_dtypes` collects them for the runs' JSON.
"""

from __future__ import annotations

import torch
from torch import nn


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast computes matrix products in on ``device_type`` now, or ``None`` when it is off there."""
    try:
        enabled, dtype = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
    except TypeError:  # torch < 2.4
        cpu = device_type == "cpu"
        enabled = torch.is_autocast_cpu_enabled() if cpu else torch.is_autocast_enabled()
        dtype = torch.get_autocast_cpu_dtype() if cpu else torch.get_autocast_gpu_dtype()
    return dtype if enabled else None


def casts_for_kernel(device_type: str) -> bool:
    """Whether an LSTM on ``device_type`` casts its input, states and weights to the autocast dtype itself and calls
    the kernel with autocast off (every device but the CPU, where autocast's own choice is already that dtype)."""
    return device_type != "cpu"


class AutocastLSTM(nn.LSTM):
    """``nn.LSTM`` (same arguments, parameters and state-dict keys) whose kernel computes in the autocast dtype it is
    called under, on every device. On a CPU that is what autocast already does (oneDNN's bf16 kernels; ATen's
    recurrence, its products in bf16, with a projection), and the call is ``nn.LSTM``'s, unchanged. On CUDA the
    input, ``(h_0, c_0)`` and weights are cast to the autocast dtype and cuDNN is called with autocast off
    (:meth:`forward_in`), so bf16 autocast runs cuDNN's bf16 kernels instead of autocast's float16 ones. Outside
    autocast, and for packed input, it is ``nn.LSTM``.

    Args: as ``nn.LSTM``. ``forward(input (B, T, I) when batch_first, hx=None)`` returns
    ``(output (B, T, D·P), (h_n, c_n))``, in the compute dtype under autocast.

    Attributes:
        compute_dtype: the dtype of the last call's output (the kernel's dtype), ``None`` before the first call.
    """

    compute_dtype: torch.dtype | None = None

    def forward(self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None):  # noqa: A002
        dtype = autocast_dtype(input.device.type) if isinstance(input, torch.Tensor) else None
        if dtype is None or not casts_for_kernel(input.device.type):
            output, state = super().forward(input, hx)
        else:
            output, state = self.forward_in(dtype, input, hx)
        self.compute_dtype = (output.data if isinstance(output, nn.utils.rnn.PackedSequence) else output).dtype
        return output, state

    def forward_in(self, dtype: torch.dtype, input: torch.Tensor,  # noqa: A002
                   hx: tuple[torch.Tensor, torch.Tensor] | None = None):
        """The LSTM with its input, states and weights cast to ``dtype`` and the kernel called with autocast off:
        the kernel computes in ``dtype`` whatever autocast's own rule for it (any device; :meth:`forward` uses it on
        CUDA). ``input``: batched, 3-d. Returns ``(output, (h_n, c_n))`` in ``dtype``.

        Raises:
            ValueError: ``input`` is not 3-d.
        """
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
    """``{module name: dtype}`` of every LSTM in ``model`` that has run (an :class:`AutocastLSTM`, or a layer of the
    published architecture, :class:`~elmo.model.published.ProjectedLSTM`): the dtype its last call computed in,
    e.g. ``{"forward_lm.layers.0": "bfloat16"}``. Empty when none has run."""
    return {name: str(module.compute_dtype).removeprefix("torch.") for name, module in model.named_modules()
            if getattr(module, "compute_dtype", None) is not None and isinstance(module.compute_dtype, torch.dtype)}


def summary_dtype(dtypes: dict[str, str]) -> str | dict[str, str] | None:
    """One dtype name when every LSTM of :func:`lstm_compute_dtypes` computed in it, else the whole mapping
    (``None`` when it is empty)."""
    values = set(dtypes.values())
    return None if not values else values.pop() if len(values) == 1 else dict(dtypes)
