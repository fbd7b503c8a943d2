"""Copies of a sampler share nothing that changes: ``copy.copy``, ``copy.deepcopy``, pickling (what a
spawned DataLoader worker gets) and ``DistributedSampler.sampler`` each give a sampler at the same
point whose later changes (weights, mask, rng, epoch, restores) leave the original as it was, for
every sampler kind, plain and distributed."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import epoch_batches, observations
from support import EVERY_KIND, EVERY_KIND_N_OBS, as_lists

import chunksampler as cs

N_OBS = EVERY_KIND_N_OBS
CONFIGS = EVERY_KIND
COPIES = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda s: pickle.loads(pickle.dumps(s)),
}


def changes(sampler) -> list:
    """What may be done to a copy: every change the sampler offers."""
    done = []
    sampler.set_epoch(3)  # a copy taken mid-epoch holds a pending restore, which update_weights refuses
    wrapped = sampler.sampler if isinstance(sampler, cs.DistributedSampler) else sampler
    if isinstance(wrapped, cs.MixtureSampler):
        sampler.update_weights([5.0, 1.0, 1.0], 2.0)
        done.append("weights")
    if not isinstance(sampler, (cs.DistributedSampler, cs.MixtureSampler)):
        sampler.mask = slice(10, 500)
        done.append("mask")
        if not isinstance(sampler, cs.SequentialSampler):
            sampler.rng = np.random.default_rng(99)
            done.append("rng")
    next(iter(sampler.sample(N_OBS)))
    return done


@pytest.mark.parametrize("how", list(COPIES))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_copy_changed_in_every_way_leaves_the_original_as_it_was(name, how):
    original = CONFIGS[name].make()
    original.set_epoch(1)
    iterator = original.sample(N_OBS)
    next(iterator)  # mid-epoch: the copy continues from here too
    twin = CONFIGS[name].make()
    twin.set_epoch(1)
    twin_iterator = twin.sample(N_OBS)
    next(twin_iterator)
    clone = COPIES[how](original)
    assert repr(clone) == repr(original)
    changes(clone)
    assert repr(original) == repr(twin)
    if isinstance(original, cs.DistributedSampler):
        assert repr(original.sampler) == repr(twin.sampler)
    # A pickle of the original (a spawned worker's) continues its epoch as the twin's iterator does,
    # and the original's next epoch is the twin's.
    pickled = pickle.loads(pickle.dumps(original))
    rest = as_lists(b for request in twin_iterator for b in observations(request))
    assert as_lists(epoch_batches(pickled, N_OBS)) == rest
    assert as_lists(epoch_batches(original, N_OBS)) == as_lists(epoch_batches(twin, N_OBS))


def test_the_issues_reproduction_update_weights_on_a_copy():
    mixture = cs.MixtureSampler(10, 2, 10, sizes=[500, 500], weights=[1, 1], rng=np.random.default_rng(0))
    d = cs.DistributedSampler(mixture, dist_info=lambda: (0, 2))
    c = copy.copy(d)
    c.update_weights([1, 5])
    assert c.sampler.weights == [1.0, 5.0]
    assert d.sampler.weights == [1.0, 1.0]
    assert pickle.loads(pickle.dumps(d)).sampler.weights == [1.0, 1.0]
    fresh = cs.DistributedSampler(
        cs.MixtureSampler(10, 2, 10, sizes=[500, 500], weights=[1, 1], rng=np.random.default_rng(0)),
        dist_info=lambda: (0, 2))
    for sampler in (d, pickle.loads(pickle.dumps(d)), copy.deepcopy(d)):
        assert as_lists(epoch_batches(sampler, 1000)) == as_lists(epoch_batches(fresh._copy(), 1000))


@pytest.mark.parametrize("name", [n for n in CONFIGS if "-" in n])
def test_the_wrapped_sampler_property_is_a_copy_of_its_own(name):
    sampler = CONFIGS[name].make()
    inner = sampler.sampler
    assert inner is not sampler.sampler and inner is not sampler._wrapped
    changes(inner)
    assert repr(sampler.sampler) == repr(CONFIGS[name].make().sampler)
