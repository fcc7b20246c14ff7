"""The bidirectional language model (biLM) of ELMo (Peters et al. 2018, §3.1 and eq. 1), in both architectures: two
*separate* language models read each right-padded sentence, the backward one reversed within its own length so that
backward state k lines up with token k (docs/method.md); padded positions are excluded from every loss and masked.

The architectures are configurations (:class:`BiLMConfig`'s fields say what each sets): **ours**, per direction a
token encoder (a word embedding, or the character CNN of :mod:`elmo.model.char_cnn`), LSTM layers and a softmax
(adaptive, Grave et al. 2017, or sampled); **bilm-tf's** (``shared_token_layer``, :meth:`BiLMConfig.bilm_tf`,
``PUBLISHED_ARCHITECTURES``), that of the published ELMo weights (AllenNLP's ``elmo_2x4096_512_2048cnn_2xhighway`` and
its smaller siblings, read by :mod:`elmo.model.published_io`; docs/published_elmo.md, "What exact means here"), whose
training head is one softmax shared by both directions (:meth:`BiLM.add_head`, :meth:`BiLM.loss`, :class:`PublishedLM`)
over :class:`~elmo.data.vocab.Vocabulary` ids (``<bos>`` ↔ ``<S>``, ``<eos>`` ↔ ``</S>``, ``<unk>`` ↔ ``<UNK>``).
bilm-tf and AllenNLP are *stateful*: :meth:`BiLM.contextual` with ``carry=True`` (docs/published_elmo.md, "Stateless
and stateful").
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
from torch import nn

from ..data.chars import TF_BOS, TF_EOS, TF_MAX_CHARS, bilm_tf_char_table, char_table
from ..data.vocab import BOS_ID, EOS_ID, Vocabulary
from ..errors import ElmoError
from .adaptive_softmax import IGNORE_INDEX, AdaptiveSoftmax, cluster_counts
from .bilm_config import HEAD_FIELDS, BiLMConfig
from .char_cnn import WORDS_PER_PASS, WORDS_PER_PASS_GPU, CharEncoder
from .dropout import FastDropout
from .hub import HubMixin, earlier_key
from .language_model import DIRECTIONS, LanguageModel, PublishedLM, States, length_mask, reverse_padded, with_boundaries
from .lstm import projected_stack
from .plan import HostPlan, WordPlan, device_reading_plan, predicted_positions, word_plan
from .sampled_softmax import SampledSoftmax

#: the default ``chunk_size`` of a biLM (:attr:`BiLM.chunk_size`)
CHUNK_SIZE = 256


def words_per_pass(device_type: str, chunk_size: int | None) -> int:
    """:attr:`BiLM.words_per_pass` on ``device_type`` with ``chunk_size`` positions per chunk."""
    if device_type == "cuda":
        return WORDS_PER_PASS_GPU
    return WORDS_PER_PASS if chunk_size is None else min(WORDS_PER_PASS, chunk_size)


class BiLM(nn.Module, HubMixin):
    """A biLM of either architecture (module docstring), sized by ``config``: a ``forward_lm`` and a ``backward_lm``
    (:class:`LanguageModel`); bilm-tf's also the one ``token_encoder`` and, with ``config.vocab_size``, the head of
    :meth:`add_head` on bilm-tf's initial weights (:func:`bilm_tf_initialization`) drawn from ``seed``. A
    :class:`~elmo.model.hub.HubMixin` folder of ``elmo_kind`` ``bilm`` (ours), ``published_bilm`` or ``published_lm``.

    Shapes: ``ids (B, T)`` int64 right-padded word ids (0 = ``<pad>``, no boundary tokens; a character biLM reads
    only ``chars``), ``lengths (B,)`` int64 in ``[1, T]``, ``chars (B, T, C)`` int64 character ids in the biLM's
    numbering (:attr:`BiLMConfig.char_scheme`, bilm-tf's *without* the sentence boundaries); layers
    ``(L + 1, B, T, D)`` float32 with ``D = output_dim``, zero at padded positions.

    Attributes:
        chunk_size: the most positions computed at a time, LSTM states carried across (docs/published_elmo.md, "Long
            documents"); :data:`CHUNK_SIZE` by default, ``None`` = one pass; not part of the model file.
        source: where it was read from as a classifier file records it: bilm-tf's options and weight files, a
            ``published_lm.pt`` or a folder (bilm-tf's architecture); ``None``: found through its models folder.
    """

    hub_kind = "bilm"
    chunk_size: int | None = CHUNK_SIZE
    #: the batch entries a training step's plan is made from, as they were on the host (``Objective.host_keys``)
    host_keys = ("ids", "lengths", "chars")

    def __init__(self, config: BiLMConfig, seed: int = 0):
        super().__init__()
        shared = config.shared_token_layer
        self.config = replace(config, vocab_size=0) if shared else config  # the head, if any, is added below
        self.source: tuple[str, ...] | None = None
        if shared:
            self.hub_kind = "published_bilm"
            self.token_encoder = CharEncoder(config.output_size, config.char_dim, config.char_filters,
                                             config.num_highway, config.max_chars, numbering="bilm_tf",
                                             activation=config.activation)
        self.forward_lm = LanguageModel(self.config, "forward")
        self.backward_lm = LanguageModel(self.config, "backward")
        if shared:
            boundaries = torch.from_numpy(bilm_tf_char_table([TF_BOS, TF_EOS], config.max_chars)).long()
            self.register_buffer("boundary_chars", boundaries, persistent=False)
            self.host_boundary_chars = boundaries  # stays on the host (a training step's plan: plan.host_plan)
            if config.vocab_size:
                bilm_tf_initialization(self, torch.Generator().manual_seed(seed))
                self.add_head(seed, **{k: getattr(config, k) for k in HEAD_FIELDS})

    @property
    def shared_token_layer(self) -> bool:
        """Whether both directions read one token layer (trained together), else one per direction (trained apart)."""
        return self.config.shared_token_layer

    #: whether it reads text as written (bilm-tf's architecture), else lower-cased with the task's vocabulary
    cased = shared_token_layer

    # ------------------------------------------------------------------ the training head of bilm-tf's architecture

    def add_head(self, seed: int = 0, **head: Any) -> "BiLM":
        """Give this biLM of bilm-tf's architecture (its weights kept) a training head, saved as ``elmo_kind``
        ``published_lm``: ``head``, values of :data:`HEAD_FIELDS` (``vocab_size`` required; the others default to
        :meth:`BiLMConfig.bilm_tf`'s), a ``softmax`` shared by both directions, initialised from ``seed`` alone, and
        ``dropout``. Returns the biLM. Raises ElmoError: a field out of range, or not of the head, named; our
        architecture (a softmax per direction)."""
        if not self.shared_token_layer:
            raise ElmoError("add_head: our biLM keeps a softmax per direction (forward_lm.softmax, backward_lm.softmax)")
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

    def without_head(self) -> "BiLM":
        """This biLM without the training head of :meth:`add_head`, its weights kept
        (:func:`~elmo.model.serialization.open_bilm`'s: the ELMo layers read none). Returns it."""
        if self.shared_token_layer:
            for name in ("softmax", "dropout"):
                self.__dict__.pop(name, None)
                self._modules.pop(name, None)
            self.config, self.hub_kind = replace(self.config, vocab_size=0), "published_bilm"
        return self

    # ------------------------------------------------------------------ files (HubMixin)

    def hub_config(self) -> dict:
        """``{"config": BiLMConfig.architecture}`` (bilm-tf's architecture: its ``weights_digest`` left out, computed
        when loaded; with a training head also ``"softmax"``: :attr:`BiLMConfig.head`)."""
        head = {"softmax": self.config.head} if self.shared_token_layer and self.config.vocab_size else {}
        return {"config": self.config.architecture, **head}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: Vocabulary | None) -> "BiLM":
        """Inverse of :meth:`hub_config`. Raises ElmoError: our biLM without its vocabulary, or with one of another
        size; a training head likewise (bilm-tf's architecture needs none otherwise)."""
        shared = config.get("elmo_kind", cls.hub_kind) != cls.hub_kind
        bilm = cls(BiLMConfig.bilm_tf(**config["config"], **config.get("softmax", {})) if shared
                   else BiLMConfig(**config["config"]))
        size = bilm.config.vocab_size
        if (size or not shared) and (vocab is None or len(vocab) != size):
            raise ElmoError(f"{'softmax' if shared else 'config'}.vocab_size is {size} but vocab.txt holds "
                            f"{'no vocabulary' if vocab is None else f'{len(vocab)} words'}")
        if not shared:
            bilm.vocab = vocab
        return bilm

    @staticmethod
    def renamed_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """:meth:`~elmo.model.hub.HubMixin.renamed_state` (also of a ``published_lm.pt``); a ``published_lm`` file of
        an earlier version also kept the biLM under ``bilm.``."""
        return HubMixin.renamed_state({k.removeprefix("bilm."): v for k, v in state.items()})

    def loaded(self, folder: Path) -> None:
        """After ``from_pretrained``: bilm-tf's architecture gets its weights' digest and ``source`` (the folder)."""
        if self.shared_token_layer:
            self.config = replace(self.config, weights_digest=weights_digest(self))
            self.source = (str(folder.resolve()),)

    def describe(self) -> str:
        """The model card's paragraph (and the training softmax it was saved with)."""
        c = self.config
        weights = sum(p.numel() for k, p in self.named_parameters() if not k.startswith("softmax."))  # ours: all
        layers = f"Each token gets {self.num_layers} layers of {self.output_dim} numbers; {weights:,} parameters."
        if not c.shared_token_layer:
            return (f"A biLM (ELMo, Peters et al. 2018) trained with the elmo toolkit: two {c.num_layers}-layer LSTM "
                    f"language models, forward and backward, {c.hidden_size} cells per direction, {c.token_encoder} "
                    f"input, a vocabulary of {c.vocab_size:,} words. {layers}")
        clip = "no clipping" if not c.clipped else f"cell clip {c.cell_clip}, projection clip {c.proj_clip}"
        head = f" Saved with the {c.softmax} softmax it was trained with, shared by both directions, over a " \
               f"vocabulary of {c.vocab_size:,} words." if c.vocab_size else ""
        return (f"The published ELMo architecture (bilm-tf; Peters et al. 2018): a character CNN ({c.n_filters} filters, "
                f"{c.num_highway} highway layers), {c.num_layers} LSTM layers per direction of {c.hidden_size} cells "
                f"projected to {c.output_size} ({clip}), residual connections {'on' if c.residual else 'off'}. "
                f"{layers}{head}")

    def bilm_tf_blockers(self) -> list[str]:
        """Why bilm-tf's files (``options.json`` + ``weights.hdf5``) cannot hold this biLM, ours (its token layers; the
        LSTMs would map exactly: docs/published_elmo.md, "Exporting"); empty for bilm-tf's architecture."""
        if self.shared_token_layer:
            return []
        pairs = zip(self.forward_lm.embedding.parameters(), self.backward_lm.embedding.parameters())
        apart = max((float((a.detach() - b.detach()).abs().max()) for a, b in pairs if a.numel()), default=0.0)
        kind = "word embedding" if self.config.token_encoder == "word" else "character CNN"
        reasons = []
        if apart > 0:
            reasons.append(f"bilm-tf's format has one token layer that both directions read (layer 0 is [x; x]), but "
                           f"our forward and backward LMs each trained their own {kind} (they differ by up to {apart:.3g})")
        if self.config.token_encoder == "word":
            reasons.append("bilm-tf's word-input variant (options without char_cnn, the token embeddings in a second hdf5 "
                           "file) is read by bilm-tf alone: AllenNLP's _ElmoBiLm (and this toolkit's loader) always "
                           "builds the character CNN from char_cnn")
        else:
            width = "" if self.config.max_chars == TF_MAX_CHARS else \
                f", {self.config.max_chars} characters per token instead of {TF_MAX_CHARS}"
            reasons.append(f"our character CNN is not bilm-tf's (our character numbering{width}, a layer normalisation "
                           "after the projection)")
        return reasons

    # ------------------------------------------------------------------ the ELMo layers

    @property
    def num_layers(self) -> int:
        """Number of ELMo layers, L + 1 (token layer included)."""
        return self.config.num_layers + 1

    @property
    def output_dim(self) -> int:
        """Width D of every ELMo layer: 2 × each direction's LSTM output width (``config.output_size``)."""
        return 2 * self.config.output_size

    @property
    def words_per_pass(self) -> int:
        """The most distinct words through a character CNN at a time: ``min(chunk_size, WORDS_PER_PASS)`` on a CPU,
        :data:`~elmo.model.char_cnn.WORDS_PER_PASS_GPU` on a GPU, where launches, not memory, bound the pass."""
        return words_per_pass(next(self.parameters()).device.type, self.chunk_size)

    def forward(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """ELMo layers of every token, stateless (zero initial LSTM states): ``(L + 1, B, T, D)``, layer 0 =
        :meth:`token_layer`, layer j = both directions' LSTM layer j. Raises ElmoError: ``chars`` missing for a
        character biLM; ``chunk_size`` < 1."""
        return self.contextual(self.token_vectors(self.tokens(ids, chars)), lengths)[0]

    def lstm_layers(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """Layers 1..L of :meth:`forward`, ``(L, B, T, D)`` (what :mod:`elmo.inference.layer_cache` stores)."""
        return self.contextual(self.token_vectors(self.tokens(ids, chars)), lengths, token_layer=False)[0]

    def token_layer(self, ids: torch.Tensor | None, lengths: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """Layer 0 of :meth:`forward` without running the LSTMs: ``(B, T, D)``, zero at padding: ``[x^fwd; x^bwd]``,
        or ``[x; x]`` for one token layer read by both directions. Raises ElmoError: ``chars`` missing for a
        character biLM."""
        x = self.token_vectors(self.tokens(ids, chars))
        x = torch.cat([x, x], dim=-1) if self.shared_token_layer else x
        return x * length_mask(lengths.to(x.device), x.shape[1]).unsqueeze(-1).to(x.dtype)

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """The parameters from the top down, for discriminative learning rates and gradual unfreezing: ``[LSTM layer
        L of both directions, .., LSTM layer 1, the token layer]`` (a training softmax is not part of ELMo)."""
        groups = [[*f.parameters(), *b.parameters()] for f, b in zip(*self.stacks())]
        return [*reversed(groups), self.token_parameters()]

    def direction(self, name: str) -> "LanguageModel | PublishedLM":
        """One direction (``"forward"`` or ``"backward"``) as a language model of its own: our
        :class:`LanguageModel`, or a :class:`PublishedLM` over the shared token layer and softmax."""
        if self.shared_token_layer:
            return PublishedLM(self, (DIRECTIONS.index(name),))
        return (self.forward_lm, self.backward_lm)[DIRECTIONS.index(name)]

    def stacks(self) -> tuple[nn.ModuleList, nn.ModuleList]:
        """The forward and the backward LSTM layers."""
        return self.forward_lm.layers, self.backward_lm.layers

    def token_parameters(self) -> list[nn.Parameter]:
        """The token layer's parameters: the one token encoder's, or both directions' encoders'."""
        if self.shared_token_layer:
            return list(self.token_encoder.parameters())
        return [p for lm in (self.forward_lm, self.backward_lm) for p in lm.embedding.parameters()]

    def tokens(self, ids: torch.Tensor | None, chars: torch.Tensor | None) -> torch.Tensor:
        """What the token layers read: ``chars`` for a character biLM, else ``ids``. Raises ElmoError: ``chars``
        missing for a character biLM."""
        if self.config.token_encoder == "word":
            return ids
        if chars is None:
            raise ElmoError(f"this biLM reads characters: pass chars (B, T, C) in its numbering "
                            f"({self.config.char_scheme}: elmo.data.chars.batch_char_ids)")
        return chars

    def token_vectors(self, tokens: torch.Tensor, plan: WordPlan | None = None) -> torch.Tensor:
        """Context-free token vectors of ``tokens``: word ids ``(...)`` for a word biLM, character ids ``(..., C)`` for
        a character one (:attr:`words_per_pass` distinct words at a time; ``plan``: as
        :meth:`~elmo.model.char_cnn.CharEncoder.forward`): ``[x^fwd; x^bwd]`` ``(..., 2E)``, or the one token layer's
        ``x`` ``(..., E)`` float32 (layer 0 is then ``[x; x]``)."""
        if self.shared_token_layer:
            flat = tokens.reshape(-1, tokens.shape[-1])
            return self.token_encoder(flat, self.words_per_pass, plan).reshape(*tokens.shape[:-1], -1)
        per_pass = (self.words_per_pass,) if self.config.token_encoder == "char" else ()
        return torch.cat([lm.embedding(tokens, *per_pass) for lm in (self.forward_lm, self.backward_lm)], dim=-1)

    def word_vectors(self, words: Sequence[str]) -> torch.Tensor:
        """:meth:`token_vectors` ``(len(words), ...)`` of distinct ``words`` on the biLM's device (``vocab_to_cache``
        of :class:`~elmo.model.elmo.Elmo` and of the embedder): bilm-tf's architecture spells them as written (the
        CNN once per word, planned on the host so nothing is read back); ours lower-cases them as in training: their
        embedding rows (``<unk>``'s outside :attr:`vocab`) or their spellings. Raises ElmoError: a word biLM without
        its vocabulary."""
        device = next(self.parameters()).device
        if self.shared_token_layer:
            table = bilm_tf_char_table(words, self.config.max_chars).astype(np.int64)
            plan = word_plan(table, self.words_per_pass, self.token_encoder.max_width).to(device)
            return self.token_vectors(torch.from_numpy(table).to(device), plan)
        words = [w.lower() for w in words]
        if self.config.token_encoder == "char":
            tokens = torch.from_numpy(char_table(words, self.config.max_chars).astype("int64"))
            return self.token_vectors(tokens.to(device).unsqueeze(0))[0]
        if self.vocab is None:
            raise ElmoError("this word biLM has no vocabulary: open it with open_bilm or load_bilm, which return it")
        return self.token_vectors(torch.tensor(self.vocab.encode(words), dtype=torch.long, device=device))

    def contextual(self, x: torch.Tensor, lengths: torch.Tensor, states: States | None = None, carry: bool = False,
                   boundaries: bool = False, token_layer: bool = True) -> tuple[torch.Tensor, States | None]:
        """ELMo layers from token vectors (:meth:`token_vectors`), the embedder's and ``Elmo``'s one path: each
        direction reads ``<bos> x_1 .. x_n <eos>`` (:func:`with_boundaries`; the backward one reversed) through its
        LSTM layers (:meth:`read_direction`), and the boundaries are removed from the output unless ``boundaries``:
        ``(layers (L + 1, B, T, D) float32, final states or None)``, zero at padded positions (``L`` layers without
        ``token_layer``). With ``lengths`` on the host (a CPU tensor, whatever the device) nothing is read back from the
        device. Raises ElmoError: :attr:`chunk_size` < 1.

        Args:
            x: ``(B, T, E')`` right-padded (``E'``: :meth:`token_vectors`' width); lengths: ``(B,)`` int64 (0 allowed:
                the row reads the boundaries only); states: initial :data:`States`, ``None`` = zeros; carry: read every
                sentence to its end (``<eos>`` forward, ``<bos>`` backward; otherwise that last step is skipped) and
                return the final states (stateful use: ``lengths`` on the host); boundaries: keep the boundary
                positions, as AllenNLP's ``_ElmoBiLm`` does (every sentence read to its end): ``(L + 1, B, T + 2, D)``,
                row b's ``<bos>`` at 0, its tokens at ``1..n``, its ``<eos>`` at ``n + 1``; token_layer: ``False``
                leaves layer 0 out.
        """
        batch, longest, width = x.shape[0], x.shape[1], self.output_dim // 2
        to_end, shared, on_host = carry or boundaries, self.shared_token_layer, lengths.device.type == "cpu"
        plan = device_reading_plan(lengths + (2 if to_end else 1), x.device) if shared else None  # both stacks' plan
        host = lengths + 2 if on_host else None  # sentence lengths, kept on the host
        lengths = lengths.to(x.device)
        sentence = lengths + 2
        # bilm-tf's <S>, </S> through the one token layer, made once for both directions (spellings planned on the host)
        if shared and on_host:  # that plan, cached per device and pass size
            plans, key = self.__dict__.setdefault("_boundary_plans", {}), (x.device, self.words_per_pass)
            if key not in plans:
                plans[key] = word_plan(self.host_boundary_chars.numpy(), key[1], self.token_encoder.max_width).to(x.device)
        one = [self._with_boundaries(x, lengths, plans[key] if on_host else None)[0]] if shared else []
        first, span = (0, longest + 2) if boundaries else (1, longest)
        skip = 0 if token_layer else 1
        depth, finals = self.config.num_layers, []
        layers = x.new_empty(depth + 1 - skip, batch, span, 2 * width, dtype=torch.float32)
        for d, lm in enumerate((self.forward_lm, self.backward_lm)):
            half = slice(d * width, (d + 1) * width)
            full = (one[0] if d == 0 else one.pop()) if shared else \
                with_boundaries(x[..., half], lengths, lm.boundary_vectors())[0]
            if token_layer:
                layers[0, ..., half] = full[:, first:first + span]
            inputs = full if d == 0 else reverse_padded(full, sentence)
            del full
            initial = None if states is None else states[d * depth:(d + 1) * depth]
            hs, ends = self.read_direction(d, inputs, sentence if host is None else host, plan, initial,
                                           longest + 1 + to_end, carry)
            del inputs
            for j, h in enumerate(hs, start=1 - skip):  # each layer written into its half and dropped
                if to_end:
                    h = (h if d == 0 else reverse_padded(h, sentence))[:, first:first + span]
                else:  # reading position k of the backward stack is token n - k
                    h = h[:, 1:1 + longest] if d == 0 else reverse_padded(h[:, 1:1 + longest], lengths)
                layers[j, ..., half] = h
            finals += ends
        kept = length_mask(sentence, span) if boundaries else length_mask(lengths, longest)
        return layers.mul_(kept.unsqueeze(-1).float()), finals if carry else None

    def read_direction(self, d: int, inputs: torch.Tensor, sentence: torch.Tensor, plan: tuple | None,
                       initial: States | None, steps: int, carry: bool) -> tuple[Iterable[torch.Tensor], States]:
        """Direction ``d``'s ``[h_1 .. h_L]``, each ``(B, >= steps, E)``, over ``inputs (B, T + 2, E)`` in reading order,
        and, with ``carry`` (each row read to its ``sentence`` length), the final states: ours through
        :meth:`LanguageModel.read` / :meth:`LanguageModel.read_to_ends`; bilm-tf's stack run as ``plan``
        (:func:`~elmo.model.plan.device_reading_plan`), each layer restored to the batch's row order one at a time (no
        second copy of them all)."""
        lm = (self.forward_lm, self.backward_lm)[d]
        if not self.shared_token_layer:
            if carry:
                outputs, ends = lm.read_to_ends(inputs, sentence.cpu(), initial)
                return outputs[1:], ends
            return lm.read(lambda a, b: inputs[:, a:b], inputs.shape[0], steps, self.chunk_size, initial)[1:], []
        order, restore, active = plan
        initial = None if initial is None else [(h[order], c[order]) for h, c in initial]
        hs, ends = projected_stack(lm.layers, inputs[order].transpose(0, 1), active, initial, self.config.residual,
                                   self.chunk_size)
        return (hs.pop(0).transpose(0, 1)[restore] for _ in range(len(hs))), [(h[restore], c[restore]) for h, c in ends]

    # ------------------------------------------------------------------ training bilm-tf's architecture

    def reading_states(self, chars: torch.Tensor, lengths: torch.Tensor, directions: Sequence[int] = (0, 1),
                       dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
                       plan: HostPlan | None = None) -> list[torch.Tensor]:
        """bilm-tf's architecture: the top LSTM layer ``(B, T + 1, P)`` float32 of each of ``directions`` (0 forward, 1
        backward) in its own reading order, zero past ``n``, what the shared softmax reads (:meth:`loss`, held-out
        perplexity), differentiable down to the character CNN: position k predicts :meth:`LanguageModel.targets`' word k (the
        forward state after ``<S> t_1 .. t_k``, the backward one after ``</S> t_n .. t_{n-k+1}``). ``chars``,
        ``lengths``: as :class:`BiLM`; ``dropout``: bilm-tf's ``DropoutWrapper(input_keep_prob)`` in training
        (:func:`~elmo.model.lstm.projected_stack`), ``None`` = none; ``plan``: the batch's
        :class:`~elmo.model.plan.HostPlan` on the device, the same states with nothing read back. Raises ElmoError:
        ``chars`` missing."""
        x = self.token_vectors(self.tokens(None, chars), None if plan is None else plan.words)
        lengths = lengths.to(x.device)
        full, sentence = self._with_boundaries(x, lengths, None if plan is None else plan.boundaries)
        order, restore, active = device_reading_plan(sentence - 1) if plan is None else \
            (plan.order, plan.restore, plan.active)
        states = []
        for d in directions:
            inputs = full if d == 0 else reverse_padded(full, sentence)
            top = projected_stack(self.stacks()[d], inputs[order].transpose(0, 1),
                                  active, None, self.config.residual, self.chunk_size, dropout)[0][-1]
            states.append(top.transpose(0, 1)[restore][:, :x.shape[1] + 1])
        return states

    def predicted_tops(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None,
                       directions: Sequence[int], plan: HostPlan | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(top (n, P), targets (n,))`` of each direction's predicted positions (with ``plan``:
        :attr:`~elmo.model.plan.HostPlan.kept`), dropout applied in training. Raises ElmoError: no training head."""
        if not (self.shared_token_layer and self.config.vocab_size):
            raise ElmoError("this biLM has no shared training softmax (BiLMConfig.vocab_size is 0, or each direction "
                            "has its own: direction(name)); add_head gives bilm-tf's architecture one")
        lengths = lengths.to(ids.device)
        states = self.reading_states(chars, lengths, directions, self.dropout if self.training else None, plan)
        out = []
        for d, top in zip(directions, states):
            targets = (self.forward_lm, self.backward_lm)[d].targets(ids, lengths).reshape(-1)
            kept = (targets != IGNORE_INDEX).nonzero()[:, 0] if plan is None else plan.kept
            out.append((self.dropout(top.reshape(-1, top.shape[-1]).index_select(0, kept)), targets.index_select(0, kept)))
        return out

    def host_plan(self, host: dict[str, torch.Tensor]) -> HostPlan:
        """bilm-tf's architecture: the :class:`~elmo.model.plan.HostPlan` of a batch (every field) from its CPU copies of
        :attr:`host_keys`, on the host (:func:`~elmo.model.plan.step_loss` moves it to the batch's device); cluster
        counts for the adaptive softmax only. Raises ElmoError: a copy not on the CPU (missing:
        :func:`~elmo.model.plan.plan_batch`); a target outside the vocabulary."""
        ids, lengths, chars = (host[k] for k in self.host_keys)
        if any(t.device.type != "cpu" for t in (ids, lengths, chars)):
            raise ElmoError("host_plan takes the batch's CPU tensors (the trainer's host copies)")
        counts = {d: cluster_counts(ids, lengths, last, tuple(self.softmax.cutoffs)) for d, last in
                  ((0, EOS_ID), (1, BOS_ID))} if isinstance(self.softmax, AdaptiveSoftmax) else None
        per_pass, width = self.words_per_pass, self.token_encoder.max_width
        return HostPlan(int((lengths.numpy() + 1).sum()), counts, *device_reading_plan(lengths + 1),
                        predicted_positions(lengths, ids.shape[1]),
                        word_plan(chars.reshape(-1, chars.shape[-1]).numpy(), per_pass, width),
                        word_plan(self.host_boundary_chars.numpy(), per_pass, width))

    def loss(self, ids: torch.Tensor, lengths: torch.Tensor, chars: torch.Tensor | None = None,
             directions: Sequence[int] = (0, 1), plan: HostPlan | None = None) -> tuple[torch.Tensor, int]:
        """Training loss ``(loss, n)`` of bilm-tf's architecture with its head (:meth:`add_head`): the mean over
        ``directions`` of each direction's mean negative log-likelihood, nats per predicted word (in eval mode exact:
        ``exp(loss)`` is the batch's perplexity; in training the sampled softmax's estimate), and
        ``n = sum(lengths + 1)``, the words each direction predicts; ``ids`` (:class:`~elmo.data.vocab.Vocabulary`'s)
        are the targets. With ``plan`` (the batch's :meth:`host_plan`) nothing is read back from the device, loss and
        gradients the same bit for bit. Source: Peters et al. (2018) §3.1 and bilm-tf's ``bilm/training.py``:
        ``0.5 * (loss_fwd + loss_bwd)``, each sentence read from zero LSTM states (unlike bilm-tf). Raises ElmoError:
        ``chars`` missing; no head."""
        tops = self.predicted_tops(ids, lengths, chars, directions, plan)  # before self.softmax: it raises without a head
        losses = [self.softmax(top, targets) if isinstance(self.softmax, SampledSoftmax) else
                  self.softmax.loss(top, targets, None if plan is None else plan.cluster_counts[d])[0]
                  for d, (top, targets) in zip(directions, tops)]
        return torch.stack(losses).mean(), int((lengths + 1).sum()) if plan is None else plan.units

    def _with_boundaries(self, x: torch.Tensor, lengths: torch.Tensor,
                         plan: WordPlan | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`with_boundaries` with the ``<S>``, ``</S>`` spellings through the one token layer."""
        return with_boundaries(x, lengths, self.token_vectors(self.boundary_chars.to(x.device), plan))


for _kind in ("published_bilm", "published_lm"):  # bilm-tf's architecture, without and with its training head
    HubMixin.kinds[_kind] = BiLM


def weights_digest(bilm: nn.Module) -> str:
    """A short hash of a biLM's weights (names as earlier versions gave them, ``forward_layers.j``; shapes and the first
    4,096 values of each; a training ``softmax`` left out), which identifies one of bilm-tf's architecture in
    :attr:`BiLMConfig.weights_digest` so that a classifier only loads onto it."""
    digest = hashlib.sha256()
    for name, tensor in bilm.state_dict().items():
        if name.startswith("softmax."):  # a training head is not part of the biLM
            continue
        name = earlier_key(name)
        values = tensor.detach().float().reshape(-1)[:4096].cpu().numpy()
        digest.update(f"{name}{tuple(tensor.shape)}".encode() + values.tobytes())
    return digest.hexdigest()[:16]


def bilm_tf_initialization(bilm: BiLM, generator: torch.Generator) -> BiLM:
    """``bilm`` (bilm-tf's architecture) with bilm-tf's initial weights (``bilm/training.py``), drawn in place from
    ``generator``: character embeddings U(-1, 1) (row 0, a masked token's, zero); convolutions U(-0.05, 0.05) for relu
    (Kim et al. 2015), N(0, 1/(width·char_dim)) for tanh, biases 0; highway ``W_carry``, ``W_transform`` and the
    projection N(0, 1/F), ``b_carry`` -2 (carry gate mostly closed), other biases 0; the LSTMs
    :meth:`~elmo.model.lstm.ProjectedLSTM.initialize`'s."""
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
