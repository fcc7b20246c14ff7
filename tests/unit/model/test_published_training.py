"""Training the published architecture (elmo.model.bilm, BiLM.reading_states): the loss falls,
gradients reach every part, the training path computes the inference path's states, and the inference caches follow
the optimiser."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from support import published_lm

from elmo.data.chars import batch_char_ids
from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError
from elmo.model.adaptive_softmax import IGNORE_INDEX
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig

TINY = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8)), num_highway=1, hidden_size=16, projection_dim=8)
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["A", "dog", "ran", "."], ["The", "dog", "sat", "."]] * 4


def batch(sentences=SENTENCES, vocab=None):
    vocab = vocab or Vocabulary.build(SENTENCES, min_freq=1)
    longest = max(len(s) for s in sentences)
    ids = torch.tensor([vocab.encode(s) + [0] * (longest - len(s)) for s in sentences])
    return vocab, ids, torch.tensor([len(s) for s in sentences]), batch_char_ids(sentences, 50, "bilm_tf")


@pytest.mark.parametrize("softmax", ["adaptive", "sampled"])
def test_the_loss_falls_gradients_reach_every_part_and_the_inference_caches_follow_the_optimiser(softmax):
    vocab, ids, lengths, chars = batch(SENTENCES[:3])
    torch.manual_seed(0)
    model = published_lm(TINY, len(vocab), softmax=softmax, samples=6, cutoffs=(6,), dropout=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02, fused=True)  # as fit(): no version-counter bump
    model.eval()
    with torch.no_grad():
        before = float(model(ids, lengths, chars)[0])
        model.bilm(ids, lengths, chars)  # fills the inference caches (oneDNN-packed / cast weights)
    for step in range(40):
        model.train()
        loss, n = model(ids, lengths, chars)
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            assert n == int((lengths + 1).sum())
            reached = {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
            parts = ["token_encoder.char_embedding", "token_encoder.convs.0", "token_encoder.convs.1",
                     "token_encoder.highways.0", "token_encoder.projection"]
            parts += [f"{d}_lm.layers.{j}.{w}" for d in ("forward", "backward") for j in (0, 1)
                      for w in ("input_weight", "recurrent_weight", "bias", "projection")]
            assert all(any(name.startswith(f"bilm.{part}") for name in reached) for part in parts), reached
            assert any(name.startswith("bilm.softmax.") for name in reached)
        optimizer.step()
    model.eval()
    with torch.no_grad():
        after = float(model(ids, lengths, chars)[0])
        layers = model.bilm(ids, lengths, chars)
        fresh = published_lm(TINY, len(vocab), softmax=softmax, samples=6, cutoffs=(6,))
        fresh.load_state_dict(model.state_dict())
        assert torch.equal(layers, fresh.eval().bilm(ids, lengths, chars))  # no stale cached weights
    assert after < 0.75 * before  # a tiny repeated corpus: learnt (exact NLL in eval mode; measured 0.24 and 0.68)


def test_the_training_states_are_the_elmo_layers_of_inference():
    """reading_states (with autograd, the training path) and the ELMo layers of forward() (no_grad, the inference
    path) are the same LSTM states, shifted by the boundary token: forward position k is token k's forward
    half, backward position n + 1 - k its backward half (k from 1)."""
    vocab, ids, lengths, chars = batch(SENTENCES[:3])
    model = published_lm(TINY, len(vocab), seed=1)
    forward, backward = model.bilm.reading_states(chars, lengths)
    assert forward.requires_grad and forward.shape == (3, 8, 8)
    with torch.no_grad():
        top = model.bilm(ids, lengths, chars)[-1]
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(forward[b, 1:n + 1].detach(), top[b, :n, :8], atol=1e-6, rtol=0)
        torch.testing.assert_close(backward[b, 1:n + 1].flip(0).detach(), top[b, :n, 8:], atol=1e-6, rtol=0)
        assert not forward[b, n + 1:].any() and not backward[b, n + 1:].any()


def test_targets_are_the_next_word_in_each_reading_order():
    vocab, ids, lengths, _ = batch([["a", "b", "c"], ["d"]], Vocabulary(["<pad>", "<unk>", "<bos>", "<eos>", *"abcd"]))
    model = BiLM(replace(TINY, vocab_size=len(vocab)))
    ignore = IGNORE_INDEX
    assert model.forward_lm.targets(ids, lengths).tolist() == [[4, 5, 6, 3], [7, 3, ignore, ignore]]
    assert model.backward_lm.targets(ids, lengths).tolist() == [[6, 5, 4, 2], [7, 2, ignore, ignore]]


def test_bad_training_heads_are_refused_naming_the_field():
    for kwargs, field in (({"softmax": "full"}, "softmax"), ({"samples": 0}, "softmax_samples"),
                          ({"dropout": 1.0}, "dropout"), ({"vocab_size": 3}, "vocab_size")):
        with pytest.raises(ElmoError, match=f"BiLMConfig.{field}"):
            replace(TINY, **{"vocab_size": 10, **kwargs})


def test_a_training_state_that_keeps_the_softmax_beside_the_bilm_loads():
    """Training checkpoints of earlier versions held the softmax at ``softmax.``, beside the biLM's ``bilm.``."""
    vocab, ids, lengths, chars = batch(SENTENCES[:2])
    model = published_lm(TINY, len(vocab), seed=2).eval()
    old = {k.removeprefix("bilm.") if k.startswith("bilm.softmax.") else k: v for k, v in model.state_dict().items()}
    assert any(k.startswith("softmax.") for k in old)
    fresh = published_lm(TINY, len(vocab), seed=5).eval()
    fresh.load_state_dict(old)
    with torch.no_grad():
        assert torch.equal(fresh(ids, lengths, chars)[0], model(ids, lengths, chars)[0])


def test_a_biLM_without_its_head_has_no_loss_and_says_so():
    vocab, ids, lengths, chars = batch(SENTENCES[:1])
    bilm = BiLM(replace(TINY, vocab_size=len(vocab))).without_head()
    assert bilm.config.vocab_size == 0 and not hasattr(bilm, "softmax") and "softmax." not in str(bilm.state_dict())
    with pytest.raises(ElmoError, match="no shared training softmax"):
        bilm.loss(ids, lengths, chars)
    assert bilm.add_head(3, vocab_size=len(vocab)).hub_kind == "published_lm" and bilm.loss(ids, lengths, chars)[1] > 0
