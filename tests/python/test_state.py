"""state_dict()/load_state_dict(): a fresh sampler of the same configuration and seed continues
after any batch exactly as the uninterrupted epoch goes on, for every sampler kind (WeightedClassSampler
in both compositions), distributed in both modes, with workers; and an elastic restart of a global-mode job from 4 ranks to 3."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest
from conftest import epoch_batches, observations
from hypothesis import HealthCheck, event, given, reject, settings
from support import EVERY_KIND, EVERY_KIND_N_OBS, as_lists, configs, picks, servable

import chunksampler as cs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs())
def test_a_fresh_sampler_continues_after_every_batch(config):
    check_resume_after_every_batch(config)


# WeightedClassSampler alone, both compositions, plain and distributed: the draws above give it a
# fifth of theirs.
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs(kinds=("weighted",)))
def test_a_fresh_weighted_class_sampler_continues_after_every_batch(config):
    event(f"{config.composition}, {'distributed ' + config.mode if config.world_size else 'plain'}")
    check_resume_after_every_batch(config)


def check_resume_after_every_batch(config):
    sampler = servable(config)
    if sampler is None:
        reject()
    n_obs, worker = config.n_obs, config.worker
    whole = sampler.n_batches(n_obs, worker=worker)
    batches = []
    at_requests = []  # (batches so far, the default state_dict() then)
    iterator = sampler.sample(n_obs, worker=worker)
    assert iterator.n_batches == whole
    for request in iterator:
        batches.extend(as_lists(observations(request)))
        at_requests.append((len(batches), sampler.state_dict()))
    assert len(batches) == whole
    # Without an argument, state_dict() is the point after the batches the iterator has yielded.
    for k, state in at_requests:
        assert state == sampler.state_dict(k)
        assert (state["epoch"], state["batches_done"]) == (config.epoch, k)
    states = {k: sampler.state_dict(k) for k in range(whole + 1)}
    following = as_lists(epoch_batches(sampler, n_obs, worker=worker))

    for k in picks(whole):
        state = states[k]
        fresh = config.make()
        fresh.load_state_dict(state)
        assert fresh.state_dict() == state  # a pending restore is the point it names
        assert fresh.epoch == config.epoch
        iterator = fresh.sample(n_obs, worker=worker)
        assert iterator.n_batches == whole - k
        rest = []
        for request in iterator:
            rest.extend(as_lists(observations(request)))
            # The default state counts from the epoch's start, the restored batches included.
            assert fresh.state_dict() == states[k + len(rest)]
        assert rest == batches[k:], k
        assert fresh.epoch == config.epoch + 1
    # After the restored epoch, the restored sampler goes on as the uninterrupted one.
    assert as_lists(epoch_batches(fresh, n_obs, worker=worker)) == following


def test_load_state_dict_restores_across_a_text_round_trip():
    def make():
        return cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(3))

    sampler = make()
    iterator = sampler.sample(200)
    next(iterator)
    next(iterator)
    state = sampler.state_dict()
    assert state["batches_done"] == 8 and state["epoch"] == 0
    rest = as_lists(b for r in iterator for b in observations(r))
    fresh = make()
    fresh.load_state_dict({"state": str(state["state"])})  # only the text is read back
    assert as_lists(epoch_batches(fresh, 200)) == rest


def test_a_state_of_another_seed_or_configuration_is_refused():
    sampler = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(3))
    next(iter(sampler.sample(200)))
    state = sampler.state_dict()
    other_seed = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(4))
    with pytest.raises(cs.StateMismatchError):
        other_seed.load_state_dict(state)
    other_shape = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=8, rng=np.random.default_rng(3))
    with pytest.raises(cs.StateMismatchError):
        other_shape.load_state_dict(state)
    # A refused state leaves the sampler as it was.
    assert as_lists(epoch_batches(other_seed, 200)) == as_lists(
        epoch_batches(cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(4)), 200)
    )


def test_a_contiguous_state_does_not_restore_on_another_world_size():
    def rank(r, world):
        base = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=10, rng=np.random.default_rng(1))
        return cs.DistributedSampler(base, dist_info=lambda: (r, world))

    old = rank(0, 4)
    next(iter(old.sample(1000)))
    with pytest.raises(cs.StateMismatchError, match="world_size"):
        rank(0, 3).load_state_dict(old.state_dict())


# --- elastic restart: 4 ranks to 3, global mode ------------------------------------------------

N_OBS, CHUNK, PRELOAD, BATCH = 1003, 8, 2, 8


def _rank(rank, world, remainder, enforce, mask=slice(3, 1000)):
    base = cs.RandomSampler(chunk_size=CHUNK, preload_nchunks=PRELOAD, batch_size=BATCH, mask=mask,
                            rng=np.random.default_rng(11))
    return cs.DistributedSampler(base, dist_info=lambda: (rank, world), mode="global", remainder=remainder,
                                 enforce_equal_batches=enforce)


def _dealt(unread, world, remainder, enforce):
    """The old ranks' unread batches, in order, as the new ranks read them one after the other
    (distributed_sampler.hpp's restore: dealt in blocks; drop leaves out fewer than `world` of them,
    pad repeats as many from the start; without equal batches, all of them once)."""
    if not enforce or not unread:
        return unread
    each = -(-len(unread) // world) if remainder == "pad" else len(unread) // world
    return [unread[i % len(unread)] for i in range(each * world)]


@pytest.mark.parametrize(("remainder", "enforce"), [("drop", True), ("pad", True), ("drop", False)])
@pytest.mark.parametrize("k", [0, 1, 5, 12])
def test_elastic_restart_from_4_to_3_ranks(remainder, enforce, k):
    epoch = 2
    old = [_rank(r, 4, remainder, enforce) for r in range(4)]
    uninterrupted = []
    for sampler in old:
        sampler.set_epoch(epoch)
        uninterrupted.append(as_lists(epoch_batches(sampler, N_OBS)))
    assert all(len(b) > k for b in uninterrupted)
    # Every rank of a synchronous job is at the same point: any rank's state serves, rank 0's is taken.
    state = old[0].state_dict(k)
    assert all(sampler.state_dict(k) == state for sampler in old)

    new = [_rank(r, 3, remainder, enforce) for r in range(3)]
    after = []
    for sampler in new:
        sampler.load_state_dict(state)
        announced = sampler.n_batches(N_OBS) - k
        after.append(as_lists(epoch_batches(sampler, N_OBS)))
        assert len(after[-1]) == announced
        assert sampler.epoch == epoch + 1
    counts = {len(b) for b in after}
    assert len(counts) == 1 if enforce else max(counts) - min(counts) <= 1

    unread = [batch for batches in uninterrupted for batch in batches[k:]]
    assert [batch for batches in after for batch in batches] == _dealt(unread, 3, remainder, enforce)

    coverage = collections.Counter(o for batches in uninterrupted for batch in batches for o in batch)
    read = collections.Counter(o for batches in uninterrupted for batch in batches[:k] for o in batch)
    read.update(o for batches in after for batch in batches for o in batch)
    assert set(read) <= set(coverage)
    if not enforce:
        # Nothing left out, nothing repeated: every observation of the mask exactly once.
        assert read == collections.Counter(range(3, 1000))
    elif remainder == "drop":
        assert max(read.values()) == 1  # nothing twice
        assert len(coverage) - len(read) < 3 * BATCH  # fewer than 3 (new world size) batches lost
    else:
        assert set(read) == set(coverage) == set(range(3, 1000))  # nothing lost
        assert sum(read.values()) - len(read) <= sum(coverage.values()) - len(coverage) + 3 * BATCH


def test_elastic_restart_with_an_even_deal_reads_each_observation_exactly_once():
    # 992 observations, 4 ranks of 31 batches of 8: after k = 4 batches each, 108 unread batches
    # deal evenly to 3 ranks (36 each), so drop loses nothing: the union is the mask, once each.
    old = [_rank(r, 4, "drop", True, mask=None) for r in range(4)]
    uninterrupted = [as_lists(epoch_batches(s, 992)) for s in old]
    assert [len(b) for b in uninterrupted] == [31] * 4
    state = old[0].state_dict(4)
    read = collections.Counter(o for b in uninterrupted for batch in b[:4] for o in batch)
    for r in range(3):
        sampler = _rank(r, 3, "drop", True, mask=None)
        sampler.load_state_dict(state)
        batches = epoch_batches(sampler, 992)
        assert len(batches) == 36
        read.update(int(o) for batch in batches for o in batch)
    assert read == collections.Counter(range(992))


def test_two_elastic_restarts_in_a_row_read_each_observation_exactly_once():
    # 4 ranks read 3 batches each, 3 ranks go on from rank 0's state and read 5 more each, then 2
    # ranks finish from the state a new rank 0 gives after those: without equal batches nothing is
    # left out or repeated over the three jobs.
    first = [_rank(r, 4, "drop", False) for r in range(4)]
    read = collections.Counter(o for s in first for batch in epoch_batches(s, N_OBS)[:3] for o in batch.tolist())
    state = first[0].state_dict(3)
    second = [_rank(r, 3, "drop", False) for r in range(3)]
    for sampler in second:
        sampler.load_state_dict(state)
        read.update(o for batch in epoch_batches(sampler, N_OBS)[:5] for o in batch.tolist())
    again = second[0].state_dict(3 + 5)  # counted from the epoch's start
    assert all(sampler.state_dict(8) == again for sampler in second)
    assert again["batches_done"] == 8
    for r in range(2):
        sampler = _rank(r, 2, "drop", False)
        sampler.load_state_dict(again)
        read.update(o for batch in epoch_batches(sampler, N_OBS) for o in batch.tolist())
    assert read == collections.Counter(range(3, 1000))


@pytest.mark.parametrize("name", sorted(EVERY_KIND))
def test_a_sample_iterator_knows_its_position_in_the_epoch(name):
    """The iterator sample() (and sample_arrays()) returns says where it begins in its epoch and
    gives the state after any number of its batches: what a loader's own count needs, without
    asking the sampler for the epoch's counts."""
    config = EVERY_KIND[name]
    sampler = config.make()
    sampler.set_epoch(2)
    requests = sampler.sample(EVERY_KIND_N_OBS)
    whole = requests.n_batches
    assert requests.batches_before == 0
    for k in (0, 1, whole // 2, whole):
        assert requests.state_dict(k) == sampler.state_dict(k)
    with pytest.raises(cs.ConfigError, match=r"yielded \(%d\) must be in \[0, n_batches\(\)\]" % (whole + 1)):
        requests.state_dict(whole + 1)
    done = whole // 2
    resumed = config.make()
    resumed.load_state_dict(sampler.state_dict(done))
    rest = resumed.sample_arrays(EVERY_KIND_N_OBS)
    assert (rest.batches_before, rest.n_batches) == (done, whole - done)
    assert rest.state(0) == sampler.state_dict(done)["state"]
    later = whole - done
    assert rest.state(later) == sampler.state_dict(whole)["state"]
    # The iterator's states stay those of its epoch after the sampler has moved on.
    resumed.set_epoch(7)
    assert rest.state(later) == sampler.state_dict(whole)["state"]


def test_a_state_is_a_value_with_its_fields_text_and_pickle():
    sampler = cs.DistributedSampler(
        cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(5)),
        dist_info=lambda: (1, 3),
    )
    sampler.set_epoch(4)
    requests = sampler.sample(1000, worker=(1, 2))
    next(requests)
    text = sampler.state_dict(3)["state"]
    state = cs.SamplerState.parse(text)
    assert (state.epoch, state.batches_done, state.n_obs) == (4, 3, 1000)
    assert (state.world_size, state.num_workers, state.worker, state.seed) == (3, 2, 1, sampler.seed)
    assert state.text == str(state) == text
    assert state == cs.SamplerState.parse(text) and state != cs.SamplerState.parse(sampler.state_dict(2)["state"])
    assert hash(state) == hash(cs.SamplerState.parse(text))
    assert pickle.loads(pickle.dumps(state)) == state
    assert eval(repr(state), {"SamplerState": cs.SamplerState}) == state
    # At an epoch's start no sample() has begun, no n_obs is tied to it.
    assert cs.SamplerState.parse(cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4).state_dict()["state"]).n_obs is None
    with pytest.raises(cs.StateFormatError):
        cs.SamplerState.parse(text.replace("epoch=", "epoch=x"))
    with pytest.raises(TypeError):
        cs.SamplerState.parse(7)
