"""The defaults that adapt to the corpus size (elmo.pipelines.common.auto_batch_size, ``--init-embeddings auto``):
on the full AG News sample they choose exactly the fixed values the default run was measured with, and on a small
corpus they choose what lets one epoch learn."""

from __future__ import annotations

import pytest
import torch
from support import make_rows

import elmo.pipelines.pretraining as pretraining
from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.common import (
    DEFAULT_BATCH_SIZE,
    MIN_AUTO_BATCH,
    MIN_STEPS_PER_EPOCH,
    CommonArgs,
    auto_batch_size,
    resolve_batch_size,
)
from elmo.pipelines.pretraining import AUTO_INIT_MAX_COSINE, PretrainArgs, init_embeddings

#: Training documents of the default run: the 39,122-row sample less its 5 % validation split, and the
#: official 120,000-row file less its split.
SAMPLE_TRAIN, OFFICIAL_TRAIN = 37_166, 114_000


@pytest.mark.parametrize("documents", [SAMPLE_TRAIN, OFFICIAL_TRAIN, DEFAULT_BATCH_SIZE * MIN_STEPS_PER_EPOCH])
def test_the_full_corpus_keeps_the_batch_size_of_64(documents):
    assert auto_batch_size(None, documents) == DEFAULT_BATCH_SIZE == 64


@pytest.mark.parametrize(("documents", "expected"), [(1_900, 8), (3_800, 15), (250, 8), (1, 8), (15_999, 63)])
def test_a_small_corpus_gets_smaller_batches_for_enough_steps(documents, expected):
    chosen = auto_batch_size(None, documents)
    assert chosen == expected
    assert chosen == MIN_AUTO_BATCH or documents // chosen >= MIN_STEPS_PER_EPOCH


def test_an_explicit_batch_size_or_an_unknown_corpus_size_is_not_adapted():
    assert auto_batch_size(32, 1_900) == 32 and auto_batch_size(200, 10) == 200
    assert auto_batch_size(None, None) == DEFAULT_BATCH_SIZE  # a streamed --train-file


def test_resolving_fixes_the_size_in_the_flags_and_says_it_with_why_when_lowered():
    said: list[str] = []
    small, full, given = ClassifyArgs(), PretrainArgs(), ClassifyArgs(batch_size=16)
    assert small.batch_size is None and full.batch_size is None
    assert resolve_batch_size(small, 1_900, said.append) == 8 and small.batch_size == 8
    assert resolve_batch_size(full, SAMPLE_TRAIN, said.append) == 64 and full.batch_size == 64
    assert resolve_batch_size(given, 1_900, said.append) == 16
    assert said[0] == ("batches: up to 8 documents (1,900 training documents: at least 238 steps per epoch; the "
                       "smallest automatic batch, 8, cannot promise 250) and 8,192 tokens, padding included "
                       "(--batch-size, --max-tokens)")
    assert said[1] == "batches: up to 64 documents and 4,096 tokens, padding included (--batch-size, --max-tokens)"
    assert said[2] == "batches: up to 16 documents and 8,192 tokens, padding included (--batch-size, --max-tokens)"


def auto_batch_reason(documents: int) -> str:
    """The reason :func:`resolve_batch_size` prints in parentheses for ``documents`` with no --batch-size, or ``""``."""
    said: list[str] = []
    resolve_batch_size(CommonArgs(), documents, said.append)
    return said[0].partition(" documents (")[2].rpartition(") and ")[0]


def test_the_reason_printed_for_a_lowered_batch_is_true_where_the_floor_binds_and_where_it_does_not():
    # the normal case: N // 250 documents a batch promise at least 250 steps
    assert auto_batch_size(None, 3_800) == 15
    assert auto_batch_reason(3_800) == "3,800 training documents: at least 254 steps per epoch"
    assert auto_batch_reason(2_000) == "2,000 training documents: at least 250 steps per epoch"
    # the floor: batches of 8 cannot promise 250 steps below 2,000 documents (the smoke run's 1,900: 238)
    assert auto_batch_size(None, 1_900) == MIN_AUTO_BATCH
    assert auto_batch_reason(1_900) == ("1,900 training documents: at least 238 steps per epoch; the smallest "
                                        "automatic batch, 8, cannot promise 250")
    assert auto_batch_reason(1_999) == "1,999 training documents: at least 250 steps per epoch"  # ceil(1999 / 8)
    assert auto_batch_reason(SAMPLE_TRAIN) == auto_batch_reason(16_000) == ""  # the default batch: nothing to explain
    for documents in range(1, 16_000, 7):  # every claim holds: ceil(N / B) steps, and 250 only when promised
        chosen, reason = auto_batch_size(None, documents), auto_batch_reason(documents)
        steps = -(-documents // chosen)
        assert f"at least {steps:,} steps per epoch" in reason
        assert ("cannot promise 250" in reason) == (steps < MIN_STEPS_PER_EPOCH)


@pytest.fixture(scope="module")
def toy():
    tokens = [tokenize(r[2]) for r in make_rows(400, seed=5)]
    return tokens, Vocabulary.build(tokens, min_freq=2)


@pytest.mark.parametrize(("cosine", "mode", "copied"), [(0.733, "auto", True), (0.999, "auto", False),
                                                          (AUTO_INIT_MAX_COSINE, "auto", True),
                                                          (0.999, "word2vec", True)])
def test_auto_init_copies_word2vec_unless_its_vectors_share_one_direction(toy, monkeypatch, cosine, mode, copied):
    tokens, vocab = toy
    monkeypatch.setattr(pretraining, "common_direction_cosine", lambda vectors: cosine)
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    before = bilm.forward_lm.embedding.weight.detach().clone()
    said: list[str] = []
    info = init_embeddings(bilm, vocab, tokens, PretrainArgs(init_embeddings=mode, embedding_dim=8, hidden_size=8),
                           say=said.append)
    assert info["copied"] is copied and info["common_direction_cosine"] == cosine
    changed = not torch.equal(bilm.forward_lm.embedding.weight, before)
    assert changed is copied
    assert copied or ("kept random token embeddings" in said[0] and f"{cosine:.3f}" in said[0])


def test_the_scripts_default_to_the_adaptive_choices():
    assert PretrainArgs().init_embeddings == "auto"
    assert PretrainArgs().batch_size is None and ClassifyArgs().batch_size is None
