"""The original ELMo biLM of bilm-tf (Peters et al. 2018), the architecture of the published ELMo weights.

The published models (AllenNLP's ``elmo_2x4096_512_2048cnn_2xhighway`` and its smaller siblings) are bilm-tf's
character-input biLM; :mod:`elmo.model.published_io` reads their files into :class:`PublishedBiLM`, which computes
the reference implementation's vectors (``docs/published_elmo.md``, "What exact means here"). Per token:

1. **Token layer** (:class:`~elmo.model.char_cnn.CharEncoder`): bilm-tf character ids
   (:func:`elmo.data.chars.bilm_tf_char_ids`) → character embedding → max-pooled convolutions, ``char_cnn.activation``
   → highway layers in TensorFlow's form ``y = g ⊙ relu(W_t x + b_t) + (1 − g) ⊙ x``, ``g = σ(W_c x + b_c)`` → a
   linear projection to ``projection_dim``. One token layer serves both directions: ``h_0 = [x; x]``.
2. **LSTM layers** (:class:`ProjectedLSTM`), per direction: TensorFlow's ``LSTMCell`` with ``num_proj`` (forget
   bias + 1.0, cell clipped to ``±cell_clip``, output projected and clipped to ``±proj_clip``); with
   ``use_skip_connections`` every layer but the first adds its input to its output.
3. **Sentence boundaries** ``<S>`` and ``</S>`` are added around every sentence before the LSTMs and removed after.

bilm-tf and AllenNLP (``ElmoEmbedder(stateful=True)``) are *stateful*, row r's final states starting row r of the next
batch: :meth:`PublishedBiLM.contextual` with ``carry=True``; ``forward`` is stateless. :class:`ProjectedLSTM` clips the
cell, which ``nn.LSTM`` cannot; without clipping (``pretrain --lstm fused``) it runs on PyTorch's fused LSTM kernel,
stateful use included.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ..data.chars import TF_BOS, TF_EOS, TF_MAX_CHARS, TF_NUM_CHARS, bilm_tf_char_table
from ..errors import ElmoError
from .bilm import BiLMLayers, States, reverse_padded, with_boundaries
from .char_cnn import ACTIVATIONS, CharEncoder
from .hub import HubMixin
from .lstm import ProjectedLSTM, projected_stack
from .plan import HostPlan, WordPlan, device_reading_plan, word_plan

#: the character CNN of every published model (widths 1-7, 2048 filters)
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass(frozen=True)
class PublishedBiLMConfig:
    """bilm-tf's hyperparameters (its ``options.json``, read by :func:`elmo.model.published_io.read_options`).

    Attributes:
        char_dim: ``char_cnn.embedding.dim``; filters: ``char_cnn.filters`` ``(width, count)`` pairs; num_highway:
            ``char_cnn.n_highway``; max_chars: ``char_cnn.max_characters_per_token``; activation:
            ``char_cnn.activation`` (``relu`` or ``tanh``); n_characters: ``char_cnn.n_characters`` (261 when
            training, 262 with the padding id; the weights have 261 rows either way);
        hidden_size: ``lstm.dim`` (cells); projection_dim: ``lstm.projection_dim`` (= the token width); num_layers:
            ``lstm.n_layers``; cell_clip, proj_clip: ``lstm.cell_clip``, ``lstm.proj_clip`` (``None`` or 0 = no
            clipping, stored as ``None``; both off: the fused LSTM kernel, :class:`ProjectedLSTM`);
            use_skip_connections: ``lstm.use_skip_connections``;
        weights_digest: a hash of the weights (set by the loader) so that classifiers only load onto them.

    Raises ElmoError, naming the option, for a value outside what is supported.
    """

    char_dim: int = 16
    filters: tuple[tuple[int, int], ...] = field(default=PUBLISHED_FILTERS)
    num_highway: int = 2
    max_chars: int = TF_MAX_CHARS
    activation: str = "relu"
    hidden_size: int = 4096
    projection_dim: int = 512
    num_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    n_characters: int = TF_NUM_CHARS
    weights_digest: str = ""

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        sizes = {"char_cnn.embedding.dim": self.char_dim, "char_cnn.n_highway": self.num_highway + 1,
                 "lstm.dim": self.hidden_size, "lstm.projection_dim": self.projection_dim,
                 "lstm.n_layers": self.num_layers}
        for name, value in sizes.items():
            if value < 1:
                raise ElmoError(f"{name} must be positive, got {value - (name == 'char_cnn.n_highway')}")
        if not self.filters or any(w < 1 or n < 1 for w, n in self.filters):
            raise ElmoError(f"char_cnn.filters must be non-empty [width, count] pairs, got {list(self.filters)}")
        if not 3 <= self.max_chars or max(w for w, _ in self.filters) > self.max_chars:
            raise ElmoError(f"char_cnn.max_characters_per_token {self.max_chars} must be >= 3 and >= the widest "
                            f"filter ({max(w for w, _ in self.filters)})")
        if self.activation not in ACTIVATIONS:
            raise ElmoError(f"char_cnn.activation {self.activation!r} is not supported (use {' or '.join(ACTIVATIONS)})")
        if self.n_characters not in (261, 262):
            raise ElmoError(f"char_cnn.n_characters must be 261 or 262 (bilm-tf's byte vocabulary), got {self.n_characters}")
        if self.projection_dim > self.hidden_size:
            raise ElmoError(f"lstm.projection_dim ({self.projection_dim}) must not exceed lstm.dim ({self.hidden_size})")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value == 0:  # AllenNLP's reading of 0: no clipping
                object.__setattr__(self, name, None)
            elif value is not None and not value > 0:
                raise ElmoError(f"lstm.{name} must be positive, 0 or null (no clipping), got {value}")

    def saved(self) -> dict:
        """The config as a classifier's fingerprint hashes it: ``asdict`` (:meth:`elmo.model.bilm.BiLMConfig.saved`)."""
        return asdict(self)

    @property
    def architecture(self) -> dict:
        """The config without :attr:`weights_digest`, as ``config.json`` records it (JSON values: lists for tuples)."""
        return {k: [list(f) for f in v] if k == "filters" else v for k, v in asdict(self).items()
                if k != "weights_digest"}

    @property
    def output_size(self) -> int:
        """Width of the token vectors and of each LSTM layer's output per direction (``projection_dim``)."""
        return self.projection_dim

    @property
    def n_filters(self) -> int:
        """Width of the concatenated max-pooled convolutions (2048 in the published models)."""
        return sum(n for _, n in self.filters)

    @property
    def chars_per_token(self) -> int:
        """Characters per token of ``chars`` (batches always carry them: this biLM reads characters only)."""
        return self.max_chars

    @property
    def char_scheme(self) -> str:
        """The character numbering of ``chars``: bilm-tf's (:func:`elmo.data.chars.bilm_tf_char_ids`)."""
        return "bilm_tf"


#: the published ELMo architectures (AllenNLP's file names without ``elmo_`` and the suffixes) by ``pretrain
#: --architecture`` name: one char CNN (2048 filters, widths 1-7, 16-dim characters, 50 per token), clips of 3 and
#: skip connections; the LSTM sizes and highway layers differ (https://allennlp.org/elmo)
PUBLISHED_ARCHITECTURES = {
    "elmo-small": ("2x1024_128_2048cnn_1xhighway", PublishedBiLMConfig(hidden_size=1024, projection_dim=128, num_highway=1)),
    "elmo-medium": ("2x2048_256_2048cnn_1xhighway", PublishedBiLMConfig(hidden_size=2048, projection_dim=256, num_highway=1)),
    "elmo-original": ("2x4096_512_2048cnn_2xhighway", PublishedBiLMConfig()),
}


def weights_digest(module: nn.Module) -> str:
    """A short hash of a module's weights (names, shapes and the first 4,096 values of each), which identifies a
    published biLM in :attr:`PublishedBiLMConfig.weights_digest` so that a classifier only loads onto it."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        values = tensor.detach().float().reshape(-1)[:4096].cpu().numpy()
        digest.update(f"{name}{tuple(tensor.shape)}".encode() + values.tobytes())
    return digest.hexdigest()[:16]


class PublishedBiLM(BiLMLayers, HubMixin):
    """bilm-tf's biLM, sized by ``config`` (:class:`PublishedBiLMConfig`), with the
    :class:`~elmo.model.bilm.AnyBiLM` interface; its layers are computed as our :class:`~elmo.model.bilm.BiLM`'s
    (:class:`~elmo.model.bilm.BiLMLayers`, whose shapes apply). Load the published weights with
    :func:`elmo.model.published_io.load_published_bilm`; ``save_pretrained`` / ``from_pretrained``
    (:class:`~elmo.model.hub.HubMixin`) write and read it as a folder.

    Differences: ``ids`` are ignored but for ``Elmo``'s default lengths (no word vocabulary); ``chars`` are in
    bilm-tf's numbering *without* the sentence boundaries; ``D = 2 × projection_dim`` (1024 for the Original model);
    ``chunk_size`` bounds the positions whose LSTM input products run at once (:meth:`ProjectedLSTM.forward`).
    """

    hub_kind = "published_bilm"

    #: the published models read text as written and share one token layer (:class:`~elmo.model.bilm.AnyBiLM`)
    cased = True
    shared_token_layer = True

    def bilm_tf_blockers(self) -> list[str]:
        """Why bilm-tf's files cannot hold this biLM: never (:meth:`elmo.model.bilm.BiLM.bilm_tf_blockers`)."""
        return []

    def __init__(self, config: PublishedBiLMConfig):
        super().__init__()
        self.config = config
        # AnyBiLM.source: bilm-tf's options and weight files, or a published_lm.pt (one path)
        self.source: tuple[str, ...] | None = None
        self.token_encoder = CharEncoder(config.projection_dim, config.char_dim, config.filters, config.num_highway,
                                         config.max_chars, numbering="bilm_tf", activation=config.activation)
        sizes = (config.projection_dim, config.hidden_size, config.projection_dim, config.cell_clip, config.proj_clip)
        self.forward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        self.backward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        boundaries = torch.from_numpy(bilm_tf_char_table([TF_BOS, TF_EOS], config.max_chars)).long()
        self.register_buffer("boundary_chars", boundaries, persistent=False)
        self.host_boundary_chars = boundaries  # stays on the host (a training step's plan: plan.host_plan)

    def hub_config(self) -> dict:
        """``{"config": PublishedBiLMConfig as a dict}``, its ``weights_digest`` left out (computed when loaded):
        :attr:`PublishedBiLMConfig.architecture`."""
        return {"config": self.config.architecture}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: object) -> "PublishedBiLM":
        """Inverse of :meth:`hub_config` (``vocab``, the training vocabulary if any, is not part of the biLM)."""
        return cls(PublishedBiLMConfig(**config["config"]))

    def loaded(self, folder: Path) -> None:
        """After ``from_pretrained``: the weights' digest and ``source`` (the folder)."""
        self.config, self.source = replace(self.config, weights_digest=weights_digest(self)), (str(folder.resolve()),)

    def describe(self) -> str:
        """The model card's paragraph."""
        c = self.config
        clip = "no clipping" if c.cell_clip is None and c.proj_clip is None else \
            f"cell clip {c.cell_clip}, projection clip {c.proj_clip}"
        return (f"The published ELMo architecture (bilm-tf; Peters et al. 2018): a character CNN ({c.n_filters} filters, "
                f"{c.num_highway} highway layers), {c.num_layers} LSTM layers per direction of {c.hidden_size} cells "
                f"projected to {c.projection_dim} ({clip}), residual connections {'on' if c.use_skip_connections else 'off'}. "
                f"Each token gets {self.num_layers} layers of {self.output_dim} numbers; "
                f"{self.parameter_count():,} parameters.")

    def token_vectors(self, chars: torch.Tensor, plan: WordPlan | None = None) -> torch.Tensor:
        """Context-free token vectors ``(..., projection_dim)`` float32 of ``chars (..., C)`` (the token layer x),
        at most :attr:`words_per_pass` distinct words through the character CNN at a time (``plan``: as
        :meth:`~elmo.model.char_cnn.CharEncoder.forward`)."""
        flat = chars.reshape(-1, chars.shape[-1])
        return self.token_encoder(flat, self.words_per_pass, plan).reshape(*chars.shape[:-1], -1)

    def word_vectors(self, words: Sequence[str]) -> torch.Tensor:
        """Token vectors ``(len(words), projection_dim)`` of distinct ``words`` spelt out (the character CNN once per
        word), on the biLM's device in the token layer's compute dtype, planned on the host so nothing is read back
        (``vocab_to_cache`` of :class:`~elmo.model.elmo.Elmo` and of the embedder)."""
        device = next(self.token_encoder.parameters()).device
        table = bilm_tf_char_table(words, self.config.max_chars).astype(np.int64)
        plan = word_plan(table, self.words_per_pass, self.token_encoder.max_width).to(device)
        return self.token_vectors(torch.from_numpy(table).to(device), plan)

    @staticmethod
    def tokens(ids: torch.Tensor | None, chars: torch.Tensor | None) -> torch.Tensor:
        """What the token layer reads: ``chars`` (the ids are not read). Raises ElmoError: ``chars`` missing."""
        if chars is None:
            raise ElmoError("a published (bilm-tf) biLM reads characters: pass chars (B, T, C) in bilm-tf's numbering "
                            "(elmo.data.chars.bilm_tf_char_table)")
        return chars

    @staticmethod
    def layer_zero(x: torch.Tensor) -> torch.Tensor:
        """Layer 0 from :meth:`token_vectors`: ``[x; x]`` (one token layer read by both directions)."""
        return torch.cat([x, x], dim=-1)

    def stacks(self) -> tuple[nn.ModuleList, nn.ModuleList]:
        """The forward and the backward :class:`ProjectedLSTM` layers."""
        return self.forward_layers, self.backward_layers

    def token_parameters(self) -> list[nn.Parameter]:
        """The one token layer's parameters."""
        return list(self.token_encoder.parameters())

    def reading(self, lengths: torch.Tensor, device: torch.device, to_end: bool) -> dict:
        """Both stacks' reading plan (:func:`~elmo.model.plan.device_reading_plan`) and the boundaries' spelling plan,
        made on the host when ``lengths`` are there (nothing read from the device)."""
        read = lengths + (2 if to_end else 1)
        if lengths.device.type == "cpu":
            return {"plan": device_reading_plan(read.numpy().astype(np.int64), device),
                    "boundaries": self.boundary_plan(device)}
        return {"plan": _reading_plan(read.to(device)), "boundaries": None}

    def boundary_inputs(self, d: int, x: torch.Tensor, lengths: torch.Tensor, reading: dict) -> torch.Tensor:
        """``<S> x_1 .. x_n </S>`` ``(B, T + 2, P)`` through the one token layer, made once for both directions."""
        if "full" not in reading:
            reading["full"] = self._with_boundaries(x, lengths, reading["boundaries"])[0]
        return reading.pop("full") if d == 1 else reading["full"]

    def read_direction(self, d: int, inputs: torch.Tensor, sentence: torch.Tensor, reading: dict,
                       initial: States | None, steps: int, carry: bool) -> tuple[Iterator[torch.Tensor], States]:
        """Direction ``d``'s ``h_1 .. h_L`` ``(B, T + 2, P)`` and final states, its stack run as ``reading`` plans, each
        layer restored to the batch's row order one at a time (no second copy of them all)."""
        order, restore, active = reading["plan"]
        initial = None if initial is None else [(h[order], c[order]) for h, c in initial]
        hs, ends = projected_stack(self.stacks()[d], inputs[order].transpose(0, 1),
                                   active, initial, self.config.use_skip_connections, self.chunk_size)

        def restored() -> Iterator[torch.Tensor]:
            while hs:
                yield hs.pop(0).transpose(0, 1)[restore]
        return restored(), [(h[restore], c[restore]) for h, c in ends]

    def reading_states(self, chars: torch.Tensor, lengths: torch.Tensor, directions: Sequence[int] = (0, 1),
                       dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
                       plan: HostPlan | None = None) -> list[torch.Tensor]:
        """The top LSTM layer of each direction in its own reading order: what the language-model softmax reads
        (training and held-out perplexity, :class:`elmo.model.published_lm.PublishedBiLMWithSoftmax`), differentiable
        down to the character CNN. Raises ElmoError: ``chars`` missing.

        Args:
            chars: ``(B, T, C)`` bilm-tf character ids without the sentence boundaries; lengths: ``(B,)`` int64;
            directions: which stacks run, 0 = forward, 1 = backward; dropout: on every LSTM layer's input (bilm-tf's
                ``DropoutWrapper(input_keep_prob)`` in training; the residual connection adds the dropped input, as
                TF's wrapper order does), ``None`` = none; plan: the batch's :class:`~elmo.model.plan.HostPlan` on the
                device: the same states, nothing read back.

        Returns:
            One ``(B, T + 1, P)`` float32 tensor per entry of ``directions``, zero past ``n``: forward position k is
            the state after ``<S> t_1 .. t_k`` (predicting ``t_{k+1}``, ``</S>`` at ``k = n``), backward position k
            after ``</S> t_n .. t_{n-k+1}`` (predicting ``t_{n-k}``, ``<S>`` at ``k = n``).
        """
        x = self.token_vectors(self.tokens(None, chars), None if plan is None else plan.words)
        lengths = lengths.to(x.device)
        full, sentence = self._with_boundaries(x, lengths, None if plan is None else plan.boundaries)
        order, restore, active = _reading_plan(sentence - 1) if plan is None else (plan.order, plan.restore, plan.active)
        states = []
        for d in directions:
            inputs = full if d == 0 else reverse_padded(full, sentence)
            top = projected_stack(self.stacks()[d], inputs[order].transpose(0, 1),
                                  active, None, self.config.use_skip_connections, self.chunk_size, dropout)[0][-1]
            states.append(top.transpose(0, 1)[restore][:, :x.shape[1] + 1])
        return states

    def boundary_plan(self, device: torch.device) -> WordPlan:
        """The :class:`~elmo.model.plan.WordPlan` of the ``<S>``, ``</S>`` spellings, made on the host per device."""
        plans, key = self.__dict__.setdefault("_boundary_plans", {}), (device, self.words_per_pass)
        if key not in plans:
            plans[key] = word_plan(self.host_boundary_chars.numpy(), self.words_per_pass,
                                   self.token_encoder.max_width).to(device)
        return plans[key]

    def _with_boundaries(self, x: torch.Tensor, lengths: torch.Tensor,
                         plan: WordPlan | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`~elmo.model.bilm.with_boundaries` with the ``<S>``, ``</S>`` spellings through the token layer."""
        return with_boundaries(x, lengths, self.token_vectors(self.boundary_chars.to(x.device), plan))


def _reading_plan(read: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """How a batch whose row b reads ``read[b]`` steps runs: ``(order, restore, active)``: the rows sorted longest
    first (each step then runs a prefix of them), the inverse permutation, and the rows running at each step."""
    return device_reading_plan(read.cpu().numpy(), read.device)  # the one read: the lengths
