"""The Elmo module (elmo.model.elmo): mixed layers, mask, dropout, frozen or fine-tuned biLM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo import Elmo, ElmoError
from elmo.data.vocab import SPECIALS
from elmo.model.bilm import BiLM, BiLMConfig

WORDS = list(SPECIALS) + ["the", "market", "rallied", "on", "friday", "team", "won", "match", "."]


def tiny_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": len(WORDS), "embedding_dim": 8, "hidden_size": 8, "cutoffs": (6,), "dropout": 0.0}
    return BiLM(BiLMConfig(**(sizes | options))).eval()


def test_elmo_module_shapes_mask_and_outputs():
    bilm = tiny_bilm()
    elmo = Elmo(bilm, num_output_representations=2, mix="frozen_lambda", dropout=0.5)
    ids = torch.tensor([[4, 5, 6], [7, 8, 0]])
    out = elmo(ids)
    reps, mask = out["elmo_representations"], out["mask"]
    assert len(reps) == 2 and all(r.shape == (2, 3, 16) for r in reps)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    assert reps[0][1, 2].abs().sum() == 0  # padding is zero
    assert not torch.allclose(reps[0], reps[1])  # each output has its own mix (frozen draws seed, seed + 1)
    elmo.eval()
    with torch.no_grad():
        layers = bilm(ids, torch.tensor([3, 2]))
        weights = torch.softmax(elmo.mixes[0].weights, 0)
        expected = torch.einsum("l,lbtd->btd", weights, layers)
        np.testing.assert_allclose(elmo(ids)["elmo_representations"][0], expected, atol=1e-6)
    elmo.train()
    assert not elmo.bilm.training  # the biLM never trains its dropout
    a, b = elmo(ids)["elmo_representations"][0], elmo(ids)["elmo_representations"][0]
    assert not torch.equal(a, b)  # dropout on the ELMo vector in training mode


def test_elmo_module_freezes_or_fine_tunes_the_bilm():
    ids = torch.tensor([[4, 5, 6]])
    frozen = Elmo(tiny_bilm(), dropout=0.0)
    frozen(ids)["elmo_representations"][0].sum().backward()
    assert all(p.grad is None for p in frozen.bilm.parameters())
    assert frozen.mixes[0].weights.grad is not None and frozen.penalty().item() == 0.0
    tuned = Elmo(tiny_bilm(), dropout=0.0, requires_grad=True)
    tuned(ids)["elmo_representations"][0].sum().backward()
    assert tuned.bilm.forward_lm.layers[1].weight_ih_l0.grad is not None
    with pytest.raises(ElmoError, match="empty sequence"):
        frozen(torch.tensor([[4, 5], [0, 0]]))
    with pytest.raises(ElmoError, match="unknown layer mix"):
        Elmo(tiny_bilm(), mix="average")
