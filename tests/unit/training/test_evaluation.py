"""Language-model evaluation (elmo.training.evaluation): the fast perplexity is the exact full-softmax one."""

from __future__ import annotations

import math

import pytest
import torch

from elmo.data.corpus import EncodedCorpus
from elmo.model.bilm import BiLM, BiLMConfig, LanguageModel
from elmo.training.evaluation import evaluate_words, perplexity

V = 40


def make_bilm() -> BiLM:
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.0, cutoffs=(10, 20))).eval()


def test_adaptive_loss_perplexity_equals_full_softmax_perplexity():
    bilm = make_bilm()
    g = torch.Generator().manual_seed(1)
    corpus = EncodedCorpus([torch.randint(4, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 9, (20,), generator=g)])
    for lm in (bilm.forward_lm, bilm.backward_lm):
        fast = perplexity(lm, corpus, torch.device("cpu"))
        exact, targets, top5 = evaluate_words(lm, corpus, torch.device("cpu"))
        assert fast == pytest.approx(exact["perplexity"], rel=1e-4)
        assert len(targets) == corpus.num_tokens + len(corpus)  # every word plus one boundary word
        assert 1 < exact["perplexity"] < 10 * V and top5.shape == (len(targets), 5)
        assert exact["top1_accuracy"] <= exact["top5_accuracy"]


def test_perplexity_of_uniform_model_is_vocabulary_size():
    lm = LanguageModel(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, cutoffs=(10,)), "forward")
    with torch.no_grad():
        for p in lm.softmax.parameters():
            p.zero_()
    corpus = EncodedCorpus([[5, 6, 25]])  # targets 5, 6, 25, <eos>: word 25 is in the tail
    # head: 10 words + 1 cluster equally likely; the cluster spreads its mass over 30 words
    expected = math.exp(-(3 * math.log(1 / 11) + math.log(1 / 11 / 30)) / 4)
    assert perplexity(lm, corpus, torch.device("cpu")) == pytest.approx(expected, rel=1e-5)
