"""A training step of the published architecture planned on the host (elmo.model.plan): the same loss
and gradients bit for bit as the step that asks the device, and none of the operators that read the device back
(``nonzero``, ``item``, ``unique``, ``bincount`` ...) in its forward and backward pass. On the CPU they would cost
nothing; on a GPU each one waits for every queued kernel, which is why the step must not contain them."""

from __future__ import annotations

import collections
from dataclasses import replace

import numpy as np
import pytest
import torch
from support import needs_native_bf16, published_lm

from elmo.data.corpus import encode_corpus
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.language_model import PublishedLM
from elmo.model.plan import plan_batch, step_loss, word_plan
from elmo.runtime.device import autocast

#: operators whose result's size or value the host must read from the device (a synchronisation on CUDA)
READING_OPERATORS = {"aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::_unique2", "aten::unique_dim",
                     "aten::unique_consecutive", "aten::masked_select", "aten::repeat_interleave", "aten::bincount",
                     "aten::_assert_async"}
CONFIG = BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4), (2, 8), (3, 8)), num_highway=1, hidden_size=16,
                             projection_dim=8)
FUSED = replace(CONFIG, cell_clip=None, proj_clip=None)


def batch_and_vocab(seed: int = 0, docs: int = 12, longest: int = 25) -> tuple[dict[str, torch.Tensor], Vocabulary]:
    rng = np.random.default_rng(seed)
    words = list(dict.fromkeys("".join(rng.choice(list("abcdefghij"), rng.integers(1, 12))) for _ in range(200)))
    vocab = Vocabulary([*SPECIALS, *words[:120]])  # the rest are out of the vocabulary
    texts = [[words[j] for j in rng.integers(0, len(words), rng.integers(1, longest))] for _ in range(docs)]
    corpus = encode_corpus(texts, vocab, max_chars=CONFIG.max_chars, char_scheme=CONFIG.char_scheme)
    return corpus.collate(np.arange(docs)), vocab


def model_of(config: BiLMConfig, vocab: Vocabulary) -> PublishedLM:
    model = published_lm(config, len(vocab), cutoffs=(20, 60))
    model.bilm.chunk_size = 5  # several passes of the character CNN
    return model


def with_host(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch as the trainer hands it to the loss with ``Objective.host_keys``."""
    return {**batch, **{f"host_{k}": batch[k] for k in BiLM.host_keys}}


def step(config: BiLMConfig, precision: torch.dtype | None, planned: bool):
    batch, vocab = batch_and_vocab()
    model = model_of(config, vocab)
    torch.manual_seed(1)  # the dropout masks
    with autocast(torch.device("cpu"), precision):
        loss, units = step_loss(model, model, with_host(batch)) if planned else \
            model(batch["ids"], batch["lengths"], batch["chars"])
    loss.backward()
    return loss.detach(), units, [p.grad for p in model.parameters()]


def assert_same_step(config: BiLMConfig, precision: torch.dtype | None) -> None:
    (loss, units, grads), (planned_loss, planned_units, planned_grads) = (step(config, precision, p) for p in (False, True))
    assert torch.equal(loss, planned_loss) and units == planned_units
    assert all(torch.equal(a, b) for a, b in zip(grads, planned_grads, strict=True))


@pytest.mark.parametrize("config", [CONFIG, FUSED], ids=["clipped", "fused"])
def test_the_planned_step_is_the_same_step_bit_for_bit(config):
    assert_same_step(config, None)


@pytest.mark.cpu_features
@needs_native_bf16()
@pytest.mark.parametrize("config", [CONFIG, FUSED], ids=["clipped", "fused"])
def test_the_planned_step_is_the_same_step_in_bf16_on_a_cpu_with_native_bf16(config):
    assert_same_step(config, torch.bfloat16)


def operators_of_one_step(config: BiLMConfig, planned: bool) -> collections.Counter:
    """The operators of a step's forward and backward pass and gradient clipping (the optimiser is left out: the
    CPU's fused Adam reads each parameter's step count from the host, where CUDA's keeps it on the device)."""
    batch, vocab = batch_and_vocab(1, docs=3, longest=6)
    model = model_of(config, vocab)
    with torch.profiler.profile() as prof:
        loss, _ = step_loss(model, model, with_host(batch)) if planned else \
            model(batch["ids"], batch["lengths"], batch["chars"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return collections.Counter(e.name for e in prof.events())


@pytest.mark.parametrize("config", [CONFIG, FUSED], ids=["clipped", "fused"])
def test_a_planned_step_reads_nothing_back(config):
    planned = operators_of_one_step(config, True)
    assert not READING_OPERATORS & set(planned), {k: planned[k] for k in READING_OPERATORS & set(planned)}
    unplanned = operators_of_one_step(config, False)  # the same step asking the device: the test sees reads
    assert {"aten::nonzero", "aten::unique_dim", "aten::bincount"} <= set(unplanned)
    assert sum(planned.values()) < sum(unplanned.values())


def test_the_word_plan_orders_spellings_as_torch_unique_does():
    rng = np.random.default_rng(3)
    chars = rng.integers(0, 6, size=(300, 7))
    chars[rng.integers(0, 300, 100)] = chars[0]  # repeats
    unique, inverse = torch.unique(torch.from_numpy(chars), dim=0, return_inverse=True)
    plan = word_plan(chars, per_pass=16, max_width=3)
    assert sorted(map(tuple, plan.distinct.tolist())) == sorted(map(tuple, unique.tolist()))
    assert torch.equal(plan.distinct[plan.gather], torch.from_numpy(chars))
    assert sum(rows.stop - rows.start for rows, _ in plan.passes) == len(unique)


def test_a_target_outside_the_vocabulary_is_named():
    batch, vocab = batch_and_vocab()
    small = Vocabulary([*SPECIALS, "a"])  # the batch's ids run past its size
    model = model_of(CONFIG, small)
    with pytest.raises(ElmoError, match=rf"target\(s\) outside \[0, {len(small)}\)"):
        model.host_plan({k: batch[k] for k in BiLM.host_keys})
    with pytest.raises(ElmoError, match="host copy has no chars"):
        plan_batch(model)({k: batch[k] for k in ("ids", "lengths")})
    with pytest.raises(ElmoError, match="host copy has no chars"):
        step_loss(model, model, {**batch, "host_ids": batch["ids"], "host_lengths": batch["lengths"]})


def test_unique_rows_is_numpys_unique_by_rows_and_survives_a_hash_collision(monkeypatch):
    import elmo.model.plan as plan
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 6, size=(3000, 7))  # many repeats, every lexicographic tie-break exercised
    rows[:, 4:] = rng.integers(0, 2, size=(3000, 3))
    for sample in (rows, rows[:1], rows[:0], np.repeat(rows[:3], 5, axis=0)):
        distinct, inverse = plan.unique_rows(sample)
        expected, expected_inverse = np.unique(sample, axis=0, return_inverse=True)
        assert np.array_equal(distinct, expected) and np.array_equal(inverse, expected_inverse.reshape(-1))
        assert distinct.dtype == sample.dtype and inverse.dtype == expected_inverse.dtype
    monkeypatch.setattr(plan, "_ROW_HASH", np.zeros_like(plan._ROW_HASH))  # every row hashes alike
    distinct, inverse = plan.unique_rows(np.array([[1, 2], [3, 4], [1, 2], [0, 9]]))
    assert distinct.tolist() == [[0, 9], [1, 2], [3, 4]] and inverse.tolist() == [1, 2, 1, 0]
    with pytest.raises(ValueError, match="unique_rows takes"):
        plan.unique_rows(np.zeros(3, dtype=np.int64))
