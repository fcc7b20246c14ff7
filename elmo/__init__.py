"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch.

Notebook API: :class:`ELMoEmbedder` (vectors of every layer), :class:`Elmo` (the ELMo layer for your
own ``nn.Module``), :class:`TextClassifier` (AG News labels), all in :mod:`elmo.api` / :mod:`elmo.layer`.

Modules: :mod:`elmo.data` (AG News, tokeniser, batching), :mod:`elmo.stream` (your own corpus,
streamed), :mod:`elmo.distributed` (``torchrun`` data parallelism), :mod:`elmo.vocab`, :mod:`elmo.bilm`
(the biLM), :mod:`elmo.chars` (character CNN token encoder), :mod:`elmo.mix` (scalar mix and
learned layer function), :mod:`elmo.layer` (:class:`Elmo`), :mod:`elmo.classifier`,
:mod:`elmo.train` (the training loop), :mod:`elmo.metrics`, :mod:`elmo.checkpoint`,
:mod:`elmo.static` (Word2Vec and PPMI + SVD baselines), :mod:`elmo.baselines` (``baselines.py``) and
:mod:`elmo.report` (``report.pdf``), :mod:`elmo.cache` (frozen biLM layers computed once) and
:mod:`elmo.bench` (``python -m elmo.bench``) and :mod:`elmo.bench_scale` (streaming memory, torchrun).
"""

from .api import ELMoEmbedder, TextClassifier
from .bilm import BiLM, BiLMConfig, LanguageModel, load_bilm
from .chars import CharCNN
from .errors import ElmoError
from .layer import Elmo
from .mix import MIX_SETTINGS, LearnedLayerFunction, ScalarMix, build_mix
from .vocab import Vocabulary

__all__ = ["BiLM", "BiLMConfig", "CharCNN", "ELMoEmbedder", "Elmo", "ElmoError", "LanguageModel",
           "LearnedLayerFunction", "MIX_SETTINGS", "ScalarMix", "TextClassifier", "Vocabulary", "build_mix",
           "load_bilm"]
