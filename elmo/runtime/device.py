"""Device, mixed precision (``--precision``: :func:`resolve_precision`), CPU threads and seeds: the run-time choices
every layer above shares."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import resource
import sys
from pathlib import Path

import numpy as np
import torch

from ..errors import ElmoError

Batch = dict[str, torch.Tensor]
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; otherwise ``torch.device(name)``. A bare ``cuda`` means the current
    GPU (under ``torchrun``, the local rank's: :func:`elmo.runtime.distributed.init`). Raises ElmoError for an unknown
    device name, or CUDA asked for but absent."""
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ElmoError(f"--device: unknown device {name!r} (use auto, cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError("--device cuda was asked for but no CUDA device is available")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (CPU and CUDA) so a CPU run repeats exactly."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def cap_kernel_caches(entries: int) -> None:
    """Bound oneDNN's shape-keyed kernel caches (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, ideep's ``LRU_CACHE_CAPACITY``;
    1024 entries each by default) to ``entries`` unless the environment sets them, before the first oneDNN kernel:
    length-bucketed batches give nearly every batch a new shape, and each holds memory (lab/performance.md)."""
    for variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        os.environ.setdefault(variable, str(entries))


#: After :func:`steady_heap`, blocks up to this size come from the C heap (glibc's ``M_MMAP_THRESHOLD``); free
#: memory at the heap's top is kept up to twice it (``M_TRIM_THRESHOLD``).
STEADY_HEAP_MMAP_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def steady_heap() -> bool:
    """Keep the C heap's freed blocks for the next step instead of handing them back, for the rest of the process
    (thresholds: :data:`STEADY_HEAP_MMAP_THRESHOLD`; why, and the loops that must then allocate their pieces once:
    lab/performance.md); returns whether the C library has glibc's ``mallopt`` (else a no-op: macOS, musl)."""
    libc, mallopt = ctypes.util.find_library("c"), None
    with contextlib.suppress(OSError):
        mallopt = getattr(ctypes.CDLL(libc), "mallopt", None) if libc else None
    return mallopt is not None and bool(mallopt(_M_MMAP_THRESHOLD, STEADY_HEAP_MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, 2 * STEADY_HEAP_MMAP_THRESHOLD))


def default_threads() -> int:
    """Intra-op threads per process: the cores this process may use divided by the processes ``torchrun`` started on
    this node (``LOCAL_WORLD_SIZE``; 1 without ``torchrun``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # not Linux
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, cores // local)


def configure_threads(threads: int | None = None) -> int:
    """Use ``threads`` intra-op threads (default: :func:`default_threads`); returns the number set."""
    threads = threads or default_threads()
    torch.set_num_threads(threads)
    return threads


#: oneDNN instruction-set ceilings (``ONEDNN_MAX_CPU_ISA``) below AVX512_CORE_BF16: bf16 is emulated under them.
ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


def cpu_has_bf16() -> bool:
    """Whether this CPU has native bfloat16 dot products (AVX512-BF16 or AMX-BF16 in ``/proc/cpuinfo``; false without
    that file or under a ceiling in ``ONEDNN_MAX_CPU_ISA``, :data:`ISAS_WITHOUT_BF16`; docs/troubleshooting.md)."""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() in ISAS_WITHOUT_BF16:
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(name: str, device: torch.device, native_bf16: bool | None = None) -> torch.dtype | None:
    """The autocast dtype for ``--precision`` ``name`` (one of :data:`PRECISIONS`) on ``device``; ``None`` means fp32.
    ``auto``: on CUDA bf16 where the GPU supports it, else fp16 (with a gradient scaler in training); on a CPU bf16
    when it has native bf16 (``native_bf16``, default :func:`cpu_has_bf16`), else fp32. Weights, optimiser state, the
    LM softmax's log-probabilities and every loss stay fp32; only matrix products and the LSTM kernels run lower. On
    CUDA it turns TF32 (cuDNN's default) off, so that what computes in fp32 does. Raises ElmoError for an unknown name,
    fp16 off CUDA (no fast fp16 kernels there) or bf16 on a CPU without native bf16 (docs/troubleshooting.md: why)."""
    if name not in PRECISIONS:
        raise ElmoError(f"--precision: unknown precision {name!r} (use {', '.join(PRECISIONS)})")
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    if device.type == "cpu" and native_bf16 is None and name in ("auto", "bf16", "fp16"):
        native_bf16 = cpu_has_bf16()
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" and native_bf16 else None
    if name == "fp16" and device.type != "cuda":
        advice = (f"use fp32 on {device.type}" if device.type != "cpu"
                  else "on this CPU use bf16 or fp32 (auto picks bf16 here)" if native_bf16
                  else "on this CPU use fp32 or auto (auto picks fp32 here: this CPU has no native bf16)")
        raise ElmoError(f"--precision fp16 needs a CUDA device; {advice}")
    if name == "bf16" and device.type == "cpu" and not native_bf16:
        raise ElmoError("--precision bf16 needs a CPU with native bf16 (AVX512-BF16 or AMX-BF16) and this one has "
                        "neither (see lscpu): use --precision fp32 or auto (auto picks fp32 here)")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def precision_name(dtype: torch.dtype | None) -> str:
    """``"fp32"``, ``"bf16"`` or ``"fp16"`` for an autocast dtype from :func:`resolve_precision`."""
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype`` on ``device`` (mixed precision); a no-op when ``dtype`` is ``None``."""
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def move(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A tensor on ``device``: from the host to CUDA pinned first and copied without waiting; one already there (layers
    gathered from a GPU-resident cache) as it is; otherwise ``.to``."""
    if device.type == "cuda" and tensor.device != device:
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move every tensor of a batch (:func:`move`); other entries (a host plan) stay as they are."""
    return {k: move(v, device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def available_memory() -> int | None:
    """Bytes of memory the OS reports available (``MemAvailable`` of ``/proc/meminfo``), or ``None``."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def device_memory_free(device: torch.device) -> int | None:
    """Bytes free on a CUDA ``device`` (``torch.cuda.mem_get_info``); ``None`` for a CPU."""
    return torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None


def maxrss_mb(ru_maxrss: int) -> float:
    """A ``ru_maxrss`` of ``getrusage`` or ``wait4`` in MiB (it is KiB on Linux, bytes on macOS)."""
    return ru_maxrss / 2**20 if sys.platform == "darwin" else ru_maxrss / 1024


def peak_rss_mb() -> float:
    """Peak resident memory of this process's own program in MiB: ``VmHWM`` of ``/proc/self/status`` on Linux, which
    starts afresh at ``exec``; elsewhere ``ru_maxrss``, which also holds the peak of the process it was started from."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return maxrss_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
