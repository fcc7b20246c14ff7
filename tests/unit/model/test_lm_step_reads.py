"""Our biLM's training step with the softmax's cluster sizes (adaptive) or predicted positions (sampled) from the host
(``LanguageModel.host_plan``): the same loss and gradients bit for bit as the step that finds them on the device, and,
for the word-level biLM with the adaptive softmax (``ELMO.py``'s), no operator that reads the device back in its
forward and backward pass."""

from __future__ import annotations

import collections

import pytest
import torch

from elmo.errors import ElmoError
from elmo.model.adaptive_softmax import cluster_counts
from elmo.model.bilm_config import BiLMConfig
from elmo.model.language_model import LanguageModel

READING_OPERATORS = {"aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::_unique2", "aten::unique_dim",
                     "aten::masked_select", "aten::bincount"}


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    lengths = torch.tensor([9, 3, 5, 1, 7])
    ids = torch.randint(4, 50, (5, 9)).masked_fill(torch.arange(9)[None] >= lengths[:, None], 0)
    return ids, lengths


def run(direction: str, counts: bool, softmax: str = "adaptive"):
    torch.manual_seed(1)
    lm = LanguageModel(BiLMConfig(vocab_size=50, embedding_dim=8, hidden_size=8, cutoffs=(10, 30), softmax=softmax,
                                  samples=12), direction)
    ids, lengths = batch()
    with torch.profiler.profile() as prof:
        plan = lm.host_plan({"ids": ids, "lengths": lengths}) if counts else None
        loss, n = lm(ids, lengths, plan=plan)
        loss.backward()
    return loss.detach(), n, [p.grad for p in lm.parameters() if p.grad is not None], \
        collections.Counter(e.name for e in prof.events())


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_host_counts_give_the_same_step_and_no_device_read(direction):
    loss, n, grads, ops = run(direction, False)
    host_loss, host_n, host_grads, host_ops = run(direction, True)
    assert torch.equal(loss, host_loss) and n == host_n == int((batch()[1] + 1).sum())
    assert all(torch.equal(a, b) for a, b in zip(grads, host_grads, strict=True))
    assert not READING_OPERATORS & set(host_ops)
    assert "aten::bincount" in ops  # the step without them counts on the device, and the test sees it


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_sampled_softmax_step_takes_its_positions_from_the_host(direction):
    loss, n, grads, ops = run(direction, False, "sampled")
    host_loss, host_n, host_grads, host_ops = run(direction, True, "sampled")
    assert torch.equal(loss, host_loss) and n == host_n == int((batch()[1] + 1).sum())
    assert all(torch.equal(a, b) for a, b in zip(grads, host_grads, strict=True)) and len(grads) == 11
    assert ops["aten::nonzero"] > host_ops["aten::nonzero"]  # the predicted positions: found on the device, or not


def test_cluster_counts_count_each_rows_words_and_its_boundary():
    ids, lengths = torch.tensor([[5, 12, 40], [31, 0, 0]]), torch.tensor([3, 1])
    assert cluster_counts(ids, lengths, 2, (10, 30, 50)) == [3, 1, 2]  # 5 and </S> twice | 12 | 40, 31
    with pytest.raises(ElmoError, match=r"1 target\(s\) outside \[0, 50\)"):
        cluster_counts(torch.tensor([[5, 50]]), torch.tensor([2]), 2, (10, 30, 50))
