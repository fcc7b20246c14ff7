"""Fine-tuning the published ELMo (or an exported one) on a domain's text: ``python -m elmo finetune``.

Open the biLM (:func:`bilm_to_finetune`: bilm-tf's files, or any biLM of the published architecture) → read the
domain text as ``pretrain --architecture`` does and build its vocabulary → add a softmax over it, shared by both
directions (:class:`~elmo.model.published_lm.PublishedBiLMWithSoftmax`), initialised by ``--softmax-init``
(:mod:`elmo.model.published_finetune`) → the exact held-out perplexity of each direction *before* → continue the
language-model training with :func:`~elmo.training.trainer.fit` (the biLM at ``--lr``, the softmax at
``--softmax-lr``) → the exact perplexity *after* → ``<models-dir>/published_lm.pt`` (for ``python -m elmo export``)
and ``<results-dir>/lm.json`` (``pretrain``'s, plus ``before`` and ``finetune``). See docs/fine_tuning.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..artifacts import environment_info
from ..data.corpus import encode_corpus
from ..errors import ElmoError
from ..model.bilm import SOFTMAXES
from ..model.published import PublishedBiLMConfig
from ..model.published_finetune import (
    SOFTMAX_INITS,
    init_softmax_from_token_layer,
    language_model_of,
    target_counts,
)
from ..model.published_io import options_of
from ..model.published_lm import DIRECTION_NAMES, PublishedBiLMWithSoftmax, PublishedSoftmaxConfig
from ..model.serialization import OpenedBiLM, open_bilm, save_published_lm
from ..runtime import distributed
from ..training.evaluation import perplexity
from ..training.trainer import Progress, Unfreezing, fit
from .common import CommonArgs, StartedRun, checkpointing, option, refuse_overwriting, resolve_batch_size, start
from .pretraining import (
    PretrainArgs,
    PretrainData,
    evaluate_direction,
    finish_lm_results,
    lm_card,
    lm_objective,
    lm_summary,
    lm_train_config,
    load_data,
    refuse_different_models,
    replace_different_models,
    say_stale,
    set_aside_stale,
    stale_classifiers,
)

_PRETRAIN_FIELDS = {f.name: f for f in dataclasses.fields(PretrainArgs)}


def same_as_pretrain(name: str) -> dataclasses.Field:
    """The field ``name`` of :class:`~elmo.pipelines.pretraining.PretrainArgs` (default, help, choices), so the
    flags both commands take read the domain text the same way and say so in the same words (a flag of
    ``finetune`` even where ``pretrain`` leaves it to the lab, as ``--lr-gamma``)."""
    f = _PRETRAIN_FIELDS[name]
    return option(f.default, f.metadata["help"], **{k: v for k, v in f.metadata.items() if k not in ("help", "lab")})


#: the learning rates ``finetune`` defaults to (Adam; lab/experiments.md, ``finetune_published``)
FINETUNE_LR, FINETUNE_SOFTMAX_LR = 1e-4, 1e-2
#: training documents whose target counts give the unigram biases of ``--softmax-init token-layer``
COUNT_MAX_DOCS = 100_000
#: training documents the scales of ``--softmax-init token-layer`` are fitted on
SCALE_FIT_DOCS = 256


@dataclass
class FinetuneArgs(CommonArgs):
    """Flags of ``python -m elmo finetune``; the domain text is read as ``pretrain`` reads it (the same flags).

    * ``--options-file`` and ``--weight-file``: bilm-tf's files, published (https://allennlp.org/elmo) or written by
      ``python -m elmo export``. The new softmax learns at ``--softmax-lr``, faster than the biLM's ``--lr``: it starts
      from an initialisation, the biLM from trained weights; ``--dropout`` as bilm-tf's.
    * ``--softmax``: sampled (bilm-tf's, ``--softmax-samples`` candidates per batch and direction) or adaptive (only
      with ``--softmax-init random``); held-out perplexities are exact either way. ``--softmax-init token-layer``:
      word w's row is the biLM's token-layer vector of w and its bias the log unigram frequency of w, both scaled by
      two numbers fitted on a sample of the text; ``random``: bilm-tf's N(0, 1/dim) rows, zero biases.
    """

    options_file: str | None = option(None, "the biLM to fine-tune: bilm-tf's options.json, or alone any biLM of the "
                                            "published architecture (a models folder, published_lm.pt, a "
                                            "save_pretrained folder or Hub model ID)")
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
        """:meth:`CommonArgs.check` plus the biLM files, the learning rates and the text flags. Raises
        :class:`ElmoError` naming the flag."""
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
        self.pretrain_args().check()  # the text flags' rules of pretrain (--val-file goes with --train-file, ...)

    def pretrain_args(self, architecture: PublishedBiLMConfig | None = None) -> PretrainArgs:
        """These flags as ``pretrain --architecture`` takes them, the architecture that of the biLM being fine-tuned
        (``architecture``): what reads the text, builds the vocabulary and makes the batches is ``pretrain``'s
        (:func:`~elmo.pipelines.pretraining.load_data`)."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(PretrainArgs) if hasattr(self, f.name)}
        return FinetuneText(**shared, architecture=self.options_file, architecture_config=architecture)

    def lm_config(self, vocab_size: int) -> PublishedSoftmaxConfig:
        """The training head: ``--softmax``, ``--softmax-samples``, ``--dropout``."""
        return PublishedSoftmaxConfig(vocab_size=vocab_size, softmax=self.softmax, samples=self.softmax_samples,
                                 dropout=self.dropout)


@dataclass
class FinetuneText(PretrainArgs):
    """:class:`~elmo.pipelines.pretraining.PretrainArgs` holding what ``finetune`` reads the text with (an adapter:
    ``--architecture`` is the biLM being fine-tuned, ``architecture_config`` its architecture)."""

    architecture_config: PublishedBiLMConfig | None = None

    def published_config(self) -> PublishedBiLMConfig | None:
        """The architecture of the biLM being fine-tuned."""
        return self.architecture_config

    def _check_architecture(self) -> None:
        """Nothing: ``finetune`` reads the options file (:func:`bilm_to_finetune`; errors name ``--options-file``)."""


def check_files(config: FinetuneArgs, opened: OpenedBiLM) -> None:
    """Before anything is written: no output (``published_lm.pt``, its training checkpoint, ``lm.json``, the plots)
    is one of the inputs (the biLM's files, the text files, AG News in ``--data-dir``), and ``--models-dir`` holds no
    model but a ``published_lm.pt`` of the architecture of the ``opened`` biLM
    (:func:`~elmo.pipelines.pretraining.refuse_different_models`).

    Raises:
        ElmoError: naming the output and the input it would write over, or the different model's file.
    """
    refuse_different_models(config, lambda: options_of(opened.bilm.config))
    out = config.outputs
    refuse_overwriting(config, {**{f"--options-file ({f.name})": f for f in opened.source.files if Path(f).is_file()},
                                "--options-file": config.options_file, "--weight-file": config.weight_file,
                                "--train-file": config.train_file, "--val-file": config.val_file,
                                "--test-file": config.test_file},
                       [out.published_lm, out.checkpoint("published_lm"), out.result("lm"), out.image("lm_loss"),
                        out.image("lm_confusion_forward"), out.image("lm_confusion_backward")],
                       agnews=config.train_file is None)


def bilm_to_finetune(config: FinetuneArgs) -> OpenedBiLM:
    """The biLM of ``--options-file`` (and ``--weight-file``), opened by
    :func:`~elmo.model.serialization.open_bilm`: bilm-tf's pair, or any biLM of the published architecture.

    Raises:
        ElmoError: naming the flag and file: missing or invalid files; our biLM (``bilstm.pt``), which ``ELMO.py``
            trains and this command does not.
    """
    try:
        opened = open_bilm(config.options_file, config.weight_file)
    except ElmoError as exc:
        message = str(exc)
        flags = [f for f, path in (("--options-file", config.options_file), ("--weight-file", config.weight_file))
                 if str(path) in message] or ["--options-file/--weight-file"]
        raise ElmoError(f"{flags[0]}: {message}") from None
    if opened.bilm.bilm_tf_blockers():
        raise ElmoError(f"--options-file {config.options_file}: {opened.where} is our biLM; finetune continues the "
                        "training of the published architecture (bilm-tf's files, a published_lm.pt, a save_pretrained "
                        "folder of it): train ours further with ELMO.py")
    return opened


def initial_softmax(model: PublishedBiLMWithSoftmax, loaded: PretrainData, config: FinetuneArgs) -> dict:
    """Apply ``--softmax-init`` to ``model.softmax`` (:mod:`elmo.model.published_finetune`): ``token-layer`` counts the
    targets of the first :data:`COUNT_MAX_DOCS` training documents and fits its two scales on the first
    :data:`SCALE_FIT_DOCS`; ``random`` keeps the softmax's own initialisation. Returns what was done (``lm.json``)."""
    if config.softmax_init == "random":
        return {"method": "random"}
    vocab = loaded.vocab
    counted = list(itertools.islice(loaded.sentences(), COUNT_MAX_DOCS))
    counts = target_counts(counted, vocab)
    sample = encode_corpus([d[:config.max_length] for d in counted[:SCALE_FIT_DOCS] if d], vocab,
                           max_chars=model.bilm.config.max_chars, char_scheme="bilm_tf")
    info = init_softmax_from_token_layer(model, vocab, counts, sample)
    return {**info, "counted_documents": len(counted)}


def held_out_perplexities(model: PublishedBiLMWithSoftmax, data: dict, run: StartedRun) -> dict[str, dict[str, float]]:
    """The exact full-vocabulary perplexity of each direction on val (and test, when given):
    ``{"val": {"forward_perplexity": ..., "backward_perplexity": ...}, ...}``."""
    return {split: {f"{d}_perplexity": perplexity(model.direction(d), data[split], run.device) for d in DIRECTION_NAMES}
            for split in ("val", "test") if split in data}


def parameter_groups(model: PublishedBiLMWithSoftmax, config: FinetuneArgs) -> Unfreezing:
    """Two Adam groups: the biLM at ``--lr``, the softmax at ``--softmax-lr`` (both under the warm-up and
    ``--lr-gamma``), every parameter trained from the first step."""
    return Unfreezing([{"params": list(model.bilm.parameters()), "lr": config.lr},
                       {"params": list(model.softmax.parameters()), "lr": config.softmax_lr}], lambda epoch: None)


def finetune(config: FinetuneArgs) -> dict:
    """``python -m elmo finetune`` (module docstring). Returns the ``lm.json`` content (on every rank under
    ``torchrun``; rank 0 alone writes files).

    Raises:
        ElmoError: a missing or invalid biLM file or text file (named with its flag), an output that is one of the
            inputs (:func:`check_files`), an output folder that cannot be written, bad flags.
    """
    opened = bilm_to_finetune(config)
    check_files(config, opened)
    text = config.pretrain_args(opened.bilm.config)
    run = start(config, kernel_cache_entries=32)
    stale = stale_classifiers(config, "published_lm", keep=[config.options_file, config.weight_file]) \
        if run.ctx.is_main else []
    say_stale(stale, run)
    bilm = opened.bilm
    loaded = load_data(text, run)
    train = loaded.data["train"]
    resolve_batch_size(config, loaded.train_documents, run.say)
    vocab = loaded.vocab
    run.say(f"fine-tuning {opened.where} on {loaded.source}: {loaded.train_tokens:,} training tokens, vocabulary "
            f"{len(vocab):,} (" + ", ".join(f"OOV {k} {v:.2%}" for k, v in loaded.oov.items()) + f"), device "
            f"{run.device}, " + (f"{run.ctx.world_size} processes × " if run.ctx.enabled else "")
            + f"{run.threads} threads, {run.precision} training")
    model = language_model_of(bilm, config.lm_config(len(vocab)), seed=config.seed)
    init = initial_softmax(model, loaded, config)
    model.to(run.device)
    before = held_out_perplexities(model, loaded.data, run)
    run.say("before: " + ", ".join(f"{split} {d} perplexity {ppl[f'{d}_perplexity']:.2f}"
                                   for split, ppl in before.items() for d in DIRECTION_NAMES))
    out = lm_summary(loaded, run, {"architecture": config.options_file, "softmax": config.softmax, "before": before,
                                   "finetune": {"options_file": config.options_file, "weight_file": config.weight_file,
                                                "softmax_init": init, "lr": config.lr,
                                                "softmax_lr": config.softmax_lr}})
    started = time.perf_counter()
    torch.manual_seed(config.seed + run.ctx.rank)  # one dropout and candidate stream per rank
    fitted = fit(model, lm_objective(model, loaded, config, run), lm_train_config(config, train), run.device,
                 run.amp_dtype, checkpointing(config, "published_lm", vocab=vocab.fingerprint()),
                 Progress("biLM", "tok", config.quiet), parameter_groups(model, config))
    out["train_seconds"] = time.perf_counter() - started
    if run.ctx.is_main:
        for name in DIRECTION_NAMES:
            evaluate_direction(model.direction(name), fitted, loaded.data, run, vocab, out)
        meta = {**environment_info(config.seed), "config": asdict(config), "card": lm_card(out, config, "finetune")}
        replace_different_models(config, "published_lm", keep=[config.options_file, config.weight_file])
        save_published_lm(model, vocab, run.outputs.published_lm, meta)
        set_aside_stale(stale, run)
        out["bilm_config"], out["options"] = asdict(model.bilm.config), options_of(model.bilm.config)
        out["lm_config"] = asdict(model.config)
        finish_lm_results(out, config, run, started, {"biLM": fitted.history}, ["published_lm"])
        run.say("after:  " + ", ".join(f"{split} {d} perplexity {out[split][f'{d}_perplexity']:.2f}"
                                       for split in before for d in DIRECTION_NAMES))
    distributed.barrier()
    return out
