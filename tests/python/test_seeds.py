"""What a sampler made without ``rng`` means across ranks and restarts.

A plain sampler draws its seed from fresh entropy (annbatch's default). A DistributedSampler of
one uses the shared seed 0, so the ranks, whose entropy differs, deal one permutation among
themselves in global mode, and a restarted job finds its checkpoint's seed. A sampler whose seed
nobody chose adopts the seed of a state it restores; a chosen seed is checked like any setting.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import epoch_batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import Config, as_lists, configs

import chunksampler as cs

RANDOM_KINDS = ("random", "class", "weighted", "mixture")


def unseeded(config: Config) -> Config:
    return Config(**{**config.__dict__, "seed": None})


def rows_of(sampler, n_obs: int) -> list[int]:
    return [i for batch in epoch_batches(sampler, n_obs) for i in batch.tolist()]


def test_the_issues_reproduction_global_mode_over_unseeded_samplers_is_disjoint_and_complete():
    # 2,000 rows, chunks of 50, two ranks: with a seed from fresh entropy on each rank, 650 rows
    # were read on both and 650 on neither.
    def rank(r: int) -> cs.DistributedSampler:
        base = cs.RandomSampler(chunk_size=50, preload_nchunks=2, batch_size=50)
        return cs.DistributedSampler(base, dist_info=lambda: (r, 2), mode="global")

    ranks = [rank(0), rank(1)]
    assert [s.seed for s in ranks] == [0, 0] and [s.rng for s in ranks] == [None, None]
    for epoch in range(3):
        for s in ranks:
            s.set_epoch(epoch)
        rows = [rows_of(s, 2000) for s in ranks]
        assert len(rows[0]) == len(rows[1]) == 1000
        assert sorted(rows[0] + rows[1]) == list(range(2000))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs(kinds=RANDOM_KINDS, distributed="always", workers=False), st.integers(0, 3))
def test_every_rank_of_an_unseeded_sampler_plays_the_shared_seeds_epochs(config, epoch):
    config = unseeded(config)
    try:
        ranks = [config.make(rank=r) for r in range(config.world_size)]
        for s in ranks:
            s.set_epoch(epoch)
        played = [as_lists(epoch_batches(s, config.n_obs)) for s in ranks]
    except cs.ConfigError:  # a configuration some rank cannot serve (the rules are tested elsewhere)
        return
    again = [config.make(rank=r) for r in range(config.world_size)]  # other entropy, same epochs
    for s in ranks + again:
        assert s.seed == 0 and s.sampler.seed == 0
    for s in again:
        s.set_epoch(epoch)
    assert played == [as_lists(epoch_batches(s, config.n_obs)) for s in again]
    if config.kind == "random" and not config.replacement and config.mode == "global":
        rows = [i for batches in played for batch in batches for i in batch]
        assert len(rows) == len(set(rows)) or config.remainder == "pad"


def test_a_seed_given_with_rng_is_the_distributed_samplers_seed():
    base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(3))
    sharded = cs.DistributedSampler(base, dist_info=lambda: (1, 2), mode="global")
    assert sharded.seed == base.seed != 0 and sharded.rng is base.rng
    plain = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10)
    assert cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10).seed != plain.seed  # entropy


def part_then_state(sampler, n_obs: int, taken: int):
    """Takes ``taken`` requests of the sampler's epoch 1; returns its state and the rest of the epoch."""
    sampler.set_epoch(1)
    iterator = sampler.sample(n_obs)
    for _ in range(taken):
        next(iterator)
    state = sampler.state_dict()
    rest = as_lists(b for request in iterator for b in _batches(request))
    return state, rest


def _batches(request):
    rows = np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])
    return [rows[split] for split in request["splits"]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs(kinds=RANDOM_KINDS, distributed=True, workers=False), st.integers(0, 2))
def test_an_unseeded_sampler_adopts_a_states_seed_and_resumes_exactly(config, taken):
    # The state comes from a run whose seed was chosen; the restarted sampler was made without rng.
    try:
        source = config.make()
        # The epochs played: 1 (part_then_state's) and 2; with rotate an odd epoch has its own shard.
        for epoch in (1, 2):
            source.set_epoch(epoch)
            source.validate(config.n_obs)
    except cs.ConfigError:
        return
    probe = source._copy()
    probe.set_epoch(1)
    taken = min(taken, len(list(probe.sample(config.n_obs))))
    state, rest = part_then_state(source, config.n_obs, taken)
    restarted = unseeded(config).make()
    assert restarted.seed != source.seed
    restarted.load_state_dict(state)
    assert restarted.seed == source.seed
    assert as_lists(b for request in restarted.sample(config.n_obs) for b in _batches(request)) == rest
    # The adopted seed is the sampler's from now on: its next epoch is the source's next epoch.
    assert as_lists(epoch_batches(restarted, config.n_obs)) == as_lists(epoch_batches(source, config.n_obs))


@pytest.mark.parametrize("distributed", [False, True])
def test_a_chosen_seed_refuses_another_seeds_state(distributed):
    def make(seed):
        base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(seed))
        return cs.DistributedSampler(base, dist_info=lambda: (0, 2)) if distributed else base

    state, _ = part_then_state(make(1), 200, 1)
    chosen = make(2)
    with pytest.raises(cs.StateMismatchError, match=r"seed \(\d+\) is not this sampler's"):
        chosen.load_state_dict(state)
    assert as_lists(epoch_batches(chosen, 200)) == as_lists(epoch_batches(make(2), 200))


def test_a_refused_state_leaves_an_unseeded_sampler_as_it_was():
    other = cs.RandomSampler(chunk_size=5, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(1))
    state, _ = part_then_state(other, 200, 1)  # another chunk size, and another seed
    sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10)
    sampler.set_epoch(2)
    seed, twin = sampler.seed, copy.copy(sampler)
    with pytest.raises(cs.StateMismatchError, match="configuration"):
        sampler.load_state_dict(state)
    assert sampler.seed == seed and sampler.epoch == 2
    assert as_lists(epoch_batches(sampler, 200)) == as_lists(epoch_batches(twin, 200))


def test_copies_and_pickles_of_an_unseeded_sampler_still_adopt():
    source = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(4))
    state, rest = part_then_state(source, 200, 2)
    for make in (copy.copy, copy.deepcopy, lambda s: pickle.loads(pickle.dumps(s)), lambda s: s._copy()):
        restarted = make(cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10))
        restarted.load_state_dict(state)
        assert as_lists(b for request in restarted.sample(200) for b in _batches(request)) == rest


def test_assigning_rng_chooses_the_seed_and_none_unchooses_it():
    source = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(4))
    state, _ = part_then_state(source, 200, 1)
    sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10)
    sampler.rng = np.random.default_rng(5)
    with pytest.raises(cs.StateMismatchError, match="seed"):
        sampler.load_state_dict(state)
    sampler.rng = None
    sampler.load_state_dict(state)
    assert sampler.seed == source.seed
