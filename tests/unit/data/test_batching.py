"""Which documents form a batch (elmo.data.batching): length buckets, shuffling, each torchrun rank's share."""

from __future__ import annotations

import numpy as np
import pytest

from elmo.data.batching import bucket_batches, rank_share
from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError


def lengths(n: int = 500, seed: int = 0, high: int = 60) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, high, size=n)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size, max_tokens", [(32, None), (32, 400), (7, 100), (1, None), (500, 10_000)])
def test_bucket_batches_cover_every_index_once_within_both_limits(batch_size, max_tokens, shuffle):
    docs = lengths()
    batches = bucket_batches(docs, batch_size, max_tokens, shuffle=shuffle, seed=3)
    assert all(b.dtype == np.int64 and len(b) >= 1 for b in batches)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(docs)))
    for b in batches:
        assert len(b) <= batch_size
        if max_tokens is not None and len(b) > 1:  # a single document longer than the budget still forms a batch
            assert docs[b].max() * len(b) <= max_tokens
    if max_tokens is None:  # only the document count limits a batch: all but the last of each pool are full
        assert sum(len(b) < batch_size for b in batches) <= -(-len(docs) // (50 * batch_size))


def test_bucket_batches_group_similar_lengths_and_reshuffle_with_the_seed():
    docs = lengths(2000)
    ordered = bucket_batches(docs, 16)
    padding = sum(docs[b].max() * len(b) - docs[b].sum() for b in ordered)
    unsorted = sum(docs[i:i + 16].max() * len(docs[i:i + 16]) - docs[i:i + 16].sum() for i in range(0, 2000, 16))
    assert padding < unsorted / 5  # sorted within pools of 50 batches: little padding
    for b in ordered:
        assert np.all(np.diff(docs[b]) >= 0)  # sorted by length inside a batch
    same = bucket_batches(docs, 16, shuffle=True, seed=1)
    assert [b.tolist() for b in same] == [b.tolist() for b in bucket_batches(docs, 16, shuffle=True, seed=1)]
    assert [b.tolist() for b in same] != [b.tolist() for b in bucket_batches(docs, 16, shuffle=True, seed=2)]
    assert [b.tolist() for b in ordered] == [b.tolist() for b in bucket_batches(docs, 16, seed=9)]  # no shuffle: no seed


def test_a_document_longer_than_the_token_budget_gets_a_batch_of_its_own():
    batches = bucket_batches(np.array([3, 50, 4, 2]), batch_size=8, max_tokens=20)
    assert [1] in [b.tolist() for b in batches]
    assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3]


@pytest.mark.parametrize("batch_size, max_tokens", [(0, None), (-1, 10), (4, 0)])
def test_bucket_batches_refuse_non_positive_limits(batch_size, max_tokens):
    with pytest.raises(ElmoError, match="must be positive"):
        bucket_batches(np.array([1, 2]), batch_size, max_tokens)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_rank_shares_partition_a_global_batch(world_size):
    index = np.array([10, 11, 12, 13, 14, 15, 16])
    parts = [rank_share(index, (rank, world_size)) for rank in range(world_size)]
    assert not any(ghost for _, ghost in parts)
    assert sorted(int(i) for part, _ in parts for i in part) == index.tolist()  # each document exactly once
    sizes = [len(part) for part, _ in parts]
    assert max(sizes) - min(sizes) <= 1  # dealt out evenly
    assert parts[0][0].tolist() == index[::world_size].tolist()  # every world_size-th, from the rank


def test_a_rank_left_without_a_document_borrows_the_first_as_a_ghost():
    index = np.array([7, 8])
    parts = [rank_share(index, (rank, 4)) for rank in range(4)]
    assert [(p.tolist(), g) for p, g in parts] == [([7], False), ([8], False), ([7], True), ([7], True)]
    part, ghost = rank_share(index)
    assert part.tolist() == [7, 8] and not ghost  # a single process takes the whole batch


def test_eval_batches_deal_out_whole_batches():
    corpus = EncodedCorpus([[1]] * 7)
    shares = [[index.tolist() for index, _ in corpus.eval_batches(1, None, (rank, 3))] for rank in range(3)]
    assert shares == [[[0], [3], [6]], [[1], [4]], [[2], [5]]]
    assert [index.tolist() for index, _ in corpus.eval_batches(1, None)] == [[i] for i in range(7)]


def test_corpus_batches_cover_every_document_once_within_the_token_budget():
    rng = np.random.default_rng(0)
    corpus = EncodedCorpus([[1] * int(n) for n in rng.integers(1, 60, size=500)])
    batches = corpus.batches(batch_size=32, max_tokens=400, shuffle=True, seed=1)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(500))
    for b in batches:
        assert len(b) <= 32 and (len(b) == 1 or corpus.lengths[b].max() * len(b) <= 400)
    assert [x.tolist() for x in batches] == [x.tolist() for x in corpus.batches(32, 400, shuffle=True, seed=1)]
    assert [x.tolist() for x in batches] != [x.tolist() for x in corpus.batches(32, 400, shuffle=True, seed=2)]


def test_ranks_split_every_global_batch_without_overlap_and_borrow_a_ghost_when_short():
    rng = np.random.default_rng(0)
    sizes = [*rng.integers(1, 20, size=95), 40, 45, 50, 55, 60, 33]  # the long ones fill a 64-token batch alone
    corpus = EncodedCorpus([rng.integers(4, 50, size=n).tolist() for n in sizes])
    shares = []
    for rank in range(3):
        shares.append(list(corpus.epoch_batches(8, 64, seed=5, shard=(rank, 3))))
    whole = corpus.batches(8, 64, shuffle=True, seed=5)
    assert all(len(s) == len(whole) for s in shares)  # every rank takes every step
    for step, index in enumerate(whole):
        parts = [shares[r][step] for r in range(3)]
        real = [p for p in parts if "ghost" not in p]
        got = sorted(int(x) for p in real for x in p["lengths"])
        assert got == sorted(corpus.lengths[index].tolist())  # the global batch, each document once
        assert len(real) == min(3, len(index))  # ghosts only when a batch has fewer documents than ranks
    assert any(len(index) < 3 for index in whole)  # the case above was exercised


def test_eval_batches_of_all_ranks_together_are_the_single_process_batches():
    corpus = EncodedCorpus([[4] * n for n in range(1, 30)])
    single = [index.tolist() for index, _ in corpus.eval_batches(4, 32)]
    ranks = [[index.tolist() for index, _ in corpus.eval_batches(4, 32, shard=(r, 2))] for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == sorted(single) and not set(map(tuple, ranks[0])) & set(map(tuple, ranks[1]))
