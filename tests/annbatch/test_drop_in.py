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
        lambda: chunksampler.WeightedClassSampler(
            10, 2, 10, classes=np.zeros(100, dtype=np.int8), num_samples=50, composition="stratified"
        ),
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


def test_loader_batches_of_a_stratified_weighted_class_sampler_mix_the_classes_by_weight():
    # Rows [500 c, 500 c + 500) are class c; 10 chunks of 10 rows a request, weights 4:3:2:1, so
    # every request holds 4, 3, 2 and 1 chunks of the classes, and its 5 batches of 20 rows hold
    # 40, 30, 20 and 10 rows of them between them.
    codes = np.repeat(np.arange(4, dtype=np.int8), N_OBS // 4)
    sampler = chunksampler.WeightedClassSampler(
        10, 10, 20, classes=codes, num_samples=1000, class_weights=[4, 3, 2, 1], composition="stratified",
        rng=np.random.default_rng(0),
    )
    loader = Loader(batch_sampler=sampler, preload_to_gpu=False, to=None).add_dataset(make_x())
    batches = list(loader)
    assert len(batches) == sampler.n_batches(N_OBS) == 50
    classes = [codes[rows_of([batch])] for batch in batches]
    assert all(len(c) == 20 for c in classes)
    for request in range(10):
        rows = np.concatenate(classes[5 * request : 5 * request + 5])
        assert np.bincount(rows, minlength=4).tolist() == [40, 30, 20, 10], request
    assert max(len(set(c.tolist())) for c in classes) > 1  # batches mix classes, unlike ClassSampler's
