"""The downstream task recipe every representation gets, so ELMo and the baselines differ only in it: :class:`HeadArgs`
(the classifier-head flags ``classification.py`` and ``baselines.py`` share), :func:`prepare` (the trained biLM and the
encoded AG News splits) and :func:`train_and_evaluate` (trains any :class:`~elmo.model.classifier.SequenceClassifier`
and scores it on every split).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..data.agnews import CLASS_NAMES, NUM_CLASSES, labelled_draw, load_agnews
from ..data.corpus import Corpus, EncodedCorpus, encode_corpus
from ..data.pretraining_text import pretraining_text
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..inference.class_probabilities import class_probabilities
from ..model.bilm import BiLM
from ..model.classifier import SequenceClassifier, bilm_fingerprint
from ..model.serialization import open_bilm
from ..model.static import copy_vectors, word2vec_vectors
from ..runtime import distributed
from ..training.metrics import classification_metrics
from ..training.state import Checkpointing
from ..training.trainer import Objective, Progress, TrainConfig, Unfreezing, fit
from .common import CommonArgs, StartedRun, format_confusion, option, resolve_batch_size, start
from .plots import plot_confusion

#: the task vocabulary with a published biLM (which has none): training words seen this often, at most this many
TASK_MIN_FREQ, TASK_MAX_VOCAB = 2, 50000

SELECTION_METRICS = ("f1", "loss")  # --select-by: validation macro-F1 (maximised) or cross-entropy (minimised)


@dataclass
class HeadArgs(CommonArgs):
    """The classifier-head flags (module docstring; what each does: ``docs/commands.md``, ``docs/method.md``). The
    lab's ``--labelled-fraction`` draws its share with ``--seed`` (:func:`~elmo.data.agnews.labelled_draw`), leaving
    what is learnt from text alone and the validation split unchanged; ``--track-test`` is never used for selection."""

    encoder_hidden: int = option(128, "task BiLSTM state width per direction")
    encoder_projection: int = option(0, "project the task BiLSTM's input to this width", lab=True)
    epochs: int = option(4, "maximum training epochs")
    token_embedding_dim: int = option(128, "width of the task token embedding x_k")
    token_embedding_init: str = option("random", "initial x_k", choices=("random", "word2vec"))
    dropout: float = option(0.3, "dropout on ELMo vectors and the pooled vector")
    weight_decay: float = option(0.0, "Adam weight decay")
    layer_norm: bool = option(False, "normalise each biLM layer before the mix")
    concat_token_embedding: bool = option(True, "feed the encoder [x_k; ELMo_k]")
    select_by: str = option("f1", "the validation metric that picks the epoch", choices=SELECTION_METRICS)
    labelled_fraction: float = option(1.0, "train on this share of the labelled documents", lab=True)
    track_test: bool = option(False, "record the test accuracy after every epoch", lab=True)

    def check(self) -> None:
        """:meth:`CommonArgs.check` plus ``--select-by`` and ``--labelled-fraction`` (:class:`ElmoError` names it)."""
        super().check()
        if self.select_by not in SELECTION_METRICS:
            raise ElmoError(f"--select-by must be one of {', '.join(SELECTION_METRICS)}, got {self.select_by!r}")
        if not 0.0 < self.labelled_fraction <= 1.0:
            raise ElmoError(f"--labelled-fraction must be in (0, 1], got {self.labelled_fraction}")

    def head_sizes(self) -> dict[str, Any]:
        """The :class:`~elmo.model.classifier.SequenceClassifierConfig` fields these flags set (the shared head)."""
        return {"num_classes": NUM_CLASSES, "encoder_hidden": self.encoder_hidden,
                "encoder_projection": self.encoder_projection, "dropout": self.dropout,
                "token_embedding_dim": self.token_embedding_dim if self.concat_token_embedding else 0, "seed": self.seed}


@dataclass
class TaskData:
    """What every classifier run starts from (:func:`prepare`): the started run, the trained biLM (on the device), its
    vocabulary, the AG News splits raw and encoded (``"train"``: the ``--labelled-fraction`` the classifier trains on),
    optional Word2Vec rows for x_k (one per vocabulary word), the text that representations learnt from text alone
    train on (``text``, ``text_data``) and the biLM's :func:`~elmo.model.classifier.bilm_fingerprint`."""

    run: StartedRun
    bilm: BiLM
    vocab: Vocabulary
    corpora: dict[str, Corpus]
    data: dict[str, EncodedCorpus]
    token_vectors: np.ndarray | None = None
    text: Corpus | None = None
    text_data: EncodedCorpus | None = None
    fingerprint: str | None = None

    def to_device(self, model: SequenceClassifier) -> SequenceClassifier:
        """Initialise ``model``'s task token embedding x_k (``--token-embedding-init``) and move it to the device."""
        if self.token_vectors is not None and model.token_embedding is not None:
            copy_vectors(model.token_embedding, self.token_vectors)
        return model.to(self.run.device)


def prepare(config: HeadArgs, published: tuple[str, str] | None = None) -> TaskData:
    """Start the run (:func:`~elmo.pipelines.common.start`), load the biLM onto the device, and read and encode the
    train/val/test splits and the text of :class:`TaskData`. ``published``: ``(options.json, weights.hdf5)`` of a
    bilm-tf biLM to use instead of the one ``--models-dir`` holds (:func:`~elmo.model.serialization.open_bilm`); a
    published biLM, either way, gets text with the case kept and a task vocabulary for x_k built from the training
    split (:data:`TASK_MIN_FREQ`), ours has its own. Raises :class:`ElmoError` when ``--models-dir`` holds no biLM (run
    ``python ELMO.py`` first) or invalid biLM files, on a different biLM on another ``torchrun`` node, on bad data."""
    run = start(config, kernel_cache_entries=256)
    opened = open_bilm(*(published or (run.outputs.models,)))
    bilm, vocab = opened.bilm, None if opened.bilm.cased else opened.vocab  # None: a published biLM's, built below
    where = opened.where if published is None else str(published[1])
    corpora = dict(zip(("train", "val", "test"), load_agnews(config.data_dir, config.val_fraction, config.seed,
                                                             config.max_docs, config.skip_bad_rows, config.download)))
    if vocab is None:
        corpora = {name: c.cased() for name, c in corpora.items()}
        vocab = Vocabulary.build(corpora["train"].tokens, TASK_MIN_FREQ, TASK_MAX_VOCAB)
    fingerprint = bilm_fingerprint(bilm, vocab)
    if distributed.broadcast_words([fingerprint]) != [fingerprint]:
        raise ElmoError(f"rank {run.ctx.rank}: {where} (or the data) differs from rank 0's: every node needs the same")
    bilm.to(run.device)
    def encode(c: Corpus) -> EncodedCorpus:
        return encode_corpus(c.tokens, vocab, c.labels, config.max_length, bilm.config.chars_per_token,
                             bilm.config.char_scheme)

    data = {name: encode(c) for name, c in corpora.items()}
    text, text_data = corpora["train"], data["train"]
    if config.text_fraction < 1.0 or config.extra_text:
        text, stats = pretraining_text(text, [corpora["val"], corpora["test"]], config.text_fraction, config.seed,
                                       config.extra_text)
        text_data = encode(text)
        run.say(f"text for Word2Vec, SVD and TF-IDF: {stats['train_documents']} training descriptions"
                + "".join(f" + {c['kept']} rows of {Path(f).name}" for f, c in stats["extra"].items()))
    if config.labelled_fraction < 1.0:
        every = len(corpora["train"])
        # from the whole training split whatever the text, so biLMs on a pre-training-text curve share these documents
        corpora["train"] = corpora["train"].subset(labelled_draw(corpora["train"].labels, config.labelled_fraction,
                                                                 config.seed))
        data["train"] = encode(corpora["train"])
        run.say(f"labelled documents: {len(corpora['train'])} of {every} ({config.labelled_fraction:.0%}; "
                f"per class {np.bincount(corpora['train'].labels, minlength=NUM_CLASSES).tolist()})")
    run.say(f"data: {len(corpora['train'])} train / {len(corpora['val'])} val / {len(corpora['test'])} test "
            f"documents; biLM {where}, vocabulary {len(vocab):,}; device {run.device}, {run.precision}")
    resolve_batch_size(config, len(corpora["train"]), run.say)
    token_vectors = None
    if config.token_embedding_init == "word2vec" and config.token_embedding_dim and run.ctx.is_main:
        token_vectors, info = word2vec_vectors(text.tokens, vocab, config.token_embedding_dim, seed=config.seed,
                                               workers=run.word2vec_workers)  # DDP copies rank 0's weights
        run.say(f"x_k initialised from Word2Vec ({config.token_embedding_dim}-d, {info['seconds']:.0f} s)")
    return TaskData(run, bilm, vocab, corpora, data, token_vectors, text, text_data, fingerprint)


def classifier_loss(model: SequenceClassifier, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Mean cross-entropy (fp32) of a labelled batch plus the model's penalty, and its document count
    (the ``loss_fn`` of every classifier; ``model`` may be wrapped in DDP)."""
    logits = model(batch["ids"], batch["lengths"], batch.get("chars"), batch.get("layers"))
    penalty = getattr(model, "module", model).penalty()
    return F.cross_entropy(logits.float(), batch["labels"]) + penalty, len(batch["labels"])


def train_and_evaluate(model: SequenceClassifier, data: dict[str, EncodedCorpus], config: HeadArgs,
                       run: StartedRun, checkpoint: Checkpointing | None = None) -> dict[str, Any]:
    """Train ``model`` (any :class:`~elmo.model.classifier.SequenceClassifier`, on the run's device) with
    :func:`elmo.training.trainer.fit` and score it on every split of ``data`` (``{"train", "val", "test"}`` encoded
    corpora with labels, and cached biLM layers if attached): Adam on cross-entropy over length-bucketed batches of
    ``data["train"]`` (reshuffled from ``config.seed + epoch``), validation macro-F1, accuracy and cross-entropy after
    every epoch, early stopping and the best epoch kept on ``--select-by``; ``--track-test`` adds each epoch's test
    accuracy to its history row. Returns ``{"train", "val", "test": metrics, "best_epoch", "history", "train_seconds",
    "test_predictions": each test document's predicted class, in file order (for paired tests such as McNemar's)}``
    (metrics: :func:`~elmo.training.metrics.classification_metrics`)."""
    started = time.perf_counter()
    device, amp_dtype, shard = run.device, run.amp_dtype, run.ctx.shard
    unfreezing = fine_tuning(model, config)  # None unless the classifier trains its biLM too

    predictions: dict[str, np.ndarray] = {}
    tracked: list[float] = []  # --track-test

    def scores(split: str) -> dict[str, Any]:
        probs = class_probabilities(model, data[split], device, amp_dtype)
        predictions[split] = probs.argmax(1)
        return classification_metrics(data[split].labels, predictions[split], NUM_CLASSES, probabilities=probs)

    def validate() -> dict[str, float]:
        m = scores("val")
        if config.track_test:
            tracked.append(scores("test")["accuracy"])
        return {"f1": m["f1"], "accuracy": m["accuracy"], "loss": m["loss"]}

    objective = Objective(
        batches=lambda epoch: data["train"].epoch_batches(config.batch_size, config.max_tokens, config.seed + epoch,
                                                          shard),
        loss_fn=classifier_loss, validate=validate, monitor=config.select_by, maximize=config.select_by == "f1")
    train_config = TrainConfig(epochs=config.epochs, lr=config.lr, clip_norm=config.clip_norm, patience=config.patience,
                               weight_decay=config.weight_decay)
    fitted = fit(model, objective, train_config, device, amp_dtype, checkpoint,
                 Progress(model.config.representation, "doc", config.quiet), unfreezing)
    for row, accuracy in zip(fitted.history[len(fitted.history) - len(tracked):], tracked):
        row["test_accuracy"] = accuracy  # rows of epochs before a --resume have none
    seconds = time.perf_counter() - started
    return {**{split: scores(split) for split in ("train", "val", "test")}, "best_epoch": fitted.best_epoch,
            "history": fitted.history, "train_seconds": seconds,
            "test_predictions": np.asarray(predictions["test"]).tolist()}


def report_test(run: StartedRun, name: str, entry: dict[str, Any]) -> None:
    """Rank 0: print the test accuracy and macro-F1 of ``name`` (a layer mix, with its λ and γ if any, or a baseline)
    and its test confusion matrix, and plot that as ``confusion_<name>.png``."""
    test, lam = entry["test"], entry.get("lambdas")
    run.say(f"{name}: test accuracy {test['accuracy']:.4f}, macro-F1 {test['f1']:.4f}"
            + ("" if lam is None else f", λ = {np.round(lam, 3).tolist()}, γ = {entry['gamma']:.3f}"))
    run.say(format_confusion(test["confusion_matrix"]))
    plot_confusion(test["confusion_matrix"], CLASS_NAMES, CLASS_NAMES, run.outputs.image(f"confusion_{name}"),
                   f"{name} (test accuracy {test['accuracy']:.3f})")


def fine_tuning(model: SequenceClassifier, config: HeadArgs) -> Unfreezing | None:
    """The :class:`~elmo.training.trainer.Unfreezing` schedule of ``--unfreeze-bilm`` (Howard & Ruder 2018, ULMFiT
    §3.2-3.3), else ``None``: the task model (mix + head) at ``lr``, the biLM's layer groups top down (the token
    encoders lowest) at ``lr / lr_decay``, ``lr / lr_decay²``, ...; epoch 1 trains the task model only, each later
    epoch unfreezes the next group down."""
    if not getattr(model.config, "unfreeze_bilm", False):
        return None
    groups = model.bilm.layer_groups()  # top down
    bilm_ids = {id(p) for p in model.bilm.parameters()}
    task = [p for p in model.parameters() if p.requires_grad and id(p) not in bilm_ids]
    param_groups = [{"params": task, "lr": config.lr}]
    param_groups += [{"params": g, "lr": config.lr / config.lr_decay ** (i + 1)} for i, g in enumerate(groups)]

    def unfreeze(epoch: int) -> None:
        for i, group in enumerate(groups):
            for p in group:
                p.requires_grad_(i < epoch)

    return Unfreezing(param_groups, unfreeze)
