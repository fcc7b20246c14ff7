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
from ..errors import ElmoError
from .bilm import AnyBiLM, BiLMConfig, length_mask, reverse_padded
from .dropout import FastDropout
from .elmo import Elmo
from .hub import HubMixin, from_nested_config, nested_config
from .lstm import AutocastLSTM
from .mix import LAYER_MIXES, LEARNED_FUNCTIONS
from .published import PublishedBiLM
from .serialization import open_bilm
from .static import STATIC_METHODS


@dataclass
class SequenceClassifierConfig:
    """Sizes of the task head every representation shares (:class:`SequenceClassifier`).

    Attributes:
        num_classes: output classes C.
        encoder_hidden: BiLSTM state width E per direction.
        encoder_projection: width P of a linear projection of the encoder's input (the dropped-out ``[x_k; ELMo_k]``)
            before the BiLSTM, shared by its two directions; 0 feeds the input as it is.
        token_embedding_dim: width of the task's own trainable token embedding x_k concatenated with the
            representation (paper §3.3); 0 feeds the representation alone.
        dropout: dropout on the representation and on the pooled vector.
        seed: seeds the representation's fixed random weights (the ``frozen_lambda`` mix).

    Raises:
        ElmoError: a size or rate out of range, naming the field (:attr:`ElmoError.field`).
    """

    num_classes: int = 4
    encoder_hidden: int = 128
    encoder_projection: int = 0
    token_embedding_dim: int = 0
    dropout: float = 0.3
    seed: int = 0

    def __post_init__(self):
        owner = type(self).__name__
        if self.token_embedding_dim < 0:
            raise ElmoError(f"{owner}.token_embedding_dim must be >= 0, got {self.token_embedding_dim}",
                            field=f"{owner}.token_embedding_dim")
        if self.encoder_hidden <= 0:
            raise ElmoError(f"{owner}.encoder_hidden must be positive, got {self.encoder_hidden}",
                            field=f"{owner}.encoder_hidden")
        if self.encoder_projection < 0:
            raise ElmoError(f"{owner}.encoder_projection must be >= 0, got {self.encoder_projection}",
                            field=f"{owner}.encoder_projection")
        if self.num_classes < 2:
            raise ElmoError(f"{owner}.num_classes must be >= 2, got {self.num_classes}", field=f"{owner}.num_classes")
        if not 0.0 <= self.dropout < 1.0:
            raise ElmoError(f"{owner}.dropout must be in [0, 1), got {self.dropout}", field=f"{owner}.dropout")

    @property
    def representation(self) -> str:
        """The name of what the head reads (a layer mix, or the static vectors), for progress lines."""
        raise NotImplementedError


@dataclass
class ClassifierConfig(SequenceClassifierConfig):
    """The ELMo classifier (:class:`ElmoClassifier`): the head's sizes plus the ELMo options.

    Attributes:
        mix: the layer mix, one of :data:`~elmo.model.mix.LAYER_MIXES` (:mod:`elmo.model.mix`).
        layer_norm: normalise each biLM layer per token before the mix (:mod:`elmo.model.mix`).
        elmo_dropout: extra dropout on the ELMo vector alone (:class:`~elmo.model.elmo.Elmo`).
        mix_l2: coefficient λ of the penalty λ‖w‖² on the scalar-mix weights (§3.3).
        unfreeze_bilm: train the biLM with the task (:class:`~elmo.model.elmo.Elmo` ``requires_grad``).
        learned_function: the network of the ``learned_function`` mix, ``gate`` or ``mlp``
            (:data:`~elmo.model.mix.LEARNED_FUNCTIONS`; a classifier file without it holds ``mlp``).
        (and the head's sizes, :class:`SequenceClassifierConfig`)

    Raises:
        ElmoError: a value out of range or not one of the choices, naming the field (e.g.
            ``ClassifierConfig.mix must be one of trainable_lambda, frozen_lambda, learned_function, got 'svd'``).
    """

    mix: str = "trainable_lambda"
    layer_norm: bool = False
    elmo_dropout: float = 0.0
    mix_l2: float = 0.0
    unfreeze_bilm: bool = False
    learned_function: str = "gate"

    def __post_init__(self):
        super().__post_init__()
        if self.mix not in LAYER_MIXES:
            raise ElmoError(f"ClassifierConfig.mix must be one of {', '.join(LAYER_MIXES)}, got {self.mix!r}",
                            field="ClassifierConfig.mix")
        if not 0.0 <= self.elmo_dropout < 1.0:
            raise ElmoError(f"ClassifierConfig.elmo_dropout must be in [0, 1), got {self.elmo_dropout}",
                            field="ClassifierConfig.elmo_dropout")
        if self.mix_l2 < 0:
            raise ElmoError(f"ClassifierConfig.mix_l2 must be >= 0, got {self.mix_l2}", field="ClassifierConfig.mix_l2")
        if self.learned_function not in LEARNED_FUNCTIONS:
            raise ElmoError(f"ClassifierConfig.learned_function must be one of {', '.join(LEARNED_FUNCTIONS)}, "
                            f"got {self.learned_function!r}", field="ClassifierConfig.learned_function")

    @classmethod
    def from_saved(cls, saved: dict) -> "ClassifierConfig":
        """The config a ``classifier*.pt`` recorded, whichever keys the file holds: ``setting`` is read as :attr:`mix`
        (both name the layer mix), ``fine_tune`` (before 0.4.0) as :attr:`unfreeze_bilm`, and a file without
        ``learned_function`` holds the MLP.

        Raises:
            ElmoError: a value out of range; TypeError: an unknown key.
        """
        saved = dict(saved)
        if "setting" in saved:
            saved.setdefault("mix", saved["setting"])
            del saved["setting"]
        if "fine_tune" in saved:
            saved.setdefault("unfreeze_bilm", saved.pop("fine_tune"))
        return cls(**{"learned_function": "mlp", **saved})

    @property
    def representation(self) -> str:
        """The layer mix."""
        return self.mix


@dataclass
class StaticClassifierConfig(SequenceClassifierConfig):
    """The static-embedding classifier (:class:`StaticEmbeddingClassifier`): the head's sizes plus its static vectors.

    Attributes:
        vectors: the static vectors, one of :data:`~elmo.model.static.STATIC_METHODS` (``word2vec``, ``svd``).
        (and the head's sizes, :class:`SequenceClassifierConfig`)

    Raises:
        ElmoError: a value out of range or unknown vectors, naming the field.
    """

    vectors: str = "word2vec"

    def __post_init__(self):
        super().__post_init__()
        if self.vectors not in STATIC_METHODS:
            raise ElmoError(f"StaticClassifierConfig.vectors must be one of {', '.join(STATIC_METHODS)}, "
                            f"got {self.vectors!r}", field="StaticClassifierConfig.vectors")

    @property
    def representation(self) -> str:
        """The static vectors."""
        return self.vectors


def masked_mean_max(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Concatenated mean and max over real positions: ``states (B, T, D)``, ``mask (B, T)`` bool, True at real tokens
    (at least one per row) → ``(B, 2D)`` ``[mean; max]``; padded positions affect neither."""
    m = mask.unsqueeze(-1).to(states.dtype)
    mean = (states * m).sum(1) / m.sum(1).clamp_min(1.0)
    maxed = states.masked_fill(~mask.unsqueeze(-1), torch.finfo(states.dtype).min).amax(1)
    return torch.cat([mean, maxed], dim=-1)


class MaskedBiLSTM(nn.Module):
    """A one-layer bidirectional LSTM over right-padded batches, without packing.

    The forward LSTM reads each row left to right (right padding comes after every real token, so it cannot reach a
    real state); the backward LSTM reads each row reversed *within its own length* and its outputs are un-reversed.
    This equals a packed ``nn.LSTM(bidirectional=True)`` at every real position while using the fused CPU kernel,
    which packed input cannot.

    Args:
        input_size: D; hidden_size: E per direction.
    """

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
    """The task head every representation shares: features → logits.

    ``features (B, T, D)`` from :meth:`features` → concatenated with the task-trained token embedding ``x_k`` when
    ``config.token_embedding_dim`` > 0 (paper §3.3, ``[x_k; ELMo_k]``) → dropout → optionally a linear projection to
    ``config.encoder_projection`` units → :class:`MaskedBiLSTM` → masked mean + max pooling → dropout → linear →
    logits ``(B, C)``. Subclasses (:class:`ElmoClassifier`, :class:`StaticEmbeddingClassifier`) differ only in the
    representation, which they build before calling :meth:`build_head`.

    Args:
        config: the head's sizes (:class:`SequenceClassifierConfig`; a subclass adds the representation's options).
    """

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
        """Class logits.

        Args:
            ids: ``(B, T)`` int64 right-padded token ids; lengths: ``(B,)`` int64, each >= 1;
            chars: ``(B, T, C)`` character ids (only read by a character biLM); layers: ``(L, B, T, D)`` cached biLM
            LSTM layers (:mod:`elmo.inference.layer_cache`; ELMo only, else ignored).

        Returns:
            ``(B, C)`` unnormalised logits.
        """
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
    """:class:`~elmo.model.elmo.Elmo` (biLM + layer mix) + the shared head (:class:`SequenceClassifier`).

    Args:
        bilm: a trained :class:`~elmo.model.bilm.BiLM` or a published :class:`~elmo.model.published.PublishedBiLM`.
            Frozen (no gradients, run without autograd) unless ``config.unfreeze_bilm``, in which case it is
            trained in place (pass a copy to keep the original). It stays in eval mode either way.
        config: :class:`ClassifierConfig`; ``config.mix`` picks the layer mix (:mod:`elmo.model.mix`).
        vocab_size: rows of the task token embedding x_k (the vocabulary the ids come from); default: our
            biLM's vocabulary (a published biLM has none: pass the task vocabulary's size).

    Raises:
        ElmoError: a published biLM without ``vocab_size``.
    """

    hub_kind = "elmo_classifier"
    #: names of the classes in output order (``config.json``'s ``class_names``; AG News's by default)
    class_names: list[str] = list(CLASS_NAMES)

    def __init__(self, bilm: AnyBiLM, config: ClassifierConfig, vocab_size: int | None = None):
        super().__init__(config)
        self.vocab_size = vocab_size or getattr(bilm.config, "vocab_size", None)
        self.elmo = Elmo(bilm, num_output_representations=1, mix=config.mix, dropout=config.elmo_dropout,
                         do_layer_norm=config.layer_norm, requires_grad=config.unfreeze_bilm, seed=config.seed,
                         learned_function=config.learned_function)
        if vocab_size is None and not hasattr(bilm.config, "vocab_size"):
            raise ElmoError("a published biLM has no vocabulary: pass vocab_size (the task vocabulary's size)")
        self.build_head(bilm.output_dim, vocab_size or bilm.config.vocab_size)

    @property
    def bilm(self) -> AnyBiLM:
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

    def load_task_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`task_state_dict` (also reads files written before the :class:`Elmo` module,
        whose mix keys start with ``mix.``). Raises ``RuntimeError`` on mismatching keys or shapes."""
        state = {("elmo.mixes.0." + k[4:] if k.startswith("mix.") else k): v for k, v in state.items()}
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in missing if self.config.unfreeze_bilm or not k.startswith("elmo.bilm.")]
        if missing or unexpected:
            raise RuntimeError(f"missing keys {missing[:3]}, unexpected keys {list(unexpected)[:3]}")

    def features(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                 layers: torch.Tensor | None = None) -> torch.Tensor:
        """ELMo vectors ``(B, T, D)`` for right-padded ``ids (B, T)`` with ``lengths (B,)`` (eq. 1),
        from cached LSTM ``layers (L, B, T, D)`` when given."""
        return self.elmo(ids, lengths, chars, layers)["elmo_representations"][0]


class StaticEmbeddingClassifier(SequenceClassifier):
    """A frozen static embedding matrix (Word2Vec, SVD; :mod:`elmo.model.static`) + the shared head.

    Args:
        vectors: ``(V, D)`` float tensor, row ``i`` the vector of vocabulary id ``i``; never trained.
        config: :class:`StaticClassifierConfig` (``vectors`` names them, e.g. ``"word2vec"``).
    """

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

#: BiLMConfig fields added after the first release (the paper's options); at their defaults they are
#: left out of :func:`bilm_fingerprint`, so classifiers saved before they existed still load.
LATER_BILM_FIELDS = ("token_encoder", "char_dim", "char_filters", "num_highway", "max_chars", "residual", "proj_size")


def bilm_fingerprint(bilm: AnyBiLM, vocab: Vocabulary) -> str:
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


def load_classifier(path: str | os.PathLike, bilm: AnyBiLM, vocab: Vocabulary) -> tuple[ElmoClassifier, list[str]]:
    """Rebuild an :class:`ElmoClassifier` from a ``classifier*.pt`` on top of its biLM.

    Args:
        path: the classifier file (``weights_only=True`` load).
        bilm, vocab: the biLM and vocabulary it was trained on (:func:`~elmo.model.serialization.load_bilm`); a
            fine-tuned classifier's file carries its own biLM weights, which replace ``bilm``'s.

    Returns:
        ``(model, class_names)``, the model in eval mode on the biLM's device (a file recording its layer mix as
        ``setting`` loads too: :meth:`ClassifierConfig.from_saved`).

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
        config = ClassifierConfig.from_saved(ckpt["config"])
        model = ElmoClassifier(copy.deepcopy(bilm) if config.unfreeze_bilm else bilm, config, vocab_size=len(vocab))
        model.load_task_state_dict(ckpt["state_dict"])
    except (KeyError, TypeError, RuntimeError, ElmoError) as exc:
        raise ElmoError(f"{path}: inconsistent classifier checkpoint: {str(exc).splitlines()[0]}") from None
    device = next(bilm.parameters()).device
    model.class_names, model.vocab = list(ckpt.get("class_names", CLASS_NAMES)), vocab
    return model.to(device).eval(), model.class_names


def published_record(bilm: AnyBiLM, vocab: Vocabulary) -> dict[str, Any]:
    """What a classifier file records to find a published biLM again: ``{"bilm_tf": {"options_file", "weight_file"},
    "vocab": the task vocabulary}`` for bilm-tf's files, ``{"bilm_source": the file, "vocab": ...}`` for a
    ``published_lm.pt`` or a ``save_pretrained`` folder (:func:`~elmo.model.serialization.open_bilm`), ``{}`` for our
    biLM (``bilstm.pt`` holds its vocabulary)."""
    if bilm.source is None:
        return {}
    if len(bilm.source) == 1:
        return {"bilm_source": str(bilm.source[0]), "vocab": list(vocab.itos)}
    options, weights = bilm.source
    return {"bilm_tf": {"options_file": str(options), "weight_file": str(weights)}, "vocab": list(vocab.itos)}


def load_classifier_bilm(path: str | os.PathLike) -> tuple[PublishedBiLM, Vocabulary] | None:
    """The published biLM and task vocabulary a ``classifier*.pt`` was trained on (:func:`published_record`: bilm-tf's
    files or a ``published_lm.pt``), or ``None`` when it was trained on our ``bilstm.pt``.

    Raises:
        ElmoError: the classifier file is missing or corrupt; the recorded biLM files are missing or invalid.
    """
    ckpt = load_checkpoint(path, "elmo.classifier")
    try:
        source = recorded_source(ckpt)
        return None if source is None else (open_bilm(*source).bilm, Vocabulary(ckpt["vocab"]))
    except KeyError as exc:
        raise ElmoError(f"{path}: inconsistent classifier checkpoint: no {exc}") from None


def recorded_source(ckpt: dict[str, Any]) -> tuple[str, ...] | None:
    """The biLM a classifier file's payload ``ckpt`` records, :func:`published_record`'s read back: ``(file or
    folder,)``, ``(options file, weight file)``, or ``None`` for our biLM (found through its models folder). Raises
    KeyError for a bilm-tf record missing a file."""
    if isinstance(ckpt.get("bilm_source"), str):
        return (ckpt["bilm_source"],)
    source = ckpt.get("bilm_tf")
    return (source["options_file"], source["weight_file"]) if isinstance(source, dict) else None
