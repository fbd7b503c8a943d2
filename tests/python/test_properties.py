"""Invariants over random configurations (hypothesis): shards disjoint and inside the mask, equal
batch counts, every observation once per epoch, deterministic for a seed."""

from __future__ import annotations

import numpy as np
from conftest import epoch_batches
from hypothesis import given, settings
from hypothesis import strategies as st
from support import batch_sizes

import chunksampler as cs

fast = settings(max_examples=60, deadline=None)


@st.composite
def configs(draw):
    chunk_size = draw(st.integers(1, 16))
    preload_nchunks = draw(st.integers(1, 4))
    batch_size = draw(st.sampled_from(batch_sizes(chunk_size, preload_nchunks)))
    n_obs = draw(st.integers(1, 600))
    start = draw(st.integers(0, n_obs - 1))
    stop = draw(st.one_of(st.none(), st.integers(start + 1, n_obs)))
    mask = draw(st.sampled_from([None, slice(start, stop)]))
    seed = draw(st.integers(0, 2**32))
    return {"chunk_size": chunk_size, "preload_nchunks": preload_nchunks, "batch_size": batch_size}, n_obs, mask, seed


def resolved(mask, n_obs):
    if mask is None:
        return 0, n_obs
    return mask.start, n_obs if mask.stop is None else mask.stop


@fast
@given(configs(), st.booleans())
def test_random_sampler_reads_every_observation_once(config, shuffle):
    shape, n_obs, mask, seed = config
    if shuffle:
        sampler = cs.RandomSampler(**shape, mask=mask, rng=np.random.default_rng(seed))
    else:
        sampler = cs.SequentialSampler(**shape, mask=mask)
    batches = epoch_batches(sampler, n_obs)
    assert len(batches) == sampler.n_batches(n_obs)
    start, stop = resolved(mask, n_obs)
    assert sorted(np.concatenate(batches).tolist()) == list(range(start, stop))
    assert all(len(b) == shape["batch_size"] for b in batches[:-1])


@fast
@given(configs())
def test_deterministic_for_a_seed(config):
    shape, n_obs, mask, seed = config
    runs = [
        epoch_batches(cs.RandomSampler(**shape, mask=mask, rng=np.random.default_rng(seed)), n_obs) for _ in range(2)
    ]
    assert len(runs[0]) == len(runs[1])
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


@fast
@given(
    configs(),
    st.integers(1, 5),
    st.booleans(),
    st.sampled_from(["contiguous", "global"]),
    st.sampled_from(["drop", "rotate"]),
    st.integers(0, 3),
)
def test_distributed_shards_are_disjoint_inside_the_mask_with_equal_batches(config, world, equal, mode, remainder, epoch):
    shape, n_obs, mask, seed = config
    start, stop = resolved(mask, n_obs)
    unit = shape["batch_size"] * world if equal else world
    if (stop - start) < unit:
        return  # every rank needs a whole batch (or one observation): refused, see test_errors
    per_rank = []
    for rank in range(world):
        base = cs.RandomSampler(**shape, mask=mask, rng=np.random.default_rng(seed))
        sampler = cs.DistributedSampler(
            base, dist_info=lambda rank=rank: (rank, world), enforce_equal_batches=equal, mode=mode, remainder=remainder
        )
        sampler.set_epoch(epoch)
        expected = sampler.n_batches(n_obs)
        batches = epoch_batches(sampler, n_obs)
        assert len(batches) == expected
        per_rank.append(batches)
    # In global mode without equal batches a rank may have one batch fewer: possibly none at all.
    everything = np.concatenate([batch for b in per_rank for batch in b])
    assert len(np.unique(everything)) == len(everything)  # disjoint, and no repeats within a rank
    assert everything.min() >= start and everything.max() < stop
    if equal:
        assert len({len(b) for b in per_rank}) == 1
        assert all(len(batch) == shape["batch_size"] for b in per_rank for batch in b)
    if not equal and mode == "global":
        assert len(everything) == stop - start  # nothing left out
        assert max(map(len, per_rank)) - min(map(len, per_rank)) <= 1


@fast
@given(configs(), st.integers(1, 4))
def test_workers_split_the_epoch(config, num_workers):
    shape, n_obs, mask, seed = config
    sampler = cs.RandomSampler(**shape, mask=mask, rng=np.random.default_rng(seed))
    whole = epoch_batches(sampler, n_obs)
    shares = []
    for worker in range(num_workers):
        sampler.set_epoch(0)
        shares.extend(epoch_batches(sampler, n_obs, worker=(worker, num_workers)))
    assert sorted(np.concatenate(shares).tolist()) == sorted(np.concatenate(whole).tolist())
