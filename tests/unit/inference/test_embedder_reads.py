"""``ElmoEmbedder`` on the published architecture plans each batch on the host (the distinct spellings, the rows
running at each step): embedding reads nothing back from the device but the layers themselves. The vectors stay the
reference ones (tests/unit/model/test_published_bilm.py compares them with bilm-tf's)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from elmo.inference.embedder import ElmoEmbedder
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.plan import device_reading_plan

READING_OPERATORS = {"aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::_unique2", "aten::unique_dim",
                     "aten::masked_select", "aten::bincount"}
SENTENCES = [["The", "market", "rallied", "."], ["Stocks", "fell"], ["a"] * 7]


def published() -> BiLM:
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16,
                                             projection_dim=8)).eval()
    for p in bilm.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return bilm


@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_embedding_reads_nothing_back(stateful):
    embedder = ElmoEmbedder(bilm=published(), device="cpu", stateful=stateful)
    with torch.profiler.profile() as prof:
        embedder.embed_batch(SENTENCES)
    ops = collections.Counter(e.name for e in prof.events())
    assert not READING_OPERATORS & set(ops), {k: ops[k] for k in READING_OPERATORS & set(ops)}


def test_the_host_reading_plan_is_the_devices():
    """The plan the host makes is the one the model would read from the device (so the vectors are the same)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        read = rng.integers(0, 9, size=rng.integers(1, 12))
        order, restore, active = device_reading_plan(torch.from_numpy(read))
        host_order, host_restore, host_active = device_reading_plan(read, torch.device("cpu"))
        assert torch.equal(order, host_order) and active == host_active
        assert torch.equal(restore, host_restore)
