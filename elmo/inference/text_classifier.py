"""The trained AG News classifier on raw text, in a notebook or behind ``python -m elmo predict``::

    from elmo import TextClassifier
    TextClassifier.from_pretrained("models").predict(["Stocks rallied on Friday."])  # ['Business']
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model import hub
from ..model.classifier import ElmoClassifier, load_classifier, load_classifier_bilm
from ..model.serialization import open_bilm
from ..runtime.device import resolve_device
from .class_probabilities import class_probabilities
from .embedder import ElmoEmbedder


class TextClassifier:
    """The trained AG News classifier on raw text: ``predict`` → class names, ``predict_proba`` → probabilities.
    ``model``: an :class:`~elmo.model.classifier.ElmoClassifier` (eval mode); ``vocab``: its biLM's vocabulary;
    ``class_names``: names of the C classes in output order."""

    def __init__(self, model, vocab: Vocabulary, class_names: Sequence[str], precision: str = "auto",
                 max_length: int = 256):
        if max_length < 1:
            raise ElmoError(f"max_length must be >= 1, got {max_length}")
        self.max_length = max_length
        self.model = model.eval()
        self.embedder = ElmoEmbedder(bilm=model.bilm, vocab=vocab, device=next(model.parameters()).device,
                                     precision=precision)
        self.class_names = list(class_names)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike = "models", classifier: str = "classifier.pt",
                        device: str | torch.device = "auto", precision: str = "auto") -> "TextClassifier":
        """Load ``classifier.pt`` (or another ``classifier_<mix>.pt``) from a models directory with the biLM it was
        trained on: the published biLM it records (bilm-tf's files given by ``--options-file``, or the folder or
        ``published_lm.pt`` it was opened from), else the directory's (:func:`~elmo.model.serialization.open_bilm`:
        ``bilstm.pt`` first); or a classifier's ``save_pretrained`` folder or Hub model id (:mod:`elmo.model.hub`).
        ``precision`` as in :class:`~elmo.inference.embedder.ElmoEmbedder`; the default matches ``classification.py``'s,
        so the scores equal those the training run reported. Raises ElmoError when a file is missing or corrupt, or the
        classifier was trained on another biLM."""
        directory = Path(path)
        file = directory / classifier
        if not file.is_file() and (hub.is_hub_id(path) or (directory / hub.CONFIG).is_file()):
            model = hub.load_pretrained(path)
            if not isinstance(model, ElmoClassifier):
                raise ElmoError(f"{path} holds a {type(model).__name__}, not a classifier, and no {classifier}")
            return cls(model.to(resolve_device(device)), model.vocab, model.class_names, precision=precision)
        if not file.is_file():
            raise ElmoError(f"{file} not found: train it with `python classification.py --models-dir {directory}`")
        published = load_classifier_bilm(file)  # trained on the published ELMo (--options-file)?
        if published is None:
            opened = open_bilm(directory)
            published = opened.bilm, opened.vocab
        bilm, vocab = published
        model, names = load_classifier(file, bilm.to(resolve_device(device)), vocab)
        return cls(model, vocab, names, precision=precision)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities ``(n, C)`` float32 (rows sum to 1) for raw texts; a text longer than ``max_length``
        tokens is truncated to its first ``max_length`` (as in training), with a warning. Raises ElmoError on a text
        that is not a ``str`` or holds no token (named by its index)."""
        if isinstance(texts, str):
            texts = [texts]
        tokens = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ElmoError(f"text {i}: expected a str, got {type(text).__name__}")
            words = self.embedder.tokenize(text)
            if not words:
                raise ElmoError(f"text {i} holds no word to classify: {text[:60]!r}")
            if len(words) > self.max_length:
                warnings.warn(f"text {i} has {len(words)} tokens; classifying its first {self.max_length} "
                              "(the length classification.py trained on)", stacklevel=2)
            tokens.append(words[: self.max_length])
        return class_probabilities(self.model, self.embedder.encode(tokens), self.embedder.device, self.embedder.amp_dtype)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable class name per text (e.g. ``"Sci/Tech"``)."""
        return [self.class_names[i] for i in self.predict_proba(texts).argmax(axis=1)]
