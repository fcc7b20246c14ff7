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

Training (``python -m elmo pretrain --architecture``, ``finetune``) adds **one softmax** over the training vocabulary,
shared by both directions (:meth:`PublishedBiLM.add_head`, :data:`~elmo.model.bilm.SOFTMAXES`): the forward LM reads
``<S> t_1 .. t_n`` and predicts ``t_1 .. t_n </S>``, the backward LM the reverse, both from the one token layer; the
loss is the mean of the two directions' (:meth:`PublishedBiLM.loss`, :class:`PublishedLM`); held-out perplexities are
exact. Word ids are :class:`~elmo.data.vocab.Vocabulary` ids (``<bos>`` ↔ ``<S>``, ``<eos>`` ↔ ``</S>``, ``<unk>`` ↔
``<UNK>``); the softmax is saved only in the model's ``save_pretrained`` folder (``elmo_kind`` ``published_lm``).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ..data.chars import TF_BOS, TF_EOS, bilm_tf_char_table
from ..data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from ..errors import ElmoError
from .adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax
from .bilm import DIRECTIONS, HEAD_FIELDS, BiLMConfig, BiLMLayers, States, length_mask, reverse_padded, with_boundaries
from .char_cnn import CharEncoder
from .dropout import FastDropout
from .hub import HubMixin
from .lstm import ProjectedLSTM, projected_stack
from .plan import HostPlan, WordPlan, device_reading_plan, host_plan, word_plan
from .sampled_softmax import SampledSoftmax

#: the published ELMo architectures (AllenNLP's file names without ``elmo_`` and the suffixes) by ``pretrain
#: --architecture`` name: one char CNN (2048 filters, widths 1-7, 16-dim characters, 50 per token), clips of 3 and
#: skip connections; the LSTM sizes and highway layers differ (https://allennlp.org/elmo)
PUBLISHED_ARCHITECTURES = {
    "elmo-small": ("2x1024_128_2048cnn_1xhighway", BiLMConfig.bilm_tf(hidden_size=1024, projection_dim=128, num_highway=1)),
    "elmo-medium": ("2x2048_256_2048cnn_1xhighway", BiLMConfig.bilm_tf(hidden_size=2048, projection_dim=256, num_highway=1)),
    "elmo-original": ("2x4096_512_2048cnn_2xhighway", BiLMConfig.bilm_tf()),
}


def weights_digest(module: nn.Module) -> str:
    """A short hash of a module's weights (names, shapes and the first 4,096 values of each; a training ``softmax``
    left out), which identifies a published biLM in :attr:`BiLMConfig.weights_digest` so that a classifier only loads onto it."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        if name.startswith("softmax."):  # a training head is not part of the biLM
            continue
        values = tensor.detach().float().reshape(-1)[:4096].cpu().numpy()
        digest.update(f"{name}{tuple(tensor.shape)}".encode() + values.tobytes())
    return digest.hexdigest()[:16]


class PublishedBiLM(BiLMLayers, HubMixin):
    """bilm-tf's biLM, sized by ``config`` (:class:`BiLMConfig`), with the
    :class:`~elmo.model.bilm.AnyBiLM` interface; its layers are computed as our :class:`~elmo.model.bilm.BiLM`'s
    (:class:`~elmo.model.bilm.BiLMLayers`, whose shapes apply). Load the published weights with
    :func:`elmo.model.published_io.load_published_bilm`; ``save_pretrained`` / ``from_pretrained``
    (:class:`~elmo.model.hub.HubMixin`) write and read it as a folder.

    With ``config.vocab_size`` set it has the training head (:meth:`add_head`), bilm-tf's initial weights
    (:func:`bilm_tf_initialization`) and the softmax drawn from ``seed`` alone.

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

    def __init__(self, config: BiLMConfig, seed: int = 0):
        super().__init__()
        self.config = replace(config, vocab_size=0)  # the head, if any, is added below
        # AnyBiLM.source: bilm-tf's options and weight files, or a published_lm.pt (one path)
        self.source: tuple[str, ...] | None = None
        self.token_encoder = CharEncoder(config.output_size, config.char_dim, config.char_filters, config.num_highway,
                                         config.max_chars, numbering="bilm_tf", activation=config.activation)
        sizes = (config.output_size, config.hidden_size, config.output_size, config.cell_clip, config.proj_clip)
        self.forward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        self.backward_layers = nn.ModuleList(ProjectedLSTM(*sizes) for _ in range(config.num_layers))
        boundaries = torch.from_numpy(bilm_tf_char_table([TF_BOS, TF_EOS], config.max_chars)).long()
        self.register_buffer("boundary_chars", boundaries, persistent=False)
        self.host_boundary_chars = boundaries  # stays on the host (a training step's plan: plan.host_plan)
        if config.vocab_size:
            bilm_tf_initialization(self, torch.Generator().manual_seed(seed))
            self.add_head(seed, **{k: getattr(config, k) for k in HEAD_FIELDS})

    def add_head(self, seed: int = 0, **head: Any) -> "PublishedBiLM":
        """Give this biLM (its weights kept) a training head: ``head``, values of :data:`HEAD_FIELDS` (``vocab_size``
        required; the others default to :class:`BiLMConfig`'s), a ``softmax`` shared by both directions,
        initialised from ``seed`` alone, and ``dropout``; saved as ``elmo_kind`` ``published_lm``. Returns the biLM.

        Raises:
            ElmoError: a field out of range, or not of the head, named.
        """
        if unknown := sorted(set(head) - set(HEAD_FIELDS)):
            raise ElmoError(f"{unknown[0]} is not a field of the training head ({', '.join(HEAD_FIELDS)})")
        defaults = {k: v for k, v in BiLMConfig.bilm_tf().head.items() if k != "vocab_size"}
        self.config = c = replace(self.config, **{**defaults, **head})
        if not c.vocab_size:
            raise ElmoError("BiLMConfig.vocab_size: a training head needs the vocabulary's size",
                            field="BiLMConfig.vocab_size")
        self.hub_kind = "published_lm"
        self.dropout = FastDropout(c.dropout)
        with torch.random.fork_rng(devices=[]):  # the initial weights are a function of ``seed`` alone
            torch.manual_seed(seed)
            self.softmax = SampledSoftmax(c.output_size, c.vocab_size, c.samples) if c.softmax == "sampled" else \
                AdaptiveSoftmax(c.output_size, c.vocab_size, c.cutoffs, c.div_value)
        return self

    def without_head(self) -> "PublishedBiLM":
        """This biLM without its training head, its weights kept (:func:`~elmo.model.serialization.open_bilm`'s:
        the ELMo layers read none). Returns it."""
        for name in ("softmax", "dropout", "hub_kind"):
            self.__dict__.pop(name, None)
            self._modules.pop(name, None)
        self.config = replace(self.config, vocab_size=0)
        return self

    def hub_config(self) -> dict:
        """``{"config": BiLMConfig as a dict}``, its ``weights_digest`` left out (computed when loaded):
        :attr:`BiLMConfig.architecture`; with a training head also ``"softmax"``:
        :attr:`BiLMConfig.head`."""
        return {"config": self.config.architecture, **({"softmax": self.config.head} if self.config.vocab_size else {})}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: Vocabulary | None) -> "PublishedBiLM":
        """Inverse of :meth:`hub_config` (``vocab``, the training vocabulary if any, is not part of the biLM). Raises
        ElmoError: a training head without a vocabulary, or with one of another size."""
        model = cls(BiLMConfig.bilm_tf(**config["config"], **config.get("softmax", {})))
        size = model.config.vocab_size
        if size and (vocab is None or len(vocab) != size):
            raise ElmoError(f"softmax.vocab_size is {size} but vocab.txt holds "
                            f"{'no vocabulary' if vocab is None else f'{len(vocab)} words'}")
        return model

    @staticmethod
    def renamed_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A ``model.safetensors`` state as this class names it: an earlier version's ``published_lm`` folder kept the
        biLM under ``bilm.``."""
        return {k.removeprefix("bilm."): v for k, v in state.items()}

    def loaded(self, folder: Path) -> None:
        """After ``from_pretrained``: the weights' digest and ``source`` (the folder)."""
        self.config, self.source = replace(self.config, weights_digest=weights_digest(self)), (str(folder.resolve()),)

    def describe(self) -> str:
        """The model card's paragraph (and the training softmax it was saved with)."""
        c = self.config
        clip = "no clipping" if c.cell_clip is None and c.proj_clip is None else \
            f"cell clip {c.cell_clip}, projection clip {c.proj_clip}"
        head = f" Saved with the {c.softmax} softmax it was trained with, shared by both directions, over a " \
               f"vocabulary of {c.vocab_size:,} words." if c.vocab_size else ""
        return (f"The published ELMo architecture (bilm-tf; Peters et al. 2018): a character CNN ({c.n_filters} filters, "
                f"{c.num_highway} highway layers), {c.num_layers} LSTM layers per direction of {c.hidden_size} cells "
                f"projected to {c.output_size} ({clip}), residual connections {'on' if c.residual else 'off'}. "
                f"Each token gets {self.num_layers} layers of {self.output_dim} numbers; "
                f"{sum(p.numel() for k, p in self.named_parameters() if not k.startswith('softmax.')):,} "
                f"parameters.{head}")

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
                                   active, initial, self.config.residual, self.chunk_size)

        def restored() -> Iterator[torch.Tensor]:
            while hs:
                yield hs.pop(0).transpose(0, 1)[restore]
        return restored(), [(h[restore], c[restore]) for h, c in ends]

    def reading_states(self, chars: torch.Tensor, lengths: torch.Tensor, directions: Sequence[int] = (0, 1),
                       dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
                       plan: HostPlan | None = None) -> list[torch.Tensor]:
        """The top LSTM layer of each direction in its own reading order: what the language-model softmax reads
        (training and held-out perplexity, :meth:`loss`), differentiable
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
                                  active, None, self.config.residual, self.chunk_size, dropout)[0][-1]
            states.append(top.transpose(0, 1)[restore][:, :x.shape[1] + 1])
        return states

    def targets(self, ids: torch.Tensor, lengths: torch.Tensor, direction: int) -> torch.Tensor:
        """One direction's targets ``(B, T + 1)`` int64 in its reading order, ``IGNORE_INDEX`` past ``n + 1``."""
        batch = ids.shape[0]
        full = torch.cat([ids.new_full((batch, 1), BOS_ID), ids, ids.new_full((batch, 1), PAD_ID)], dim=1)
        full[torch.arange(batch, device=ids.device), lengths + 1] = EOS_ID
        full = full if direction == 0 else reverse_padded(full, lengths + 2)
        return full[:, 1:].masked_fill(~length_mask(lengths + 1, ids.shape[1] + 1), IGNORE_INDEX)

    def predicted_tops(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None,
                       directions: Sequence[int], plan: HostPlan | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(top (n, P), targets (n,))`` of each direction's predicted positions, dropout applied in training; with
        ``plan`` the positions are :attr:`~elmo.model.plan.HostPlan.kept`, not a boolean mask."""
        if not self.config.vocab_size:
            raise ElmoError("this published biLM has no training softmax (BiLMConfig.vocab_size is 0): "
                            "add_head gives it one")
        lengths = lengths.to(ids.device)
        states = self.reading_states(chars, lengths, directions, self.dropout if self.training else None, plan)
        out = []
        for d, top in zip(directions, states):
            targets = self.targets(ids, lengths, d)
            if plan is None:
                keep = targets != IGNORE_INDEX
                out.append((self.dropout(top[keep]), targets[keep]))
            else:
                out.append((self.dropout(top.reshape(-1, top.shape[-1]).index_select(0, plan.kept)),
                            targets.reshape(-1).index_select(0, plan.kept)))
        return out

    #: the batch entries a training step's plan is made from, as they were on the host (``Objective.host_keys``)
    host_keys = ("ids", "lengths", "chars")

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan:
        """:func:`~elmo.model.plan.host_plan` of a batch's CPU copies of :attr:`host_keys`, on the host
        (:func:`~elmo.model.plan.step_loss` moves it to the batch's device).

        Raises:
            ElmoError: a copy missing or not on the CPU; a target outside the vocabulary.
        """
        missing = [k for k in self.host_keys if k not in host]
        if missing:
            raise ElmoError(f"PublishedBiLM.host_plan: the batch's host copy has no {', '.join(missing)}")
        adaptive = isinstance(self.softmax, AdaptiveSoftmax)
        return host_plan(host["ids"], host["lengths"], host["chars"], self.host_boundary_chars, self.words_per_pass,
                         self.token_encoder.max_width, tuple(self.softmax.cutoffs) if adaptive else None)

    def loss(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
             directions: Sequence[int] = (0, 1), plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """Training loss ``(loss, n)`` of the training head (:meth:`add_head`): the mean over ``directions`` of each
        direction's mean negative log-likelihood, nats per predicted word (in eval mode exact: ``exp(loss)`` is the
        batch's perplexity; in training the sampled softmax's estimate), and ``n = sum(lengths + 1)``, the words each
        direction predicts. ``ids (B, T)`` int64 :class:`~elmo.data.vocab.Vocabulary` ids (the targets), ``chars``
        as :meth:`reading_states`; with ``plan`` (the batch's :meth:`host_plan`) nothing is read back from the
        device (:func:`~elmo.model.plan.step_loss`); loss and gradients are the same bit for bit.

        Source: Peters et al. (2018) §3.1 and bilm-tf's ``bilm/training.py``: ``0.5 * (loss_fwd + loss_bwd)``, each
        sentence read from zero LSTM states (unlike bilm-tf). Raises ElmoError: ``chars`` missing.
        """
        losses = []
        for d, (top, targets) in zip(directions, self.predicted_tops(ids, lengths, chars, directions, plan)):
            if isinstance(self.softmax, SampledSoftmax):
                losses.append(self.softmax(top, targets))
            else:
                counts = None if plan is None else plan.cluster_counts[d]
                losses.append(self.softmax.loss(top, targets, counts)[0])
        return torch.stack(losses).mean(), int((lengths + 1).sum()) if plan is None else plan.units

    def direction(self, name: str) -> "PublishedLM":
        """Direction ``"forward"`` or ``"backward"`` as a language model of its own (:class:`PublishedLM`), as
        :meth:`elmo.model.bilm.BiLM.direction` gives ours."""
        return PublishedLM(self, (DIRECTIONS.index(name),))

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


#: a :class:`PublishedBiLM` with its training head (:meth:`PublishedBiLM.add_head`) is saved as this kind
HubMixin.kinds["published_lm"] = PublishedBiLM


def _reading_plan(read: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """How a batch whose row b reads ``read[b]`` steps runs: ``(order, restore, active)``: the rows sorted longest
    first (each step then runs a prefix of them), the inverse permutation, and the rows running at each step."""
    return device_reading_plan(read.cpu().numpy(), read.device)  # the one read: the lengths


def bilm_tf_initialization(bilm: PublishedBiLM, generator: torch.Generator) -> PublishedBiLM:
    """``bilm`` with bilm-tf's initial weights (``bilm/training.py``), drawn in place from ``generator``: character
    embeddings U(-1, 1) (row 0, a masked token's, zero); convolutions U(-0.05, 0.05) for relu (Kim et al. 2015),
    N(0, 1/(width·char_dim)) for tanh, biases 0; highway ``W_carry``, ``W_transform`` and the projection N(0, 1/F),
    ``b_carry`` -2 (carry gate mostly closed), other biases 0; LSTM weights Glorot-uniform (TF's default) over TF's
    ``W_0`` ``(I + P, 4H)`` and ``W_P_0`` ``(H, P)``, bias 0 plus TF's forget-gate bias 1.0."""
    config, encoder = bilm.config, bilm.token_encoder

    def uniform(p: torch.Tensor, bound: float) -> None:
        p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)

    def normal(p: torch.Tensor, std: float) -> None:
        p.copy_(torch.randn(p.shape, generator=generator) * std)

    width = config.n_filters
    with torch.no_grad():
        uniform(encoder.char_embedding.weight, 1.0)
        encoder.char_embedding.weight[0].zero_()
        for (w, _), conv in zip(config.char_filters, encoder.convs):
            uniform(conv.weight, 0.05) if config.activation == "relu" else normal(conv.weight, (w * config.char_dim) ** -0.5)
            conv.bias.zero_()
        for highway in encoder.highways:
            normal(highway.weight, width ** -0.5)
            highway.bias.zero_()
            highway.bias[width:].fill_(-2.0)  # [transform; carry]
        if encoder.projection is not None:
            normal(encoder.projection.weight, width ** -0.5)
            encoder.projection.bias.zero_()
    for lstm in (lstm for stack in bilm.stacks() for lstm in stack):
        lstm.initialize(generator)
    return bilm


class PublishedLM(nn.Module):
    """A :class:`PublishedBiLM` with its training head as a language model over ``directions`` (0 forward, 1
    backward): what :func:`~elmo.training.trainer.fit` trains (``forward`` → ``(loss, n)``,
    :meth:`PublishedBiLM.loss`; ``host_keys`` and ``host_plan`` for :func:`~elmo.model.plan.step_loss`) and, for one
    direction, the :class:`~elmo.model.bilm.Direction` that :mod:`elmo.training.evaluation` reads for per-direction
    held-out perplexities (``predicted_states``, ``vocabulary_log_probs``, ``log_probs``). Its state is the biLM's
    under ``bilm.``; a training checkpoint of an earlier version, with the softmax beside it, loads too."""

    def __init__(self, bilm: PublishedBiLM, directions: Sequence[int] = (0, 1)):
        super().__init__()
        self.bilm, self.directions = bilm, tuple(directions)
        self.direction = DIRECTIONS[self.directions[0]] if len(self.directions) == 1 else "both"
        self.host_keys = bilm.host_keys
        self._register_load_state_dict_pre_hook(
            lambda state, prefix, *_: state.update({f"{prefix}bilm.{k[len(prefix):]}": state.pop(k) for k in
                                                   [k for k in state if k.startswith(f"{prefix}softmax.")]}))

    @property
    def vocab_size(self) -> int:
        """V, the words the shared softmax predicts (:attr:`BiLMConfig.vocab_size`)."""
        return self.bilm.config.vocab_size

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan:
        """:meth:`PublishedBiLM.host_plan`."""
        return self.bilm.host_plan(host)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
                plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """``(mean NLL, n)`` over :attr:`directions` (:meth:`PublishedBiLM.loss`)."""
        return self.bilm.loss(ids, lengths, chars, self.directions, plan)

    @torch.no_grad()
    def predicted_states(self, ids: torch.Tensor, lengths: torch.Tensor,
                         chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first direction's top states ``(n, P)`` float32 at its ``n`` predicted positions and their targets
        ``(n,)`` (:meth:`~elmo.model.bilm.LanguageModel.predicted_states`)."""
        [(top, targets)] = self.bilm.predicted_tops(ids, lengths, chars, self.directions[:1])
        return top.float(), targets

    @torch.no_grad()
    def vocabulary_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities ``(n, V)`` float32 of every word after each of the ``n`` states ``(n, P)`` (the
        directions share the softmax)."""
        return self.bilm.softmax.log_prob(states)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor,
                  chars: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`vocabulary_log_probs` of :meth:`predicted_states`: ``(n, V)`` float32 and the ``n`` word ids."""
        states, targets = self.predicted_states(ids, lengths, chars)
        return self.vocabulary_log_probs(states), targets
