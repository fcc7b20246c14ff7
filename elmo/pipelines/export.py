"""Writing a biLM as bilm-tf's files (``python -m elmo export``), for AllenNLP, bilm-tf and our ``ElmoEmbedder``: the
biLM ``--models-dir`` holds (:func:`~elmo.model.serialization.open_bilm`; its vocabulary, if any, becomes ``vocab.txt``)
or a bilm-tf biLM (``--options-file``, ``--weight-file``, optional ``--vocab-file``), as ``options.json``,
``weights.hdf5`` and ``vocab.txt`` (:mod:`elmo.model.published_io`; what they hold, in which order they are written
and why they are bit for bit: ``docs/published_elmo.md``, "Exporting"). Our own biLM is refused
(:func:`bilm_tf_refusal`); the training softmax is not written. ``--format hub``: :func:`export_pretrained`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..artifacts import check_writable, load_checkpoint, refuse_overwriting_inputs
from ..data.vocab import SPECIALS
from ..errors import ElmoError
from ..inference.text_classifier import TextClassifier
from ..model import hub
from ..model.bilm import BiLM
from ..model.bilm_config import BiLMConfig
from ..model.published_io import (
    options_of,
    read_vocabulary,
    save_published_bilm,
    tf_datasets,
)
from ..model.serialization import BILM_FILES, BiLMFiles, find_bilm, open_bilm
from .common import option, refuse_another_model

#: what ``export`` writes into its folder, bilm-tf's names: options, weights, vocabulary
EXPORT_FILES = ("options.json", "weights.hdf5", "vocab.txt")


@dataclass
class ExportArgs:
    """Flags of ``python -m elmo export`` (which biLMs: module docstring; ``--vocab-file``: ``docs/published_elmo.md``).
    The files in ``--out`` (created if missing) of the names ``--format`` writes are replaced only when they are this
    model's own earlier export (:func:`~elmo.pipelines.common.refuse_another_model`), or with ``--overwrite``."""

    out: str = option(None, "the folder to write the files into", required=True, metavar="DIR")
    models_dir: str | None = option(None, "the folder holding the model (bilm-tf: any biLM of the published architecture)")
    options_file: str | None = option(None, "a bilm-tf biLM's options.json instead")
    weight_file: str | None = option(None, "its weights.hdf5 (with --options-file)")
    vocab_file: str | None = option(None, "tokens for vocab.txt (with --options-file)")
    format: str = option("bilm-tf", "bilm-tf: options.json, weights.hdf5, vocab.txt; hub: save_pretrained's "
                         "config.json, model.safetensors, vocab.txt, README.md", choices=("bilm-tf", "hub"))
    classifier: str | None = option(None, "--format hub: this classifier file of --models-dir (its biLM included)",
                                    metavar="FILE")
    push_to_hub: str | None = option(None, "--format hub: also upload --out to this Hub model id (hf auth login)",
                                     metavar="REPO_ID")
    overwrite: bool = option(False, "replace another model's files in --out (else refused)")
    quiet: bool = option(False, "print nothing but errors")

    def check(self) -> None:
        """One biLM: a ``--models-dir`` or both bilm-tf files. Raises :class:`ElmoError`."""
        published = self.options_file is not None or self.weight_file is not None
        if (self.models_dir is not None) == published:
            raise ElmoError("give one biLM: the --models-dir of `pretrain --architecture` or a bilm-tf biLM "
                            "(--options-file and --weight-file)")
        if self.models_dir is not None and self.vocab_file is not None:
            raise ElmoError("--vocab-file goes with --options-file: a trained --models-dir writes its own vocabulary")
        if self.format != "hub" and (self.classifier or self.push_to_hub):
            raise ElmoError(f"{'--classifier' if self.classifier else '--push-to-hub'} goes with --format hub")
        if self.classifier and self.models_dir is None:
            raise ElmoError("--classifier names a file of --models-dir: give --models-dir")
        if self.format == "hub" and self.vocab_file is not None:
            raise ElmoError("--vocab-file goes with --format bilm-tf")
        if published and (self.options_file is None or self.weight_file is None):
            given, missing = ("--options-file", "--weight-file") if self.weight_file is None else \
                ("--weight-file", "--options-file")
            raise ElmoError(f"{given} needs {missing} too: a bilm-tf biLM is the pair of files")


def output_files(out_dir: str | Path) -> dict[str, Path]:
    """``{"options.json": out_dir/options.json, ...}``: the files ``export`` writes (:data:`EXPORT_FILES`)."""
    return {name: Path(out_dir) / name for name in EXPORT_FILES}


def bilm_tf_refusal(bilm: BiLM) -> str:
    """Why our :class:`~elmo.model.bilm.BiLM` cannot be written as bilm-tf's files (its
    :meth:`~elmo.model.bilm.BiLM.bilm_tf_blockers`), as the message of the :class:`ElmoError` of :func:`export_bilm`."""
    return ("our biLM cannot be written as bilm-tf's files: " + "; and ".join(bilm.bilm_tf_blockers()) + ". Use it as "
            "it is: ElmoEmbedder.from_pretrained(models) or embed --models-dir models/ (docs/published_elmo.md, Exporting)")


def allennlp_limits(config: BiLMConfig) -> list[str]:
    """What in ``config`` AllenNLP's ``_ElmoBiLm`` does not read (it needs skip connections and an LSTM projection,
    dataset ``W_P_0``); bilm-tf and this toolkit read both. Empty for every published model."""
    limits = []
    if not config.residual:
        limits.append("lstm.use_skip_connections is false (AllenNLP supports only biLMs with residual connections)")
    if config.output_size >= config.hidden_size:
        limits.append(f"lstm.projection_dim {config.output_size} equals lstm.dim, so there is no projection W_P_0 "
                      "(AllenNLP's ElmoLstm reads one)")
    return limits


def bilm_tf_difference(bilm: BiLM, out_dir: str | Path) -> tuple[Path, str] | None:
    """What :func:`export_bilm` would replace in ``out_dir`` that is not ``bilm``'s own earlier export: ``None`` if it
    holds none of :data:`EXPORT_FILES` or holds ``bilm`` (same ``options.json``, every ``weights.hdf5`` dataset bit for
    bit; ``vocab.txt``, unread by a character biLM, may differ); else ``(file, what it is)``, the first other file."""
    import h5py

    files = output_files(out_dir)
    present = [path for path in files.values() if path.exists()]
    if not present:
        return None
    if not files["options.json"].is_file() or not files["weights.hdf5"].is_file():
        return present[0], "not a bilm-tf export (options.json or weights.hdf5 missing)"
    try:
        options = json.loads(files["options.json"].read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return files["options.json"], "a file that does not load"
    if options != json.loads(json.dumps(options_of(bilm.config))):
        return files["options.json"], "a biLM of another architecture"
    ours, saved = tf_datasets(bilm), {}
    try:
        with h5py.File(files["weights.hdf5"], "r") as weights:
            weights.visititems(lambda name, item: saved.__setitem__(name, item[()])
                               if isinstance(item, h5py.Dataset) else None)
    except (OSError, ValueError):
        return files["weights.hdf5"], "a file that does not load"
    if saved.keys() != ours.keys() or not all(np.array_equal(saved[k], v) for k, v in ours.items()):
        return files["weights.hdf5"], "another biLM (other weights)"
    return None


def export_bilm(bilm: BiLM, out_dir: str | Path, words: Iterable[str] = ()) -> dict[str, Any]:
    """Write ``bilm`` (a :class:`~elmo.model.bilm.BiLM`, any device) into ``out_dir`` (created if missing) as bilm-tf's
    files: :func:`~elmo.model.published_io.save_published_bilm` of ``words``. Returns ``{"options_file", "weight_file",
    "vocab_file"}`` (paths as str), its counts (``"datasets"``, ``"parameters"``, ``"vocabulary"``) and
    ``"allennlp_limits"`` (:func:`allennlp_limits`). Raises :class:`ElmoError`: ``bilm`` is our biLM
    (:func:`bilm_tf_refusal`); as ``save_published_bilm`` (a bad vocabulary word, an unwritable ``out_dir``)."""
    if bilm.bilm_tf_blockers():
        raise ElmoError(bilm_tf_refusal(bilm))
    files = output_files(out_dir)
    check_writable(out_dir, flags=("--out",))
    written = save_published_bilm(bilm, files["options.json"], files["weights.hdf5"], files["vocab.txt"], words)
    return {"options_file": str(files["options.json"]), "weight_file": str(files["weights.hdf5"]),
            "vocab_file": str(files["vocab.txt"]), **written, "allennlp_limits": allennlp_limits(bilm.config)}


def inputs_of(models_dir: str | Path | None, found: BiLMFiles | None = None) -> dict[str, Path]:
    """The files of the biLM ``models_dir`` holds that ``export`` reads (:attr:`~elmo.model.serialization.BiLMFiles.read`),
    keyed as ``--models-dir (bilm/config.json)``; none without ``models_dir`` or a biLM in it. ``found``: what
    :func:`~elmo.model.serialization.find_bilm` already said of it."""
    try:
        read = [] if models_dir is None else (found or find_bilm(models_dir)).read
    except ElmoError:  # export --format hub --classifier: the classifier's biLM may be elsewhere
        read = []
    return {f"--models-dir ({f.relative_to(models_dir) if f.is_relative_to(models_dir) else f.name})": f
            for f in read if f.is_file()}


def export(config: ExportArgs) -> dict[str, Any]:
    """``python -m elmo export``: the biLM of ``config`` into ``config.out``; returns :func:`export_bilm`'s summary
    (``--format hub``: :func:`export_pretrained`'s). Raises :class:`ElmoError` when an output is one of the inputs
    (both named, before anything is read); on a missing or invalid options, weight, model or vocabulary file (named);
    on our own biLM (:func:`bilm_tf_refusal`); when ``--out`` holds another model's file (:func:`bilm_tf_difference`)
    and no ``--overwrite`` is given, or cannot be written."""
    if config.format == "hub":
        return export_pretrained(config)
    try:  # which biLM --models-dir holds, nothing read yet
        trained = None if config.models_dir is None else find_bilm(config.models_dir)
    except ElmoError:
        raise ElmoError(f"--models-dir {config.models_dir} holds no biLM: looked for {', '.join(BILM_FILES)}; train "
                        "the published architecture with `python -m elmo pretrain --architecture elmo-small "
                        f"--models-dir {config.models_dir}` first") from None
    refuse_overwriting_inputs({"--options-file": config.options_file, "--weight-file": config.weight_file,
                               "--vocab-file": config.vocab_file, **inputs_of(config.models_dir, trained)},
                              {f"--out ({name})": path for name, path in output_files(config.out).items()})
    if trained is not None:
        opened = open_bilm(*trained.files)
        if opened.bilm.bilm_tf_blockers():
            raise ElmoError(f"--models-dir {config.models_dir}: {bilm_tf_refusal(opened.bilm)}")
        bilm, words = opened.bilm, [] if opened.vocab is None else opened.vocab.itos[len(SPECIALS):]
    else:
        bilm = open_bilm(config.options_file, config.weight_file).bilm
        words = read_vocabulary(config.vocab_file) if config.vocab_file is not None else []
    refuse_another_model("--out", Path(config.out), bilm_tf_difference(bilm, config.out), config.overwrite)
    summary = export_bilm(bilm, config.out, words)
    if not config.quiet:
        print(f"wrote {summary['weight_file']} ({summary['datasets']} datasets, {summary['parameters']:,} numbers), "
              f"{summary['vocab_file']} ({summary['vocabulary']:,} tokens) and {summary['options_file']}", file=sys.stderr)
        for limit in summary["allennlp_limits"]:
            print(f"note: AllenNLP will not read these files: {limit}; bilm-tf and this toolkit do", file=sys.stderr)
    return summary


def export_pretrained(config: ExportArgs) -> dict[str, Any]:
    """``export --format hub``: the biLM of ``--models-dir`` (any :func:`~elmo.model.serialization.open_bilm` reads),
    its ``--classifier``, or bilm-tf's files, written with ``save_pretrained`` into ``--out`` (and uploaded to
    ``--push-to-hub``), the model card from what the training runs recorded; returns ``{"out", "kind", "files",
    "pushed"}``. Raises :class:`ElmoError` when an output is one of the inputs; on a missing or invalid model; when
    ``--out`` holds another model's file (:meth:`~elmo.model.hub.HubMixin.saved_difference`) and no ``--overwrite`` is
    given, or cannot be written."""
    outputs = {f"--out ({name})": Path(config.out) / name for name in (hub.CONFIG, hub.WEIGHTS, hub.VOCAB, hub.CARD)}
    classifier = None if config.classifier is None else Path(config.models_dir) / config.classifier
    refuse_overwriting_inputs({"--options-file": config.options_file, "--weight-file": config.weight_file,
                               "--classifier": classifier, **inputs_of(config.models_dir)}, outputs)
    if classifier is None:  # bilm-tf's files, or the biLM --models-dir holds (there is then no --weight-file)
        model = open_bilm(config.options_file if config.models_dir is None else config.models_dir, config.weight_file).bilm
    else:
        model = TextClassifier.from_pretrained(config.models_dir, config.classifier, device="cpu", precision="fp32").model
        saved = load_checkpoint(classifier, "elmo.classifier")
        bilm_card = None if "bilm_tf" in saved or "bilm_source" in saved else model.bilm.card  # the folder's own biLM
        model.card = {**(bilm_card or {}), **(saved.get("card") or {})}
    refuse_another_model("--out", Path(config.out), model.saved_difference(config.out), config.overwrite)
    pushed = model.save_pretrained(config.out, push_to_hub=config.push_to_hub is not None, repo_id=config.push_to_hub)
    files = sorted(f.name for f in outputs.values() if f.is_file())
    if not config.quiet:
        print(f"wrote {model.hub_kind} to {config.out}: {', '.join(files)}" + (f"; pushed: {pushed}" if pushed else ""),
              file=sys.stderr)
    return {"out": str(config.out), "kind": model.hub_kind, "files": files, "pushed": pushed}
