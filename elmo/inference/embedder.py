"""Pre-trained ELMo in a notebook: :class:`ELMoEmbedder`, contextual vectors of every biLM layer.

It and :class:`~elmo.inference.text_classifier.TextClassifier` (labels) load what ``python ELMO.py`` / ``python classification.py`` wrote (``models/bilstm.pt``,
``models/classifier.pt``) with ``torch.load(weights_only=True)``, run on the GPU when one is present
(``device=`` to choose) and tokenise text exactly as training did (:func:`elmo.data.text.tokenize`)::

    from elmo import ELMoEmbedder, TextClassifier
    e = ELMoEmbedder.from_pretrained("models")
    vectors = e.embed_sentence(e.tokenize("Stocks rallied on Friday."))  # (3, 5, D)
    TextClassifier.from_pretrained("models").predict(["Stocks rallied on Friday."])  # ['Business']

Batches are right-padded, and every biLM state of a token depends only on its own sentence, so a
sentence's vectors do not depend on what else is in its batch (padding invariance, tested).

Length: :class:`ELMoEmbedder` has no maximum; a sentence of any length is embedded whole (memory grows
linearly, about 6 KB per token for the float32 result at the default sizes). :class:`TextClassifier`
truncates a text to ``max_length`` tokens (256, as ``classification.py`` trained and evaluated) and
warns when it does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from ..artifacts import Outputs
from ..data.corpus import EncodedCorpus, encode_corpus
from ..data.text import tokenize
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model.bilm import BiLM
from ..model.serialization import load_bilm
from ..runtime.device import autocast, resolve_device, resolve_precision


def bilm_path(path: str | os.PathLike) -> Path:
    """``path`` itself if it is a file, else the ``bilstm.pt`` in that models folder.

    Raises:
        ElmoError: the file is missing (saying how to train it).
    """
    path = Path(path)
    file = Outputs(models=path).bilm if path.is_dir() or not path.suffix else path
    if not file.is_file():
        raise ElmoError(f"{file} not found: train the biLM with `python ELMO.py --models-dir {file.parent}` first")
    return file


def _check_sentences(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
    """Lower-cased token lists (training lower-cases). Raises :class:`ElmoError` on non-string input."""
    if isinstance(sentences, str):
        raise ElmoError("expected a list of token lists, got a str (tokenize it first: e.tokenize(text))")
    out = []
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) or not all(isinstance(t, str) for t in sentence):
            raise ElmoError(f"sentence {i}: expected a list of str tokens, got {type(sentence).__name__} "
                            f"{str(sentence)[:60]!r}")
        out.append([t.lower() for t in sentence])
    return out


class ELMoEmbedder:
    """Contextual vectors of every biLM layer for tokenised sentences (as AllenNLP's ``ElmoEmbedder``).

    Args:
        bilm: a trained :class:`~elmo.model.bilm.BiLM`; vocab: its :class:`~elmo.data.vocab.Vocabulary`.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``.
        max_tokens: padded-token budget per internal batch.
        precision: ``"auto"`` (bf16 autocast on CPUs with native bf16 and on GPUs; see
            :func:`elmo.runtime.device.resolve_precision`), ``"fp32"``, ``"bf16"`` or ``"fp16"`` (CUDA). The
            vectors returned are float32 either way.

    The layers are h_0 (token vectors), h_1 .. h_L (LSTM layers), each ``D = bilm.output_dim`` wide
    (both directions concatenated; paper eq. 1). Words outside the vocabulary (OOV) read as ``<unk>``
    for a word biLM; a character biLM (``--token-encoder char``) spells them out.
    """

    def __init__(self, bilm: BiLM, vocab: Vocabulary, device: str | torch.device = "auto", max_tokens: int = 16384,
                 precision: str = "auto"):
        self.device = resolve_device(device)
        self.amp_dtype = resolve_precision(precision, self.device)
        self.bilm = bilm.to(self.device).eval()
        self.vocab = vocab
        self.max_tokens = max_tokens

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike = "models", device: str | torch.device = "auto",
                        precision: str = "auto") -> "ELMoEmbedder":
        """Load ``bilstm.pt`` from a models directory or a file path (``device``, ``precision`` as above).

        Raises:
            ElmoError: the file is missing, corrupt or not an ELMo biLM; an unknown precision.
        """
        bilm, vocab, _ = load_bilm(bilm_path(path))
        return cls(bilm, vocab, device, precision=precision)

    @property
    def num_layers(self) -> int:
        """L + 1 layers per token."""
        return self.bilm.num_layers

    @property
    def dim(self) -> int:
        """Width D of each layer."""
        return self.bilm.output_dim

    @staticmethod
    def tokenize(text: str) -> list[str]:
        """The training tokeniser (:func:`elmo.data.text.tokenize`): cleaned, lower-cased word tokens."""
        return tokenize(text)

    def encode(self, sentences: Sequence[Sequence[str]]) -> EncodedCorpus:
        """Word ids (and, for a character biLM, spellings) of non-empty, lower-cased token lists."""
        return encode_corpus(sentences, self.vocab, max_chars=self.bilm.config.chars_per_token)

    def batch_tensors(self, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """Right-padded model inputs for non-empty token lists.

        Returns:
            ``{"ids": (B, T) int64, "lengths": (B,) int64}`` plus ``"chars": (B, T, C)`` for a character biLM.
        """
        return self.encode(sentences).collate(np.arange(len(sentences)))

    @torch.no_grad()
    def _layers(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """``(L + 1, B, T, D)`` float32 biLM layers of one collated batch."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with autocast(self.device, self.amp_dtype):
            layers = self.bilm(batch["ids"], batch["lengths"], batch.get("chars"))
        return layers.float().cpu().numpy()

    def _embed(self, sentences: list[list[str]], batch_size: int | None) -> list[np.ndarray]:
        """Vectors of checked token lists, ``batch_size`` sentences per pass (all in one when ``None``)."""
        out = [np.zeros((self.num_layers, 0, self.dim), dtype=np.float32) for _ in sentences]
        real = [i for i, s in enumerate(sentences) if s]
        if not real:
            return out
        corpus = self.encode([sentences[i] for i in real])
        batches = corpus.batches(batch_size, self.max_tokens) if batch_size else [np.arange(len(real))]
        for index in batches:
            layers = self._layers(corpus.collate(index))
            for row, j in enumerate(index):
                out[real[j]] = layers[:, row, : corpus.lengths[j]].copy()
        return out

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Embed token lists in one forward pass.

        Args:
            sentences: token lists (lower-cased here, as in training). An empty list is allowed.

        Returns:
            One float32 array ``(L + 1, n_i, D)`` per sentence (``n_i = 0`` for an empty one).

        Raises:
            ElmoError: input that is not a list of lists of str.
        """
        return self._embed(_check_sentences(sentences), None)

    def embed_sentence(self, tokens: Sequence[str]) -> np.ndarray:
        """Vectors of one tokenised sentence: ``(L + 1, n_tokens, D)`` float32 (layer 0, 1, 2 for L = 2)."""
        return self.embed_batch([tokens])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]], batch_size: int = 64) -> Iterator[np.ndarray]:
        """Embed many sentences lazily, in input order, batching sentences of similar length together
        (:meth:`elmo.data.corpus.EncodedCorpus.batches`, under a ``max_tokens`` padded-token budget).

        Args:
            sentences: any iterable of token lists (read ``50 * batch_size`` at a time).
            batch_size: sentences per forward pass (also capped by the token budget).

        Yields:
            ``(L + 1, n_i, D)`` float32 arrays, one per sentence, in the order given.

        Raises:
            ElmoError: ``batch_size < 1`` or malformed input.
        """
        if batch_size < 1:
            raise ElmoError(f"batch_size must be >= 1, got {batch_size}")
        iterator = iter(sentences)
        while chunk := [s for _, s in zip(range(50 * batch_size), iterator)]:
            yield from self._embed(_check_sentences(chunk), batch_size)
