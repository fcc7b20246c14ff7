"""Embedding a text file into an hdf5 file (``python -m elmo embed``), AllenNLP's ``allennlp elmo`` command, from the
published ELMo or any biLM :func:`~elmo.model.serialization.open_bilm` opens. The layout (one float32 dataset per line,
``sentence_to_index``), the tokenisation (``line.strip().split()``), the streaming and ``--chunk-size``:
``docs/published_elmo.md``. In ``sentence_to_index`` a later duplicate line wins, as in AllenNLP. The hdf5 file is
written beside its target and moved into place when complete (Ctrl-C leaves no output); it may not be one of the inputs
(:func:`check_files`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from tqdm import tqdm

from ..artifacts import atomic_hdf5, refuse_overwriting_inputs
from ..errors import ElmoError
from ..inference.embedder import ElmoEmbedder
from ..model.bilm import CHUNK_SIZE
from ..model.serialization import find_bilm, open_bilm
from ..runtime.device import PRECISIONS, configure_threads
from ..training.state import Interrupted
from .common import at_least, option

OUTPUT_FORMATS = ("all", "top", "average")


@dataclass
class EmbedArgs:
    """Flags of ``python -m elmo embed`` (module docstring). ``--stateful`` carries the LSTM states from each batch to
    the next, row by row, as bilm-tf and AllenNLP do (published biLM only; batches are then the lines in file order)."""

    input_file: str = option(None, "UTF-8 text file, one whitespace-tokenised sentence per line", positional=True)
    out: str = option(None, "the hdf5 file to write", positional=True)
    all: bool = option(False, "write every layer of each sentence, (L + 1, n, D)", one_of="what to write")
    top: bool = option(False, "write the top layer, (n, D)", one_of="what to write")
    average: bool = option(False, "write the average of the layers, (n, D)", one_of="what to write")
    options_file: str | None = option(None, "the published ELMo's options.json (bilm-tf; with --weight-file)")
    weight_file: str | None = option(None, "the published ELMo's weights.hdf5 (with --options-file)")
    models_dir: str | None = option(None, "a models folder instead, holding (looked for in this order) bilstm.pt, "
                                          "published_lm.pt, bilm/config.json + bilm/model.safetensors (ELMO.py, "
                                          "pretrain --architecture, finetune), config.json + model.safetensors "
                                          "(export --format hub) or options.json + weights.hdf5; or a Hub model id")
    batch_size: int = option(64, "sentences per batch")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("fp32", "fp32 (exact), or bf16 / auto for speed", choices=PRECISIONS)
    stateful: bool = option(False, "carry the LSTM states across batches")
    chunk_size: int = option(CHUNK_SIZE, "compute longer lines N positions at a time")
    forget_sentences: bool = option(False, "do not write the sentence_to_index dataset")
    threads: int | None = option(None, "CPU threads (default: all cores)")
    quiet: bool = option(False, "no progress bar (the line saying what was written still prints)")

    def check(self) -> None:
        """Exactly one output format (required, as in AllenNLP) and one biLM; raises :class:`ElmoError`."""
        chosen = [f"--{name}" for name in OUTPUT_FORMATS if getattr(self, name)]
        if not chosen:
            raise ElmoError("one of --all, --top and --average is required: what to write (every layer, the top "
                            "layer or their average)")
        if len(chosen) > 1:
            raise ElmoError(f"give only one of --all, --top and --average, not {' and '.join(chosen)}")
        if (self.models_dir is None) == (self.options_file is None and self.weight_file is None):
            raise ElmoError("give the published ELMo (--options-file and --weight-file) or our own biLM "
                            "(--models-dir), not both and not neither")
        at_least(self, 1, "batch_size", "chunk_size")

    @property
    def output_format(self) -> str:
        """``"all"``, ``"top"`` or ``"average"``."""
        return next(name for name in OUTPUT_FORMATS if getattr(self, name))


def count_sentences(path: str | os.PathLike) -> int:
    """Number of lines of ``path``, checking in one streamed pass that every line holds a sentence. Raises
    :class:`ElmoError` on a missing, unreadable or non-UTF-8 file, a blank line (named by its 1-based line number and
    0-based sentence index) or no line at all."""
    count = 0
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for count, line in enumerate(handle, 1):
                if not line.strip():
                    raise ElmoError(f"{path} line {count} is blank (sentence index {count - 1}): every line must "
                                    "hold a sentence; remove the blank lines")
    except FileNotFoundError:
        raise ElmoError(f"{path}: no such file") from None
    except UnicodeDecodeError:  # text mode decodes ahead of the lines it returns: find the line again byte-exactly
        with open(path, "rb") as handle:
            for number, raw in enumerate(islice(handle, count, None), count + 1):
                try:
                    raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise ElmoError(f"{path} line {number} is not UTF-8 text ({exc.reason} at byte {exc.start + 1} of "
                                    "the line): embed reads a UTF-8 text file, one sentence per line") from None
        raise ElmoError(f"{path} is not UTF-8 text: embed reads a UTF-8 text file, one sentence per line") from None
    except IsADirectoryError:
        raise ElmoError(f"{path}: a folder, not a text file") from None
    except OSError as exc:
        raise ElmoError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if count == 0:
        raise ElmoError(f"{path}: no sentences in it")
    return count


def write_embeddings(embedder: ElmoEmbedder, config: EmbedArgs, total: int, out: Any) -> dict[str, Any]:
    """Embed every line of ``config.input_file`` into the open hdf5 file ``out``; returns counts."""
    import h5py

    fmt = config.output_format
    lines: deque[str] = deque()  # the stripped lines read ahead by embed_sentences, not yet written

    def tokens() -> Iterator[list[str]]:  # the file was checked by count_sentences first
        with open(config.input_file, encoding="utf-8-sig") as handle:
            for line in handle:
                lines.append(line.strip())
                yield lines[-1].split()

    index: dict[str, str] = {}
    n_tokens = 0
    vectors = embedder.embed_sentences(tokens(), config.batch_size)
    for i, layers in enumerate(tqdm(vectors, total=total, unit=" sentences", disable=config.quiet, file=sys.stderr)):
        kept = layers[-1] if fmt == "top" else layers.mean(axis=0) if fmt == "average" else layers  # (L + 1, n, D)
        out.create_dataset(str(i), data=kept.astype(np.float32, copy=False))
        line = lines.popleft()
        n_tokens += layers.shape[1]
        if not config.forget_sentences:
            index[line] = str(i)
    if not config.forget_sentences:
        out.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))[0] = json.dumps(index)
    return {"sentences": total, "tokens": n_tokens}


def check_files(config: EmbedArgs) -> None:
    """Before any work: raises :class:`ElmoError` when ``out`` is one of the inputs (naming both) or a folder, or when
    ``--models-dir`` holds no biLM (:func:`~elmo.model.serialization.find_bilm`)."""
    found = () if config.models_dir is None else find_bilm(config.models_dir).files
    refuse_overwriting_inputs({"input_file": config.input_file, "--options-file": config.options_file,
                               "--weight-file": config.weight_file, **{f"--models-dir ({f.name})": f for f in found}},
                              {"out": config.out})
    if Path(config.out).is_dir():
        raise ElmoError(f"out {config.out} is a folder: name the hdf5 file to write")


def embed(config: EmbedArgs) -> dict[str, Any]:
    """Write ``config``'s hdf5 file (module docstring); returns ``{"sentences", "tokens", "seconds", "out", "format"}``.
    Raises :class:`ElmoError` as :func:`check_files` and :func:`count_sentences`, on missing or invalid biLM files, or
    on an output folder that cannot be written (a part of its path is a file: named); :class:`Interrupted` on Ctrl-C
    while embedding (the output file is then not written, or left as it was)."""
    target = Path(config.out)
    check_files(config)
    configure_threads(config.threads)
    total = count_sentences(config.input_file)
    opened = None if config.models_dir is None else open_bilm(config.models_dir)  # else the two files
    embedder = ElmoEmbedder(config.options_file, config.weight_file, bilm=opened.bilm if opened else None,
                            vocab=opened.vocab if opened else None, device=config.device, stateful=config.stateful,
                            precision=config.precision, chunk_size=config.chunk_size)
    existed = target.exists()
    started = time.perf_counter()
    try:
        with atomic_hdf5(target, "out") as out:
            summary = write_embeddings(embedder, config, total, out)
    except KeyboardInterrupt:
        kept = "left as it was" if existed else "not written"
        raise Interrupted(f"embedding {config.input_file} was interrupted by Ctrl-C; {target} was {kept}") from None
    summary |= {"seconds": time.perf_counter() - started, "out": str(target), "format": config.output_format}
    print(f"wrote {summary['sentences']:,} sentences ({summary['tokens']:,} tokens) to {target} in "
          f"{summary['seconds']:.1f} s", file=sys.stderr)  # --quiet drops only the progress bar
    return summary
