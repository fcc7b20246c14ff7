"""Computing a frozen biLM's LSTM layers h_1..h_L once per document for all of ``classification.py``'s layer mixes and
epochs (docs/method.md), in the batches of :func:`elmo.inference.class_probabilities.class_probabilities`; the token
layer h_0 is recomputed per batch (:meth:`elmo.model.bilm.BiLM.token_layer`). The cache holds ``L × D`` values per
token at 16 bits (:func:`cache_dtype`), cast back to the compute precision when used, in a :mod:`elmo.data.layer_store`
store that :func:`should_cache` picks.
"""

from __future__ import annotations

import tempfile

import torch

from ..data.corpus import EncodedCorpus
from ..data.layer_store import DiskLayerStore, MemoryLayerStore, disk_free
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..runtime import distributed
from ..runtime.device import autocast, available_memory, device_memory_free, to_device
from .class_probabilities import PREDICT_BATCH, PREDICT_MAX_TOKENS

CACHE_MODES = ("auto", "device", "disk", "memory", "on", "off")  # "on" is an alias of "memory"


def cache_dtype(amp_dtype: torch.dtype | None) -> torch.dtype:
    """The 16-bit dtype the layers are stored in: ``amp_dtype`` when it is bf16 or fp16, else fp16 (an fp32 run stores
    its layers at half the size)."""
    return amp_dtype if amp_dtype in (torch.bfloat16, torch.float16) else torch.float16


def should_cache(mode: str, bilm: BiLM, num_tokens: int, dtype: torch.dtype,
                 directory: str | None = None, device: torch.device | None = None) -> tuple[str | None, str]:
    """Where ``--cache-layers mode`` keeps the layers of ``num_tokens`` tokens stored as ``dtype``, and why (a line for
    the log), as ``("device" | "disk" | "memory" | None, why)``; ``None``: no cache, the biLM runs in every step.
    ``auto`` picks ``"device"`` when the models run on a GPU and the layers fit in half its free memory (written once and
    gathered there, never through the host), else ``"disk"`` (in ``directory`` or the system's temporary folder) when the
    file fits in half its free space, else ``"memory"`` when it fits in half the available memory, else no cache; the
    other modes force a choice (``on``: ``memory``). Raises ElmoError: an unknown ``mode``; ``device`` without a GPU."""
    if mode not in CACHE_MODES:
        raise ElmoError(f"--cache-layers: unknown mode {mode!r} (use {', '.join(CACHE_MODES)})")
    size = num_tokens * bilm.config.num_layers * bilm.output_dim * dtype.itemsize  # h_1..h_L stored as dtype
    gib = f"{size / 2**30:.2f} GiB for {num_tokens:,} tokens"
    free_gpu = None if device is None else device_memory_free(device)
    if mode == "device" and free_gpu is None:
        raise ElmoError("--cache-layers device keeps the layers in a GPU's memory and the models run on the CPU: use "
                        "auto, disk or memory")
    if mode == "auto" and free_gpu is not None and size <= free_gpu / 2:
        return "device", f"caching the biLM layers in the GPU's memory ({gib}; {free_gpu / 2**30:.1f} GiB free)"
    if mode != "auto":
        kind = {"on": "memory", "off": None}.get(mode, mode)
        return kind, f"--cache-layers {mode}" + (f": caching the biLM layers in {kind} ({gib})" if kind else "")
    where = directory or tempfile.gettempdir()
    free_disk = disk_free(where)
    if free_disk is None or size <= free_disk / 2:
        return "disk", f"caching the biLM layers in a temporary file in {where} ({gib})"
    free = available_memory()
    if free is not None:  # under torchrun every process on the node holds its own copy
        free //= distributed.context().local_world_size
    if free is not None and size > free / 2:
        return None, (f"not caching the biLM layers: {gib} exceed half of the {free_disk / 2**30:.1f} GiB free in "
                      f"{where} and of the {free / 2**30:.1f} GiB of memory available; the biLM runs in every step "
                      "instead (--cache-layers disk/memory forces it)")
    return "memory", f"caching the biLM layers in memory ({gib}; too little free disk in {where})"


@torch.no_grad()
def compute_layers(bilm: BiLM, corpus: EncodedCorpus, device: torch.device, amp_dtype: torch.dtype | None = None,
                   kind: str = "memory", directory: str | None = None) -> MemoryLayerStore | DiskLayerStore:
    """The frozen ``bilm``'s (eval mode, on ``device``) LSTM layers of every token of ``corpus`` (chars attached for
    a character biLM), as a store of ``(num_tokens, L, D)`` rows in the corpus's flat token order: row
    ``corpus.offsets[i] + k`` holds h_1..h_L of token k of document i (:meth:`elmo.model.bilm.BiLM.forward` layers
    1..L), computed under ``amp_dtype`` autocast (:func:`elmo.runtime.device.resolve_precision`) and stored as its
    :func:`cache_dtype`. ``kind``: ``"memory"``, ``"device"`` (on ``device``) or ``"disk"`` (in ``directory``;
    :mod:`elmo.data.layer_store`). Raises ElmoError on an unknown ``kind``, and the disk store's errors (no space, no
    folder)."""
    if kind not in ("memory", "device", "disk"):
        raise ElmoError(f"compute_layers: kind must be 'memory', 'device' or 'disk', got {kind!r}")
    bilm.eval()
    shape, dtype = (bilm.config.num_layers, bilm.output_dim), cache_dtype(amp_dtype)
    store = (DiskLayerStore(corpus.num_tokens, shape, dtype, directory) if kind == "disk"
             else MemoryLayerStore(corpus.num_tokens, shape, dtype, device=device if kind == "device" else None))
    kept = device if kind == "device" else torch.device("cpu")
    for index in corpus.batches(PREDICT_BATCH, PREDICT_MAX_TOKENS):
        batch = to_device(corpus.collate(index), device)
        with autocast(device, amp_dtype):
            layers = bilm.lstm_layers(batch["ids"], batch["lengths"], batch.get("chars"))  # (L, B, T, D)
        layers = layers.permute(1, 2, 0, 3).to(kept, dtype)  # (B, T, L, D)
        for row, i in enumerate(index):
            store.write(int(corpus.offsets[i]), layers[row, :corpus.lengths[i]])
    return store
