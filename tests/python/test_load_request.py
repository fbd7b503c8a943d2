"""sample() yields annbatch's LoadRequest dicts; the splits are int64 views into one array."""

from __future__ import annotations

import threading

import numpy as np
from conftest import rng

import chunksampler as cs


def test_keys_and_types():
    sampler = cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=8, rng=rng())
    for request in sampler.sample(1000):
        assert set(request) == {"requests", "splits"}
        assert all(isinstance(s, slice) and s.step is None for s in request["requests"])
        assert all(isinstance(s, np.ndarray) and s.dtype == np.int64 and s.ndim == 1 for s in request["splits"])
        assert 1 <= len(request["splits"][-1]) <= 8


def test_splits_are_views_into_one_positions_array():
    sampler = cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=8, rng=rng())
    request = next(iter(sampler.sample(1000)))
    splits = request["splits"]
    assert len(splits) == 8
    base = splits[0].base
    assert base is not None and all(s.base is base for s in splits)
    assert all(np.shares_memory(s, base) for s in splits)
    start = splits[0].__array_interface__["data"][0]
    for i, s in enumerate(splits):
        assert s.__array_interface__["data"][0] == start + 8 * 8 * i
    assert sorted(np.concatenate(splits).tolist()) == list(range(64))


def test_a_request_outlives_the_next_one_and_the_iterator():
    sampler = cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=8, rng=rng())
    it = sampler.sample(1000)
    first = next(it)
    copy = [s.copy() for s in first["splits"]]
    rest = list(it)
    del it, rest, sampler
    assert all(np.array_equal(a, b) for a, b in zip(first["splits"], copy))


def test_the_iterator_ends_and_stays_ended():
    it = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10).sample(25)
    assert it.n_batches == 3
    assert len(list(it)) == 3
    assert list(it) == []


def test_threads_iterating_their_own_epochs_agree():
    sampler = cs.RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=64, rng=rng(3))
    iterators = []
    for _ in range(4):
        sampler.set_epoch(5)
        iterators.append(sampler.sample(200_000))
    results = [None] * 4

    def run(i):
        results[i] = np.concatenate([np.concatenate(r["splits"]) for r in iterators[i]])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_close_ends_an_iteration_as_a_generators_close_does():
    # annbatch's sample() is a generator; code that calls close() on it works with ours.
    sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(0))
    for sample in (sampler.sample, sampler.sample_arrays):
        it = sample(100)
        next(it)
        it.close()
        assert list(it) == []
        it.close()  # again: nothing
    # Each pass is its own: the next one is a whole epoch.
    assert sum(len(r["splits"]) for r in sampler.sample(100)) == 10
