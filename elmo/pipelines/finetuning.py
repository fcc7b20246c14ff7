"""Fine-tuning a biLM on a domain's text: ``python -m elmo finetune`` (docs/fine_tuning.md). Open the biLM
(:func:`bilm_to_finetune`; the published architecture gets a new softmax over the domain vocabulary), read the text as
``pretrain`` reads it for that biLM, measure the exact held-out perplexities *before*, then train and write it as
``pretrain`` does (:func:`~elmo.pipelines.pretraining.train_and_write`; ``lm.json`` adds ``before`` and ``finetune``).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable

from ..data.corpus import encode_corpus
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..model.bilm_config import SOFTMAXES
from ..model.language_model import DIRECTIONS, LanguageModel
from ..model.published_finetune import (
    SOFTMAX_INITS,
    init_softmax_from_token_layer,
    language_model_of,
    target_counts,
)
from ..model.serialization import OpenedBiLM, open_bilm
from ..training.evaluation import perplexity
from ..training.trainer import Unfreezing
from .common import CommonArgs, StartedRun, option, resolve_batch_size, start
from .pretraining import (
    PretrainArgs,
    check_lm_files,
    lm_summary,
    load_data,
    say_stale,
    train_and_write,
    training_head,
)


def same_as_pretrain(name: str) -> dataclasses.Field:
    """The field ``name`` of :class:`~elmo.pipelines.pretraining.PretrainArgs` (default, help, choices): shared flags
    read the text alike and have the same help; a ``finetune`` flag even where ``pretrain`` marks it ``lab``."""
    f = {f.name: f for f in dataclasses.fields(PretrainArgs)}[name]
    return option(f.default, f.metadata["help"], **{k: v for k, v in f.metadata.items() if k not in ("help", "lab")})


#: the learning rates ``finetune`` defaults to (Adam; lab/experiments.md, ``finetune_published``)
FINETUNE_LR, FINETUNE_SOFTMAX_LR = 1e-4, 1e-2
#: training documents whose target counts give the unigram biases of ``--softmax-init token-layer``
COUNT_MAX_DOCS = 100_000
#: training documents the scales of ``--softmax-init token-layer`` are fitted on
SCALE_FIT_DOCS = 256


@dataclass
class FinetuneArgs(CommonArgs):
    """Flags of ``python -m elmo finetune`` (docs/fine_tuning.md); the domain text is read with ``pretrain``'s flags.
    ``--softmax``, ``--softmax-samples`` and ``--softmax-init`` make the published architecture's new softmax; our biLM
    keeps its own and refuses them (:func:`bilm_to_finetune`)."""

    options_file: str | None = option(None, "the biLM to fine-tune: bilm-tf's options.json, or alone any biLM (a "
                                            "models folder, bilstm.pt, a save_pretrained folder, published_lm.pt or "
                                            "Hub model ID)")
    weight_file: str | None = option(None, "its weights.hdf5 (with a bilm-tf options.json)")
    train_file: str | None = same_as_pretrain("train_file")
    val_file: str | None = same_as_pretrain("val_file")
    test_file: str | None = same_as_pretrain("test_file")
    text_column: str | None = same_as_pretrain("text_column")
    max_val_docs: int = same_as_pretrain("max_val_docs")
    stream_buffer: int = same_as_pretrain("stream_buffer")
    min_freq: int = same_as_pretrain("min_freq")
    max_vocab: int | None = same_as_pretrain("max_vocab")
    max_tokens: int = same_as_pretrain("max_tokens")
    epochs: int = option(3, "maximum epochs (early stopping on held-out perplexity)")
    lr: float = option(FINETUNE_LR, "Adam learning rate of the biLM")
    softmax_lr: float = option(FINETUNE_SOFTMAX_LR, "Adam learning rate of the new softmax")
    warmup_steps: int = option(100, "raise both learning rates over N steps")
    lr_gamma: float = same_as_pretrain("lr_gamma")
    dropout: float = option(0.1, "dropout in the biLM and before the softmax")
    softmax: str = option("sampled", "the training softmax over the domain words", choices=SOFTMAXES)
    softmax_samples: int = same_as_pretrain("softmax_samples")
    softmax_init: str = option("token-layer", "the new softmax's initial weights", choices=SOFTMAX_INITS)
    overwrite: bool = same_as_pretrain("overwrite")

    def check(self) -> None:
        """:meth:`CommonArgs.check` plus the biLM files, learning rates and text flags. Raises :class:`ElmoError`."""
        super().check()
        if self.options_file is None:
            raise ElmoError("give the biLM to fine-tune: --options-file OPTIONS.json --weight-file WEIGHTS.hdf5 "
                            "(published or exported bilm-tf files), or --options-file MODELS_DIR (any biLM of the "
                            "published architecture)")
        if self.softmax_lr <= 0:
            raise ElmoError(f"--softmax-lr must be positive, got {self.softmax_lr}")
        if self.softmax_init == "token-layer" and self.softmax != "sampled":
            raise ElmoError("--softmax-init token-layer sets every word's row and bias of a full softmax: use it with "
                            "--softmax sampled, or --softmax-init random with --softmax adaptive (which has no "
                            "per-word bias)")
        self.pretrain_args().check()  # pretrain's text-flag rules (--val-file goes with --train-file, ...)

    def pretrain_args(self, opened: OpenedBiLM | None = None) -> PretrainArgs:
        """These flags as :func:`~elmo.pipelines.pretraining.load_data` takes them for the biLM being fine-tuned
        (``opened``): the text read as it reads it, our biLM's own vocabulary."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(PretrainArgs) if hasattr(self, f.name)}
        ours = opened is not None and not opened.bilm.shared_token_layer  # lower-cased (no architecture), its vocabulary
        return FinetuneText(**shared, architecture=None if ours else self.options_file,
                            model=None if opened is None else opened.bilm.config, fixed_vocab=opened.vocab if ours else None)


@dataclass
class FinetuneText(PretrainArgs):
    """:class:`~elmo.pipelines.pretraining.PretrainArgs` adapted to the biLM being fine-tuned: ``model``, its config;
    ``fixed_vocab``, its own vocabulary (our biLM's) or ``None``. The text is read cased with ``architecture`` (the
    published one's ``--options-file``), else lower-cased."""

    model: Any = None
    fixed_vocab: Vocabulary | None = None

    def model_config(self, vocab_size: int) -> Any:
        """The config of the biLM being fine-tuned (what sets the characters of a batch)."""
        return self.model

    def vocabulary(self, build: Callable[[], Vocabulary]) -> Vocabulary:
        """:meth:`PretrainArgs.vocabulary`, or the biLM's own (``build`` still reads the text: its counts)."""
        built = super().vocabulary(build)
        return built if self.fixed_vocab is None else self.fixed_vocab

    def _check_architecture(self) -> None:
        """Nothing: ``finetune`` reads the options file (:func:`bilm_to_finetune`; errors name ``--options-file``)."""


def bilm_to_finetune(config: FinetuneArgs) -> OpenedBiLM:
    """The biLM of ``--options-file`` (and ``--weight-file``) opened by :func:`~elmo.model.serialization.open_bilm`.
    Raises :class:`ElmoError` naming the flag and file: missing or invalid files; ``--softmax``, ``--softmax-samples``
    or ``--softmax-init`` given for our biLM."""
    try:
        opened = open_bilm(config.options_file, config.weight_file)
    except ElmoError as exc:
        message = str(exc)
        flags = [f for f, path in (("--options-file", config.options_file), ("--weight-file", config.weight_file))
                 if str(path) in message] or ["--options-file/--weight-file"]
        raise ElmoError(f"{flags[0]}: {message}") from None
    defaults = FinetuneArgs()
    given = [f for f in ("softmax", "softmax_samples", "softmax_init") if getattr(config, f) != getattr(defaults, f)]
    if given and not opened.bilm.shared_token_layer:
        raise ElmoError(f"{', '.join('--' + f.replace('_', '-') for f in given)}: {opened.where} is our biLM, which "
                        "keeps its own softmax per direction over its own vocabulary (those flags make the new softmax "
                        "of the published architecture)")
    return opened


def say_perplexities(run: StartedRun, when: str, perplexities: dict[str, dict[str, float]]) -> None:
    """Print ``before: val forward perplexity 26.68, ...`` (``when``) from ``{split: {"<direction>_perplexity"}}``."""
    run.say(f"{when + ':':<7} " + ", ".join(f"{split} {d} perplexity {values[f'{d}_perplexity']:.2f}"
                                            for split, values in perplexities.items() for d in DIRECTIONS))


def parameter_groups(model: BiLM | LanguageModel, config: FinetuneArgs) -> Unfreezing:
    """Two Adam groups: the language model but its softmax at ``--lr``, the softmax at ``--softmax-lr`` (both under
    the warm-up and ``--lr-gamma``), every parameter trained from the first step."""
    head = list(model.softmax.parameters())
    in_head = {id(q) for q in head}
    body = [p for p in model.parameters() if id(p) not in in_head]
    return Unfreezing([{"params": body, "lr": config.lr}, {"params": head, "lr": config.softmax_lr}],
                      lambda epoch: None)


def finetune(config: FinetuneArgs) -> dict:
    """``python -m elmo finetune`` (module docstring). Returns the ``lm.json`` content (on every rank under
    ``torchrun``; rank 0 alone writes files). Raises :class:`ElmoError`: a missing or invalid biLM or text file (named
    with its flag), an output that is an input (the biLM's files, the text) or a different model in ``--models-dir``
    (:func:`~elmo.pipelines.pretraining.check_lm_files`), an unwritable output folder, bad flags."""
    opened = bilm_to_finetune(config)
    bilm = opened.bilm
    shared = bilm.shared_token_layer  # the published architecture (a new softmax), else ours (module docstring)
    written = bilm.config if shared else None
    check_lm_files(config, written, {**{f"--options-file ({f.name})": f for f in opened.source.read if f.is_file()},
                                     "--options-file": config.options_file, "--weight-file": config.weight_file})
    text = config.pretrain_args(opened)
    run = start(config, kernel_cache_entries=32)
    stale = say_stale(config, written, opened.source.read, run)
    loaded = load_data(text)
    resolve_batch_size(config, loaded.counts["train"], run.say)
    run.say(f"fine-tuning {opened.where} on {loaded.source}: {loaded.described(run)}")
    model, init = bilm, None
    if shared:  # the new softmax, initialised by --softmax-init (elmo.model.published_finetune; random: its own)
        model, init = language_model_of(bilm, config.seed, **training_head(config, len(loaded.vocab))), {"method": "random"}
        if config.softmax_init != "random":
            counted = list(itertools.islice(loaded.sentences(), COUNT_MAX_DOCS))
            sample = encode_corpus([d[:config.max_length] for d in counted[:SCALE_FIT_DOCS] if d], loaded.vocab,
                                   max_chars=model.config.max_chars, char_scheme="bilm_tf")
            init = {**init_softmax_from_token_layer(model, loaded.vocab, target_counts(counted, loaded.vocab), sample),
                    "counted_documents": len(counted)}
    model.to(run.device)
    before = {split: {f"{d}_perplexity": perplexity(model.direction(d), loaded.data[split], run.device)
                      for d in DIRECTIONS} for split in ("val", "test") if split in loaded.data}  # exact, each direction
    say_perplexities(run, "before", before)
    head = {"architecture": config.options_file, "softmax": config.softmax} if shared else {"softmax": bilm.config.softmax}
    new_softmax = {"weight_file": config.weight_file, "softmax_init": init} if shared else {}
    tuned = {"options_file": config.options_file, **new_softmax, "lr": config.lr, "softmax_lr": config.softmax_lr}
    out = lm_summary(loaded, run, {**head, "before": before, "finetune": tuned})
    train_and_write(model, loaded, config, run, out, stale, opened.source.read, "finetune",
                    lambda lm: parameter_groups(lm, config))
    if run.ctx.is_main:
        say_perplexities(run, "after", {split: out[split] for split in before})
    return out
