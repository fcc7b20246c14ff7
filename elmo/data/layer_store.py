"""Where a corpus's per-token biLM layers, computed once per token (:mod:`elmo.inference.layer_cache`) and read back per
batch by :meth:`elmo.data.corpus.EncodedCorpus.collate`, live. Both stores hold ``(num_tokens, L, D)`` rows of one
16-bit dtype and answer :meth:`write` and :meth:`gather`:

* :class:`MemoryLayerStore`: one tensor in host memory (the process grows with the corpus) or on a GPU (``device``:
  batches are gathered there, without a trip through the host).
* :class:`DiskLayerStore`: an anonymous temporary file (unlinked at once, so the OS frees it when the process ends),
  read with one ``preadv`` per document, so resident memory does not grow with the corpus.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import torch

from ..errors import ElmoError

STORE_DTYPES = (torch.float16, torch.bfloat16)


class MemoryLayerStore:
    """Per-token layers in one tensor, in host memory or on a device: ``num_tokens`` rows of ``row_shape`` ``(L, D)`` in
    ``dtype`` ``torch.float16`` or ``torch.bfloat16`` (else ElmoError), allocated on ``device`` (default: the CPU;
    :meth:`gather` returns batches there), or ``rows``, an existing ``(num_tokens, L, D)`` tensor (any dtype), held."""

    def __init__(self, num_tokens: int, row_shape: tuple[int, int], dtype: torch.dtype,
                 rows: torch.Tensor | None = None, device: torch.device | str | None = None):
        if rows is None and dtype not in STORE_DTYPES:
            raise ElmoError(f"layer store: dtype must be float16 or bfloat16, got {dtype}")
        self.rows = rows if rows is not None else torch.empty((num_tokens, *row_shape), dtype=dtype, device=device)
        self.num_tokens, self.row_shape, self.dtype = self.rows.shape[0], tuple(self.rows.shape[1:]), self.rows.dtype

    @property
    def kind(self) -> str:
        """``"memory"`` (the host's) or ``"device"`` (a GPU's)."""
        return "memory" if self.rows.device.type == "cpu" else "device"

    @property
    def nbytes(self) -> int:
        return self.rows.numel() * self.rows.element_size()

    def write(self, start: int, rows: torch.Tensor) -> None:
        """Store ``rows`` ``(n, L, D)`` at rows ``start .. start + n - 1`` (cast to the store's dtype)."""
        self.rows[start:start + rows.shape[0]] = rows

    def gather(self, starts: np.ndarray, lengths: np.ndarray, width: int) -> torch.Tensor:
        """Rows ``starts[b] .. starts[b] + lengths[b] - 1`` of every document ``b``, right-padded with zeros:
        ``(B, width, L, D)`` in the store's dtype, on its device (indices are built on the host: no GPU read-back)."""
        positions = np.arange(width)
        valid = positions[None, :] < lengths[:, None]
        index = np.where(valid, starts[:, None] + positions[None, :], 0)
        device = self.rows.device
        to = {"device": device, "non_blocking": device.type == "cuda"}
        index_t, padding = torch.from_numpy(index.reshape(-1)), torch.from_numpy(~valid)
        if device.type == "cuda":
            index_t, padding = index_t.pin_memory(), padding.pin_memory()
        out = self.rows.index_select(0, index_t.to(**to)).view(len(starts), width, *self.row_shape)
        return out.masked_fill_(padding.to(**to)[:, :, None, None], 0)

    def close(self) -> None:
        """Nothing to release (the tensor goes with the last reference)."""


class DiskLayerStore:
    """Per-token layers in an anonymous temporary file (see the module docstring). ``num_tokens``, ``row_shape``,
    ``dtype`` as for :class:`MemoryLayerStore`; ``directory``: where the file is created (``None``: the system's
    temporary folder, ``$TMPDIR``). Raises ElmoError on another dtype, a ``directory`` that cannot hold a file, or too
    little free space there."""

    kind = "disk"

    def __init__(self, num_tokens: int, row_shape: tuple[int, int], dtype: torch.dtype, directory: str | None = None):
        if dtype not in STORE_DTYPES:
            raise ElmoError(f"layer store: dtype must be float16 or bfloat16, got {dtype}")
        self.num_tokens, self.row_shape, self.dtype = num_tokens, tuple(row_shape), dtype
        self.row_values = int(np.prod(row_shape))
        self.row_bytes = 2 * self.row_values
        where = directory or tempfile.gettempdir()
        free = disk_free(where)
        if free is not None and self.nbytes > free:
            raise ElmoError(f"layer store: {self.nbytes / 2**30:.2f} GiB do not fit in the {free / 2**30:.1f} GiB free in "
                            f"{where}; set TMPDIR to a larger disk or set cache_layers to memory or off",
                            field="cache_layers")
        try:
            self.file = tempfile.TemporaryFile(dir=directory)
        except OSError as exc:
            raise ElmoError(f"layer store: cannot create a temporary file in {where}: {exc}") from exc
        self.fd = self.file.fileno()
        os.ftruncate(self.fd, self.nbytes)

    @property
    def nbytes(self) -> int:
        return self.num_tokens * self.row_bytes

    def write(self, start: int, rows: torch.Tensor) -> None:
        """As :meth:`MemoryLayerStore.write`; raises ElmoError when the rows do not fit in the store or have another
        row shape, or the write falls short (a full disk)."""
        if tuple(rows.shape[1:]) != self.row_shape or start < 0 or start + rows.shape[0] > self.num_tokens:
            raise ElmoError(f"layer store: cannot write {tuple(rows.shape)} at row {start} of "
                            f"({self.num_tokens}, {', '.join(map(str, self.row_shape))})")
        data = rows.detach().to("cpu", self.dtype).contiguous().view(torch.int16).numpy()
        written = os.pwrite(self.fd, memoryview(data).cast("B"), start * self.row_bytes)
        if written != data.nbytes:
            raise ElmoError(f"layer store: short write ({written} of {data.nbytes} bytes); is the disk full?")

    def gather(self, starts: np.ndarray, lengths: np.ndarray, width: int) -> torch.Tensor:
        """As :meth:`MemoryLayerStore.gather`: ``(B, width, L, D)`` on the CPU, in a fresh buffer (no file mapping)."""
        out = np.zeros((len(starts), width, self.row_values), dtype=np.int16)
        for b, (start, n) in enumerate(zip(starts.tolist(), lengths.tolist())):
            got = os.preadv(self.fd, [out[b, :n]], start * self.row_bytes)
            if got != n * self.row_bytes:
                raise ElmoError(f"layer store: short read at row {start} ({got} of {n * self.row_bytes} bytes)")
        return torch.from_numpy(out).view(self.dtype).view(len(starts), width, *self.row_shape)

    def close(self) -> None:
        """Close (and so delete) the file."""
        self.file.close()


def disk_free(directory: str) -> int | None:
    """Bytes free for an unprivileged user in ``directory``'s file system, or ``None`` if unknown."""
    try:
        stat = os.statvfs(directory)
    except (OSError, AttributeError):
        return None
    return stat.f_bavail * stat.f_frsize
