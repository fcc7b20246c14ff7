"""The ELMo layer for downstream models: a pre-trained biLM + one or more layer mixes (paper §3.2-3.3).

:class:`Elmo` is the piece a task model embeds: a drop-in for AllenNLP 2.10.1's ``allennlp.modules.elmo.Elmo`` (the
same constructor and call, the same vectors on the same weights, to 1e-5; tests/unit/model/test_elmo_allennlp.py) that
also takes the project's biLMs, call ``elmo(ids, lengths, chars)`` and layer mixes (:mod:`elmo.model.mix`); examples
in docs/published_elmo.md and docs/library.md.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from ..data.vocab import PAD_ID, Vocabulary
from ..errors import ElmoError
from .bilm import BiLM
from .dropout import FastDropout
from .hub import HubMixin, from_nested_config, nested_config
from .language_model import length_mask
from .lstm import cached, compute_dtype
from .mix import LAYER_MIXES, LEARNED_FUNCTIONS, ScalarMix, build_mix, normalize_layers, normalize_layers_over_batch
from .serialization import open_bilm

#: the constructor's arguments in ``config.json`` but the biLM; the last three only when set (:meth:`Elmo.hub_config`)
ELMO_ARGS = ("num_output_representations", "mix", "dropout", "do_layer_norm", "requires_grad", "seed", "learned_function",
             "keep_sentence_boundaries", "scalar_mix_parameters", "vocab_to_cache")


class Elmo(nn.Module, HubMixin):
    """ELMo_k = mix(h_{k,0}, .., h_{k,L}) for every token k, with dropout (paper eq. 1). ``save_pretrained`` /
    ``from_pretrained`` (:class:`~elmo.model.hub.HubMixin`) write and read it, its biLM included, as a folder.

    Args:
        options_file, weight_file: the biLM: a :class:`~elmo.model.bilm.BiLM` object (``weight_file`` ``None``);
            bilm-tf's ``options.json`` and ``weights.hdf5`` (:func:`~elmo.model.published_io.load_published_bilm`); or
            alone a models folder, ``bilstm.pt``, ``published_lm.pt``, a ``save_pretrained`` folder or Hub id
            (:func:`~elmo.model.serialization.open_bilm`; a saved ``Elmo`` folder gives its biLM alone,
            :meth:`from_pretrained` loads the whole layer).
        num_output_representations: how many ELMo vectors per token, each with its own mix (>= 1).
        requires_grad: fine-tune the biLM, else freeze it (no autograd); it always runs in eval mode (no LM dropout).
        do_layer_norm: normalise each biLM layer before mixing (§3.2): with AllenNLP's call over the batch's positions,
            ``<S>`` / ``</S>`` included, as its ``ScalarMix`` (:func:`~elmo.model.mix.normalize_layers_over_batch`);
            with the project's call per token, independent of the batch (:func:`~elmo.model.mix.normalize_layers`).
        dropout: dropout probability on each ELMo vector, in [0, 1) (training mode only).
        vocab_to_cache: a character biLM only: words whose character-CNN token vectors are cached for AllenNLP's
            ``word_inputs`` (0 is padding, as AllenNLP's ``@@PADDING@@``); not used while fine-tuning.
        keep_sentence_boundaries: AllenNLP's call only: keep ``<S>``, ``</S>`` (our ``<bos>``, ``<eos>``) in the output.
        scalar_mix_parameters: fixed un-normalised layer weights (L + 1 floats; ``[-9e10, 1, -9e10]``: layer 1 alone),
            replacing a scalar mix's; never trained, γ = 1 (AllenNLP's).
        mix: (keyword) the layer mix, one of :data:`~elmo.model.mix.LAYER_MIXES`; ``trainable_lambda`` is AllenNLP's.
        seed: (keyword) draws the fixed weights of ``frozen_lambda`` (output i uses ``seed + i``).
        learned_function: (keyword) the network of ``mix="learned_function"``: ``"gate"`` (token-wise scalar mix,
            :class:`~elmo.model.mix.GatedLayerMix`) or ``"mlp"`` (:class:`~elmo.model.mix.LearnedLayerFunction`).

    Raises ElmoError (one line) naming an argument that is invalid (``weight_file`` misplaced or missing included) or
    conflicts with another, or a bad path.
    Unlike AllenNLP's ``Elmo``, the biLM is stateless (each batch starts from zero LSTM states; AllenNLP's carry over,
    so only its first batch after construction or ``reset_states()`` agrees) and there is no ``module`` argument.
    """

    hub_kind = "elmo"

    def __init__(self, options_file: str | os.PathLike | BiLM, weight_file: str | os.PathLike | None = None,
                 num_output_representations: int = 1, requires_grad: bool = False, do_layer_norm: bool = False,
                 dropout: float = 0.5, vocab_to_cache: Sequence[str] | None = None, keep_sentence_boundaries: bool = False,
                 scalar_mix_parameters: Sequence[float] | None = None, *, mix: str = "trainable_lambda", seed: int = 0,
                 learned_function: str = "gate"):
        super().__init__()
        if mix not in LAYER_MIXES:
            raise ElmoError(f"unknown layer mix {mix!r}; choose from {', '.join(LAYER_MIXES)}")
        if learned_function not in LEARNED_FUNCTIONS:
            raise ElmoError(f"unknown learned function {learned_function!r}; choose from {', '.join(LEARNED_FUNCTIONS)}")
        if num_output_representations < 1:
            raise ElmoError(f"num_output_representations must be >= 1, got {num_output_representations}")
        if not 0.0 <= dropout < 1.0:
            raise ElmoError(f"ELMo dropout must be in [0, 1), got {dropout}")
        if isinstance(vocab_to_cache, str) or not all(isinstance(w, str) for w in vocab_to_cache or ()):
            raise ElmoError(f"vocab_to_cache must be a list of str words, got {str(vocab_to_cache)[:60]!r}")
        if scalar_mix_parameters is not None and mix == "learned_function":
            raise ElmoError("scalar_mix_parameters fix a scalar mix's weights: use them with mix='trainable_lambda' or "
                            "'frozen_lambda', not 'learned_function'")
        if isinstance(options_file, nn.Module):
            if weight_file is not None:
                raise ElmoError(f"Elmo got a biLM object and weight_file={weight_file!r}: the weights are the biLM's, "
                                "leave weight_file out (AllenNLP's order: options_file, weight_file, "
                                "num_output_representations; pass num_output_representations=... by name)")
            bilm = options_file
        elif not isinstance(options_file, (str, os.PathLike)):
            raise ElmoError(f"Elmo's first argument must be bilm-tf's options file, a models folder or a biLM (BiLM), "
                            f"got {type(options_file).__name__}")
        elif weight_file is None:
            if Path(options_file).suffix == ".json" and not Path(options_file).is_dir():
                raise ElmoError(f"{Path(options_file)}: bilm-tf's options file needs its weight_file (the weights.hdf5) too")
            opened = open_bilm(Path(options_file))
            bilm = opened.bilm
            if bilm.vocab is None:
                bilm.vocab = opened.vocab  # save_pretrained then writes it (vocab.txt)
        elif not isinstance(weight_file, (str, os.PathLike)):
            raise ElmoError(f"weight_file must be the path of bilm-tf's weights.hdf5, got {type(weight_file).__name__} "
                            f"{weight_file!r}")
        elif Path(options_file).is_dir():
            raise ElmoError(f"{Path(options_file)} is a folder: give it alone (weight_file=None), or bilm-tf's options "
                            f"file with weight_file {weight_file}")
        else:
            bilm = open_bilm(Path(options_file), weight_file).bilm
        fixed, n = None, bilm.num_layers
        if scalar_mix_parameters is not None:  # one float per layer; a wrong count names both (as AllenNLP)
            try:
                fixed = [float(w) for w in scalar_mix_parameters]
            except (TypeError, ValueError):
                raise ElmoError(f"scalar_mix_parameters must be {n} numbers, "
                                f"got {str(scalar_mix_parameters)[:60]!r}") from None
            if len(fixed) != n:
                raise ElmoError(f"scalar_mix_parameters has {len(fixed)} values, but the biLM has {n} layers to mix "
                                f"(token layer + LSTM layers): give {n}")
        if bilm.config.chars_per_token is None and (keep_sentence_boundaries or vocab_to_cache):
            raise ElmoError("keep_sentence_boundaries and vocab_to_cache go with AllenNLP's call elmo(character_ids), "
                            "which needs a character biLM: this one reads word ids")
        self.bilm = bilm
        self.requires_grad = requires_grad
        self.do_layer_norm = do_layer_norm
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.scalar_mix_parameters = fixed
        self.vocab_to_cache = list(vocab_to_cache) if vocab_to_cache else None
        self._word_cache: dict = {}
        for p in self.bilm.parameters():
            p.requires_grad_(requires_grad)
        # layer_norm=False: the layers are normalised once in forward (per token or over the batch), then mixed
        self.mixes = nn.ModuleList(
            build_mix(mix, bilm.num_layers, bilm.output_dim, seed=seed + i, layer_norm=False,
                      learned_function=learned_function) if fixed is None
            else ScalarMix(bilm.num_layers, trainable=False, weights=torch.tensor(fixed))
            for i in range(num_output_representations))
        self.dropout = FastDropout(dropout) if dropout else nn.Identity()  # p = 0 draws no random numbers

    @property
    def output_dim(self) -> int:
        """Width D of each ELMo vector: 2 × the biLM's LSTM output width (1024 for the Original published model)."""
        return self.bilm.output_dim

    def get_output_dim(self) -> int:
        """Width D of each ELMo vector (AllenNLP's name for :attr:`output_dim`)."""
        return self.output_dim

    def hub_config(self) -> dict:
        """The constructor's arguments (:data:`ELMO_ARGS`) and ``bilm``, its :func:`~elmo.model.hub.nested_config`."""
        optional = {"keep_sentence_boundaries": self.keep_sentence_boundaries,
                    "scalar_mix_parameters": self.scalar_mix_parameters, "vocab_to_cache": self.vocab_to_cache}
        return {**{k: v for k, v in self._hub_mixin_config.items() if k in ELMO_ARGS and k not in optional},
                **{k: v for k, v in optional.items() if v}, "bilm": nested_config(self.bilm)}

    @classmethod
    def from_hub_config(cls, config: dict, vocab: Vocabulary | None) -> "Elmo":
        """Inverse of :meth:`hub_config`."""
        return cls(from_nested_config(config["bilm"], vocab), **{k: v for k, v in config.items() if k in ELMO_ARGS})

    def describe(self) -> str:
        """The model card's paragraph."""
        return (f"An ELMo layer (Peters et al. 2018, eq. 1): {len(self.mixes)} weighted mix(es) of the layers of the biLM "
                f"below, each token's vector {self.output_dim} wide.\n\n{self.bilm.describe()}")

    def usage(self, repo_id: str) -> str:
        """The model card's code."""
        return (f"from elmo import Elmo\nelmo = Elmo.from_pretrained({repo_id!r})\n"
                "vectors = elmo(ids, lengths, chars)[\"elmo_representations\"][0]  # (B, T, D)")

    def train(self, mode: bool = True) -> "Elmo":
        """Train the mixes (and dropout); the biLM stays in eval mode."""
        super().train(mode)
        self.bilm.eval()
        return self

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None, chars: torch.Tensor | None = None,
                layers: torch.Tensor | None = None, *,
                lengths: torch.Tensor | None = None) -> dict[str, list[torch.Tensor] | torch.Tensor]:
        """ELMo vectors of a right-padded batch, in one of two calls told apart by ``inputs``' shape.

        **AllenNLP's call**, ``elmo(character_ids)`` or ``elmo(character_ids, word_inputs)`` (a character biLM):
        ``inputs``, ``(B, T, C)`` int64 character ids (or ``(..., T, C)``, as AllenNLP), 0 = padding, no ``<S>`` /
        ``</S>`` (the biLM adds them): :func:`elmo.data.chars.batch_to_ids` (bilm-tf's numbering + 1, ``C = 50``) for a
        published biLM, :func:`elmo.data.chars.batch_char_ids` in its own numbering for ours. A row's length is its
        count of non-zero tokens; an empty row gets zero vectors. ``word_inputs``, ``(B, T)`` int64 indices into
        ``vocab_to_cache`` (0 = padding), are read instead of the characters unless an index is outside it, while
        fine-tuning, or (with a warning) without ``vocab_to_cache``.

        **The project's call**, ``elmo(ids, lengths, chars, layers)``: ``inputs``, ``(B, T)`` int64 word ids of the
        biLM's vocabulary, right-padded with 0 (``<pad>``); second argument (or ``lengths=``), ``(B,)`` int64 true
        lengths (default: the count of non-padding ids); ``chars``, ``(B, T, C)`` int64 character ids
        (:func:`elmo.data.chars.batch_char_ids`; bilm-tf's numbering for a published biLM), required for a character
        biLM, ignored otherwise; ``layers``, ``(L, B, T, D)`` precomputed h_1..h_L (:mod:`elmo.inference.layer_cache`),
        frozen biLM only.

        Returns ``{"elmo_representations": [num_output_representations × (B, T, D)], "mask": (B, T) bool}``, D =
        :attr:`output_dim`, float vectors zero where the mask is False (AllenNLP leaves ``-mean / sd`` there with
        ``keep_sentence_boundaries`` and ``do_layer_norm``); with ``keep_sentence_boundaries``, ``T + 2`` positions.
        Raises ElmoError: ``inputs`` neither 2-d nor 3-d or more; AllenNLP's call with a word biLM, the wrong ``C`` or
        ``word_inputs`` shape (both named), ids not right-padded (checked on CPU), or ``lengths``, ``chars`` or
        ``layers``; the project's call with ``keep_sentence_boundaries``, lengths not ``(B,)``, an empty row (checked
        for host lengths only, sparing a device sync per step: corpora, embedder and ``TextClassifier`` refuse empty
        texts earlier), no ``chars`` for a character biLM, or ``layers`` while fine-tuning.
        """
        if inputs.dim() >= 3:
            if lengths is not None or chars is not None or layers is not None:
                raise ElmoError("elmo(character_ids (B, T, C)) is AllenNLP's call: it takes word_inputs, not lengths, "
                                "chars or layers (those go with word ids (B, T): elmo(ids, lengths, chars))")
            return self._forward_characters(inputs, word_inputs)
        if inputs.dim() != 2:
            raise ElmoError(f"Elmo expects character ids (B, T, C) or word ids (B, T), got shape {tuple(inputs.shape)}")
        if word_inputs is not None:
            if lengths is not None:
                raise ElmoError("with word ids (B, T) the second argument is their lengths: give it once, not also "
                                "as lengths=")
            lengths = word_inputs
        if lengths is not None and tuple(lengths.shape) != tuple(inputs.shape[:1]):
            raise ElmoError(f"with word ids of shape {tuple(inputs.shape)} the lengths must have shape "
                            f"{tuple(inputs.shape[:1])}, got {tuple(lengths.shape)}")
        if self.keep_sentence_boundaries:
            raise ElmoError("keep_sentence_boundaries applies to AllenNLP's call elmo(character_ids); "
                            "elmo(ids, lengths, chars) returns the tokens alone")
        if lengths is None:
            lengths = (inputs != PAD_ID).sum(dim=1)
        if lengths.device.type == "cpu" and bool((lengths < 1).any()):
            raise ElmoError("Elmo got an empty sequence (a row with no token)")
        mask = torch.arange(inputs.shape[1], device=inputs.device).unsqueeze(0) < lengths.unsqueeze(1)
        if layers is not None:
            if self.requires_grad:
                raise ElmoError("cached biLM layers cannot be used while fine-tuning the biLM")
            with torch.no_grad():
                h0 = self.bilm.token_layer(inputs, lengths, chars)
            layers = torch.cat([h0.unsqueeze(0), layers])  # (L+1, B, T, D) in h0's dtype: cat casts as it copies
        else:
            with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
                layers = self.bilm(inputs, lengths, chars)  # (L+1, B, T, D)
        if self.do_layer_norm:
            layers = normalize_layers(layers)
        reps = [self.dropout(mix(layers)).masked_fill(~mask.unsqueeze(-1), 0.0) for mix in self.mixes]
        return {"elmo_representations": reps, "mask": mask}

    def _forward_characters(self, inputs: torch.Tensor,
                            word_inputs: torch.Tensor | None) -> dict[str, list[torch.Tensor] | torch.Tensor]:
        """:meth:`forward`'s AllenNLP call (AllenNLP's ``Elmo.forward`` and ``_ElmoBiLm.forward``)."""
        per_token = self.bilm.config.chars_per_token
        if per_token is None:
            raise ElmoError("this biLM reads word ids (BiLMConfig.token_encoder is 'word'), not characters: call "
                            "elmo(ids, lengths)")
        if inputs.shape[-1] != per_token:
            raise ElmoError(f"character ids have {inputs.shape[-1]} characters per token, but the biLM reads "
                            f"{per_token} (batch_to_ids gives 50, a published biLM's)")
        chars = inputs.reshape(-1, *inputs.shape[-2:])
        words = None  # word_inputs (B, T) int64 where the cached vectors serve them
        if word_inputs is not None and self.vocab_to_cache is None:
            warnings.warn("Elmo got word_inputs but no vocab_to_cache: they are ignored, the character ids are read "
                          "(as AllenNLP does)", stacklevel=2)
        elif word_inputs is not None:
            if tuple(word_inputs.shape) != tuple(inputs.shape[:-1]):
                raise ElmoError(f"word_inputs have shape {tuple(word_inputs.shape)}, but the character ids' tokens have "
                                f"shape {tuple(inputs.shape[:-1])}")
            words = word_inputs.reshape(-1, inputs.shape[-2]).long()
            if self.requires_grad or (words.numel() and not
                                      0 <= int(words.min()) <= int(words.max()) < len(self.vocab_to_cache)):
                words = None
        mask = words > 0 if words is not None else (chars > 0).any(dim=-1)  # (B, T), AllenNLP's
        lengths, steps = mask.sum(dim=1), mask.shape[1]
        if mask.device.type == "cpu" and not torch.equal(mask, length_mask(lengths, steps)):
            raise ElmoError("character ids must be right-padded: a row has a padding (all-zero) token before a real one")
        boundaries = self.keep_sentence_boundaries or self.do_layer_norm  # AllenNLP mixes <S>, </S> too
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
            x = self._word_vectors()[words] if words is not None else self.bilm.token_vectors(chars)
            layers = self.bilm.contextual(x, lengths, boundaries=boundaries)[0]  # (L+1, B, T or T + 2, D)
        mixed_mask = length_mask(lengths + 2, steps + 2) if boundaries else mask
        if self.do_layer_norm:
            layers = normalize_layers_over_batch(layers, mixed_mask)
        reps = [mix(layers) for mix in self.mixes]
        if boundaries and not self.keep_sentence_boundaries:
            reps = [r[:, 1:steps + 1] for r in reps]  # token t at t + 1; a row's </S> is masked below
        out_mask = mixed_mask if self.keep_sentence_boundaries else mask
        reps = [self.dropout(r).masked_fill(~out_mask.unsqueeze(-1), 0.0) for r in reps]
        lead = inputs.shape[:-2]
        return {"elmo_representations": [r.reshape(*lead, *r.shape[1:]) for r in reps],
                "mask": out_mask.reshape(*lead, out_mask.shape[-1])}

    def _word_vectors(self) -> torch.Tensor:
        """``(len(vocab_to_cache), P)`` float32 token vectors of :attr:`vocab_to_cache` on the biLM's device, computed
        once and again when the character CNN's weights, dtype or device change (:func:`~elmo.model.lstm.cached`)."""
        params = self.bilm.token_parameters()
        make = lambda: [self.bilm.word_vectors(self.vocab_to_cache).float()]  # noqa: E731
        return cached(self._word_cache, "vectors", params, compute_dtype(params[0].device.type), make)[0]

    def penalty(self) -> torch.Tensor:
        """Σ over trainable scalar mixes (not a :class:`~elmo.model.mix.GatedLayerMix`) of ‖w‖² (un-normalised weights:
        pulls the mix toward the plain average, softmax(0); paper §3.3, as bilm-tf), else 0: a scalar tensor to scale by
        λ and add to the task loss."""
        terms = [(m.weights ** 2).sum() for m in self.mixes if type(m) is ScalarMix and m.weights.requires_grad]
        return torch.stack(terms).sum() if terms else torch.zeros(())
