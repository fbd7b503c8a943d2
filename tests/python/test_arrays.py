"""sample_arrays(): the same requests as sample(), as four read-only int64 arrays; a copy kept is
stable, the arrays outlive the iterator and the sampler, and many epochs leak nothing."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from support import configs, servable

import chunksampler as cs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs())
def test_the_same_requests_as_sample(config):
    sampler = servable(config)
    if sampler is None:
        reject()
    dicts = list(sampler.sample(config.n_obs, worker=config.worker))
    sampler.set_epoch(config.epoch)
    arrays = sampler.sample_arrays(config.n_obs, worker=config.worker)
    assert arrays.n_batches == sum(len(d["splits"]) for d in dicts)
    count = 0
    for request, got in zip(dicts, arrays):
        assert isinstance(got, cs.RequestArrays)
        assert all(a.dtype == np.int64 and a.ndim == 1 and not a.flags.writeable for a in got)
        assert [slice(int(a), int(b)) for a, b in zip(got.starts, got.stops)] == request["requests"]
        assert got.offsets[0] == 0 and got.offsets[-1] == len(got.positions)
        splits = np.split(got.positions, got.offsets[1:-1])
        assert len(splits) == len(request["splits"])
        assert all(np.array_equal(a, b) for a, b in zip(splits, request["splits"]))
        # Progress counts the same: the state after these batches is the dict path's.
        count += len(splits)
        assert sampler.state_dict() == sampler.state_dict(count)
        assert sampler.state_dict()["batches_done"] == count
    with pytest.raises(StopIteration):
        next(arrays)
    assert count == arrays.n_batches


def test_arrays_are_read_only():
    sampler = cs.RandomSampler(chunk_size=8, preload_nchunks=4, batch_size=8, rng=np.random.default_rng(0))
    request = next(iter(sampler.sample_arrays(1000)))
    for array in request:
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1
        with pytest.raises(ValueError):
            array.flags.writeable = True


def test_a_copy_is_stable_and_the_arrays_outlive_the_iterator_and_the_sampler():
    sampler = cs.RandomSampler(chunk_size=8, preload_nchunks=4, batch_size=8, rng=np.random.default_rng(0))
    expected = list(sampler.sample(1000))
    sampler.set_epoch(0)
    iterator = sampler.sample_arrays(1000)
    kept = []
    for request in iterator:
        kept.append(tuple(a.copy() for a in request))  # what the docs say to do: the views move on
    last = request
    for (starts, stops, positions, offsets), want in zip(kept, expected):
        assert [slice(int(a), int(b)) for a, b in zip(starts, stops)] == want["requests"]
        assert np.array_equal(positions, np.concatenate(want["splits"]))
    del iterator, sampler
    gc.collect()
    # The last request's views keep the epoch's buffers alive: no use after free.
    assert all(np.array_equal(a, b) for a, b in zip(last, kept[-1]))


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set from /proc")
@pytest.mark.parametrize("method", ["sample_arrays", "sample"])
def test_many_epochs_leak_nothing(method):
    # Each epoch allocates buffers of 256 KB (a request of 32768 positions) and sample() copies
    # each request's positions (3 of 256 KB): kept by a leak or a reference cycle (the collector
    # is off), 200 epochs (60 of sample()) would hold 50 MB.
    sampler = cs.DistributedSampler(
        cs.RandomSampler(chunk_size=64, preload_nchunks=512, batch_size=256, rng=np.random.default_rng(1)),
        dist_info=lambda: (0, 2),
        mode="global",
    )
    n_obs = 200_000

    def play(epochs):
        for _ in range(epochs):
            for request in getattr(sampler, method)(n_obs):
                pass
        return request

    gc.collect()
    gc.disable()
    try:
        play(20)
        before, objects = _rss(), len(gc.get_objects())
        play(200 if method == "sample_arrays" else 60)
        grown, new_objects = _rss() - before, len(gc.get_objects()) - objects
    finally:
        gc.enable()
    assert grown < 16 * 2**20, f"resident set grew by {grown / 2**20:.1f} MB"
    assert new_objects < 100
