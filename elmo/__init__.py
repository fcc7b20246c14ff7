"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API (see ``docs/architecture.md`` for the package map):

* :class:`ElmoEmbedder` — AllenNLP's interface: vectors of every biLM layer for tokenised sentences, from the
  published ELMo files (``options_file=..., weight_file=...``), our own ``models/``
  (``ElmoEmbedder.from_pretrained("models")``) or a biLM object (``ElmoEmbedder(bilm=..., vocab=...)``);
* :class:`Elmo` — the ELMo layer (biLM + layer mix) for your own ``nn.Module``;
* :class:`TextClassifier` — AG News labels for raw text;
* :func:`load_bilm`, :class:`BiLM`, :class:`ScalarMix`, :func:`build_mix` and :data:`LAYER_MIXES` (the layer
  mixes), :class:`Vocabulary`, :class:`ElmoError`;
* :func:`load_published_bilm`, :class:`PublishedBiLM`, :class:`PublishedBiLMConfig` — the published (bilm-tf)
  biLM, usable wherever ours is.
"""

from .data.vocab import Vocabulary
from .errors import ElmoError
from .inference.embedder import ElmoEmbedder
from .inference.text_classifier import TextClassifier
from .model.bilm import BiLM, BiLMConfig, LanguageModel
from .model.char_cnn import CharCNN
from .model.elmo import Elmo
from .model.mix import LAYER_MIXES, LearnedLayerFunction, ScalarMix, build_mix
from .model.published import PublishedBiLM, PublishedBiLMConfig
from .model.published_io import load_published_bilm
from .model.serialization import load_bilm

__all__ = ["BiLM", "BiLMConfig", "CharCNN", "Elmo", "ElmoEmbedder", "ElmoError", "LAYER_MIXES", "LanguageModel",
           "LearnedLayerFunction", "PublishedBiLM", "PublishedBiLMConfig", "ScalarMix", "TextClassifier", "Vocabulary",
           "build_mix", "load_bilm", "load_published_bilm"]
