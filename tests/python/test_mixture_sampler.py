"""MixtureSampler: each request reads one dataset, on its aligned chunk grid; the datasets' shares of
an epoch's requests follow weights ** (1 / temperature) to within one request; update_weights
changes later epochs and refuses older states; the same through a DistributedSampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import epoch_batches
from hypothesis import given, settings
from hypothesis import strategies as st

import chunksampler as cs

SIZES = [400, 250, 150, 200]


def mixture(**kwargs):
    args = {"chunk_size": 10, "preload_nchunks": 2, "batch_size": 10, "sizes": SIZES, "rng": np.random.default_rng(5)}
    return cs.MixtureSampler(**{**args, **kwargs})


def dataset_of(request, sizes=SIZES):
    """The one dataset every chunk of ``request`` lies in (asserts there is one)."""
    ends = np.cumsum(sizes)
    found = {int(np.searchsorted(ends, chunk.start, side="right")) for chunk in request["requests"]}
    assert len(found) == 1, request["requests"]
    (d,) = found
    begin = ends[d] - sizes[d]
    for chunk in request["requests"]:
        assert begin <= chunk.start < chunk.stop <= ends[d]
        assert (chunk.start - begin) % 10 == 0  # the dataset's aligned grid
    return d


def shares(sampler, n_obs=1000, sizes=SIZES):
    counts = [0] * len(sizes)
    for request in sampler.sample(n_obs):
        counts[dataset_of(request, sizes)] += 1
    return counts


def expected(weights, temperature, requests):
    powered = [w ** (1 / temperature) for w in weights]
    return [requests * p / sum(powered) for p in powered]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0]), min_size=4, max_size=4).filter(any),
    st.sampled_from([0.25, 1.0, 3.0]),
    st.integers(100, 3000),
    st.integers(0, 2**32),
)
def test_shares_follow_the_weights_to_within_one_request(weights, temperature, num_samples, seed):
    sampler = mixture(weights=weights, temperature=temperature, num_samples=num_samples, rng=np.random.default_rng(seed))
    counts = shares(sampler)
    assert sum(counts) == math.ceil(num_samples / 20)
    for got, want, w in zip(counts, expected(weights, temperature, sum(counts)), weights):
        assert abs(got - want) < 1, (counts, weights, temperature)
        assert w > 0 or got == 0


def test_equal_weights_by_default_and_every_row_once_without_oversampling():
    sampler = mixture()
    assert sampler.weights == [1.0, 1.0, 1.0, 1.0] and sampler.temperature == 1.0
    assert sampler.sizes == SIZES and sampler.mask == slice(0, 1000)
    counts = shares(sampler)
    assert counts == [13, 13, 12, 12]  # 50 requests, 12.5 each, ties to the lower index
    # Dataset 2 (150 rows, 15 chunks) gets 12 requests of 2 chunks: 24 > 15, so whole passes repeat.
    # Dataset 0 (40 chunks) gets 26 chunks: no row twice.
    rows = np.concatenate(epoch_batches(mixture(), 1000))
    first = rows[rows < 400]
    assert len(first) == 260 and len(np.unique(first)) == 260


def test_temperature_flattens_the_mixture():
    cold = shares(mixture(weights=[1, 0, 0, 9], num_samples=2000))
    hot = shares(mixture(weights=[1, 0, 0, 9], num_samples=2000, temperature=1000.0))
    assert cold == [10, 0, 0, 90] and hot == [50, 0, 0, 50]


def test_update_weights_changes_the_next_epochs_and_refuses_older_states():
    sampler = mixture(num_samples=2000)
    iterator = sampler.sample(1000)
    next(iterator)
    old_state = sampler.state_dict()
    sampler.update_weights([0, 0, 1, 3], temperature=0.5)
    assert sampler.weights == [0.0, 0.0, 1.0, 3.0] and sampler.temperature == 0.5
    assert shares(sampler) == [0, 0, 10, 90]
    sampler.update_weights([1, 1, 1, 1])  # the temperature stays
    assert sampler.temperature == 0.5 and shares(sampler) == [25, 25, 25, 25]
    with pytest.raises(cs.StateMismatchError):
        sampler.load_state_dict(old_state)
    with pytest.raises(cs.ConfigError, match="weights"):
        sampler.update_weights([1, 1])
    with pytest.raises(cs.ConfigError, match="temperature"):
        sampler.update_weights([1, 1, 1, 1], temperature=0.0)
    assert sampler.weights == [1.0, 1.0, 1.0, 1.0]  # a refused update changes nothing


@pytest.mark.parametrize("mode", ["contiguous", "global"])
def test_distributed_mixture(mode):
    ranks = [
        cs.DistributedSampler(mixture(num_samples=1200), dist_info=lambda r=r: (r, 2), mode=mode) for r in range(2)
    ]
    reads = []
    for d in ranks:
        d.update_weights([1, 0, 0, 1])
        assert d.sampler.weights == [1.0, 0.0, 0.0, 1.0]
        counts = [0] * 4
        for request in d.sample(1000):
            counts[dataset_of(request)] += 1
        assert counts[1] == counts[2] == 0
        reads.append(counts)
    assert sum(reads[0]) == sum(reads[1])
    with pytest.raises(TypeError, match="MixtureSampler"):
        cs.DistributedSampler(cs.SequentialSampler(10, 1, 10), dist_info=lambda: (0, 1)).update_weights([1])


def test_bad_mixture_arguments():
    with pytest.raises(TypeError, match="sizes"):
        mixture(sizes=[1.5, 100])
    with pytest.raises(TypeError, match="sizes"):
        mixture(sizes="100")
    with pytest.raises(TypeError, match="temperature"):
        mixture(temperature="hot")
    with pytest.raises(TypeError, match="weights"):
        mixture(weights="x")
    with pytest.raises(cs.ConfigError, match="sizes"):
        mixture(sizes=[])
    with pytest.raises(cs.ConfigError, match=r"sizes\[1\] \(5\) must be >= chunk_size"):
        mixture(sizes=[100, 5])
    with pytest.raises(cs.ConfigError, match="n_obs"):
        mixture().sample(999)
