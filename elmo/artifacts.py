"""Every file the project writes: its name (:class:`Outputs`), atomic saving (:func:`atomic_write`) and safe loading
(:func:`load_checkpoint`); the formats and guarantees are ``docs/artifacts.md``'s "Format and safety"."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import platform
import re
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import torch

from .errors import ElmoError

FORMAT_VERSION = 1
#: a ``save_pretrained`` folder's files (:mod:`elmo.model.hub`): configuration, weights, vocabulary, model card
PRETRAINED_FILES = ("config.json", "model.safetensors", "vocab.txt", "README.md")


@dataclass(frozen=True)
class Outputs:
    """The one place that names every output file (one property or method each; see ``docs/artifacts.md``), under
    ``models`` (``--models-dir``: model files and training checkpoints), ``results`` (``--results-dir``: JSON results)
    and ``images`` (``--images-dir``: plots)."""

    models: Path = Path("models")
    results: Path = Path("results")
    images: Path = Path("images")

    @classmethod
    def of(cls, models_dir: PathArg = None, results_dir: PathArg = None, images_dir: PathArg = None) -> "Outputs":
        """From the three flags (``None``: not given); a missing one is the folder of its name in the first one given,
        else in the working folder (``--models-dir M`` alone: ``M``, ``M/results``, ``M/images``)."""
        given = [Path(d) for d in (models_dir, results_dir, images_dir) if d is not None]
        folders = [Path(d) if d is not None else (given[0] / name if given else Path(name))
                   for d, name in zip((models_dir, results_dir, images_dir), ("models", "results", "images"))]
        return cls(*folders)

    @property
    def word2idx(self) -> Path:
        """``word2idx.pkl``: the vocabulary, a pickled ``dict[str, int]`` (classification.py, baselines.py read it)."""
        return self.models / "word2idx.pkl"

    @property
    def bilm(self) -> Path:
        """``bilstm.pt``: both directions, the vocabulary and the config."""
        return self.models / "bilstm.pt"

    @property
    def pretrained_dir(self) -> Path:
        """``bilm/``: the trained biLM, with its training softmax and vocabulary, as a ``save_pretrained`` folder
        (:mod:`elmo.model.hub`, :data:`PRETRAINED_FILES`; who writes it: ``docs/artifacts.md``)."""
        return self.models / "bilm"

    @property
    def pretrained(self) -> list[Path]:
        """The files of :attr:`pretrained_dir` (:data:`PRETRAINED_FILES`)."""
        return [self.pretrained_dir / name for name in PRETRAINED_FILES]

    @property
    def published_lm(self) -> Path:
        """``published_lm.pt``: the published architecture as earlier versions of ``pretrain --architecture`` and
        ``finetune`` wrote it; still read, no longer written (a new :attr:`pretrained_dir` removes it)."""
        return self.models / "published_lm.pt"

    def lm(self, direction: str) -> Path:
        """``forward.pt`` / ``backward.pt``: one direction of the biLM."""
        return self.models / f"{direction}.pt"

    def classifier(self, mix: str | None = None) -> Path:
        """``classifier.pt`` (the layer mix best on validation) or ``classifier_<mix>.pt``."""
        return self.models / ("classifier.pt" if mix is None else f"classifier_{mix}.pt")

    def classifiers(self) -> list[Path]:
        """The classifier files ``--models-dir`` holds now (``classifier.pt``, ``classifier_<mix>.pt``), sorted."""
        return sorted(p for p in self.models.glob("classifier*.pt") if re.fullmatch(r"classifier(_\w+)?\.pt", p.name))

    @staticmethod
    def stale(path: Path) -> Path:
        """Where a classifier file goes when a new biLM replaces its own: ``<name>.stale`` beside it, or the first free
        ``<name>.stale.2``, ``.stale.3`` ... (nothing is written over); no command reads these names."""
        target, number = path.with_name(path.name + ".stale"), 1
        while target.exists() or target.is_symlink():
            number += 1
            target = path.with_name(f"{path.name}.stale.{number}")
        return target

    def static(self, method: str) -> Path:
        """``<method>.pt``: the vectors of a static baseline (``word2vec``, ``svd``)."""
        return self.models / f"{method}.pt"

    def checkpoint(self, name: str) -> Path:
        """``checkpoints/<name>.pt``: the training state of an unfinished run (``--resume``)."""
        return self.models / "checkpoints" / f"{name}.pt"

    def log(self, name: str) -> Path:
        """``checkpoints/<name>.log``: the stderr of a training process run beside another (kept when it fails)."""
        return self.models / "checkpoints" / f"{name}.log"

    def result(self, name: str) -> Path:
        """``<results>/<name>.json``: ``lm``, ``classification``, ``baselines``, ``bench``, ``seeds`` ..."""
        return self.results / f"{name}.json"

    def image(self, name: str) -> Path:
        """``<images>/<name>.png``."""
        return self.images / f"{name}.png"

    def labelled(self, *paths: Path) -> dict[str, Path]:
        """Output files of a run keyed by the flag of their folder, as :func:`refuse_overwriting_inputs` names
        them: ``{"--models-dir (bilstm.pt)": models/bilstm.pt, "--results-dir (lm.json)": ...}``."""
        folders = (("--models-dir", self.models), ("--results-dir", self.results), ("--images-dir", self.images))
        out = {}
        for path in paths:
            flag, folder = next(((f, d) for f, d in folders if path.is_relative_to(d)), ("output", path.parent))
            out[f"{flag} ({path.relative_to(folder)})"] = path
        return out


def payload(kind: str, **fields: Any) -> dict[str, Any]:
    """A checkpoint dict with the ``format`` tag ``elmo.<kind>`` and :data:`FORMAT_VERSION`, then ``fields``."""
    return {"format": f"elmo.{kind}", "version": FORMAT_VERSION, **fields}


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` with :func:`atomic_write` (raises :class:`ElmoError` as it does)."""
    atomic_write(path, lambda handle: handle.write(data))


def _beside(path: Path, flag: str | None, make: Callable[[Path], Any]) -> Any:
    """``make(tmp)`` for the first free temporary name ``tmp`` beside ``path`` (``.<name>.<8 hex digits>.tmp``;
    ``make`` raises ``FileExistsError`` when it is taken), its folder created first. Raises :class:`ElmoError` naming
    the file in that folder's way (and ``flag``, the flag or argument naming ``path``) or why the folder cannot be
    created or written (100 names taken included)."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
        where = f" (in {flag} {path})" if flag else ""
        raise ElmoError(f"{blocking} is a file, not a folder{where}: choose another path or move the file") from None
    except OSError as exc:
        raise ElmoError(f"cannot create the folder {folder}{f' ({flag})' if flag else ''}: "
                        f"{exc.strerror or exc}") from None
    try:
        for _ in range(100):
            with contextlib.suppress(FileExistsError):
                return make(folder / f".{path.name}.{secrets.token_hex(4)}.tmp")
        raise FileExistsError(f"no free temporary name beside {path}")
    except OSError as exc:
        raise ElmoError(f"cannot write to {folder}: {exc.strerror or exc}") from None


def remove_file(path: str | os.PathLike) -> None:
    """Delete ``path`` (when it exists) and the temporary files an atomic write of it left when its process was
    killed mid-write (``.<name>.<8 hex digits>.tmp`` beside it, :func:`_beside`'s names)."""
    path = Path(path)
    path.unlink(missing_ok=True)
    for leftover in _leftovers(path, Path.is_file):
        leftover.unlink(missing_ok=True)


def _leftovers(path: Path, kind: Callable[[Path], bool]) -> list[Path]:
    """The ``kind`` (``Path.is_file``, ``Path.is_dir``) of what atomic writes of ``path`` killed mid-write left beside
    it: ``.<name>.<8 hex digits>.tmp`` (:func:`_replacing`, :func:`atomic_folder`) and ``...old.tmp`` (a replaced folder)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}(\.old)?\.tmp")
    return [p for p in path.parent.glob(f".{glob.escape(path.name)}.*.tmp") if pattern.fullmatch(p.name) and kind(p)]


@contextlib.contextmanager
def _replacing(path: Path, flag: str | None = None) -> Iterator[tuple[int, str]]:
    """``(fd, name)`` of a new temporary file beside ``path`` (:func:`_beside`) with the permissions ``path`` will
    have: those of the file it replaces, else ``0o666`` less the umask (what ``open()`` gives; ``tempfile.mkstemp``
    would give ``0o600``). Moved onto ``path`` (``os.replace``) when the block ends without an error, else removed.
    Raises :class:`ElmoError` when the folder (:func:`_beside`) or the file cannot be written or moved."""
    mode = None
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.stat(path).st_mode) & 0o777

    def new_file(tmp: Path) -> tuple[int, str]:  # FileExistsError when ``tmp`` exists
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                os.close(fd)
                os.remove(tmp)
                raise
        return fd, str(tmp)

    fd, tmp = _beside(path, flag, new_file)
    try:
        yield fd, tmp
        os.replace(tmp, path)
    except OSError as exc:
        raise ElmoError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_hdf5(path: str | os.PathLike, flag: str | None = None) -> Iterator[Any]:
    """An ``h5py.File`` open for writing on a temporary file that replaces ``path`` as :func:`atomic_write` says;
    ``flag``: the flag or argument that named ``path``, for :class:`ElmoError`'s messages (raised as it does)."""
    import h5py

    with _replacing(Path(path), flag) as (fd, tmp):
        os.close(fd)
        with h5py.File(tmp, "w") as handle:
            yield handle


@contextlib.contextmanager
def atomic_folder(folder: str | os.PathLike, flag: str | None = None) -> Iterator[Path]:
    """A whole folder written at once (``docs/artifacts.md``): yields a new empty folder beside ``folder``
    (:func:`_beside`, ``0o777`` less the umask) to fill, which takes ``folder``'s place by two renames when the block
    ends without an error, the old folder (and any file someone else put in it) being deleted; on an error it is
    deleted and ``folder`` is left as it was. A write also deletes the temporary folders a killed run left. Raises
    :class:`ElmoError` when the parent folder cannot be created or written, or the folders cannot be renamed."""
    folder = Path(folder)
    tmp = _beside(folder, flag, lambda tmp: (tmp.mkdir(), tmp)[1])  # 0o777 less the umask
    old = tmp.with_name(tmp.name[:-len(".tmp")] + ".old.tmp")
    try:
        yield tmp
        if folder.is_dir():
            os.rename(folder, old)
        os.rename(tmp, folder)
    except OSError as exc:
        if old.is_dir() and not folder.exists():
            os.rename(old, folder)
        raise ElmoError(f"cannot write {folder}: {exc.strerror or exc}") from None
    finally:
        for leftover in (tmp, old):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
    for leftover in _leftovers(folder, Path.is_dir):  # what a killed run left
        shutil.rmtree(leftover, ignore_errors=True)


def save_checkpoint(obj: dict[str, Any], path: str | os.PathLike) -> None:
    """``torch.save`` ``obj`` to ``path`` with :func:`atomic_write` (raises :class:`ElmoError` as it does)."""
    atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it into place with ``os.replace``; if
    ``write`` raises, ``path`` is left as it was (permissions: :func:`_replacing`). Raises :class:`ElmoError` when the
    folder cannot be created or written (or whatever ``write`` raises)."""
    with _replacing(Path(path)) as (fd, _), os.fdopen(fd, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())


def load_checkpoint(path: str | os.PathLike, expected_format: str | tuple[str, ...]) -> dict[str, Any]:
    """The checkpoint dict of the ``.pt`` file ``path`` (tensors on CPU, ``weights_only=True``), its ``format`` tag one
    of ``expected_format`` (e.g. ``"elmo.bilm"``) and its ``version`` :data:`FORMAT_VERSION`. Raises :class:`ElmoError`
    when the file is missing, truncated/corrupt, not loadable without executing code, or of another format or version.
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


def check_writable(*folders: str | os.PathLike, flags: tuple[str | None, ...] = ()) -> None:
    """Prove each output folder writable before any training starts, without creating it (``docs/artifacts.md``): a
    test file is written and removed in the folder or, when it does not exist yet, in its nearest existing parent.
    ``flags``: the flag naming each folder (``--models-dir`` ...). Raises :class:`ElmoError` naming the folder that
    cannot be created or written (and its flag), or the file in its way."""
    for folder, flag in zip(map(Path, folders), (*flags, *(None,) * len(folders))):
        existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
        if not existing.is_dir():
            raise ElmoError(f"{existing} is a file, not a folder{f' (in {flag} {folder})' if flag else ''}: choose "
                            "another path or move the file")
        try:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=".write-test."):
                pass
        except OSError as exc:
            what = f"write to output folder {folder}" if existing == folder else f"create the folder {folder}"
            raise ElmoError(f"cannot {what}{f' ({flag})' if flag else ''}: {exc.strerror or exc}") from None


PathArg = str | os.PathLike | None


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    """``(resolved path, (device, inode) or None when it does not exist)``."""
    with contextlib.suppress(OSError):
        st = os.stat(path)
        return os.path.realpath(path), (st.st_dev, st.st_ino)
    return os.path.realpath(path), None


def refuse_overwriting_inputs(inputs: Mapping[str, PathArg], outputs: Mapping[str, PathArg]) -> None:
    """Stop a command that would write over one of its own inputs, before it writes anything. An output is an input
    when both resolve to the same path (symbolic links followed, ``..`` removed) or both exist and are the same file on
    disk (same device and inode: a hard link, a second name of a folder, a case-insensitive file system). ``inputs``:
    every file the command reads, keyed by the flag or argument naming it as the user sees it (``"input_file"``,
    ``"--data-dir (train.csv)"``; ``None``: not given, skipped); ``outputs``: every file it writes, keyed the same way
    (:meth:`Outputs.labelled`). Raises :class:`ElmoError` naming the output's and the input's flag and path."""
    seen = [(name, Path(path), _identity(Path(path))) for name, path in inputs.items() if path is not None]
    for out_name, out_path in outputs.items():
        if out_path is None:
            continue
        resolved, inode = _identity(Path(out_path))
        for in_name, in_path, (in_resolved, in_inode) in seen:
            if resolved == in_resolved or (inode is not None and inode == in_inode):
                raise ElmoError(f"{out_name} {out_path} is the same file as {in_name} {in_path}: writing it would "
                                "destroy that input; choose another output path")


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
    """Write ``obj`` as indented JSON with :func:`atomic_write`."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode("utf-8"))
