"""The seeds' worked numbers, as annbatch gives them for the same configurations."""

from __future__ import annotations

import pytest
from conftest import epoch_batches, rng

import chunksampler as cs


@pytest.mark.parametrize("rank", [0, 1])
def test_20000_observations_on_2_ranks_give_39_batches_each(rank):
    base = cs.RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=rng(1))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 2))
    assert sampler.n_batches(20_000) == 39
    batches = epoch_batches(sampler, 20_000)
    assert len(batches) == 39
    assert all(len(b) == 256 for b in batches)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_107_observations_on_3_ranks_give_30_per_rank_with_equal_batches(rank):
    base = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=10, rng=rng(2))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 3))
    batches = epoch_batches(sampler, 107)
    assert sum(len(b) for b in batches) == 30
    assert sampler.n_batches(107) == len(batches) == 3
    assert sampler.shard(107) == slice(30 * rank, 30 * rank + 30)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_107_observations_on_3_ranks_give_35_per_rank_without_equal_batches(rank):
    base = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=10, rng=rng(2))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 3), enforce_equal_batches=False)
    batches = epoch_batches(sampler, 107)
    assert sum(len(b) for b in batches) == 35
    assert sampler.n_batches(107) == len(batches) == 4
    assert sorted(int(o) for b in batches for o in b) == list(range(35 * rank, 35 * rank + 35))


def test_sequential_reads_in_order():
    sampler = cs.SequentialSampler(chunk_size=10, preload_nchunks=2, batch_size=5)
    requests = list(sampler.sample(45))
    assert [r["requests"] for r in requests] == [
        [slice(0, 10), slice(10, 20)],
        [slice(20, 30), slice(30, 40)],
        [slice(40, 45)],
    ]
    assert [list(s) for s in requests[0]["splits"]] == [list(range(i, i + 5)) for i in range(0, 20, 5)]
    assert [list(s) for s in requests[2]["splits"]] == [[0, 1, 2, 3, 4]]
    assert not sampler.shuffle and sampler.rng is None


def test_open_ended_mask_follows_n_obs():
    sampler = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10, mask=slice(25, None))
    assert sampler.mask == slice(25, None)
    assert sampler.n_batches(60) == 4
    assert sampler.n_batches(100) == 8
    assert [int(b[0]) for b in epoch_batches(sampler, 60)] == [25, 35, 45, 55]
