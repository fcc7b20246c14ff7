"""ELMo: deep contextualized word representations (Peters et al. 2018), trained from scratch.

Notebook API: :class:`ELMoEmbedder` (vectors of every layer), :class:`Elmo` (the ELMo layer for your
own ``nn.Module``), :class:`TextClassifier` (AG News labels), all in :mod:`elmo.api` / :mod:`elmo.layer`.

Modules: :mod:`elmo.data` (AG News, tokeniser, batching), :mod:`elmo.vocab`, :mod:`elmo.bilm`
(the biLM), :mod:`elmo.chars` (character CNN token encoder), :mod:`elmo.mix` (scalar mix and
learned layer function), :mod:`elmo.layer` (:class:`Elmo`), :mod:`elmo.classifier`,
:mod:`elmo.train` (the training loop), :mod:`elmo.metrics`, :mod:`elmo.checkpoint`,
:mod:`elmo.static` (Word2Vec and PPMI + SVD baselines), :mod:`elmo.baselines` (``baselines.py``) and
:mod:`elmo.report` (``report.pdf``), :mod:`elmo.cache` (frozen biLM layers computed once) and
:mod:`elmo.bench` (``python -m elmo.bench``).
"""

import os

# oneDNN (the CPU LSTM and matmul kernels) keeps up to 1024 compiled primitives per cache, one per
# input shape; with length-bucketed batches nearly every batch has a new shape, and a bf16 LSTM
# primitive holds several MB, so the caches alone grew past 3 GB in a classification run (peak RSS
# 9.5 GB). 256 entries keep the classifier's epoch-to-epoch hits (same speed, measured) and bound the
# memory. Set before torch creates its first primitive; a value already in the environment wins.
for _variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
    os.environ.setdefault(_variable, "256")

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
