"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch.

Modules: :mod:`elmo.data` (AG News, tokeniser, batching), :mod:`elmo.vocab`, :mod:`elmo.bilm`
(the biLM), :mod:`elmo.mix` (scalar mix and learned layer function), :mod:`elmo.classifier`,
:mod:`elmo.train` (the training loop), :mod:`elmo.metrics`, :mod:`elmo.checkpoint`,
:mod:`elmo.static` (Word2Vec and PPMI + SVD baselines), :mod:`elmo.baselines` (``baselines.py``) and
:mod:`elmo.report` (``report.pdf``).
"""

from .bilm import BiLM, BiLMConfig, LanguageModel, load_bilm
from .errors import ElmoError
from .mix import MIX_SETTINGS, LearnedLayerFunction, ScalarMix, build_mix
from .vocab import Vocabulary

__all__ = ["BiLM", "BiLMConfig", "ElmoError", "LanguageModel", "LearnedLayerFunction", "MIX_SETTINGS",
           "ScalarMix", "Vocabulary", "build_mix", "load_bilm"]
