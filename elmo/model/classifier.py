"""The downstream AG News classifier on ELMo features (and on static embeddings, for comparison): the representation
``(B, T, D)`` → the shared task head (:class:`SequenceClassifier`) → logits ``(B, C)``."""

from __future__ import annotations

import copy
import hashlib
import os
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import torch
from torch import nn

from ..artifacts import environment_info, load_checkpoint, payload
from ..data.agnews import CLASS_NAMES
from ..data.vocab import Vocabulary
from ..errors import ElmoError, check_fields
from .bilm import BiLM
from .bilm_config import BiLMConfig
from .dropout import FastDropout
from .elmo import Elmo
from .hub import HubMixin, from_nested_config, nested_config
from .language_model import length_mask, reverse_padded
from .lstm import AutocastLSTM
from .mix import LAYER_MIXES, LEARNED_FUNCTIONS
from .serialization import open_bilm
from .static import STATIC_METHODS


@dataclass
class SequenceClassifierConfig:
    """Sizes of the task head every representation shares (:class:`SequenceClassifier` shows where each applies):
    ``num_classes`` C; ``encoder_hidden``, BiLSTM state width E per direction; ``encoder_projection``, width P of a
    linear projection of the BiLSTM's input, shared by both directions (0: none); ``token_embedding_dim``, width of the
    task's trainable token embedding x_k (paper §3.3; 0: none); ``dropout``, rate on the representation and on the
    pooled vector; ``seed`` draws the ``frozen_lambda`` mix's weights. Raises ElmoError: a size or rate out of range,
    naming the field (:attr:`ElmoError.field`)."""

    num_classes: int = 4
    encoder_hidden: int = 128
    encoder_projection: int = 0
    token_embedding_dim: int = 0
    dropout: float = 0.3
    seed: int = 0
    #: the field naming what the head reads (a subclass's: its layer mix, or its static vectors)
    representation_field = ""

    def __post_init__(self):
        check_fields(self, ("token_embedding_dim", self.token_embedding_dim >= 0, ">= 0"),
                     ("encoder_hidden", self.encoder_hidden > 0, "positive"),
                     ("encoder_projection", self.encoder_projection >= 0, ">= 0"),
                     ("num_classes", self.num_classes >= 2, ">= 2"), ("dropout", 0.0 <= self.dropout < 1.0, "in [0, 1)"))

    @property
    def representation(self) -> str:
        """The name of what the head reads (:attr:`representation_field`'s value), for progress lines."""
        return getattr(self, self.representation_field)


@dataclass
class ClassifierConfig(SequenceClassifierConfig):
    """The ELMo classifier (:class:`ElmoClassifier`): the head's sizes (:class:`SequenceClassifierConfig`) plus
    :class:`~elmo.model.elmo.Elmo`'s arguments ``mix`` (one of :data:`~elmo.model.mix.LAYER_MIXES`), ``learned_function``
    (one of :data:`~elmo.model.mix.LEARNED_FUNCTIONS`), ``layer_norm`` (``do_layer_norm``: each biLM layer normalised per
    token before the mix), ``elmo_dropout`` (``dropout``: extra dropout on the ELMo vector alone) and ``unfreeze_bilm``
    (``requires_grad``: train the biLM with the task), and ``mix_l2``, λ of the penalty λ‖w‖² on the scalar-mix weights
    (§3.3). Raises ElmoError: a value out of range or not one of the choices, naming the field."""

    mix: str = "trainable_lambda"
    layer_norm: bool = False
    elmo_dropout: float = 0.0
    mix_l2: float = 0.0
    unfreeze_bilm: bool = False
    learned_function: str = "gate"
    representation_field = "mix"

    def __post_init__(self):
        super().__post_init__()
        check_fields(self, ("mix", self.mix in LAYER_MIXES, f"one of {', '.join(LAYER_MIXES)}"),
                     ("elmo_dropout", 0.0 <= self.elmo_dropout < 1.0, "in [0, 1)"), ("mix_l2", self.mix_l2 >= 0, ">= 0"),
                     ("learned_function", self.learned_function in LEARNED_FUNCTIONS,
                      f"one of {', '.join(LEARNED_FUNCTIONS)}"))

    @classmethod
    def from_saved(cls, saved: dict) -> "ClassifierConfig":
        """The config a ``classifier*.pt`` recorded: ``setting`` reads as :attr:`mix`, ``fine_tune`` (files before
        0.4.0) as :attr:`unfreeze_bilm`, and a file without ``learned_function`` holds ``mlp``. Raises ElmoError on a
        value out of range, TypeError on an unknown key."""
        saved = dict(saved)
        for old, new in (("setting", "mix"), ("fine_tune", "unfreeze_bilm")):
            if old in saved:
                saved.setdefault(new, saved.pop(old))
        return cls(**{"learned_function": "mlp", **saved})


@dataclass
class StaticClassifierConfig(SequenceClassifierConfig):
    """The static-embedding classifier (:class:`StaticEmbeddingClassifier`): :class:`SequenceClassifierConfig` plus
    ``vectors``, one of :data:`~elmo.model.static.STATIC_METHODS` (``word2vec``, ``svd``). Raises ElmoError: a value out
    of range or unknown vectors, naming the field."""

    vectors: str = "word2vec"
    representation_field = "vectors"

    def __post_init__(self):
        super().__post_init__()
        check_fields(self, ("vectors", self.vectors in STATIC_METHODS, f"one of {', '.join(STATIC_METHODS)}"))


def masked_mean_max(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Concatenated mean and max over real positions: ``states (B, T, D)``, ``mask (B, T)`` bool, True at real tokens
    (at least one per row) → ``(B, 2D)`` ``[mean; max]``; padded positions affect neither."""
    m = mask.unsqueeze(-1).to(states.dtype)
    mean = (states * m).sum(1) / m.sum(1).clamp_min(1.0)
    maxed = states.masked_fill(~mask.unsqueeze(-1), torch.finfo(states.dtype).min).amax(1)
    return torch.cat([mean, maxed], dim=-1)


class MaskedBiLSTM(nn.Module):
    """A one-layer bidirectional LSTM (``input_size`` D, ``hidden_size`` E per direction) over right-padded batches,
    without packing: the backward LSTM reads each row reversed *within its own length*, so padding (after every real
    token) reaches no real state in either direction. Equals a packed ``nn.LSTM(bidirectional=True)`` at every real
    position, but, unlike packed input, uses the fused CPU kernel."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.forward_rnn = AutocastLSTM(input_size, hidden_size, batch_first=True)
        self.backward_rnn = AutocastLSTM(input_size, hidden_size, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Args: x ``(B, T, D)``, lengths ``(B,)``. Returns ``(B, T, 2E)``; padded rows are meaningless."""
        fwd, _ = self.forward_rnn(x)
        bwd, _ = self.backward_rnn(reverse_padded(x, lengths))
        return torch.cat([fwd, reverse_padded(bwd, lengths)], dim=-1)


class SequenceClassifier(nn.Module):
    """The task head every representation shares, sized by ``config`` (:class:`SequenceClassifierConfig`; a subclass's
    adds the representation's options): :meth:`features` ``(B, T, D)`` → ``[x_k; features]`` when
    ``config.token_embedding_dim`` > 0 (paper §3.3) → dropout → linear projection when ``config.encoder_projection``
    > 0 → :class:`MaskedBiLSTM` → masked mean + max pooling → dropout → linear → logits ``(B, C)``. Subclasses build
    their representation, then call :meth:`build_head`."""

    def __init__(self, config: SequenceClassifierConfig):
        super().__init__()
        self.config = config

    def build_head(self, feature_dim: int, vocab_size: int) -> None:
        """Create the dropout, token embedding, encoder and output layer for ``feature_dim``-wide features."""
        config = self.config
        self.dropout = FastDropout(config.dropout)
        self.token_embedding = None
        if config.token_embedding_dim:
            self.token_embedding = nn.Embedding(vocab_size, config.token_embedding_dim, padding_idx=0)
        width = feature_dim + config.token_embedding_dim
        self.projection = nn.Linear(width, config.encoder_projection) if config.encoder_projection else None
        self.encoder = MaskedBiLSTM(config.encoder_projection or width, config.encoder_hidden)
        self.head = nn.Linear(4 * config.encoder_hidden, config.num_classes)

    def features(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                 layers: torch.Tensor | None = None) -> torch.Tensor:
        """The representation ``(B, T, D)`` of right-padded ``ids (B, T)``; subclasses define it."""
        raise NotImplementedError

    def penalty(self) -> torch.Tensor:
        """A regularisation term added to the task loss (0 here; the mix-weight L2 for ELMo)."""
        return torch.zeros(())

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                layers: torch.Tensor | None = None) -> torch.Tensor:
        """Unnormalised class logits ``(B, C)`` of ``ids``, ``(B, T)`` int64 right-padded token ids, with ``lengths``
        ``(B,)`` int64, each >= 1, ``chars`` ``(B, T, C)`` character ids (read by a character biLM only) and ``layers``
        ``(L, B, T, D)`` cached biLM LSTM layers (:mod:`elmo.inference.layer_cache`; ELMo only, else ignored), as
        :meth:`features` takes them."""
        x = self.features(ids, lengths, chars, layers)
        if self.token_embedding is not None:
            x = torch.cat([x, self.token_embedding(ids).to(x.dtype)], dim=-1)
        x = self.dropout(x)
        if self.projection is not None:
            x = self.projection(x)
        states = self.encoder(x, lengths)
        pooled = masked_mean_max(states, length_mask(lengths, ids.shape[1]))
        return self.head(self.dropout(pooled))


class ElmoClassifier(SequenceClassifier, HubMixin):
    """:class:`~elmo.model.elmo.Elmo` (biLM + layer mix) + the shared head (:class:`SequenceClassifier`). ``bilm``: a
    :class:`~elmo.model.bilm.BiLM`, trained here or published, always in eval mode; frozen (run without autograd) unless
    ``config.unfreeze_bilm`` (``config``: :class:`ClassifierConfig`), then trained in place (pass a copy to keep the
    original). ``vocab_size``: rows of the task token embedding x_k (the ids' vocabulary); default: the biLM's
    ``config.vocab_size`` (0 for a published biLM without its softmax: give the task vocabulary's size)."""

    hub_kind = "elmo_classifier"
    #: names of the classes in output order (``config.json``'s ``class_names``; AG News's by default)
    class_names: list[str] = list(CLASS_NAMES)

    def __init__(self, bilm: BiLM, config: ClassifierConfig, vocab_size: int | None = None):
        super().__init__(config)
        self.vocab_size = vocab_size or bilm.config.vocab_size
        self.elmo = Elmo(bilm, num_output_representations=1, mix=config.mix, dropout=config.elmo_dropout,
                         do_layer_norm=config.layer_norm, requires_grad=config.unfreeze_bilm, seed=config.seed,
                         learned_function=config.learned_function)
        self.build_head(bilm.output_dim, self.vocab_size)

    @property
    def bilm(self) -> BiLM:
        """The biLM inside :attr:`elmo`."""
        return self.elmo.bilm

    def hub_config(self) -> dict:
        """``config`` (:class:`ClassifierConfig`), ``vocab_size``, ``class_names`` and ``bilm`` (its own config)."""
        return {"config": asdict(self.config), "vocab_size": self.vocab_size, "class_names": list(self.class_names),
                "bilm": nested_config(self.bilm)}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: Vocabulary | None) -> "ElmoClassifier":
        """Inverse of :meth:`hub_config` (``vocab``: the task vocabulary, the biLM's for ours)."""
        model = cls(from_nested_config(config["bilm"], vocab), ClassifierConfig.from_saved(config["config"]),
                    vocab_size=config["vocab_size"])
        model.class_names = list(config["class_names"])
        return model

    def describe(self) -> str:
        """The model card's paragraph."""
        c = self.config
        return (f"A {c.num_classes}-way text classifier ({', '.join(self.class_names)}) on ELMo: the biLM below, "
                f"{'fine-tuned' if c.unfreeze_bilm else 'frozen'}, its layers combined by the {c.mix.replace('_', ' ')} mix, "
                f"then a BiLSTM of {c.encoder_hidden} units per direction, mean and max pooling and a linear layer.\n\n"
                f"{self.bilm.describe()}")

    def usage(self, repo_id: str) -> str:
        """The model card's code."""
        return (f"from elmo import TextClassifier\nclassifier = TextClassifier.from_pretrained({repo_id!r})\n"
                "classifier.predict([\"Stocks rallied on Friday.\"])")

    @property
    def mix(self) -> nn.Module:
        """The layer mix (:mod:`elmo.model.mix`)."""
        return self.elmo.mixes[0]

    def penalty(self) -> torch.Tensor:
        """``mix_l2 · ‖w‖²`` (§3.3), see :meth:`elmo.model.elmo.Elmo.penalty`."""
        return self.config.mix_l2 * self.elmo.penalty() if self.config.mix_l2 else torch.zeros(())

    def task_state_dict(self) -> dict[str, torch.Tensor]:
        """What ``classifier.pt`` stores: everything but the frozen biLM (all of it when fine-tuned)."""
        return {k: v for k, v in self.state_dict().items() if self.config.unfreeze_bilm or not k.startswith("elmo.bilm.")}

    def features(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                 layers: torch.Tensor | None = None) -> torch.Tensor:
        """ELMo vectors ``(B, T, D)`` (eq. 1), from the cached ``layers`` when given (arguments: :meth:`forward`)."""
        return self.elmo(ids, lengths, chars, layers)["elmo_representations"][0]


class StaticEmbeddingClassifier(SequenceClassifier):
    """A frozen static embedding matrix ``vectors`` (Word2Vec, SVD; :mod:`elmo.model.static`), a ``(V, D)`` float
    tensor, row ``i`` for vocabulary id ``i``, + the shared head (``config``: :class:`StaticClassifierConfig`)."""

    def __init__(self, vectors: torch.Tensor, config: StaticClassifierConfig):
        super().__init__(config)
        self.embedding = nn.Embedding.from_pretrained(torch.as_tensor(vectors, dtype=torch.float32), freeze=True,
                                                      padding_idx=0)
        self.build_head(self.embedding.embedding_dim, self.embedding.num_embeddings)

    def features(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                 layers: torch.Tensor | None = None) -> torch.Tensor:
        """Static vectors ``(B, T, D)``: the same vector for a word wherever it occurs."""
        return self.embedding(ids)


# ---------------------------------------------------------------- classifier files (classifier*.pt)

#: BiLMConfig fields left out of :func:`bilm_fingerprint` at their defaults, so older classifier files still load.
LATER_BILM_FIELDS = ("token_encoder", "char_dim", "char_filters", "num_highway", "max_chars", "residual", "proj_size")


def bilm_fingerprint(bilm: BiLM, vocab: Vocabulary) -> str:
    """A short hash of the biLM's config and vocabulary (for a published biLM: its config, which includes a
    digest of its weights, and the task vocabulary); a classifier only loads onto the same."""
    config, default = bilm.config.saved(), asdict(BiLMConfig(vocab_size=1))
    kept = {k: v for k, v in config.items() if k not in LATER_BILM_FIELDS or v != default[k]}
    text = repr(sorted(kept.items())) + "\n" + "\n".join(vocab.itos)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def classifier_checkpoint(model: ElmoClassifier, fingerprint: str, class_names: Sequence[str],
                          extra: dict[str, Any]) -> dict[str, Any]:
    """The ``classifier*.pt`` payload: task weights, config, class names, the biLM fingerprint and the
    library versions and seed (``meta``), then ``extra``."""
    return payload("classifier", config=asdict(model.config), class_names=list(class_names),
                   bilm_fingerprint=fingerprint, meta=environment_info(model.config.seed),
                   state_dict=model.task_state_dict(), **extra)


def load_classifier(path: str | os.PathLike, bilm: BiLM, vocab: Vocabulary) -> tuple[ElmoClassifier, list[str]]:
    """Rebuild an :class:`ElmoClassifier` from the ``classifier*.pt`` at ``path`` (loaded ``weights_only=True``) on
    ``bilm`` and ``vocab``, those it was trained on (:func:`~elmo.model.serialization.load_bilm`; a fine-tuned
    classifier's biLM weights go into a copy). Returns ``(model, class_names)``, the model in eval mode on the biLM's
    device. Raises ElmoError: missing/corrupt file, not a classifier, trained on a different biLM
    (:func:`bilm_fingerprint`), or weights that do not fit the stored config."""
    ckpt = load_checkpoint(path, "elmo.classifier")
    fingerprint = bilm_fingerprint(bilm, vocab)
    if ckpt.get("bilm_fingerprint") != fingerprint:
        raise ElmoError(f"{path} was trained on a different biLM (fingerprint {ckpt.get('bilm_fingerprint')}, "
                        f"this biLM {fingerprint}): use the bilstm.pt it was trained with")
    try:
        config = ClassifierConfig.from_saved(ckpt["config"])
        model = ElmoClassifier(copy.deepcopy(bilm) if config.unfreeze_bilm else bilm, config, vocab_size=len(vocab))
        # the inverse of task_state_dict, older files' mix.* keys read too (RuntimeError on a shape that differs)
        state = {("elmo.mixes.0." + k[4:] if k.startswith("mix.") else k): v for k, v in ckpt["state_dict"].items()}
        missing, unexpected = model.load_state_dict(model.renamed_state(state), strict=False)
        missing = [k for k in missing if config.unfreeze_bilm or not k.startswith("elmo.bilm.")]
        if missing or unexpected:
            raise ElmoError(f"missing keys {missing[:3]}, unexpected keys {list(unexpected)[:3]}")
    except (KeyError, TypeError, RuntimeError, ElmoError) as exc:
        raise ElmoError(f"{path}: inconsistent classifier checkpoint: {str(exc).splitlines()[0]}") from None
    model.class_names, model.vocab = list(ckpt.get("class_names", CLASS_NAMES)), vocab
    return model.to(next(bilm.parameters()).device).eval(), model.class_names


def published_record(bilm: BiLM, vocab: Vocabulary) -> dict[str, Any]:
    """What a classifier file records to find a published biLM again, with ``"vocab"`` the task vocabulary:
    ``{"bilm_tf": {"options_file", "weight_file"}, "vocab"}`` for bilm-tf's files, ``{"bilm_source", "vocab"}`` for a
    ``published_lm.pt`` or ``save_pretrained`` folder, ``{}`` for our biLM (``bilstm.pt`` holds its vocabulary)."""
    if bilm.source is None:
        return {}
    if len(bilm.source) == 1:
        return {"bilm_source": str(bilm.source[0]), "vocab": list(vocab.itos)}
    options, weights = bilm.source
    return {"bilm_tf": {"options_file": str(options), "weight_file": str(weights)}, "vocab": list(vocab.itos)}


def load_classifier_bilm(path: str | os.PathLike) -> tuple[BiLM, Vocabulary] | None:
    """The published biLM and task vocabulary a ``classifier*.pt`` records (:func:`published_record`), or ``None`` for
    our ``bilstm.pt``. Raises ElmoError on a missing or corrupt classifier file or recorded biLM files."""
    ckpt = load_checkpoint(path, "elmo.classifier")
    try:
        source = recorded_source(ckpt)
        return None if source is None else (open_bilm(*source).bilm, Vocabulary(ckpt["vocab"]))
    except KeyError as exc:
        raise ElmoError(f"{path}: inconsistent classifier checkpoint: no {exc}") from None


def recorded_source(ckpt: dict[str, Any]) -> tuple[str, ...] | None:
    """:func:`published_record`'s record read back from a classifier payload ``ckpt``: ``(file or folder,)``, ``(options
    file, weight file)`` or ``None`` (our biLM, found through its models folder). Raises KeyError for a bilm-tf
    record without one of its files."""
    if isinstance(ckpt.get("bilm_source"), str):
        return (ckpt["bilm_source"],)
    source = ckpt.get("bilm_tf")
    return (source["options_file"], source["weight_file"]) if isinstance(source, dict) else None
