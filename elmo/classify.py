"""Training the AG News classifier on frozen ELMo features (what ``python classification.py`` runs).

For each layer-mix setting in turn (``trainable_lambda``, ``frozen_lambda``, ``learned_function``;
see :mod:`elmo.mix`) the same :class:`~elmo.classifier.ElmoClassifier` is trained by
:func:`train_and_evaluate` (the :func:`elmo.train.fit` loop, selection on validation macro-F1,
metrics on every split), the recipe ``baselines.py`` also applies to the static embeddings.
Writes ``models/classifier_<setting>.pt``, ``models/classifier.pt`` (the setting best on
validation), ``results/classification.json`` and ``images/confusion_<setting>.png``.
"""

from __future__ import annotations

import copy
import hashlib
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from . import distributed
from .bilm import BiLM, BiLMConfig, load_bilm
from .cache import CACHE_MODES, PREDICT_BATCH, PREDICT_MAX_TOKENS, compute_layers, should_cache
from .checkpoint import FORMAT_VERSION, check_writable, environment_info, load_checkpoint, save_checkpoint, write_json
from .classifier import ClassifierConfig, ElmoClassifier, SequenceClassifier
from .cli import CommonConfig, checkpointing, option, remove_checkpoints
from .data import CLASS_NAMES, NUM_CLASSES, Corpus, EncodedCorpus, load_agnews, tokenize
from .errors import ElmoError
from .metrics import classification_metrics, plot_confusion, plot_curves
from .mix import MIX_SETTINGS, mix_summary
from .pretrain import encode
from .train import (
    Checkpointing,
    TrainConfig,
    autocast,
    cap_kernel_caches,
    configure_threads,
    fit,
    precision_name,
    resolve_device,
    resolve_precision,
    set_seed,
    to_device,
)
from .vocab import Vocabulary


@dataclass
class HeadConfig(CommonConfig):
    """Flags of the classifier head, shared by ``classification.py`` and ``baselines.py`` so that ELMo and
    the static embeddings are compared with exactly the same head and training."""

    encoder_hidden: int = option(128, "task BiLSTM state width per direction")
    token_embedding_dim: int = option(128, "task-trained token embedding x_k concatenated with ELMo_k "
                                      "(paper §3.3); 0 = ELMo_k alone")
    token_embedding_init: str = option("random", "initial x_k: random, or word2vec (skip-gram trained on the "
                                       "training text, as the paper pairs ELMo with pre-trained word vectors)",
                                       choices=("random", "word2vec"))
    dropout: float = option(0.3, "dropout on ELMo vectors and the pooled vector")
    weight_decay: float = option(0.0, "Adam weight decay")
    layer_norm: bool = option(False, "normalise each biLM layer per token before the mix (paper §3.2; ELMo only)")
    concat_token_embedding: bool = option(True, "feed the task encoder [x_k; ELMo_k] (paper §3.3) rather than "
                                          "ELMo_k alone; x_k is --token-embedding-dim wide")

    def classifier_config(self, setting: str) -> ClassifierConfig:
        """The :class:`ClassifierConfig` of the head for one representation ``setting``."""
        return ClassifierConfig(setting=setting, num_classes=NUM_CLASSES, encoder_hidden=self.encoder_hidden,
                                token_embedding_dim=self.token_embedding_dim if self.concat_token_embedding else 0,
                                dropout=self.dropout, seed=self.seed, layer_norm=self.layer_norm)


@dataclass
class ClassifyConfig(HeadConfig):
    """Flags of ``classification.py`` (see ``python classification.py --help``)."""

    settings: tuple[str, ...] = option(MIX_SETTINGS, "layer-mix settings to train, in turn", choices=MIX_SETTINGS)
    elmo_dropout: float = option(0.0, "dropout on the ELMo vector itself (AllenNLP's Elmo uses 0.5)")
    mix_l2: float = option(0.0, "L2 penalty λ‖w‖² on the scalar-mix weights, pulling λ toward the average "
                           "(paper §3.3 and §5.2: 0.001 small, 1 ≈ plain average); trainable λ only, the other "
                           "settings have no trainable scalar weights")
    fine_tune: bool = option(False, "fine-tune the biLM with the classifier instead of freezing it: discriminative "
                             "learning rates and gradual unfreezing, top layer first")
    lr_decay: float = option(2.6, "fine-tuning: each biLM layer group down from the top gets the learning rate of "
                             "the group above divided by this (ULMFiT's 2.6)")
    predict: str | None = option(None, "classify this text with models/classifier.pt and print label and "
                                 "probability (no training)")
    predict_file: str | None = option(None, "classify every line of this file (one text per line; no training)")
    cache_layers: str = option("auto", "compute the frozen biLM's LSTM layers of every document once and share them "
                               "across epochs and settings (memory for time, see elmo/cache.py): auto (when they "
                               "fit in half the available memory), on, off (run the biLM in every step); never "
                               "with --fine-tune", choices=CACHE_MODES)

    def check(self) -> None:
        super().check()
        if not self.settings:
            raise ElmoError("--settings needs at least one setting")
        if self.lr_decay < 1:
            raise ElmoError(f"--lr-decay must be >= 1, got {self.lr_decay}")
        if self.predict is not None and self.predict_file is not None:
            raise ElmoError("give either --predict or --predict-file, not both")
        self.classifier_config(self.settings[0])

    def classifier_config(self, setting: str) -> ClassifierConfig:
        """The head's config plus the ELMo options (ELMo dropout, mix L2, fine-tuning)."""
        return replace(super().classifier_config(setting), elmo_dropout=self.elmo_dropout, mix_l2=self.mix_l2,
                       fine_tune=self.fine_tune)


#: BiLMConfig fields added after the first release (the paper's options); at their defaults they are
#: left out of :func:`bilm_fingerprint`, so classifiers saved before they existed still load.
_LATER_BILM_FIELDS = ("token_encoder", "char_dim", "char_filters", "num_highway", "max_chars", "residual", "proj_size")


def bilm_fingerprint(bilm: BiLM, vocab: Vocabulary) -> str:
    """A short hash of the biLM's config and vocabulary; a classifier only loads onto the same."""
    config, default = asdict(bilm.config), asdict(BiLMConfig(vocab_size=1))
    kept = {k: v for k, v in config.items() if k not in _LATER_BILM_FIELDS or v != default[k]}
    text = repr(sorted(kept.items())) + "\n" + "\n".join(vocab.itos)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def predict(model: SequenceClassifier, corpus: EncodedCorpus, device: torch.device,
            amp_dtype: torch.dtype | None = None) -> np.ndarray:
    """Class probabilities ``(N, C)`` for every document of ``corpus``, in corpus order.

    Batches of :data:`elmo.cache.PREDICT_BATCH` documents / :data:`~elmo.cache.PREDICT_MAX_TOKENS`
    padded tokens (the batches the layer cache is filled in), under ``amp_dtype`` autocast
    (:func:`elmo.train.resolve_precision`); cached biLM layers are used when the corpus has them.
    Under ``torchrun`` each rank predicts its share of the batches and the rows are all-reduced.
    """
    probs = np.zeros((len(corpus), model.config.num_classes), dtype=np.float32)
    model.eval()
    with torch.no_grad():
        for index, batch in corpus.eval_batches(PREDICT_BATCH, PREDICT_MAX_TOKENS):
            batch = to_device(batch, device)
            with autocast(device, amp_dtype):
                logits = model(batch["ids"], batch["lengths"], batch.get("chars"), batch.get("layers"))
            probs[index] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return distributed.all_reduce_sum(probs).astype(np.float32)  # each row is filled on one rank only


def classifier_checkpoint(model: ElmoClassifier, fingerprint: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The ``classifier*.pt`` payload: task weights, config, class names, the biLM fingerprint and the
    library versions and seed (``meta``)."""
    return {"format": "elmo.classifier", "version": FORMAT_VERSION, "config": asdict(model.config),
            "class_names": list(CLASS_NAMES), "bilm_fingerprint": fingerprint,
            "meta": environment_info(model.config.seed), "state_dict": model.task_state_dict(), **extra}


def load_classifier(path: str | Path, bilm: BiLM, vocab: Vocabulary) -> tuple[ElmoClassifier, list[str]]:
    """Rebuild an :class:`~elmo.classifier.ElmoClassifier` from a ``classifier*.pt`` on top of its biLM.

    Args:
        path: the classifier file (``weights_only=True`` load).
        bilm, vocab: the biLM and vocabulary it was trained on (``load_bilm("models/bilstm.pt")``);
            a fine-tuned classifier's file carries its own biLM weights, which replace ``bilm``'s.

    Returns:
        ``(model, class_names)``, the model in eval mode on the biLM's device.

    Raises:
        ElmoError: missing/corrupt file, not a classifier, trained on a different biLM (fingerprint of
            config + vocabulary), or weights that do not fit the stored config.
    """
    ckpt = load_checkpoint(path, "elmo.classifier")
    fingerprint = bilm_fingerprint(bilm, vocab)
    if ckpt.get("bilm_fingerprint") != fingerprint:
        raise ElmoError(f"{path} was trained on a different biLM (fingerprint {ckpt.get('bilm_fingerprint')}, "
                        f"this biLM {fingerprint}): use the bilstm.pt it was trained with")
    try:
        config = ClassifierConfig(**ckpt["config"])
        model = ElmoClassifier(copy.deepcopy(bilm) if config.fine_tune else bilm, config)
        model.load_task_state_dict(ckpt["state_dict"])
    except (KeyError, TypeError, RuntimeError, ElmoError) as exc:
        raise ElmoError(f"{path}: inconsistent classifier checkpoint: {str(exc).splitlines()[0]}") from None
    device = next(bilm.parameters()).device
    return model.to(device).eval(), list(ckpt.get("class_names", CLASS_NAMES))


def classifier_loss(model: SequenceClassifier, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Mean cross-entropy (fp32) of a labelled batch plus the model's penalty, and its document count
    (the ``loss_fn`` of :func:`elmo.train.fit` for every classifier; ``model`` may be wrapped in DDP)."""
    logits = model(batch["ids"], batch["lengths"], batch.get("chars"), batch.get("layers"))
    penalty = getattr(model, "module", model).penalty()  # under torchrun ``model`` is the DDP wrapper
    return F.cross_entropy(logits.float(), batch["labels"]) + penalty, len(batch["labels"])


def train_and_evaluate(model: SequenceClassifier, data: dict[str, EncodedCorpus], config: HeadConfig,
                       device: torch.device, amp_dtype: torch.dtype | None = None,
                       checkpoint: Checkpointing | None = None) -> dict[str, Any]:
    """Train ``model`` with :func:`elmo.train.fit` and evaluate it: the one recipe every representation gets.

    Adam on cross-entropy over length-bucketed batches of ``data["train"]`` (reshuffled each epoch
    from ``config.seed + epoch``), validation macro-F1 after every epoch, early stopping and the best
    epoch's weights kept; then metrics on every split.

    Args:
        model: any :class:`~elmo.classifier.SequenceClassifier`, already on ``device``.
        data: ``{"train", "val", "test"}`` encoded corpora with labels (and cached biLM layers, if attached).
        config: the head/training flags (epochs, lr, batch sizes, patience, weight decay, seed).
        amp_dtype: mixed-precision dtype of training and prediction (``None`` = fp32).
        checkpoint: training checkpoints / resume (:class:`elmo.train.Checkpointing`).

    Returns:
        ``{"train", "val", "test": metrics (see :func:`~elmo.metrics.classification_metrics`),
        "best_epoch", "history", "train_seconds"}``.
    """
    started = time.perf_counter()

    def validate() -> dict[str, float]:
        m = classification_metrics(data["val"].labels, predict(model, data["val"], device, amp_dtype).argmax(1),
                                   NUM_CLASSES)
        return {"f1": m["f1"], "accuracy": m["accuracy"]}

    fitted = fit(
        model,
        batches=lambda epoch: data["train"].epoch_batches(config.batch_size, config.max_tokens, config.seed + epoch),
        loss_fn=classifier_loss,
        validate=validate, monitor="f1", maximize=True,
        config=TrainConfig(epochs=config.epochs, lr=config.lr, clip_norm=config.clip_norm, patience=config.patience,
                           weight_decay=config.weight_decay),
        device=device, desc=model.config.setting, unit="doc", quiet=config.quiet, amp_dtype=amp_dtype,
        checkpoint=checkpoint, **fine_tuning(model, config),
    )
    seconds = time.perf_counter() - started
    entry: dict[str, Any] = {split: classification_metrics(
        data[split].labels, predict(model, data[split], device, amp_dtype).argmax(1), NUM_CLASSES)
        for split in ("train", "val", "test")}
    entry.update({"best_epoch": fitted.best_epoch, "history": fitted.history, "train_seconds": seconds})
    return entry


def fine_tuning(model: SequenceClassifier, config: HeadConfig) -> dict[str, Any]:
    """:func:`elmo.train.fit` arguments that fine-tune an ELMo classifier's biLM (``--fine-tune``); ``{}`` otherwise.

    Discriminative learning rates: the task model (mix + head) trains at ``lr``, the biLM's top LSTM
    layer at ``lr / lr_decay``, the next at ``lr / lr_decay²``, the token encoders lowest. Gradual
    unfreezing: epoch 1 trains the task model only; each later epoch unfreezes the next group down
    (Howard & Ruder 2018, ULMFiT §3.2-3.3).
    """
    if not getattr(model.config, "fine_tune", False):
        return {}
    groups = model.elmo.layer_groups()  # top down
    bilm_ids = {id(p) for p in model.bilm.parameters()}
    task = [p for p in model.parameters() if p.requires_grad and id(p) not in bilm_ids]
    param_groups = [{"params": task, "lr": config.lr}]
    param_groups += [{"params": g, "lr": config.lr / config.lr_decay ** (i + 1)} for i, g in enumerate(groups)]

    def unfreeze(epoch: int) -> None:
        for i, group in enumerate(groups):
            for p in group:
                p.requires_grad_(i < epoch)

    return {"param_groups": param_groups, "on_epoch_start": unfreeze}


@dataclass
class Run:
    """What every classifier run starts from (see :func:`prepare_run`)."""

    device: torch.device
    say: Callable[..., None]
    models: Path
    results: Path
    images: Path
    bilm: BiLM
    vocab: Vocabulary
    corpora: dict[str, Corpus]
    data: dict[str, EncodedCorpus]
    token_vectors: np.ndarray | None = None
    amp_dtype: torch.dtype | None = None  # mixed precision (elmo.train.resolve_precision); None = fp32

    def to_device(self, model: SequenceClassifier) -> SequenceClassifier:
        """Initialise ``model``'s task token embedding x_k (``--token-embedding-init``) and move it to the device."""
        if self.token_vectors is not None and model.token_embedding is not None:
            from .static import copy_vectors

            copy_vectors(model.token_embedding, self.token_vectors)
        return model.to(self.device)


def prepare_run(config: HeadConfig) -> Run:
    """Seed, threads, device, the trained biLM (on the device) and the encoded train/val/test splits.

    Raises:
        ElmoError: ``bilstm.pt`` missing from ``--models-dir`` (run ``python ELMO.py`` first), bad data.
    """
    cap_kernel_caches(256)
    ctx = distributed.init(config.device)
    set_seed(config.seed)
    configure_threads(config.threads)
    device = resolve_device(config.device)
    amp_dtype = resolve_precision(config.precision, device)
    say = (lambda *a: None) if config.quiet or not ctx.is_main else (lambda *a: print(*a, flush=True))
    models = Path(config.models_dir)
    if ctx.is_main:
        check_writable(models, config.results_dir, config.images_dir)
    if not (models / "bilstm.pt").is_file():
        raise ElmoError(f"{models / 'bilstm.pt'} not found: run `python ELMO.py --models-dir {models}` first")
    bilm, vocab, _ = load_bilm(models / "bilstm.pt")
    if distributed.broadcast_words([bilm_fingerprint(bilm, vocab)]) != [bilm_fingerprint(bilm, vocab)]:
        raise ElmoError(f"rank {ctx.rank}: {models / 'bilstm.pt'} differs from rank 0's: every node needs the same file")
    bilm.to(device)
    splits = load_agnews(config.data_dir, config.val_fraction, config.seed, config.max_docs, config.skip_bad_rows)
    corpora = dict(zip(("train", "val", "test"), splits))
    data = {name: encode(c, vocab, config.max_length, bilm.config.chars_per_token) for name, c in corpora.items()}
    say(f"data: {len(corpora['train'])} train / {len(corpora['val'])} val / {len(corpora['test'])} test documents; "
        f"biLM vocabulary {len(vocab):,}; device {device}, {precision_name(amp_dtype)}")
    token_vectors = None
    if config.token_embedding_init == "word2vec" and config.token_embedding_dim and ctx.is_main:  # DDP copies rank 0's
        from .static import word2vec_vectors

        token_vectors, info = word2vec_vectors(corpora["train"].tokens, vocab, config.token_embedding_dim,
                                               seed=config.seed)
        say(f"x_k initialised from Word2Vec ({config.token_embedding_dim}-d, {info['seconds']:.0f} s)")
    return Run(device, say, models, Path(config.results_dir), Path(config.images_dir), bilm, vocab, corpora, data,
               token_vectors, amp_dtype)


def attach_layer_cache(run: Run, config: ClassifyConfig) -> float | None:
    """Apply ``--cache-layers``: compute the frozen biLM's LSTM layers of every split once
    (:func:`elmo.cache.compute_layers`) and attach them to ``run.data``. Never with ``--fine-tune``.

    Returns:
        Seconds spent computing the cache, or ``None`` when not caching.
    """
    if config.fine_tune:
        return None
    num_tokens = sum(d.num_tokens for d in run.data.values())
    dtype = run.amp_dtype if run.amp_dtype is not None else torch.float32
    cache, why = should_cache(config.cache_layers, run.bilm, num_tokens, dtype)
    run.say(why)
    if not cache:
        return None
    started = time.perf_counter()
    for corpus in run.data.values():
        corpus.attach_layers(compute_layers(run.bilm, corpus, run.device, run.amp_dtype))
    seconds = time.perf_counter() - started
    run.say(f"biLM layers of {num_tokens:,} tokens computed in {seconds:.0f} s")
    return seconds


def read_texts(path: str | Path) -> tuple[list[str], list[int], int]:
    """The non-blank lines of a UTF-8 text file, their 1-based line numbers and how many blank lines were skipped.

    Raises:
        ElmoError: the file is missing, not UTF-8, or has no non-blank line.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise ElmoError(f"--predict-file {path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ElmoError(f"--predict-file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    kept = [(i + 1, line.strip()) for i, line in enumerate(lines) if line.strip()]
    if not kept:
        raise ElmoError(f"--predict-file {path}: no text to classify")
    return [t for _, t in kept], [n for n, _ in kept], len(lines) - len(kept)


def predict_texts(config: ClassifyConfig) -> list[dict[str, Any]]:
    """``--predict`` / ``--predict-file``: print ``label<TAB>probability<TAB>text`` per text with
    ``classifier.pt``; returns ``[{"text", "label", "probability", "probabilities"}]``.

    Raises:
        ElmoError: missing model files, an empty text (named by its line) or an unreadable file.
    """
    from .api import TextClassifier

    configure_threads(config.threads)
    if config.predict is not None:
        texts, where = [config.predict], ["--predict"]
    else:
        texts, numbers, blank = read_texts(config.predict_file)
        if blank:
            print(f"note: skipped {blank} blank line(s) of {config.predict_file}", file=sys.stderr)
        where = [f"{config.predict_file} line {n}" for n in numbers]
    classifier = TextClassifier.from_pretrained(config.models_dir, device=config.device, precision=config.precision)
    for text, place in zip(texts, where):
        if not tokenize(text):
            raise ElmoError(f"{place}: the text holds no word to classify: {text[:60]!r}")
    probs = classifier.predict_proba(texts)
    out = []
    for text, p in zip(texts, probs):
        label = classifier.class_names[int(p.argmax())]
        print(f"{label}\t{p.max():.4f}\t{text}", flush=True)
        out.append({"text": text, "label": label, "probability": float(p.max()),
                    "probabilities": dict(zip(classifier.class_names, p.tolist()))})
    return out


def classify(config: ClassifyConfig) -> dict | list:
    """Train and evaluate one classifier per setting; returns the ``classification.json`` content.
    With ``--predict`` / ``--predict-file`` it only classifies those texts (:func:`predict_texts`).

    Raises:
        ElmoError: missing biLM files (run ``python ELMO.py`` first), bad data or flags.
    """
    if config.predict is not None or config.predict_file is not None:
        return predict_texts(config)
    run = prepare_run(config)
    device, say, models, results, images = run.device, run.say, run.models, run.results, run.images
    bilm, vocab, data = run.bilm, run.vocab, run.data
    fingerprint = bilm_fingerprint(bilm, vocab)
    cache_seconds = attach_layer_cache(run, config)

    out: dict[str, Any] = {}
    payloads: dict[str, dict[str, Any]] = {}  # checkpoint contents per setting; the best is also classifier.pt
    ctx = distributed.context()
    for setting in config.settings:
        set_seed(config.seed)
        # Fine-tuning trains the biLM in place: give each setting its own copy of the pre-trained one.
        model_bilm = copy.deepcopy(bilm) if config.fine_tune else bilm
        model = run.to_device(ElmoClassifier(model_bilm, config.classifier_config(setting)))
        if ctx.rank:  # one dropout stream per rank (DDP gives every rank rank 0's initial weights)
            torch.manual_seed(config.seed + ctx.rank)
        entry = train_and_evaluate(model, data, config, device, run.amp_dtype,
                                   checkpointing(config, f"classifier_{setting}", bilm=fingerprint))
        entry.update(mix_summary(model.mix))
        out[setting] = entry
        if not ctx.is_main:
            continue
        payloads[setting] = classifier_checkpoint(model, fingerprint,
                                                  {"setting_results": {k: entry[k]["f1"] for k in ("val", "test")}})
        save_checkpoint(payloads[setting], models / f"classifier_{setting}.pt")
        plot_confusion(entry["test"]["confusion_matrix"], CLASS_NAMES, CLASS_NAMES, images / f"confusion_{setting}.png",
                       f"{setting} (test accuracy {entry['test']['accuracy']:.3f})")
        lam = "" if entry["lambdas"] is None else f", λ = {np.round(entry['lambdas'], 3).tolist()}, γ = {entry['gamma']:.3f}"
        say(f"{setting}: test accuracy {entry['test']['accuracy']:.4f}, macro-F1 {entry['test']['f1']:.4f}{lam}")
        say(format_confusion(entry["test"]["confusion_matrix"]))

    if not ctx.is_main:
        distributed.barrier()  # wait for rank 0's files, so the job ends as one
        return out
    best = max(config.settings, key=lambda s: out[s]["val"]["f1"])
    out["best_setting"] = best
    out["precision"], out["layer_cache_seconds"] = precision_name(run.amp_dtype), cache_seconds
    save_checkpoint(payloads[best], models / "classifier.pt")
    out["config"], out["meta"] = asdict(config), {**environment_info(config.seed), "bilm_fingerprint": fingerprint}
    write_json(results / "classification.json", out)
    plot_curves({s: [row["val_f1"] for row in out[s]["history"]] for s in config.settings},
                images / "classifier_val_f1.png", "Classifier validation macro-F1", "macro-F1")
    remove_checkpoints(config, [f"classifier_{s}" for s in config.settings])
    say("\n" + format_results_table(out, config.settings))
    distributed.barrier()
    return out


def format_confusion(cm: list[list[int]]) -> str:
    """The confusion matrix as text (rows true class, columns predicted)."""
    width = max(9, max(len(str(v)) for row in cm for v in row) + 2)
    lines = ["true \\ pred".ljust(12) + "".join(n[:width - 1].rjust(width) for n in CLASS_NAMES)]
    lines += [name.ljust(12) + "".join(str(v).rjust(width) for v in row) for name, row in zip(CLASS_NAMES, cm)]
    return "\n".join(lines)


def format_results_table(out: dict, settings) -> str:
    """One line per setting: train and test accuracy / macro P, R, F1."""
    lines = ["setting             split  accuracy  precision  recall     F1"]
    for s in settings:
        for split in ("train", "test"):
            m = out[s][split]
            lines.append(f"{s:<20}{split:<7}{m['accuracy']:>8.4f}{m['precision']:>11.4f}{m['recall']:>8.4f}{m['f1']:>7.4f}")
    lines.append(f"best on validation: {out['best_setting']}")
    return "\n".join(lines)
