"""The configuration of a biLM, both architectures (module docstring of :mod:`elmo.model.bilm`): :class:`BiLMConfig`,
ours or bilm-tf's (:meth:`BiLMConfig.bilm_tf`, ``shared_token_layer``), the published sizes
(:data:`PUBLISHED_ARCHITECTURES`) and the names bilm-tf's files give the fields (:data:`BILM_TF_FIELDS`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..data.chars import TF_MAX_CHARS, TF_NUM_CHARS
from ..errors import ElmoError, check_fields
from .char_cnn import ACTIVATIONS, DEFAULT_FILTERS
from .sampled_softmax import BILM_TF_SAMPLES

#: the token encoders of :attr:`BiLMConfig.token_encoder`
TOKEN_ENCODERS = ("word", "char")
#: the training softmaxes (``pretrain --softmax``); sampled is bilm-tf's (:mod:`elmo.model.sampled_softmax`)
SOFTMAXES = ("adaptive", "sampled")
#: ``--softmax``'s default: faster to a given held-out perplexity on the CPU (lab/experiments.md, ``softmax_choice``)
DEFAULT_SOFTMAX = "adaptive"
#: the :class:`BiLMConfig` fields a saved config may lack, with the defaults it then has (:meth:`BiLMConfig.saved`)
ADDED_FIELDS = {"softmax": "adaptive", "samples": BILM_TF_SAMPLES, "cell_clip": None, "proj_clip": None,
                "shared_token_layer": False, "activation": "relu", "n_characters": TF_NUM_CHARS, "weights_digest": ""}
#: the fields of the training head of bilm-tf's architecture (``vocab_size`` 0: none), which its ``config.json``
#: records apart from the biLM's (:attr:`BiLMConfig.head`)
HEAD_FIELDS = ("vocab_size", "softmax", "samples", "cutoffs", "div_value", "dropout")
#: bilm-tf's names (its ``options.json``, :func:`~elmo.model.published_io.read_options`) of the fields of its
#: architecture → :class:`BiLMConfig`'s, in the order its ``config.json`` and a classifier's fingerprint record them
BILM_TF_FIELDS = {"char_dim": "char_dim", "filters": "char_filters", "num_highway": "num_highway",
                  "max_chars": "max_chars", "activation": "activation", "hidden_size": "hidden_size",
                  "projection_dim": "embedding_dim", "num_layers": "num_layers", "cell_clip": "cell_clip",
                  "proj_clip": "proj_clip", "use_skip_connections": "residual", "n_characters": "n_characters",
                  "weights_digest": "weights_digest"}
#: the character CNN of every published model (widths 1-7, 2048 filters)
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass
class BiLMConfig:
    """Sizes of a biLM, both architectures: ours (one token encoder and one softmax per direction, text lower-cased)
    or bilm-tf's (``shared_token_layer``: the published ELMo's, :meth:`bilm_tf`).

    Attributes:
        vocab_size: number of words including the 4 specials (the softmax's output classes); bilm-tf's architecture:
            ``0`` when it has no training softmax (its published files), else >= 5.
        embedding_dim: token vector width; must equal ``output_size`` so layer 0 is as wide as the LSTM layers.
        hidden_size: LSTM cells per direction; num_layers: LSTM layers L per direction (the paper uses 2).
        dropout: on embeddings, between layers and before the softmax (training only).
        softmax: ``"adaptive"`` or ``"sampled"`` (:data:`SOFTMAXES`); both give exact held-out perplexities.
        cutoffs, div_value: the adaptive softmax's cluster boundaries (word ids, clipped to the vocabulary) and the
            factor by which each tail cluster's projection shrinks; samples: the sampled softmax's candidates per batch.
        cell_clip, proj_clip: ``None`` (both): ``nn.LSTM`` (:class:`~elmo.model.lstm.AutocastLSTM`, the fused kernel);
            otherwise bilm-tf's cell and initialisation (:class:`~elmo.model.lstm.ProjectedLSTM`, a per-step loop),
            its cell and output clipped to these bounds.
        token_encoder: ``"word"`` (embedding table) or ``"char"`` (:class:`~elmo.model.char_cnn.CharEncoder`, §3.1);
            char_dim, char_filters, num_highway, max_chars: the character CNN's sizes (char only).
        residual: a residual connection around every LSTM layer but the first (§3.1).
        proj_size: > 0: ``hidden_size`` cells projected to ``proj_size`` (< ``hidden_size``) outputs; 0 = none.
        shared_token_layer: bilm-tf's architecture: one character CNN in bilm-tf's numbering read by both directions
            (layer 0 is ``[x; x]``), :class:`~elmo.model.lstm.ProjectedLSTM` cells, one softmax shared by the
            directions, text read as written; activation: its CNN's (``relu`` or ``tanh``); n_characters: bilm-tf's
            ``char_cnn.n_characters`` (261 when training, 262 with the padding id; the weights have 261 rows either
            way); weights_digest: a hash of its weights (set by the loaders) so that classifiers only load onto them.

    Raises ElmoError naming ``BiLMConfig.<field>`` for a value out of range.
    """

    vocab_size: int
    embedding_dim: int = 256
    hidden_size: int = 256
    num_layers: int = 2
    dropout: float = 0.2
    cutoffs: tuple[int, ...] = field(default=(1000, 5000, 15000))
    div_value: float = 4.0
    token_encoder: str = "word"
    char_dim: int = 16
    char_filters: tuple[tuple[int, int], ...] = field(default=DEFAULT_FILTERS)
    num_highway: int = 1
    max_chars: int = 20
    residual: bool = False
    proj_size: int = 0
    softmax: str = "adaptive"
    samples: int = BILM_TF_SAMPLES
    cell_clip: float | None = None
    proj_clip: float | None = None
    shared_token_layer: bool = False
    activation: str = "relu"
    n_characters: int = TF_NUM_CHARS
    weights_digest: str = ""

    def __post_init__(self):
        self.cutoffs = tuple(int(c) for c in self.cutoffs)
        self.char_filters = tuple((int(w), int(n)) for w, n in self.char_filters)
        shared = self.shared_token_layer  # bilm-tf's architecture: 0 is no training softmax
        check_fields(self, ("vocab_size", lambda v: (shared and v == 0) or not v < (5 if shared else 1),
                            "0 (no training softmax) or >= 5" if shared else "positive"),
                     *((name, lambda v: not v <= 0, "positive")
                       for name in ("embedding_dim", "hidden_size", "num_layers", "char_dim", "max_chars")),
                     ("token_encoder", lambda v: v in TOKEN_ENCODERS and not (shared and v != "char"),
                      f"one of {TOKEN_ENCODERS} ('char' for bilm-tf's architecture)"),
                     ("softmax", lambda v: v in SOFTMAXES, f"one of {', '.join(SOFTMAXES)}"))
        if self.samples < 1:  # named as its flag, softmax_samples
            raise ElmoError(f"BiLMConfig.softmax_samples must be >= 1, got {self.samples}",
                            field="BiLMConfig.softmax_samples")
        check_fields(self, ("dropout", lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
                     *((name, lambda v: v is None or v > 0, "positive or None (no clipping)")
                       for name in ("cell_clip", "proj_clip")),
                     ("proj_size", lambda v: 0 <= v < self.hidden_size,
                      f"0 (none) or smaller than BiLMConfig.hidden_size ({self.hidden_size})"))
        if self.embedding_dim != self.output_size:
            raise ElmoError(
                f"BiLMConfig.embedding_dim ({self.embedding_dim}) must equal the LSTM output width "
                f"({self.output_size}: BiLMConfig.proj_size if set, else BiLMConfig.hidden_size) so that layer 0 "
                "has the width of the LSTM layers", field="BiLMConfig.embedding_dim")
        if self.token_encoder == "char" and self.char_filters and max(w for w, _ in self.char_filters) > self.max_chars:
            raise ElmoError(f"BiLMConfig.char_filters: the widest filter ({max(w for w, _ in self.char_filters)}) "
                            f"exceeds BiLMConfig.max_chars ({self.max_chars})", field="BiLMConfig.max_chars")
        if self.activation not in ACTIVATIONS or self.n_characters not in (261, 262):
            raise ElmoError(f"BiLMConfig.activation must be one of {ACTIVATIONS} and BiLMConfig.n_characters 261 or "
                            f"262, got {self.activation!r}, {self.n_characters}", field="BiLMConfig.activation")

    @classmethod
    def bilm_tf(cls, *, char_dim: int = 16, filters: Sequence[Sequence[int]] = PUBLISHED_FILTERS, num_highway: int = 2,
                max_chars: int = TF_MAX_CHARS, activation: str = "relu", hidden_size: int = 4096,
                projection_dim: int = 512, num_layers: int = 2, cell_clip: float | None = 3.0,
                proj_clip: float | None = 3.0, use_skip_connections: bool = True, n_characters: int = TF_NUM_CHARS,
                weights_digest: str = "", vocab_size: int = 0, softmax: str = DEFAULT_SOFTMAX,
                samples: int = BILM_TF_SAMPLES, cutoffs: Sequence[int] = (1000, 5000, 15000), div_value: float = 4.0,
                dropout: float = 0.1) -> "BiLMConfig":
        """bilm-tf's architecture (``shared_token_layer``) from its options' names (:data:`BILM_TF_FIELDS`; the
        Original model's sizes by default) and a training head (:data:`HEAD_FIELDS`; bilm-tf's dropout 0.1).
        ``projection_dim`` is the token and LSTM output width (= ``hidden_size``: no projection); a clip of 0 or
        ``None`` is none (AllenNLP's reading of 0). Raises ElmoError naming the option for a value it cannot take."""
        filters = tuple((int(w), int(n)) for w, n in filters)
        sizes = {"char_cnn.embedding.dim": char_dim, "char_cnn.n_highway": num_highway + 1, "lstm.dim": hidden_size,
                 "lstm.projection_dim": projection_dim, "lstm.n_layers": num_layers}
        for name, value in sizes.items():
            if value < 1:
                raise ElmoError(f"{name} must be positive, got {value - (name == 'char_cnn.n_highway')}")
        if not filters or any(w < 1 or n < 1 for w, n in filters):
            raise ElmoError(f"char_cnn.filters must be non-empty [width, count] pairs, got {[list(f) for f in filters]}")
        if not 3 <= max_chars or max(w for w, _ in filters) > max_chars:
            raise ElmoError(f"char_cnn.max_characters_per_token {max_chars} must be >= 3 and >= the widest "
                            f"filter ({max(w for w, _ in filters)})")
        if activation not in ACTIVATIONS:
            raise ElmoError(f"char_cnn.activation {activation!r} is not supported (use {' or '.join(ACTIVATIONS)})")
        if n_characters not in (261, 262):
            raise ElmoError(f"char_cnn.n_characters must be 261 or 262 (bilm-tf's byte vocabulary), got {n_characters}")
        if projection_dim > hidden_size:
            raise ElmoError(f"lstm.projection_dim ({projection_dim}) must not exceed lstm.dim ({hidden_size})")
        for name, value in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
            if value is not None and value != 0 and not value > 0:
                raise ElmoError(f"lstm.{name} must be positive, 0 or null (no clipping), got {value}")
        return cls(vocab_size=vocab_size, embedding_dim=projection_dim, hidden_size=hidden_size, num_layers=num_layers,
                   dropout=dropout, cutoffs=cutoffs, div_value=div_value, token_encoder="char", char_dim=char_dim,
                   char_filters=filters, num_highway=num_highway, max_chars=max_chars, residual=use_skip_connections,
                   proj_size=projection_dim if projection_dim < hidden_size else 0, softmax=softmax, samples=samples,
                   cell_clip=cell_clip or None, proj_clip=proj_clip or None, shared_token_layer=True,
                   activation=activation, n_characters=n_characters, weights_digest=weights_digest)

    @property
    def output_size(self) -> int:
        """Width of each LSTM layer's output per direction: ``proj_size`` if set, else ``hidden_size``."""
        return self.proj_size or self.hidden_size

    def saved(self) -> dict[str, Any]:
        """The config as files record it (``bilstm.pt``, ``forward.pt``, ``config.json``) and as a classifier's
        fingerprint hashes it: ``asdict`` without the fields of :data:`ADDED_FIELDS` at their defaults, so that files
        and fingerprints of biLMs without those fields stay the same; bilm-tf's architecture: its
        :data:`BILM_TF_FIELDS` by bilm-tf's names (the head left out)."""
        if self.shared_token_layer:
            return {old: getattr(self, new) for old, new in BILM_TF_FIELDS.items()}
        return {k: v for k, v in asdict(self).items() if k not in ADDED_FIELDS or v != ADDED_FIELDS[k]}

    @property
    def architecture(self) -> dict[str, Any]:
        """What ``config.json`` records under ``config``: :meth:`saved` (bilm-tf's architecture: without
        ``weights_digest``, computed when loaded), JSON values."""
        saved = self.saved()
        if self.shared_token_layer:
            saved.pop("weights_digest")
        return json.loads(json.dumps(saved))

    @property
    def head(self) -> dict[str, Any]:
        """The training head's fields (:data:`HEAD_FIELDS`), as the ``config.json`` of bilm-tf's architecture
        records them under ``softmax``."""
        return {k: list(v) if k == "cutoffs" else v for k, v in asdict(self).items() if k in HEAD_FIELDS}

    @property
    def n_filters(self) -> int:
        """Width of the concatenated max-pooled convolutions (2048 in the published models)."""
        return sum(n for _, n in self.char_filters)

    @property
    def clipped(self) -> bool:
        """Whether the LSTMs are bilm-tf's clipped cell (a clip set), else ``nn.LSTM``."""
        return self.cell_clip is not None or self.proj_clip is not None

    @property
    def chars_per_token(self) -> int | None:
        """``max_chars`` when the biLM reads characters (batches must carry ``chars``), else ``None``."""
        return self.max_chars if self.token_encoder == "char" else None

    @property
    def char_scheme(self) -> str:
        """The character numbering of ``chars`` (:data:`elmo.data.chars.CHAR_SCHEMES`): ``"bilm_tf"`` for bilm-tf's
        architecture, else ours, ``"elmo"``."""
        return "bilm_tf" if self.shared_token_layer else "elmo"


#: the published ELMo architectures (AllenNLP's file names without ``elmo_`` and the suffixes) by ``pretrain
#: --architecture`` name: one char CNN (2048 filters, widths 1-7, 16-dim characters, 50 per token), clips of 3 and
#: skip connections; the LSTM sizes and highway layers differ (https://allennlp.org/elmo)
PUBLISHED_ARCHITECTURES = {
    "elmo-small": ("2x1024_128_2048cnn_1xhighway", BiLMConfig.bilm_tf(hidden_size=1024, projection_dim=128, num_highway=1)),
    "elmo-medium": ("2x2048_256_2048cnn_1xhighway", BiLMConfig.bilm_tf(hidden_size=2048, projection_dim=256, num_highway=1)),
    "elmo-original": ("2x4096_512_2048cnn_2xhighway", BiLMConfig.bilm_tf()),
}
