"""Model files: what ``forward.pt``, ``backward.pt``, ``bilstm.pt``, ``classifier*.pt`` and the static baselines'
``<method>.pt`` hold, and how they are rebuilt (formats: :mod:`elmo.artifacts`, docs/artifacts.md); the
``published_lm.pt`` of earlier versions is read, no longer written (the published architecture is saved as a
``save_pretrained`` folder, :mod:`elmo.model.hub`). :func:`open_bilm` opens whichever biLM a folder holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..artifacts import PRETRAINED_FILES, Outputs, environment_info, load_checkpoint, payload, save_checkpoint
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from . import hub
from .bilm import BiLM, weights_digest
from .bilm_config import BiLMConfig
from .language_model import LanguageModel
from .published_io import config_from_options, load_published_bilm


def lm_checkpoint(lm: LanguageModel, vocab: Vocabulary, meta: dict[str, Any]) -> dict[str, Any]:
    """The ``forward.pt`` / ``backward.pt`` payload of one direction."""
    return payload("lm", direction=lm.direction, config=lm.config.saved(), vocab=list(vocab.itos),
                   state_dict=lm.state_dict(), meta=meta)


def save_bilm(bilm: BiLM, vocab: Vocabulary, path: str | os.PathLike, meta: dict[str, Any]) -> None:
    """Write ``bilstm.pt``: both directions, the vocabulary and the config, atomically."""
    save_checkpoint(payload("bilm", config=bilm.config.saved(), vocab=list(vocab.itos),
                            forward=bilm.forward_lm.state_dict(), backward=bilm.backward_lm.state_dict(),
                            meta=meta), path)


def load_bilm(path: str | os.PathLike) -> tuple[BiLM, Vocabulary, dict[str, Any]]:
    """Rebuild the biLM from ``bilstm.pt`` alone (``weights_only=True``): ``(bilm, vocab, meta)``, the biLM in eval mode
    on the CPU with its ``vocab`` and ``card`` (``meta["card"]``) set for ``save_pretrained``. Raises ElmoError:
    missing/corrupt file, not an ``elmo.bilm`` checkpoint, or weights that do not fit the stored config."""
    ckpt = load_checkpoint(path, "elmo.bilm")
    try:
        config = BiLMConfig(**ckpt["config"])
        vocab = Vocabulary(ckpt["vocab"])
        if len(vocab) != config.vocab_size:
            raise ElmoError(f"vocabulary has {len(vocab)} words but the config says {config.vocab_size}")
        bilm = BiLM(config)
        bilm.forward_lm.load_state_dict(ckpt["forward"])
        bilm.backward_lm.load_state_dict(ckpt["backward"])
    except (KeyError, TypeError, RuntimeError, ElmoError) as exc:
        raise ElmoError(f"{path}: inconsistent biLM checkpoint: {str(exc).splitlines()[0]}") from None
    meta = ckpt.get("meta", {})
    bilm.vocab, bilm.card = vocab, meta.get("card")
    return bilm.eval(), vocab, meta


def published_lm_bilm(path: str | os.PathLike) -> tuple[BiLM, Vocabulary, dict[str, Any]]:
    """:func:`load_bilm` of a ``published_lm.pt`` as earlier versions of ``pretrain --architecture`` and ``finetune``
    wrote it (``options``: bilm-tf's ``options.json``, ``lm_config``: :data:`~elmo.model.bilm_config.HEAD_FIELDS`,
    ``state_dict``, ``vocab``, ``meta``): the biLM without its softmax, ``source`` ``(path,)``, ``config.weights_digest``
    identifying the weights (as :func:`load_published_bilm`'s, so that a classifier only loads onto them). Raises
    ElmoError: missing or corrupt file, not an ``elmo.published_lm`` file, or weights that do not fit its options."""
    ckpt = load_checkpoint(path, "elmo.published_lm")
    try:
        vocab = Vocabulary(ckpt["vocab"])
        config = replace(config_from_options(ckpt["options"]), **ckpt["lm_config"])
        if len(vocab) != config.vocab_size:
            raise ElmoError(f"vocabulary has {len(vocab)} words but the softmax {config.vocab_size}")
        model = BiLM(config)
        model.load_state_dict(BiLM.renamed_state(ckpt["state_dict"]))
    except (KeyError, TypeError, RuntimeError, ElmoError) as exc:
        raise ElmoError(f"{path}: inconsistent published_lm file: {str(exc).splitlines()[0]}") from None
    bilm = model.without_head()
    bilm.config = replace(bilm.config, weights_digest=weights_digest(bilm))
    meta = ckpt.get("meta", {})
    bilm.vocab, bilm.card, bilm.source = vocab, meta.get("card"), (str(Path(path).resolve()),)
    return bilm.eval(), vocab, meta


#: what :func:`find_bilm` looks for in a folder, in this order
BILM_FILES = ("bilstm.pt", "published_lm.pt", f"bilm/{hub.CONFIG} + bilm/{hub.WEIGHTS}", f"{hub.CONFIG} + {hub.WEIGHTS}",
              "options.json + weights.hdf5")


@dataclass(frozen=True)
class BiLMFiles:
    """Where a biLM is: ``kind`` (``"bilstm"``, ``"published_lm"``, ``"pretrained"``: :mod:`elmo.model.hub`, or
    ``"bilm_tf"``; what each is: :func:`open_bilm`) and its ``files`` (one, or the options and weight files)."""

    kind: str
    files: tuple[Path, ...]

    def __str__(self) -> str:
        return " + ".join(str(f) for f in self.files)

    @property
    def read(self) -> list[Path]:
        """The files opening it reads (what no command may write over): :func:`files_read` of :attr:`files`."""
        return files_read(self.files)


def files_read(paths: Sequence[Path]) -> list[Path]:
    """The files a biLM at ``paths`` is read from: each path, a ``save_pretrained`` folder's configuration, weights and
    vocabulary in place of the folder."""
    return [f for path in paths for f in ((path / hub.CONFIG, path / hub.WEIGHTS, path / hub.VOCAB)
                                          if path.is_dir() else (path,))]


def find_bilm(path: str | os.PathLike) -> BiLMFiles:
    """Which biLM ``path`` holds, without reading it: a folder's first of :data:`BILM_FILES` (``bilm/``:
    :attr:`~elmo.artifacts.Outputs.pretrained_dir`); a Hub model id (``owner/name``, not a path here); a file
    ``published_lm.pt``; a ``save_pretrained`` folder's ``config.json`` or ``model.safetensors`` (the folder); an
    ``options.json`` (any ``*.json``, ``weights.hdf5`` beside it) or ``weights.hdf5`` (any ``*.hdf5``, ``options.json``
    beside it); any other file is read as our ``bilstm.pt``. Raises ElmoError: ``path`` missing or a folder holding
    none (one line naming it and what was looked for)."""
    if hub.is_hub_id(path):
        return BiLMFiles("pretrained", (Path(path),))
    path = Path(path)
    if path.is_dir():
        if found := models_in(path):  # a save_pretrained folder is opened as the folder
            return BiLMFiles("pretrained", (found[0].files[0].parent,)) if found[0].kind == "pretrained" else found[0]
    elif path.is_file():
        if path.name == Outputs(models=path.parent).published_lm.name:
            return BiLMFiles("published_lm", (path,))
        if path.name in (hub.CONFIG, hub.WEIGHTS) and (path.parent / hub.WEIGHTS).is_file():
            return BiLMFiles("pretrained", (path.parent,))
        if path.suffix == ".json":
            return BiLMFiles("bilm_tf", (path, path.with_name("weights.hdf5")))
        if path.suffix == ".hdf5":
            return BiLMFiles("bilm_tf", (path.with_name("options.json"), path))
        return BiLMFiles("bilstm", (path,))
    missing = "" if path.is_dir() else " (no such file or folder)"
    raise ElmoError(f"{path} holds no biLM{missing}: looked for {', '.join(BILM_FILES)} (train one with "
                    f"`python ELMO.py --models-dir {path}`)")


def models_in(folder: str | os.PathLike) -> list[BiLMFiles]:
    """Every biLM ``folder`` holds, in :data:`BILM_FILES`' order (:func:`find_bilm` opens only the first), each with
    all its files (a ``save_pretrained`` folder's vocabulary and card too, when there); ``[]`` for a folder holding
    none, or no folder. Reads no file."""
    folder, outputs = Path(folder), Outputs(models=Path(folder))
    saved = [("pretrained", tuple(where / name for name in PRETRAINED_FILES)) for where in (outputs.pretrained_dir, folder)]
    kinds = (("bilstm", (outputs.bilm,)), ("published_lm", (outputs.published_lm,)), *saved,
             ("bilm_tf", (folder / "options.json", folder / "weights.hdf5")))
    return [BiLMFiles(kind, files if kind != "pretrained" else tuple(f for f in files if f.is_file()))
            for kind, files in kinds if all(f.is_file() for f in files[:2])]


@dataclass
class OpenedBiLM:
    """What :func:`open_bilm` returns: the biLM (eval mode, on the CPU), its vocabulary (``None`` for bilm-tf's
    character-only files), where it came from (:class:`BiLMFiles`) and the file's ``meta`` (``{}`` for bilm-tf's)."""

    bilm: BiLM
    vocab: Vocabulary | None
    source: BiLMFiles
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The file(s) it was read from, for messages (``models/bilstm.pt``)."""
        return str(self.source)


def open_bilm(path: str | os.PathLike, weight_file: str | os.PathLike | None = None) -> OpenedBiLM:
    """Open any biLM the project reads: the one way every command and class of the library opens one. ``path``: a
    folder or one of its files (:func:`find_bilm`): our ``bilstm.pt`` (:func:`load_bilm`), an earlier version's
    ``published_lm.pt`` (:func:`published_lm_bilm`), a ``save_pretrained`` folder or Hub model id (the biLM of a saved
    biLM, of ``pretrain --architecture``'s or ``finetune``'s biLM with its softmax, of an ``Elmo`` layer or of a
    classifier), or bilm-tf's ``options.json`` + ``weights.hdf5`` (:func:`load_published_bilm`); ``weight_file``:
    bilm-tf's weight file (any name), ``path`` then its options file (any name). Raises ElmoError: ``path`` holds no
    biLM (:func:`find_bilm`), or corrupt or inconsistent files (the loaders)."""
    source = find_bilm(path) if weight_file is None else BiLMFiles("bilm_tf", (Path(path), Path(weight_file)))
    if source.kind in ("bilstm", "published_lm"):
        bilm, vocab, meta = (load_bilm if source.kind == "bilstm" else published_lm_bilm)(source.files[0])
        return OpenedBiLM(bilm, vocab, source, meta)
    if source.kind == "pretrained":
        model = hub.load_pretrained(source.files[0])
        # a biLM, or an Elmo layer's or a classifier's biLM; without a training softmax, which the layers never read
        bilm = getattr(model, "bilm", model).without_head()
        return OpenedBiLM(bilm, model.vocab, source, {"card": model.card})
    return OpenedBiLM(load_published_bilm(*source.files), None, source)


def save_static_vectors(vectors: np.ndarray, vocab: Vocabulary, info: dict[str, Any], seed: int,
                        path: str | os.PathLike) -> None:
    """Write a static baseline's ``(V, D)`` vectors with the vocabulary and how they were trained."""
    save_checkpoint(payload("static", vectors=torch.from_numpy(vectors), vocab=list(vocab.itos), info=info,
                            meta=environment_info(seed)), path)
