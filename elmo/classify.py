"""Training the AG News classifier on frozen ELMo features (what ``python classification.py`` runs).

For each layer-mix setting in turn (``trainable_lambda``, ``frozen_lambda``, ``learned_function``;
see :mod:`elmo.mix`) the same :class:`~elmo.classifier.ElmoClassifier` is trained by
:func:`train_and_evaluate` (the :func:`elmo.train.fit` loop, selection on validation macro-F1,
metrics on every split), the recipe ``baselines.py`` also applies to the static embeddings.
Writes ``models/classifier_<setting>.pt``, ``models/classifier.pt`` (the setting best on
validation), ``results/classification.json`` and ``images/confusion_<setting>.png``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from .bilm import BiLM, load_bilm
from .checkpoint import FORMAT_VERSION, environment_info, save_checkpoint, write_json
from .classifier import ClassifierConfig, ElmoClassifier, SequenceClassifier
from .cli import CommonConfig, option
from .data import CLASS_NAMES, NUM_CLASSES, Corpus, EncodedCorpus, load_agnews
from .errors import ElmoError
from .metrics import classification_metrics, plot_confusion, plot_curves
from .mix import MIX_SETTINGS, mix_summary
from .pretrain import encode
from .train import TrainConfig, configure_threads, fit, resolve_device, set_seed, to_device
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

    def classifier_config(self, setting: str) -> ClassifierConfig:
        """The :class:`ClassifierConfig` of the head for one representation ``setting``."""
        return ClassifierConfig(setting=setting, num_classes=NUM_CLASSES, encoder_hidden=self.encoder_hidden,
                                token_embedding_dim=self.token_embedding_dim, dropout=self.dropout, seed=self.seed,
                                layer_norm=self.layer_norm)


@dataclass
class ClassifyConfig(HeadConfig):
    """Flags of ``classification.py`` (see ``python classification.py --help``)."""

    settings: tuple[str, ...] = option(MIX_SETTINGS, "layer-mix settings to train, in turn", choices=MIX_SETTINGS)

    def check(self) -> None:
        super().check()
        if not self.settings:
            raise ElmoError("--settings needs at least one setting")


def bilm_fingerprint(bilm: BiLM, vocab: Vocabulary) -> str:
    """A short hash of the biLM's config and vocabulary; a classifier only loads onto the same."""
    text = repr(sorted(asdict(bilm.config).items())) + "\n" + "\n".join(vocab.itos)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def predict(model: SequenceClassifier, corpus: EncodedCorpus, device: torch.device, max_tokens: int = 16384) -> np.ndarray:
    """Class probabilities ``(N, C)`` for every document of ``corpus``, in corpus order."""
    probs = np.zeros((len(corpus), model.config.num_classes), dtype=np.float32)
    model.eval()
    with torch.no_grad():
        for index in corpus.batches(256, max_tokens):
            batch = to_device(corpus.collate(index), device)
            probs[index] = torch.softmax(model(batch["ids"], batch["lengths"]).float(), dim=-1).cpu().numpy()
    return probs


def classifier_checkpoint(model: ElmoClassifier, fingerprint: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The ``classifier*.pt`` payload: task weights, config, class names and the biLM fingerprint."""
    return {"format": "elmo.classifier", "version": FORMAT_VERSION, "config": asdict(model.config),
            "class_names": list(CLASS_NAMES), "bilm_fingerprint": fingerprint,
            "state_dict": model.task_state_dict(), **extra}


def train_and_evaluate(model: SequenceClassifier, data: dict[str, EncodedCorpus], config: HeadConfig,
                       device: torch.device) -> dict[str, Any]:
    """Train ``model`` with :func:`elmo.train.fit` and evaluate it: the one recipe every representation gets.

    Adam on cross-entropy over length-bucketed batches of ``data["train"]`` (reshuffled each epoch
    from ``config.seed + epoch``), validation macro-F1 after every epoch, early stopping and the best
    epoch's weights kept; then metrics on every split.

    Args:
        model: any :class:`~elmo.classifier.SequenceClassifier`, already on ``device``.
        data: ``{"train", "val", "test"}`` encoded corpora with labels.
        config: the head/training flags (epochs, lr, batch sizes, patience, weight decay, seed).

    Returns:
        ``{"train", "val", "test": metrics (see :func:`~elmo.metrics.classification_metrics`),
        "best_epoch", "history", "train_seconds"}``.
    """
    started = time.perf_counter()

    def validate() -> dict[str, float]:
        m = classification_metrics(data["val"].labels, predict(model, data["val"], device).argmax(1), NUM_CLASSES)
        return {"f1": m["f1"], "accuracy": m["accuracy"]}

    fitted = fit(
        model,
        batches=lambda epoch: (data["train"].collate(i) for i in data["train"].batches(
            config.batch_size, config.max_tokens, shuffle=True, seed=config.seed + epoch)),
        loss_fn=lambda m, b: (F.cross_entropy(m(b["ids"], b["lengths"]).float(), b["labels"]), len(b["labels"])),
        validate=validate, monitor="f1", maximize=True,
        config=TrainConfig(epochs=config.epochs, lr=config.lr, clip_norm=config.clip_norm, patience=config.patience,
                           weight_decay=config.weight_decay),
        device=device, desc=model.config.setting, unit="doc", quiet=config.quiet,
    )
    seconds = time.perf_counter() - started
    entry: dict[str, Any] = {split: classification_metrics(data[split].labels, predict(model, data[split], device).argmax(1),
                                                           NUM_CLASSES) for split in ("train", "val", "test")}
    entry.update({"best_epoch": fitted.best_epoch, "history": fitted.history, "train_seconds": seconds})
    return entry


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
    set_seed(config.seed)
    configure_threads(config.threads)
    device = resolve_device(config.device)
    say = (lambda *a: None) if config.quiet else (lambda *a: print(*a, flush=True))
    models = Path(config.models_dir)
    if not (models / "bilstm.pt").is_file():
        raise ElmoError(f"{models / 'bilstm.pt'} not found: run `python ELMO.py --models-dir {models}` first")
    bilm, vocab, _ = load_bilm(models / "bilstm.pt")
    bilm.to(device)
    splits = load_agnews(config.data_dir, config.val_fraction, config.seed, config.max_docs, config.skip_bad_rows)
    corpora = dict(zip(("train", "val", "test"), splits))
    data = {name: encode(c, vocab, config.max_length) for name, c in corpora.items()}
    say(f"data: {len(corpora['train'])} train / {len(corpora['val'])} val / {len(corpora['test'])} test documents; "
        f"biLM vocabulary {len(vocab):,}")
    token_vectors = None
    if config.token_embedding_init == "word2vec" and config.token_embedding_dim:
        from .static import word2vec_vectors

        token_vectors, info = word2vec_vectors(corpora["train"].tokens, vocab, config.token_embedding_dim,
                                               seed=config.seed)
        say(f"x_k initialised from Word2Vec ({config.token_embedding_dim}-d, {info['seconds']:.0f} s)")
    return Run(device, say, models, Path(config.results_dir), Path(config.images_dir), bilm, vocab, corpora, data,
               token_vectors)


def classify(config: ClassifyConfig) -> dict:
    """Train and evaluate one classifier per setting; returns the ``classification.json`` content.

    Raises:
        ElmoError: missing biLM files (run ``python ELMO.py`` first), bad data or flags.
    """
    run = prepare_run(config)
    device, say, models, results, images = run.device, run.say, run.models, run.results, run.images
    bilm, vocab, data = run.bilm, run.vocab, run.data
    fingerprint = bilm_fingerprint(bilm, vocab)

    out: dict[str, Any] = {}
    payloads: dict[str, dict[str, Any]] = {}  # checkpoint contents per setting; the best is also classifier.pt
    for setting in config.settings:
        set_seed(config.seed)
        model = run.to_device(ElmoClassifier(bilm, config.classifier_config(setting)))
        entry = train_and_evaluate(model, data, config, device)
        entry.update(mix_summary(model.mix))
        out[setting] = entry
        payloads[setting] = classifier_checkpoint(model, fingerprint,
                                                  {"setting_results": {k: entry[k]["f1"] for k in ("val", "test")}})
        save_checkpoint(payloads[setting], models / f"classifier_{setting}.pt")
        plot_confusion(entry["test"]["confusion_matrix"], CLASS_NAMES, CLASS_NAMES, images / f"confusion_{setting}.png",
                       f"{setting} (test accuracy {entry['test']['accuracy']:.3f})")
        lam = "" if entry["lambdas"] is None else f", λ = {np.round(entry['lambdas'], 3).tolist()}, γ = {entry['gamma']:.3f}"
        say(f"{setting}: test accuracy {entry['test']['accuracy']:.4f}, macro-F1 {entry['test']['f1']:.4f}{lam}")
        say(format_confusion(entry["test"]["confusion_matrix"]))

    best = max(config.settings, key=lambda s: out[s]["val"]["f1"])
    out["best_setting"] = best
    save_checkpoint(payloads[best], models / "classifier.pt")
    out["config"], out["meta"] = asdict(config), {**environment_info(config.seed), "bilm_fingerprint": fingerprint}
    write_json(results / "classification.json", out)
    plot_curves({s: [row["val_f1"] for row in out[s]["history"]] for s in config.settings},
                images / "classifier_val_f1.png", "Classifier validation macro-F1", "macro-F1")
    say("\n" + format_results_table(out, config.settings))
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
