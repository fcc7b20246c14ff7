"""Pre-training the biLM (what ``python ELMO.py`` runs): read and split the data → vocabulary on the training split →
``--init-embeddings`` → train the forward and backward LM (:func:`train_and_write`, early stopping on validation
perplexity) → exact full-vocabulary evaluation → the model files (:func:`write_outputs`), ``results/lm.json`` and the
plots. ``--architecture`` trains the published ELMo architecture instead (docs/make_your_own_elmo.md).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from ..artifacts import (
    Outputs,
    PathArg,
    atomic_folder,
    environment_info,
    load_checkpoint,
    remove_file,
    save_checkpoint,
)
from ..data.agnews import load_agnews
from ..data.corpus import EncodedCorpus, encode_corpus
from ..data.pretraining_text import pretraining_text
from ..data.stream import StreamedCorpus, TextSource
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..model.bilm_config import DEFAULT_SOFTMAX, PUBLISHED_ARCHITECTURES, SOFTMAXES, TOKEN_ENCODERS, BiLMConfig
from ..model.char_cnn import DEFAULT_FILTERS
from ..model.classifier import recorded_source
from ..model.hub import read_config
from ..model.language_model import DIRECTIONS, Direction, LanguageModel, PublishedLM
from ..model.plan import plan_batch, step_loss
from ..model.published_io import config_from_options, options_of, read_options
from ..model.sampled_softmax import BILM_TF_SAMPLES
from ..model.serialization import BiLMFiles, files_read, lm_checkpoint, models_in, save_bilm
from ..model.static import center_vectors, common_direction_cosine, copy_vectors, word2vec_vectors
from ..runtime import distributed
from ..runtime.device import peak_rss_mb, set_seed, steady_heap
from ..training.evaluation import evaluate_words, perplexity
from ..training.metrics import top_words_confusion
from ..training.processes import ChildRun, run_side_by_side
from ..training.trainer import FitResult, Objective, Progress, TrainConfig, Unfreezing, fit
from .common import (
    CommonArgs,
    StartedRun,
    at_least,
    checkpointing,
    command_line,
    option,
    phase,
    refuse_another_model,
    refuse_overwriting,
    resolve_batch_size,
    start,
    write_results,
)
from .plots import plot_confusion, plot_curves

INIT_EMBEDDINGS = ("auto", "word2vec", "word2vec-centered", "none")
#: ``--init-embeddings auto`` stays random when a Word2Vec vector's mean cosine with the vectors' mean exceeds this
#: (Word2Vec trained on too little text points every word the same way).
AUTO_INIT_MAX_COSINE = 0.9

#: our biLM, the preset without ``--architecture``: each size flag's value when left out (``--embedding-dim``: its help)
OUR_PRESET = {"hidden_size": 256, "num_layers": 2, "token_encoder": "word", "char_dim": 16,
              "char_filters": tuple(f"{w}:{n}" for w, n in DEFAULT_FILTERS), "num_highway": 1, "max_chars": 20,
              "residual": True, "proj_size": 0, "lstm": "fused"}
#: ``--lstm clipped`` on our biLM: its cells and outputs clipped to this (bilm-tf's ``cell_clip`` and ``proj_clip``)
OUR_CLIP = PUBLISHED_ARCHITECTURES["elmo-original"][1].cell_clip
#: the size flags a published preset takes, by the bilm-tf name of the field each sets (besides ``--proj-size``,
#: ``--embedding-dim``, ``--char-filters``; :data:`~elmo.model.bilm_config.BILM_TF_FIELDS`)
PRESET_FLAGS = {"hidden_size": "hidden_size", "num_layers": "num_layers", "char_dim": "char_dim",
                "num_highway": "num_highway", "max_chars": "max_chars", "residual": "use_skip_connections"}


@dataclass
class PretrainArgs(CommonArgs):
    """Flags of ``ELMO.py`` (``python -m elmo pretrain``): their help, docs/commands.md, docs/make_your_own_elmo.md
    (``--architecture``, ``--softmax``, ``--lstm``) and docs/own_corpus_and_scaling.md (``--train-file``). The size
    flags override our preset (:data:`OUR_PRESET`) or, given, ``--architecture``'s (:data:`PRESET_FLAGS`):
    :meth:`model_config`. ``--init-embeddings``: :func:`init_embeddings`; ``--overwrite``: :func:`different_models`,
    :func:`overwritten_models`; ``--concurrent-directions``: :func:`direction_threads`."""

    min_freq: int = option(2, "keep words seen at least this often")
    max_vocab: int | None = option(50000, "keep at most this many words (+ 4 specials)")
    architecture: str | None = option(None, "the preset the sizes below start from: ours (word inputs; the default) "
                                      "or the published ELMo's: " + ", ".join(PUBLISHED_ARCHITECTURES)
                                      + " or an options.json", metavar="NAME")
    embedding_dim: int | None = option(None, "token vector width (= the LSTM output width, its default)")
    hidden_size: int | None = option(None, "LSTM cells per direction (ours: 256)")
    num_layers: int | None = option(None, "LSTM layers per direction (ours: 2)")
    proj_size: int | None = option(None, "project the LSTM cells to this width (ours: 0, none)")
    residual: bool | None = option(None, "residual connection between LSTM layers (ours: on)")
    lstm: str | None = option(None, "LSTM cell: fused (PyTorch's kernel; ours) or clipped (the published cell, a "
                              "per-step loop; the published presets')", choices=("clipped", "fused"))
    token_encoder: str | None = option(None, "word embeddings or the character CNN (ours: word)", choices=TOKEN_ENCODERS)
    char_filters: tuple[str, ...] = option((), "char CNN width:count (ours: "
                                                  + " ".join(OUR_PRESET["char_filters"]) + ")")
    char_dim: int | None = option(None, "character embedding width (ours: 16)")
    num_highway: int | None = option(None, "highway layers after the char CNN (ours: 1)")
    max_chars: int | None = option(None, "characters per token, char CNN (ours: 20)")
    softmax: str = option(DEFAULT_SOFTMAX, "the training softmax", choices=SOFTMAXES)
    softmax_samples: int = option(BILM_TF_SAMPLES, "--softmax sampled: candidates per batch")
    dropout: float = option(0.1, "dropout in the language models")
    max_tokens: int = option(4096, "token budget per batch (padding included)")
    lr: float = option(4e-3, "Adam learning rate")
    lr_gamma: float = option(1.0, "multiply the learning rate by this every epoch", lab=True)
    warmup_steps: int = option(300, "raise the learning rate over N steps")
    epochs: int = option(4, "maximum epochs per direction")
    init_embeddings: str = option("auto", "initial token embeddings of both LMs", choices=INIT_EMBEDDINGS)
    train_file: str | None = option(None, "your own corpus (one text a line)")
    val_file: str | None = option(None, "validation text for --train-file")
    test_file: str | None = option(None, "test text for --train-file")
    text_column: str | None = option(None, "the text's column in .csv files")
    max_val_docs: int = option(10000, "hold out at most N lines of --train-file")
    stream_buffer: int = option(1_000_000, "tokens of --train-file shuffled at a time")
    concurrent_directions: str = option("auto", "train both directions at once", choices=("auto", "on", "off"))
    overwrite: bool = option(False, "replace a different model in --models-dir (else refused)")

    def filters(self) -> tuple[tuple[int, int], ...]:
        """``--char-filters`` as ``(width, count)`` pairs (our preset's when left out). Raises :class:`ElmoError`."""
        given = OUR_PRESET["char_filters"] if self.char_filters == () else self.char_filters
        try:
            filters = tuple(tuple(int(v) for v in f.split(":")) for f in given)
            if any(len(f) != 2 for f in filters):
                raise ValueError
        except ValueError:
            raise ElmoError(f"--char-filters expects width:count pairs such as 3:64, got {' '.join(self.char_filters)}") from None
        return filters

    def bilm_config(self, vocab_size: int) -> BiLMConfig:
        """Our biLM's :class:`~elmo.model.bilm_config.BiLMConfig`, a flag left out :data:`OUR_PRESET`'s. Raises
        :class:`ElmoError` on bad sizes."""
        sizes = {name: OUR_PRESET[name] if getattr(self, name) in (None, ()) else getattr(self, name)
                 for name in OUR_PRESET} | {"char_filters": self.filters()}
        clip = OUR_CLIP if sizes.pop("lstm") == "clipped" else None  # at bilm-tf's bounds, the published presets'
        output = sizes["proj_size"] or sizes["hidden_size"]
        return BiLMConfig(vocab_size=vocab_size, embedding_dim=self.embedding_dim or output, dropout=self.dropout,
                          softmax=self.softmax, samples=self.softmax_samples, cell_clip=clip, proj_clip=clip, **sizes)

    def published_config(self) -> BiLMConfig | None:
        """The published config ``--architecture`` names (a preset, or an options.json read by
        :func:`~elmo.model.published_io.read_options`) with the size flags (:data:`PRESET_FLAGS`) and ``--lstm``
        applied; ``None`` without it. Raises :class:`ElmoError` (starting with the flag): an unknown name, a missing or
        invalid options file, a size the architecture cannot take (naming the flags)."""
        if self.architecture is None:
            return None
        if self.architecture in PUBLISHED_ARCHITECTURES:
            config = PUBLISHED_ARCHITECTURES[self.architecture][1]
        elif not Path(self.architecture).suffix.lower() == ".json" and not Path(self.architecture).is_file():
            raise ElmoError(f"--architecture must be {', '.join(PUBLISHED_ARCHITECTURES)} or the path of a bilm-tf "
                            f"options.json, got {self.architecture!r}")
        else:
            try:
                config = read_options(self.architecture)
            except ElmoError as exc:
                raise ElmoError(f"--architecture {exc}") from None
        if self.token_encoder == "word":
            raise ElmoError(f"--token-encoder word: --architecture {self.architecture} reads characters (its token "
                            "layer is the character CNN)")
        sizes = {field: getattr(self, flag) for flag, field in PRESET_FLAGS.items() if getattr(self, flag) is not None}
        if self.char_filters:
            sizes["filters"] = self.filters()
        hidden = sizes.get("hidden_size", config.hidden_size)
        width = (self.proj_size or hidden) if self.proj_size is not None else self.embedding_dim or config.output_size
        if self.embedding_dim is not None and self.embedding_dim != width:
            raise ElmoError(f"--embedding-dim ({self.embedding_dim}) must equal the LSTM output width ({width}: "
                            "--proj-size if set, else --hidden-size) so that layer 0 has the width of the LSTM layers")
        clips = {"cell_clip": None, "proj_clip": None} if self.lstm == "fused" else {}
        try:
            return BiLMConfig.bilm_tf(**{**config.saved(), **sizes, "projection_dim": width, **clips})
        except ElmoError as exc:
            named = [*PRESET_FLAGS, "char_filters", "proj_size", "embedding_dim"]
            given = ", ".join("--" + f.replace("_", "-") for f in named if getattr(self, f) not in (None, ()))
            raise ElmoError(f"--architecture {self.architecture}" + (f" with {given}" if given else "")
                            + f": {exc}") from None

    @property
    def cased(self) -> bool:
        """Whether the text is read as written (the published architecture's), else lower-cased (ours)."""
        return self.architecture is not None

    def vocabulary(self, build: Callable[[], Vocabulary]) -> Vocabulary:
        """``build()`` on rank 0, its word list broadcast to every rank (``torchrun`` ranks must encode alike)."""
        ctx = distributed.context()
        vocab = build() if ctx.is_main else None
        return Vocabulary(distributed.broadcast_words(vocab.itos if vocab is not None else None)) if ctx.enabled else vocab

    def model_config(self, vocab_size: int) -> BiLMConfig:
        """What is trained: the published architecture (``--architecture``) or our biLM (:meth:`bilm_config`)."""
        return self.published_config() or self.bilm_config(vocab_size)

    def check(self) -> None:
        """:meth:`CommonArgs.check` plus the biLM's sizes and the vocabulary and stream flags. Raises
        :class:`ElmoError` naming the flag (or the ``BiLMConfig`` / ``TrainConfig`` field it sets)."""
        super().check()
        at_least(self, 1, "min_freq", "max_vocab", "max_val_docs", "stream_buffer")
        self._check_architecture()
        TrainConfig(epochs=self.epochs, lr=self.lr, lr_gamma=self.lr_gamma, warmup_steps=self.warmup_steps)  # flags
        if self.train_file is None:
            for name in ("val_file", "test_file", "text_column"):
                if getattr(self, name) is not None:
                    raise ElmoError(f"--{name.replace('_', '-')} goes with --train-file (AG News is read from --data-dir)")
        elif self.text_fraction != 1.0 or self.extra_text:
            raise ElmoError("--text-fraction and --extra-text shape the AG News pre-training text; with --train-file "
                            "the text is that file")

    def _check_architecture(self) -> None:
        """The size flags, and that the config they give (:meth:`model_config`, its head) builds. Raises ElmoError."""
        at_least(self, 1, "embedding_dim", "hidden_size", "num_layers", "char_dim", "max_chars")
        at_least(self, 0, "num_highway", "proj_size")
        if self.architecture is None:
            self.bilm_config(vocab_size=10)
            return
        if self.concurrent_directions == "on":
            raise ElmoError(f"--concurrent-directions on: --architecture {self.architecture} trains both directions "
                            "in one model (one token layer and one softmax shared by them); use auto or off")
        replace(self.published_config(), **training_head(self, vocab_size=10))


def training_head(flags: CommonArgs, vocab_size: int) -> dict:
    """The :data:`~elmo.model.bilm_config.HEAD_FIELDS` of bilm-tf's training head (:meth:`~elmo.model.bilm.BiLM.add_head`)
    over ``vocab_size`` words from ``--softmax``, ``--softmax-samples`` and ``--dropout``."""
    return {"vocab_size": vocab_size, "softmax": flags.softmax, "samples": flags.softmax_samples,
            "dropout": flags.dropout}


def init_embeddings(bilm: BiLM, vocab: Vocabulary, sentences, config: PretrainArgs, say=print, workers: int = 1) -> dict:
    """Apply ``--init-embeddings`` (docs/commands.md): Word2Vec vectors of ``sentences``
    (:func:`elmo.model.static.word2vec_vectors`, ``workers`` threads; unit std) replace both LMs' input rows of each
    word Word2Vec saw (:func:`~elmo.model.static.copy_vectors`). Returns ``{"method": "none"}`` or Word2Vec's settings
    plus ``common_direction_cosine`` (before centring), ``centered`` and ``copied`` (False: ``auto`` kept random rows)."""
    if config.init_embeddings == "none":
        return {"method": "none"}
    if bilm.config.token_encoder == "char":
        say("--init-embeddings word2vec does not apply to the character encoder: it starts random")
        return {"method": "none", "reason": "character token encoder"}
    vectors, info = word2vec_vectors(sentences, vocab, dim=bilm.config.embedding_dim, seed=config.seed, workers=workers)
    centered = config.init_embeddings == "word2vec-centered"
    info.update(common_direction_cosine=common_direction_cosine(vectors), centered=centered, copied=True)
    if config.init_embeddings == "auto" and info["common_direction_cosine"] > AUTO_INIT_MAX_COSINE:
        say(f"kept random token embeddings: the Word2Vec vectors of this corpus share one direction (mean cosine with "
            f"their mean {info['common_direction_cosine']:.3f} > {AUTO_INIT_MAX_COSINE}; --init-embeddings auto)")
        return {**info, "copied": False}
    if centered:
        vectors = center_vectors(vectors)
    copied = [copy_vectors(lm.embedding, vectors) for lm in (bilm.forward_lm, bilm.backward_lm)][0]
    say(f"initialised the token embeddings from Word2Vec ({copied:,} words, {info['seconds']:.0f} s; mean cosine of "
        f"a word vector with the vectors' mean {info['common_direction_cosine']:.3f}"
        + (", removed" if centered else "") + ")")
    return info


@dataclass
class PretrainData:
    """The encoded (or streamed) splits, the vocabulary and what the log and ``lm.json`` say of them; ``counts``: the
    documents per split (``"train"``'s adapt :func:`~elmo.pipelines.common.auto_batch_size`; ``--train-file``: its
    non-blank lines outside the held-out share)."""

    vocab: Vocabulary
    data: dict[str, EncodedCorpus | StreamedCorpus]
    source: str
    counts: dict[str, int]
    train_tokens: int
    oov: dict[str, float]
    sentences: Callable[[], Iterable]
    skipped_lines: int | None = None
    text_stats: dict | None = None  # AG News: what the pre-training text holds (--text-fraction, --extra-text)

    def described(self, run: StartedRun) -> str:
        """The log's ``12,345 training tokens, vocabulary 6,789 (OOV val 1.23%, ...), device cpu, 4 threads, ...``."""
        return (f"{self.train_tokens:,} training tokens, vocabulary {len(self.vocab):,} ("
                + ", ".join(f"OOV {k} {v:.2%}" for k, v in self.oov.items()) + f"), device {run.device}, "
                + (f"{run.ctx.world_size} processes × " if run.ctx.enabled else "")
                + f"{run.threads} threads, {run.precision} training")


#: --train-file: Word2Vec (--init-embeddings word2vec) trains on at most this many leading documents.
WORD2VEC_MAX_DOCS = 100_000


def prepare_stream(config: PretrainArgs) -> PretrainData:
    """``--train-file``: the streamed corpora (:mod:`elmo.data.stream`), the vocabulary, training documents and tokens
    from one pass over the training text (on rank 0, as the held-out OOV rates); ``sentences()``: the first
    :data:`WORD2VEC_MAX_DOCS` training documents. Raises :class:`ElmoError`: missing or unreadable files, a missing
    ``--text-column``, no training text."""

    def open_source(path: str, max_docs: int | None = None) -> TextSource:
        csv = Path(path).suffix.lower() == ".csv"
        if csv and config.text_column is None:
            raise ElmoError(f"{path}: a CSV file: name the column holding the text with --text-column")
        return TextSource(path, config.text_column if csv else None, max_docs, not config.cased)

    source = open_source(config.train_file, config.max_docs)
    holdout = config.val_file is None
    split = {"val_fraction": config.val_fraction, "seed": config.seed, "max_val_docs": config.max_val_docs}
    stats = {"train_documents": 0, "train_tokens": 0}

    def counted():
        for doc in source.documents("train", **split) if holdout else source.documents():
            stats["train_documents"] += 1
            stats["train_tokens"] += len(doc)
            yield doc

    vocab = config.vocabulary(lambda: Vocabulary.build(counted(), config.min_freq, config.max_vocab))
    is_main = distributed.context().is_main
    if is_main and stats["train_documents"] == 0:
        raise ElmoError(f"{config.train_file}: no training text (every line is blank or held out)")
    # counted on rank 0; every rank needs it for the batch size (auto_batch_size)
    documents, skipped = int(distributed.broadcast_words([str(stats["train_documents"])])[0]), source.skipped
    model = config.model_config(len(vocab))
    common = {"vocab": vocab, "max_length": config.max_length, "buffer_tokens": config.stream_buffer,
              "max_chars": model.chars_per_token, "char_scheme": model.char_scheme}
    data = {"train": StreamedCorpus(source, part="train" if holdout else None, **split, **common),
            "val": StreamedCorpus(source, part="val", **split, **common) if holdout
            else StreamedCorpus(open_source(config.val_file), **common)}
    if config.test_file is not None:
        data["test"] = StreamedCorpus(open_source(config.test_file), **common)
    oov = {name: vocab.oov_rate(data[name].pieces()) for name in data if name != "train" and is_main}
    return PretrainData(vocab, data, f"{config.train_file} (streamed)", {"train": documents}, stats["train_tokens"],
                        oov, lambda: itertools.islice(data["train"].pieces(), WORD2VEC_MAX_DOCS), skipped)


def load_data(config: PretrainArgs) -> PretrainData:
    """``--train-file`` (:func:`prepare_stream`), else AG News train / val / test, the training split replaced by the
    pre-training text (:func:`elmo.data.pretraining_text.pretraining_text`), the vocabulary built on it, every split
    encoded. Raises :class:`ElmoError`: bad data or flags (:func:`elmo.data.agnews.load_agnews`, :func:`prepare_stream`),
    an unreadable ``--extra-text``."""
    if config.train_file is not None:
        return prepare_stream(config)
    train, val, test = load_agnews(config.data_dir, config.val_fraction, config.seed, config.max_docs,
                                   config.skip_bad_rows, config.download)
    text, stats = pretraining_text(train, [val, test], config.text_fraction, config.seed, config.extra_text)
    text, val, test = (text.cased(), val.cased(), test.cased()) if config.cased else (text, val, test)
    vocab = config.vocabulary(lambda: Vocabulary.build(text.tokens, config.min_freq, config.max_vocab))
    model = config.model_config(len(vocab))
    data = {name: encode_corpus(c.tokens, vocab, c.labels, config.max_length, model.chars_per_token, model.char_scheme)
            for name, c in (("train", text), ("val", val), ("test", test))}
    oov = {name: vocab.oov_rate(c.tokens) for name, c in (("val", val), ("test", test))}
    return PretrainData(vocab, data, config.data_dir, {k: len(v) for k, v in data.items()}, data["train"].num_tokens,
                        oov, lambda: text.tokens, text_stats=stats)


def fit_direction(lm: LanguageModel | PublishedLM, loaded: PretrainData, config: PretrainArgs, run: StartedRun,
                  bar: bool = True, groups: Unfreezing | None = None) -> FitResult:
    """Train one LM (a :class:`~elmo.model.language_model.PublishedLM` of both directions: ``published_lm``, shown as
    ``biLM``) on this rank's share of shuffled batches, early stopping on validation perplexity, the warm-up at most
    one epoch (else a small corpus would train at a fraction of ``--lr`` throughout), dropout and sampled candidates
    seeded with ``--seed`` + rank, the training state in the checkpoint ``<direction>_lm`` (``--resume``);
    ``bar=False``: per-epoch lines; ``groups``: the optimiser's (``finetune``), else one."""
    both, data = lm.direction == "both", loaded.data
    torch.manual_seed(config.seed + run.ctx.rank)
    objective = Objective(
        batches=lambda epoch: data["train"].epoch_batches(config.batch_size, config.max_tokens, config.seed + epoch,
                                                          run.ctx.shard),
        loss_fn=lambda model, batch: step_loss(lm, model, batch),  # planned on the host: no device reads
        validate=lambda: {"perplexity": perplexity(lm, data["val"], run.device)},
        monitor="perplexity", maximize=False, host_keys=lm.host_keys, prepare=plan_batch(lm))
    steps = len(data["train"].batches(config.batch_size, config.max_tokens)) \
        if isinstance(data["train"], EncodedCorpus) else config.warmup_steps
    train_config = TrainConfig(epochs=config.epochs, lr=config.lr, clip_norm=config.clip_norm, patience=config.patience,
                               lr_gamma=config.lr_gamma, warmup_steps=min(config.warmup_steps, steps))
    return fit(lm, objective, train_config, run.device, run.amp_dtype,
               checkpointing(config, "published_lm" if both else f"{lm.direction}_lm", vocab=loaded.vocab.fingerprint()),
               Progress("biLM" if both else f"{lm.direction} LM", "tok", config.quiet, bar), groups)


def direction_threads(config: PretrainArgs, run: StartedRun) -> int | None:
    """``--concurrent-directions``: each direction's CPU threads when the two LMs train side by side (half the run's,
    at least 1), or ``None`` when they train in turn: ``off``, ``--architecture``, ``torchrun``, a non-CPU device, or
    ``auto`` on fewer than 2 threads. Raises :class:`ElmoError`: ``on`` under ``torchrun`` or off the CPU."""
    choice = config.concurrent_directions
    if choice == "off" or config.architecture is not None:
        return None
    if run.ctx.enabled or run.device.type != "cpu":
        if choice == "on":
            where = "under torchrun" if run.ctx.enabled else f"on {run.device.type}"
            raise ElmoError("--concurrent-directions on trains the two directions in two processes on the CPU; "
                            f"{where} they train one after the other: use auto or off")
        return None
    return None if choice == "auto" and run.threads < 2 else max(1, run.threads // 2)


@dataclass
class DirectionJob:
    """One LM direction to train in its own process (:func:`train_direction`), pickled to it: ``lm`` with its initial
    weights (Word2Vec rows included); ``loaded``, the data without the Word2Vec text; ``amp_dtype`` (``None``: fp32)."""

    lm: LanguageModel
    loaded: PretrainData
    config: PretrainArgs
    amp_dtype: torch.dtype | None


def train_direction(job: DirectionJob) -> dict:
    """In a child process (:func:`train_side_by_side`): :func:`fit_direction` as in turn, on this process's threads,
    then :func:`measure_direction`. Returns ``{"state": the best epoch's weights, "history", "best_epoch",
    "best_value", "measured"}``. Raises as :func:`~elmo.training.trainer.fit` (``Interrupted``: Ctrl-C)."""
    config, lm = job.config, job.lm
    steady_heap()
    set_seed(config.seed)
    run = StartedRun(distributed.context(), torch.device("cpu"), job.amp_dtype, torch.get_num_threads(),
                     config.outputs, lambda *a: None)
    fitted = fit_direction(lm, job.loaded, config, run, bar=False)
    return {"state": lm.state_dict(), **asdict(fitted), "measured": measure_direction(lm, job.loaded.data, run.device)}


def train_side_by_side(bilm: BiLM, loaded: PretrainData, config: PretrainArgs, run: StartedRun,
                       threads: int) -> tuple[dict[str, FitResult], dict[str, dict]]:
    """Train the forward and backward LMs at once, each in a process of ``threads`` CPU threads
    (:func:`train_direction` via :func:`~elmo.training.processes.run_side_by_side`, which owns the logs, errors and
    Ctrl-C), and load their best weights into ``bilm``; the logs are deleted when both succeed. Returns ``(FitResult
    per direction, evaluation per direction)``: :func:`measure_direction`'s plus ``startup_seconds`` (its process's
    start until training) and ``peak_rss_mb``."""
    shared = replace(loaded, sentences=tuple)  # the Word2Vec text stays here: the children do not need it
    lms = (bilm.forward_lm, bilm.backward_lm)
    runs = [ChildRun(f"{lm.direction} LM", train_direction, DirectionJob(lm, shared, config, run.amp_dtype), threads,
                     run.outputs.log(f"{lm.direction}_lm"), run.outputs.checkpoint(f"{lm.direction}_lm.result"))
            for lm in lms]
    fitted, measured = {}, {}
    for lm, done in zip(lms, run_side_by_side(runs)):
        lm.load_state_dict(done.value["state"])
        fitted[lm.direction] = FitResult(done.value["history"], done.value["best_epoch"], done.value["best_value"])
        measured[lm.direction] = {**done.value["measured"], "startup_seconds": done.startup_seconds,
                                  "peak_rss_mb": done.peak_rss_mb}
    for child in runs:
        child.log.unlink(missing_ok=True)
    return fitted, measured


#: what :func:`different_models` calls each kind of :func:`~elmo.model.serialization.models_in`
MODEL_KINDS = {"bilstm": "ELMO.py's biLM", "published_lm": "pretrain --architecture's or finetune's biLM",
               "pretrained": "a save_pretrained model", "bilm_tf": "bilm-tf's files"}


def different_models(config: CommonArgs, written: BiLMConfig | None) -> list[tuple[BiLMFiles, str]]:
    """The models in ``--models-dir`` (:func:`~elmo.model.serialization.models_in`) other than the one a command
    writes there (its own kind, :func:`new_model_files`), each with what it is: another kind, the published
    architecture of another size, or a file that does not load. ``written``: the config of the published architecture
    written (a :class:`~elmo.model.bilm.BiLM` with its training head), ``None`` for ours."""
    own, found = BiLM.hub_kind if written is None else "published_lm", []
    for model in models_in(config.outputs.models):
        try:
            saved = read_config(model.files[0].parent) if model.kind == "pretrained" else None
            kind = saved["elmo_kind"] if saved else {"bilstm": BiLM.hub_kind}.get(model.kind, model.kind)
            if kind != own:
                found.append((model, MODEL_KINDS[model.kind] + (f" ({kind})" if saved else "") + ", a different model"))
                continue
            if written is not None:
                size = BiLMConfig.bilm_tf(**saved["config"]) if saved else \
                    config_from_options(load_checkpoint(model.files[0], "elmo.published_lm")["options"])
                if size.architecture != written.architecture:
                    found.append((model, "a biLM of another architecture"))
        except (ElmoError, KeyError, TypeError):
            found.append((model, "a file that does not load"))
    return found


def new_model_files(config: CommonArgs, written: BiLMConfig | None) -> list[Path]:
    """The model files a command writes or replaces in ``--models-dir`` (``written``: :func:`different_models`): ours
    ``bilstm.pt`` and the ``save_pretrained`` folder; the published architecture that folder and ``published_lm.pt``."""
    out = config.outputs
    return [out.bilm, *out.pretrained] if written is None else [*out.pretrained, out.published_lm]


def overwritten_models(config: CommonArgs, written: BiLMConfig | None, keep: Iterable = ()) -> list[Path]:
    """With ``--overwrite`` (else none), the files of :func:`different_models` but the command's inputs ``keep``."""
    if not config.overwrite:
        return []
    kept = {os.path.realpath(path) for path in keep if path is not None}
    return [Path(path) for model, _ in different_models(config, written) for path in model.files
            if os.path.realpath(path) not in kept]


def stale_classifiers(config: CommonArgs, written: BiLMConfig | None, keep: Iterable = ()) -> list[Path]:
    """The classifier files of ``--models-dir`` that the new biLM (``written``: :func:`different_models`) leaves
    without the biLM they were trained on (docs/commands.md, ``--overwrite``): trained on one of
    :func:`new_model_files` or :func:`overwritten_models` (``keep``: the inputs), or on a ``bilstm.pt`` the folder no
    longer holds (they would load onto the new biLM). Files that do not load as classifiers are not counted."""
    out = config.outputs
    replaced = {os.path.realpath(path)
                for path in [*new_model_files(config, written), *overwritten_models(config, written, keep)]}
    stale = []
    for path in out.classifiers():
        try:
            sources = [Path(f) for f in recorded_source(load_checkpoint(path, "elmo.classifier")) or ()]
        except (ElmoError, KeyError):
            continue
        if any(os.path.realpath(f) in replaced for f in files_read(sources)) or (not sources and (
                os.path.realpath(out.bilm) in replaced or not out.bilm.is_file())):
            stale.append(path)
    return stale


def say_stale(config: CommonArgs, written: BiLMConfig | None, keep: Iterable, run: StartedRun) -> list[Path]:
    """At the start, on rank 0 (else ``[]``): the :func:`stale_classifiers`, named on stderr (``--quiet`` too)."""
    stale = stale_classifiers(config, written, keep) if run.ctx.is_main else []
    if stale:
        folder = stale[0].parent
        print(f"note: {folder} holds classifier files trained on the biLM this run replaces "
              f"({', '.join(p.name for p in stale)}); once the new biLM is saved they are renamed to <name>.stale (a "
              "run that stops before leaves them as they are); then train new ones with `python classification.py "
              f"--models-dir {folder}`", file=sys.stderr, flush=True)
    return stale


def set_aside_stale(stale: list[Path]) -> None:
    """Once the new biLM is saved: rename each of ``stale`` to its :meth:`~elmo.artifacts.Outputs.stale` name beside
    it (nothing is deleted); one line on stderr. Raises :class:`ElmoError` naming a file that cannot be renamed."""
    moved = []
    for path in [path for path in stale if path.is_file()]:
        target = Outputs.stale(path)
        try:
            os.replace(path, target)
        except OSError as exc:
            raise ElmoError(f"cannot move {path} aside to {target}: {exc.strerror or exc}") from None
        moved.append(f"{path.name} -> {target.name}")
    if moved:
        print(f"note: renamed the classifier files of the previous biLM in {stale[0].parent}: {', '.join(moved)}",
              file=sys.stderr, flush=True)


def check_lm_files(config: CommonArgs, written: BiLMConfig | None, inputs: dict[str, PathArg]) -> None:
    """Before ``pretrain`` or ``finetune`` writes anything: refuse, unless ``--overwrite`` or ``--resume``, any of
    :func:`different_models` (``written`` as there), and an output (the model files; our biLM's training files: the
    checkpoints, the logs and results of side-by-side runs; ``lm.json``, the plots) that is one of the ``inputs``
    (keyed by flag; ``--train-file``, ``--val-file``, ``--test-file`` added) or, without ``--train-file``, AG News.
    Raises :class:`ElmoError` naming the different model's file, or the output and the input it would write over."""
    out = config.outputs
    found = [] if config.overwrite or config.resume else different_models(config, written)
    refuse_another_model("--models-dir", out.models, found[0] if found else None, False)
    training = [path for name in ("forward_lm", "backward_lm")
                for path in (out.checkpoint(name), out.log(name), out.checkpoint(f"{name}.result"))]
    models = [*new_model_files(config, written), out.checkpoint("published_lm")] if written is not None else \
        [out.word2idx, *map(out.lm, DIRECTIONS), *new_model_files(config, written), *training]
    text = {"--train-file": config.train_file, "--val-file": config.val_file, "--test-file": config.test_file}
    refuse_overwriting(config, {**text, **inputs}, [*models, out.result("lm"), out.image("lm_loss"),
                                                    *(out.image(f"lm_confusion_{d}") for d in DIRECTIONS)],
                       agnews=config.train_file is None)


def check_files(config: PretrainArgs) -> None:
    """:func:`check_lm_files` for ``pretrain`` (its input ``--architecture``)."""
    check_lm_files(config, config.published_config(), {"--architecture": config.architecture})


def pretrain(config: PretrainArgs) -> dict:
    """Run the whole pre-training pipeline (module docstring). Returns the ``lm.json`` content on every rank (under
    ``torchrun`` only rank 0 evaluates, prints and writes files). Raises :class:`ElmoError`: bad data or flags, an
    output that is an input (:func:`check_files`), an output folder that cannot be written."""
    check_files(config)
    steady_heap()
    run = start(config, kernel_cache_entries=32)
    ctx, say = run.ctx, run.say
    stale = say_stale(config, config.published_config(), [config.architecture], run)
    threads_each = direction_threads(config, run)
    phases: dict = {}
    with phase(phases, "data"):  # read, split, vocabulary, encoded
        loaded = load_data(config)
    resolve_batch_size(config, loaded.counts["train"], say)
    say(f"data: {loaded.source}: " + " / ".join(f"{n} {k}" for k, n in loaded.counts.items()) + " documents, "
        + loaded.described(run))
    if config.architecture is not None:  # the published architecture, initialised as bilm-tf initialises it
        model = BiLM(replace(config.published_config(), **training_head(config, len(loaded.vocab))), seed=config.seed)
        if config.init_embeddings.startswith("word2vec"):
            say(f"--init-embeddings {config.init_embeddings} does not apply to the character encoder: it starts from "
                "bilm-tf's initialisation")
        extra = {"architecture": config.architecture, "softmax": config.softmax}
    else:
        model = BiLM(config.bilm_config(len(loaded.vocab)))
        # Rank 0's weights reach every rank when fit() wraps the model (DDP broadcasts them): only rank 0 runs Word2Vec.
        with phase(phases, "word2vec"):
            out_init = init_embeddings(model, loaded.vocab, loaded.sentences(), config, say, run.word2vec_workers) \
                if ctx.is_main else {}
        extra = {"init_embeddings": out_init, "softmax": config.softmax, "concurrent_directions": threads_each is not None,
                 "threads_per_direction": threads_each or run.threads}
    out = lm_summary(loaded, run, extra) | phases
    return train_and_write(model.to(run.device), loaded, config, run, out, stale, [config.architecture],
                           threads=threads_each)


def lm_summary(loaded: PretrainData, run: StartedRun, extra: dict) -> dict:
    """The start of ``lm.json``: precision, the data (tokens, vocabulary, OOV rates, documents), ``extra`` and
    the processes; the perplexities and the training history are filled in later."""
    out = {"precision": run.precision, "val": {}, "test": {}, "train_tokens": loaded.train_tokens,
           "vocab_size": len(loaded.vocab), "oov_rate": loaded.oov, "documents": loaded.counts, "directions": {},
           **extra, "processes": run.ctx.world_size}
    return out | {k: v for k, v in (("skipped_lines", loaded.skipped_lines), ("pretraining_text", loaded.text_stats))
                  if v is not None}


def train_and_write(model: BiLM, loaded: PretrainData, config: PretrainArgs, run: StartedRun, out: dict,
                    stale: list[Path], keep: Iterable, command: str = "pretrain",
                    groups: Callable[[torch.nn.Module], Unfreezing] | None = None, threads: int | None = None) -> dict:
    """Train ``model`` with :func:`fit_direction` (``groups(lm)``: the optimiser's groups, else one): the published
    architecture both directions at once (:class:`~elmo.model.language_model.PublishedLM`), ours one direction after
    the other or, given ``threads``, side by side (:func:`train_side_by_side`); then rank 0 writes it
    (:func:`write_outputs`: ``stale``, ``command``, ``keep``). Returns ``out``, completed (on every rank)."""
    started, measured = time.perf_counter(), None
    if model.shared_token_layer:
        fitted = fit_direction(PublishedLM(model), loaded, config, run, groups=groups(model) if groups else None)
    elif threads is None:
        fitted = {lm.direction: fit_direction(lm, loaded, config, run, groups=groups(lm) if groups else None)
                  for lm in map(model.direction, DIRECTIONS)}
    else:
        run.say(f"training the forward and backward LMs side by side: two processes of {threads} thread(s) each "
                f"(--concurrent-directions {config.concurrent_directions})")
        fitted, measured = train_side_by_side(model, loaded, config, run, threads)
        out["startup_seconds"] = {d: m["startup_seconds"] for d, m in measured.items()}
        out["peak_rss_mb"] = {**{d: m["peak_rss_mb"] for d, m in measured.items()}, "main": peak_rss_mb()}
    out["train_seconds"] = time.perf_counter() - started
    out.setdefault("phase_seconds", {})["training"] = out["train_seconds"]  # side by side: with each one's evaluation
    if run.ctx.is_main:
        write_outputs(model, loaded, fitted, config, run, out, started, measured, stale, command, keep)
    distributed.barrier()  # the other ranks wait for rank 0's files, so the job ends as one
    return out


def write_outputs(model: BiLM, loaded: PretrainData, fitted: FitResult | dict[str, FitResult], config: PretrainArgs,
                  run: StartedRun, out: dict, started: float, measured: dict[str, dict] | None, stale: list[Path],
                  command: str, keep: Iterable) -> None:
    """Rank 0, after :func:`train_and_write`: evaluate both directions exactly (unless ``measured`` holds that:
    :func:`train_side_by_side`), delete :func:`overwritten_models` (never the inputs ``keep``), write the model files
    (docs/commands.md, ``pretrain``), set ``stale`` aside (:func:`set_aside_stale`), plot the loss curves and end as
    :func:`~elmo.pipelines.common.write_results` (``lm.json``; the table: each direction's perplexities, word accuracy
    and speed). ``command``: what the model card says made it (:func:`command_line`)."""
    outputs, vocab, shared = run.outputs, loaded.vocab, model.shared_token_layer
    if shared:
        for name in DIRECTIONS:
            evaluate_direction(model.direction(name), fitted, loaded.data, run, vocab, out)
        out["bilm_config"], out["options"] = model.config.saved(), options_of(model.config)
        out["lm_config"], histories = model.config.head, {"biLM": fitted.history}
        for path in overwritten_models(config, model.config, keep):  # so that the folder opens as the new model
            remove_file(path)
    else:
        meta = {**environment_info(config.seed), "config": asdict(config)}
        vocab.save_pickle(outputs.word2idx)
        for path in overwritten_models(config, None, keep):
            remove_file(path)
        for lm in map(model.direction, DIRECTIONS):
            with phase(out, "saving"):
                save_checkpoint(lm_checkpoint(lm, vocab, meta), outputs.lm(lm.direction))
            evaluate_direction(lm, fitted[lm.direction], loaded.data, run, vocab, out, (measured or {}).get(lm.direction))
        out["bilm_config"] = asdict(model.config)
        histories = {d: out["directions"][d]["history"] for d in out["directions"]}
    # the model card's facts (elmo.model.hub): the training text, its tokens, the held-out perplexities, the command
    text = str(config.train_file) if config.train_file else f"AG News descriptions ({Path(config.data_dir) / 'train.csv'})"
    text += "".join(f", {out['documents'][k]:,} {k} documents" for k in ("train", "val") if k in out["documents"])
    text += "".join(f", plus {f}" for f in config.extra_text)
    shown = {split: {d: out[split][f"{d}_perplexity"] for d in DIRECTIONS if f"{d}_perplexity" in out[split]}
             for split in ("val", "test") if out[split]}
    model.vocab, model.card = vocab, {"text": text, "train_tokens": out["train_tokens"], "perplexity": shown,
                                      "command": command_line(command, config)}
    with phase(out, "saving"):
        if not shared:
            save_bilm(model, vocab, outputs.bilm, {**meta, "card": model.card})
        # the four files at once: an interrupted run leaves the previous folder whole; the card loads it from there
        with atomic_folder(outputs.pretrained_dir, "--models-dir") as folder:
            model.save_pretrained(folder, model_card_kwargs={"repo_id": str(outputs.pretrained_dir)})
        if shared:
            remove_file(outputs.published_lm)  # an earlier version's
    set_aside_stale(stale)
    out["tokens_per_second"] = {d: out["directions"][d]["tokens_per_second"] for d in out["directions"]}
    # per history, the dtype its LSTMs computed in at the last step
    out["lstm_dtype"] = {d: rows[-1].get("lstm_dtype") if rows else None for d, rows in histories.items()}
    out["seconds"] = time.perf_counter() - started
    with phase(out, "plots"):
        plot_curves({f"{d} train": [row["train_loss"] for row in rows] for d, rows in histories.items()}
                    | {f"{d} val": [math.log(row["val_perplexity"]) for row in rows] for d, rows in histories.items()},
                    outputs.image("lm_loss"), "biLM loss per epoch", "NLL (nats per word)")
    split = "test" if out["test"] else "val"
    lines = [f"direction   val ppl  {split:>5} ppl  {split:>5} top-1  {split:>5} top-5   tokens/s"]
    for d in [d for d in DIRECTIONS if f"{d}_perplexity" in out["val"]]:
        w = out[split][f"{d}_words"]
        lines.append(f"{d:<10}{out['val'][f'{d}_perplexity']:>8.2f}{out[split][f'{d}_perplexity']:>11.2f}"
                     f"{w['top1_accuracy']:>13.3f}{w['top5_accuracy']:>13.3f}{out['tokens_per_second'][d]:>11,.0f}")
    write_results(config, "lm", out, environment_info(config.seed),
                  ["published_lm"] if shared else [f"{d}_lm" for d in DIRECTIONS], "\n".join(lines), run.say)


def measure_direction(lm: Direction, data: dict, device: torch.device) -> dict:
    """Exact full-vocabulary evaluation of one trained LM (:func:`~elmo.training.evaluation.evaluate_words`) on val and
    test (if any). Returns ``{"val": metrics[, "test": metrics], "targets": (n,), "top5": (n, 5)}``, the test (else val)
    word ids as CPU tensors that a child process can hand back through ``torch.load(weights_only=True)``."""
    measured = {}
    for split in [name for name in ("val", "test") if name in data]:
        measured[split], targets, top5 = evaluate_words(lm, data[split], device)
    return {**measured, "targets": torch.from_numpy(targets), "top5": torch.from_numpy(top5)}


def evaluate_direction(lm: Direction, fitted: FitResult, data: dict, run: StartedRun, vocab: Vocabulary,
                       out: dict, measured: dict | None = None) -> None:
    """Evaluate one trained LM (:func:`measure_direction`, unless ``measured`` holds that), add its perplexities, word
    metrics and training history to ``out`` and plot the test (else val) confusion of the 20 most frequent words."""
    key = f"{lm.direction}_perplexity"
    with phase(out, "evaluation"):
        measured = measured or measure_direction(lm, data, run.device)
    split = "test" if "test" in measured else "val"  # the split shown
    for name in [name for name in ("val", "test") if name in measured]:
        out[name][key], out[name][f"{lm.direction}_words"] = measured[name]["perplexity"], measured[name]
    shown, targets, top5 = measured[split], np.asarray(measured["targets"]), np.asarray(measured["top5"])
    speeds = [row["units_per_second"] for row in fitted.history]
    out["directions"][lm.direction] = {"best_epoch": fitted.best_epoch, "history": fitted.history,
                                       "tokens_per_second": float(np.median(speeds))}
    top = list(range(4, min(24, len(vocab))))
    with phase(out, "plots"):
        plot_confusion(top_words_confusion(targets, top5[:, 0], top), vocab.decode(top), vocab.decode(top) + ["other"],
                       run.outputs.image(f"lm_confusion_{lm.direction}"),
                       f"{lm.direction} LM on {split}: 20 most frequent words")
    run.say(f"{lm.direction} LM: val perplexity {out['val'][key]:.2f}, {split} perplexity "
        f"{shown['perplexity']:.2f}, {split} top-1 {shown['top1_accuracy']:.3f}, top-5 {shown['top5_accuracy']:.3f}")
