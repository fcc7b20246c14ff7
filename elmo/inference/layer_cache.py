"""Computing a frozen biLM's LSTM layers once per document instead of once per batch and epoch.

``classification.py`` trains three classifiers (one per layer-mix setting) for several epochs on the
same frozen biLM. Without a cache every step runs the biLM forward (4 LSTM passes: 2 layers × 2
directions) before the task model; with it the LSTM layers h_1..h_L of every token are computed
once, in the batches :func:`elmo.inference.prediction.predict` uses, and shared by all settings and epochs. The
token layer h_0 is not stored: for a word biLM it is an embedding lookup, recomputed per batch
(:meth:`elmo.model.bilm.BiLM.token_layer`).

The trade-off, memory for time: the cache holds ``L × D`` values per token at 16 bits
(:func:`cache_dtype`: bf16 when the biLM runs in bf16, otherwise fp16, whose 11-bit significand
keeps the LSTM outputs, bounded by the tanh and the residual sum, to a relative error of 2^-11; 2 KB
per token at the default sizes, 2 × 512, whatever the compute precision), about 3.3 GiB for the shared
39k-row AG News sample and 9 GiB for the full 120k-row train file (plus val and test), and it removes
the biLM forward from every classifier step (measured in ``python -m elmo bench``). Each batch's rows
are cast back to the compute precision when used.
``--cache-layers auto`` caches only when that fits in half of the memory the OS reports available.
"""

from __future__ import annotations

import torch

from ..data.corpus import EncodedCorpus
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..runtime import distributed
from ..runtime.device import autocast, available_memory, to_device
from .prediction import PREDICT_BATCH, PREDICT_MAX_TOKENS

CACHE_MODES = ("auto", "on", "off")


def cache_dtype(amp_dtype: torch.dtype | None) -> torch.dtype:
    """The 16-bit dtype the layers are stored in: ``amp_dtype`` when it is bf16 or fp16, else fp16 (an fp32
    run stores its layers at half the size; see the module docstring for the rounding)."""
    return amp_dtype if amp_dtype in (torch.bfloat16, torch.float16) else torch.float16


def cache_bytes(bilm: BiLM, num_tokens: int, dtype: torch.dtype) -> int:
    """Size in bytes of the cached layers h_1..h_L of ``num_tokens`` tokens stored as ``dtype``."""
    return num_tokens * bilm.config.num_layers * bilm.output_dim * torch.empty((), dtype=dtype).element_size()


def should_cache(mode: str, bilm: BiLM, num_tokens: int, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``--cache-layers mode`` caches ``num_tokens`` tokens, and why (a line for the log).

    Raises:
        ElmoError: an unknown ``mode``.
    """
    if mode not in CACHE_MODES:
        raise ElmoError(f"--cache-layers: unknown mode {mode!r} (use {', '.join(CACHE_MODES)})")
    size = cache_bytes(bilm, num_tokens, dtype)
    if mode != "auto":
        return mode == "on", f"--cache-layers {mode} ({size / 2**30:.2f} GiB for {num_tokens:,} tokens)"
    free = available_memory()
    if free is not None:  # under torchrun every process on the node holds its own copy
        free //= distributed.context().local_world_size
    if free is not None and size > free / 2:
        return False, (f"not caching the biLM layers: {size / 2**30:.2f} GiB > half of the {free / 2**30:.1f} GiB "
                       "available; the biLM runs in every step instead (--cache-layers on forces it)")
    return True, f"caching the biLM layers: {size / 2**30:.2f} GiB for {num_tokens:,} tokens"


@torch.no_grad()
def compute_layers(bilm: BiLM, corpus: EncodedCorpus, device: torch.device,
                   amp_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The biLM's LSTM layers of every token of ``corpus``, in the corpus's flat token order.

    Args:
        bilm: the frozen biLM (eval mode, on ``device``).
        corpus: the documents; chars must be attached for a character biLM.
        amp_dtype: autocast dtype (:func:`elmo.runtime.device.resolve_precision`); the layers are stored in
            :func:`cache_dtype` of it (bf16 under bf16 autocast, else fp16).

    Returns:
        ``(num_tokens, L, D)`` CPU tensor: row ``corpus.offsets[i] + k`` holds h_1..h_L of token k of
        document i (:meth:`elmo.model.bilm.BiLM.forward` layers 1..L).
    """
    bilm.eval()
    store: torch.Tensor | None = None
    for index in corpus.batches(PREDICT_BATCH, PREDICT_MAX_TOKENS):
        batch = to_device(corpus.collate(index), device)
        with autocast(device, amp_dtype):
            layers = bilm.lstm_layers(batch["ids"], batch["lengths"], batch.get("chars"))  # (L, B, T, D)
        layers = layers.permute(1, 2, 0, 3).cpu()  # (B, T, L, D)
        if store is None:
            store = torch.empty((corpus.num_tokens, *layers.shape[2:]), dtype=cache_dtype(amp_dtype))
        for row, i in enumerate(index):
            start, n = corpus.offsets[i], corpus.lengths[i]
            store[start:start + n] = layers[row, :n]
    assert store is not None  # a corpus has at least one document
    return store
