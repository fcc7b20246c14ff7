"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API: :class:`ElmoEmbedder` (AllenNLP's interface: every biLM layer's vectors, from the published ELMo
files, our own ``models/`` or a biLM object), :class:`Elmo` (the ELMo layer for your own ``nn.Module``; AllenNLP's
``Elmo``, with :func:`batch_to_ids`), :class:`TextClassifier` (AG News labels for raw text), :class:`ElmoClassifier`
(the classifier model itself, as ``save_pretrained`` / ``from_pretrained`` save and open it), the one way to open any
biLM the project reads (:func:`open_bilm`), the biLM of both architectures, ours and the published bilm-tf one
(:class:`BiLM`, :class:`BiLMConfig`), the layer mixes (:class:`ScalarMix`, :func:`build_mix`,
:data:`LAYER_MIXES`), :class:`Vocabulary` and :class:`ElmoError` (docs/library.md).
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
