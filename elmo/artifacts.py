"""Every file the project writes: its name (:class:`Outputs`), atomic saving and safe loading.

Every ``.pt`` file this project writes is a dict of plain Python values and tensors with a
``format`` tag, e.g. ``{"format": "elmo.bilm", "version": 1, "config": {...}, "vocab": [...], ...}``.
Files are written to a temporary file in the target directory and moved into place with
``os.replace``, so an interrupted run never leaves a half-written model; they are read with
``torch.load(..., weights_only=True)``, which cannot execute code.
"""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import torch

from .errors import ElmoError

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Outputs:
    """The one place that names every output file, under the three output folders.

    Args:
        models: ``--models-dir`` (model files and training checkpoints).
        results: ``--results-dir`` (JSON results); images: ``--images-dir`` (plots).

    The model files (see ``docs/artifacts.md``): ``word2idx.pkl``, ``forward.pt``, ``backward.pt``,
    ``bilstm.pt`` (the biLM), ``classifier.pt`` (the setting best on validation) and
    ``classifier_<setting>.pt``, ``<method>.pt`` for the static baselines' vectors.
    """

    models: Path = Path("models")
    results: Path = Path("results")
    images: Path = Path("images")

    @classmethod
    def of(cls, models_dir: str | os.PathLike, results_dir: str | os.PathLike = "results",
           images_dir: str | os.PathLike = "images") -> "Outputs":
        """From the ``--models-dir``, ``--results-dir`` and ``--images-dir`` flags."""
        return cls(Path(models_dir), Path(results_dir), Path(images_dir))

    @property
    def word2idx(self) -> Path:
        """The vocabulary, a pickled ``dict[str, int]`` (the assignment's file)."""
        return self.models / "word2idx.pkl"

    @property
    def bilm(self) -> Path:
        """``bilstm.pt``: both directions, the vocabulary and the config."""
        return self.models / "bilstm.pt"

    def lm(self, direction: str) -> Path:
        """``forward.pt`` / ``backward.pt``: one direction of the biLM."""
        return self.models / f"{direction}.pt"

    def classifier(self, setting: str | None = None) -> Path:
        """``classifier.pt`` (best setting on validation) or ``classifier_<setting>.pt``."""
        return self.models / ("classifier.pt" if setting is None else f"classifier_{setting}.pt")

    def static(self, method: str) -> Path:
        """``<method>.pt``: the vectors of a static baseline (``word2vec``, ``svd``)."""
        return self.models / f"{method}.pt"

    def checkpoint(self, name: str) -> Path:
        """``checkpoints/<name>.pt``: the training state of an unfinished run (``--resume``)."""
        return self.models / "checkpoints" / f"{name}.pt"

    def result(self, name: str) -> Path:
        """``<results>/<name>.json``: ``lm``, ``classification``, ``baselines``, ``bench``, ``seeds`` ..."""
        return self.results / f"{name}.json"

    def image(self, name: str) -> Path:
        """``<images>/<name>.png``."""
        return self.images / f"{name}.png"


def payload(kind: str, **fields: Any) -> dict[str, Any]:
    """A checkpoint dict with the ``format`` tag ``elmo.<kind>`` and :data:`FORMAT_VERSION`, then ``fields``."""
    return {"format": f"elmo.{kind}", "version": FORMAT_VERSION, **fields}


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``.

    Raises:
        ElmoError: the directory cannot be created or written.
    """
    atomic_write(path, lambda handle: handle.write(data))


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[tuple[int, str]]:
    """``(fd, name)`` of a new temporary file beside ``path`` that replaces ``path`` (``os.replace``) when the
    block ends without an error and is removed otherwise, leaving ``path`` as it was.

    Raises:
        ElmoError: the folder cannot be created or written, or the file cannot be written or moved.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ElmoError(f"cannot write to {path.parent}: {exc.strerror or exc}") from None
    try:
        yield fd, tmp
        os.replace(tmp, path)
    except OSError as exc:
        raise ElmoError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_hdf5(path: str | os.PathLike) -> Iterator[Any]:
    """An ``h5py.File`` open for writing on a temporary file beside ``path``, moved into place with
    ``os.replace`` when the block ends without an error (removed otherwise, leaving ``path`` as it was).

    Raises:
        ElmoError: the folder or the file cannot be written.
    """
    import h5py

    with _replacing(Path(path)) as (fd, tmp):
        os.close(fd)
        with h5py.File(tmp, "w") as handle:
            yield handle


def save_checkpoint(obj: dict[str, Any], path: str | os.PathLike) -> None:
    """``torch.save`` ``obj`` to ``path`` atomically (temp file + ``os.replace``).

    Raises:
        ElmoError: the directory cannot be created or written.
    """
    atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it into place with ``os.replace``.

    If ``write`` raises, the temporary file is removed and ``path`` is left as it was.

    Raises:
        ElmoError: the directory cannot be created or written (or whatever ``write`` raises).
    """
    with _replacing(Path(path)) as (fd, _), os.fdopen(fd, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())


def load_checkpoint(path: str | os.PathLike, expected_format: str | tuple[str, ...]) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True`` and check its ``format`` tag.

    Args:
        path: the ``.pt`` file.
        expected_format: accepted value(s) of the ``format`` key, e.g. ``"elmo.bilm"``.

    Returns:
        The checkpoint dict (tensors on CPU).

    Raises:
        ElmoError: the file is missing, truncated/corrupt, not loadable without executing code,
            or not a checkpoint of the expected kind.
    """
    path = Path(path)
    expected = (expected_format,) if isinstance(expected_format, str) else tuple(expected_format)
    if not path.is_file():
        raise ElmoError(f"{path}: model file not found")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, random bytes, a pickle with globals, ...
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "Unsupported global" in ln), lines[0] if lines else type(exc).__name__)
        raise ElmoError(f"{path}: not a loadable ELMo checkpoint (corrupt, truncated or unsafe): {detail}") from None
    if not isinstance(obj, dict) or obj.get("format") not in expected:
        found = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise ElmoError(f"{path}: expected a checkpoint of format {' or '.join(expected)}, found {found!r}")
    if obj.get("version") != FORMAT_VERSION:
        raise ElmoError(f"{path}: checkpoint version {obj.get('version')} is not supported (need {FORMAT_VERSION})")
    return obj


def check_writable(*folders: str | os.PathLike) -> None:
    """Create each output folder and prove it can be written, before any training starts (so a run
    never trains for minutes and then fails to save).

    Raises:
        ElmoError: naming the folder that cannot be created or written.
    """
    for folder in map(Path, folders):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test."):
                pass
        except OSError as exc:
            raise ElmoError(f"cannot write to output folder {folder}: {exc.strerror or exc}") from None


def environment_info(seed: int | None = None) -> dict[str, Any]:
    """Library versions and the seed, recorded in every checkpoint and results file."""
    import numpy
    import sklearn

    return {
        "torch": str(torch.__version__),
        "numpy": numpy.__version__,
        "scikit_learn": sklearn.__version__,
        "python": platform.python_version(),
        "seed": seed,
    }


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    import json

    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode("utf-8"))
