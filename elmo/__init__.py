"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch in PyTorch.

The notebook API (see ``docs/architecture.md`` for the package map):

* :class:`ElmoEmbedder` — AllenNLP's interface: vectors of every biLM layer for tokenised sentences, from the
  published ELMo files (``options_file=..., weight_file=...``) or our own ``models/``; :class:`ELMoEmbedder`
  is the same class built from a biLM object;
* :class:`Elmo` — the ELMo layer (biLM + scalar mix) for your own ``nn.Module``;
* :class:`TextClassifier` — AG News labels for raw text;
* :func:`load_bilm`, :class:`BiLM`, :class:`ScalarMix`, :class:`Vocabulary`, :class:`ElmoError`;
* :func:`load_published_bilm`, :class:`PublishedBiLM` — the published (bilm-tf) biLM, usable wherever ours is.
"""

from .data.vocab import Vocabulary
from .errors import ElmoError
from .inference.embedder import ELMoEmbedder, ElmoEmbedder
from .inference.text_classifier import TextClassifier
from .model.bilm import BiLM, BiLMConfig, LanguageModel
from .model.bilm_tf import BilmTfConfig, PublishedBiLM
from .model.bilm_tf_io import load_published_bilm
from .model.char_cnn import CharCNN
from .model.elmo import Elmo
from .model.mix import MIX_SETTINGS, LearnedLayerFunction, ScalarMix, build_mix
from .model.serialization import load_bilm

__all__ = ["BiLM", "BiLMConfig", "BilmTfConfig", "CharCNN", "ELMoEmbedder", "Elmo", "ElmoEmbedder", "ElmoError",
           "LanguageModel", "LearnedLayerFunction", "MIX_SETTINGS", "PublishedBiLM", "ScalarMix", "TextClassifier",
           "Vocabulary", "build_mix", "load_bilm", "load_published_bilm"]
