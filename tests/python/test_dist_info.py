"""DistributedSampler's dist_info, set_epoch and workers."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import epoch_batches, rng

import chunksampler as cs


def test_dist_info_callable_is_called_once():
    calls = []

    def dist_info():
        calls.append(1)
        return (1, 2)

    base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=rng())
    sampler = cs.DistributedSampler(base, dist_info=dist_info)
    assert (sampler.rank, sampler.world_size) == (1, 2)
    sampler.n_batches(1000)
    list(sampler.sample(1000))
    list(sampler.sample(1000))
    assert len(calls) == 1


def test_torch_backend_needs_an_initialized_process_group():
    torch_distributed = pytest.importorskip("torch.distributed")
    assert not torch_distributed.is_initialized()
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5)
    # The environment is at fault, as with dist_info="env" outside a launcher: still a RuntimeError.
    with pytest.raises(cs.DistEnvironmentError, match="torch.distributed is not initialized"):
        cs.DistributedSampler(base, dist_info="torch")


def test_the_wrapped_sampler_is_copied():
    base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=rng(4))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (0, 2))
    before = epoch_batches(sampler, 400)
    base.set_epoch(9)
    sampler.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(before, epoch_batches(sampler, 400)))
    assert sampler.rng is base.rng and sampler.batch_size == 10 and sampler.shuffle


def test_set_epoch_replays_an_epoch_and_epochs_differ():
    sampler = cs.RandomSampler(chunk_size=8, preload_nchunks=4, batch_size=8, rng=rng(5))
    first = epoch_batches(sampler, 512)
    second = epoch_batches(sampler, 512)
    assert sampler.epoch == 2
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))
    sampler.set_epoch(1)
    assert all(np.array_equal(a, b) for a, b in zip(second, epoch_batches(sampler, 512)))
    sampler.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, epoch_batches(sampler, 512)))


@pytest.mark.parametrize("num_workers", [1, 2, 3, 5])
def test_workers_cover_the_epoch(num_workers):
    base = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=rng(6))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (1, 2))
    whole = epoch_batches(sampler, 1000)
    seen = []
    for worker in range(num_workers):
        sampler.set_epoch(0)
        batches = epoch_batches(sampler, 1000, worker=(worker, num_workers))
        assert len(batches) == sampler.n_batches(1000, worker=(worker, num_workers))
        seen.extend(batches)
    assert sorted(np.concatenate(seen).tolist()) == sorted(np.concatenate(whole).tolist())
    assert len(seen) == len(whole)


@pytest.mark.parametrize("remainder", ["drop", "pad", "rotate"])
def test_global_mode_gives_equal_batch_counts(remainder):
    counts = set()
    for rank in range(3):
        base = cs.RandomSampler(chunk_size=7, preload_nchunks=2, batch_size=7, rng=rng(8))
        sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 3), mode="global", remainder=remainder)
        assert (sampler.mode, sampler.remainder) == ("global", remainder)
        counts.add(len(epoch_batches(sampler, 500)))
    assert len(counts) == 1


def test_rotate_reads_every_observation_in_two_epochs():
    seen = set()
    for rank in range(2):
        base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
        sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 2), remainder="rotate")
        for _ in range(2):
            seen.update(np.concatenate(epoch_batches(sampler, 105)).tolist())
    assert seen == set(range(105))
