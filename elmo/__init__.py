"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API (docs/library.md): :class:`ElmoEmbedder` (every biLM layer's vectors), :class:`Elmo` (the ELMo layer
for your own ``nn.Module``, with :func:`batch_to_ids`), :class:`TextClassifier` (AG News labels for raw text),
:func:`open_bilm` (any biLM the project reads) and the classes they are built of.
"""

from .data.chars import batch_to_ids
from .data.vocab import Vocabulary
from .errors import ElmoError
from .inference.embedder import ElmoEmbedder
from .inference.text_classifier import TextClassifier
from .model.bilm import BiLM, BiLMConfig, LanguageModel
from .model.char_cnn import CharEncoder
from .model.classifier import ElmoClassifier
from .model.elmo import Elmo
from .model.mix import LAYER_MIXES, LearnedLayerFunction, ScalarMix, build_mix
from .model.serialization import open_bilm

__all__ = ["BiLM", "BiLMConfig", "CharEncoder", "Elmo", "ElmoClassifier", "ElmoEmbedder", "ElmoError", "LAYER_MIXES",
           "LanguageModel", "LearnedLayerFunction", "ScalarMix", "TextClassifier",
           "Vocabulary", "batch_to_ids", "build_mix", "open_bilm"]
