"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API (see ``docs/architecture.md`` for the package map):

* :class:`ELMoEmbedder` — vectors of every biLM layer for tokenised sentences;
* :class:`Elmo` — the ELMo layer (biLM + scalar mix) for your own ``nn.Module``;
* :class:`TextClassifier` — AG News labels for raw text;
* :func:`load_bilm`, :class:`BiLM`, :class:`ScalarMix`, :class:`Vocabulary`, :class:`ElmoError`.
"""

from .data.vocab import Vocabulary
from .errors import ElmoError
from .inference.embedder import ELMoEmbedder
from .inference.text_classifier import TextClassifier
from .model.bilm import BiLM, BiLMConfig, LanguageModel
from .model.char_cnn import CharCNN
from .model.elmo import Elmo
from .model.mix import MIX_SETTINGS, LearnedLayerFunction, ScalarMix, build_mix
from .model.serialization import load_bilm

__all__ = ["BiLM", "BiLMConfig", "CharCNN", "ELMoEmbedder", "Elmo", "ElmoError", "LanguageModel",
           "LearnedLayerFunction", "MIX_SETTINGS", "ScalarMix", "TextClassifier", "Vocabulary", "build_mix",
           "load_bilm"]
