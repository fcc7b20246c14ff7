"""Batches prepared one ahead (elmo.training.trainer.prepared): on a GPU the trainer makes and plans the next batch in
a worker thread while the device computes this one. The batches, their order and what reaches the step are the same
as made inline; a worker never runs more than one batch ahead; an error while making a batch reaches the caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from support import published_lm

from elmo.data.corpus import encode_corpus
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm_config import BiLMConfig
from elmo.model.plan import plan_batch, step_loss
from elmo.training.trainer import prepared


def test_one_ahead_gives_the_same_batches_in_order_never_more_than_one_ahead():
    events: list[str] = []
    threads: set[str] = set()

    def batches():
        for i in range(5):
            events.append(f"make {i}")
            threads.add(threading.current_thread().name)
            yield {"i": i}

    def prepare(batch):
        return {**batch, "prepared": True}
    inline = list(prepared(batches(), prepare, ahead=False))
    events.clear()
    threads.clear()
    ahead = []
    for batch in prepared(batches(), prepare, ahead=True):
        events.append(f"use {batch['i']}")
        ahead.append(batch)
    assert ahead == inline == [{"i": i, "prepared": True} for i in range(5)]
    for i in range(5):  # batch i + 1 may be made before batch i is used, batch i + 2 not
        assert events.index(f"make {i}") < events.index(f"use {i}")
        if i + 2 < 5:
            assert events.index(f"use {i}") < events.index(f"make {i + 2}")
    assert threads and all(name.startswith("elmo-batches") for name in threads)
    assert list(prepared(iter([]), prepare, ahead=True)) == []
    assert prepared([1, 2], None, ahead=True) == [1, 2]


def test_an_error_while_making_a_batch_reaches_the_caller_and_stopping_early_ends_the_worker():
    def failing():
        yield {"i": 0}
        raise ElmoError("train.csv, line 3: no text")

    seen = []
    with pytest.raises(ElmoError, match="line 3"):
        for batch in prepared(failing(), lambda b: b, ahead=True):
            seen.append(batch["i"])
    assert seen == [0]
    source = prepared(({"i": i} for i in range(100)), lambda b: b, ahead=True)
    assert next(iter(source))["i"] == 0
    source.close()  # what the trainer's loop does when it stops mid-epoch
    assert not any(t.name.startswith("elmo-batches") for t in threading.enumerate())


def test_a_step_with_the_plan_made_before_it_is_the_step_planned_inside_it_bit_for_bit():
    torch.manual_seed(0)
    config = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
    model = published_lm(config, 40, cutoffs=(10,))
    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(36)])
    windows = [[f"w{(3 * i + j) % 36}" for j in range(1 + i % 5)] for i in range(6)]
    batch = encode_corpus(windows, vocab, max_chars=config.max_chars, char_scheme=config.char_scheme).collate(np.arange(6))
    losses, grads = [], []
    for planned in (False, True):
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks
        step = plan_batch(model)(batch) if planned else batch | {f"host_{k}": batch[k] for k in model.host_keys}
        loss, n = step_loss(model, model, step)
        loss.backward()
        losses.append((loss.item(), n))
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert losses[0] == losses[1] and all(torch.equal(a, b) for a, b in zip(*grads))
