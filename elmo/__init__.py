"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API: :class:`ElmoEmbedder` (AllenNLP's interface: every biLM layer's vectors, from the published ELMo
files, our own ``models/`` or a biLM object), :class:`Elmo` (the ELMo layer for your own ``nn.Module``),
:class:`TextClassifier` (AG News labels for raw text), our biLM (:func:`load_bilm`, :class:`BiLM`), the published
bilm-tf biLM (:func:`load_published_bilm`, :class:`PublishedBiLM`), the layer mixes (:class:`ScalarMix`,
:func:`build_mix`, :data:`LAYER_MIXES`), :class:`Vocabulary` and :class:`ElmoError` (docs/library.md).
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
