"""Our own checks in annbatch's environment (run by scripts/test_annbatch.sh beside annbatch's
tests): the samplers are virtual subclasses of annbatch.abc.Sampler, and annbatch.Loader serves
batches from them as from its own."""

from __future__ import annotations

import numpy as np
import pytest
from annbatch import Loader
from annbatch.abc import Sampler

import chunksampler

N_OBS = 2_000


def rows_of(batches):
    # Row i of X holds i in every column, so a batch names the observations it holds.
    return np.concatenate([np.asarray(batch["X"])[:, 0] for batch in batches]).astype(np.int64)


def make_x():
    return np.repeat(np.arange(N_OBS, dtype=np.float32)[:, None], 3, axis=1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: chunksampler.RandomSampler(64, 4, 128),
        lambda: chunksampler.SequentialSampler(64, 4, 128),
        lambda: chunksampler.ClassSampler(10, 2, 10, classes=np.zeros(100, dtype=np.int8), num_samples=50),
        lambda: chunksampler.MixtureSampler(64, 2, 64, sizes=[200, 300]),
        lambda: chunksampler.DistributedSampler(chunksampler.RandomSampler(64, 4, 128), dist_info=lambda: (0, 2)),
    ],
)
def test_every_sampler_is_an_annbatch_sampler(make):
    assert isinstance(make(), Sampler)


def test_loader_reads_every_row_once_from_a_random_sampler():
    sampler = chunksampler.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=128, rng=np.random.default_rng(0))
    loader = Loader(batch_sampler=sampler, preload_to_gpu=False, to=None).add_dataset(make_x())
    batches = list(loader)
    assert len(batches) == sampler.n_batches(N_OBS) == 16
    assert sorted(rows_of(batches).tolist()) == list(range(N_OBS))


def test_loader_reads_one_ranks_shard_from_a_distributed_sampler():
    shards = []
    for rank in range(2):
        base = chunksampler.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=128, rng=np.random.default_rng(0))
        sampler = chunksampler.DistributedSampler(base, dist_info=lambda rank=rank: (rank, 2))
        shard = sampler.shard(N_OBS)  # this rank's contiguous range in the coming epoch
        loader = Loader(batch_sampler=sampler, preload_to_gpu=False, to=None).add_dataset(make_x())
        batches = list(loader)
        assert len(batches) == sampler.n_batches(N_OBS)
        rows = rows_of(batches)
        assert shard.start <= rows.min() and rows.max() < shard.stop
        assert len(set(rows.tolist())) == len(rows)
        shards.append(set(rows.tolist()))
    assert not shards[0] & shards[1]
