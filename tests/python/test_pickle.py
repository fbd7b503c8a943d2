"""Pickling keeps a sampler's configuration, seed and point in its epochs: an unpickled copy yields
what the original would, fresh, mid-epoch (it continues after the yielded batches), after a whole
epoch, after set_epoch, after load_state_dict, after mask and rng assignment; in another process
too; and a DistributedSampler does not ask dist_info again."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest
from conftest import epoch_batches, observations
from support import EVERY_KIND, EVERY_KIND_N_OBS, as_lists

import chunksampler as cs

N_OBS = EVERY_KIND_N_OBS
CONFIGS = EVERY_KIND
kinds = pytest.mark.parametrize("name", list(CONFIGS))


def clone(sampler):
    return pickle.loads(pickle.dumps(sampler))


def batches(requests):
    return as_lists(b for request in requests for b in observations(request))


@kinds
def test_a_fresh_sampler(name):
    sampler = CONFIGS[name].make()
    copy = clone(sampler)
    assert type(copy) is type(sampler) and copy.seed == sampler.seed and repr(copy) == repr(sampler)
    for _ in range(2):
        assert as_lists(epoch_batches(copy, N_OBS)) == as_lists(epoch_batches(sampler, N_OBS))


@kinds
@pytest.mark.parametrize("taken", [1, 2])
@pytest.mark.parametrize("worker", [None, (1, 2)])
def test_mid_epoch_the_copy_continues_after_the_yielded_batches(name, taken, worker):
    sampler = CONFIGS[name].make()
    sampler.set_epoch(1)
    iterator = sampler.sample(N_OBS, worker=worker)
    yielded = batches(next(iterator) for _ in range(taken))
    copy = clone(sampler)
    assert copy.state_dict() == sampler.state_dict()
    assert copy.state_dict()["batches_done"] == len(yielded) > 0
    rest = batches(iterator)
    assert rest, "the epoch must go on after the requests taken, or the test shows nothing"
    assert batches(copy.sample(N_OBS, worker=worker)) == rest
    # Then both go on to the next epoch alike.
    assert as_lists(epoch_batches(copy, N_OBS, worker=worker)) == as_lists(epoch_batches(sampler, N_OBS, worker=worker))


@kinds
def test_after_a_whole_epoch_the_copy_plays_the_next_epoch(name):
    sampler = CONFIGS[name].make()
    epoch_batches(sampler, N_OBS)
    copy = clone(sampler)
    assert copy.epoch == sampler.epoch == 1
    assert as_lists(epoch_batches(copy, N_OBS)) == as_lists(epoch_batches(sampler, N_OBS))


@kinds
def test_after_set_epoch(name):
    sampler = CONFIGS[name].make()
    epoch_batches(sampler, N_OBS)
    sampler.set_epoch(3)
    copy = clone(sampler)
    assert copy.epoch == 3
    expected = as_lists(epoch_batches(sampler, N_OBS))
    assert as_lists(epoch_batches(copy, N_OBS)) == expected
    reference = CONFIGS[name].make()
    reference.set_epoch(3)
    assert as_lists(epoch_batches(reference, N_OBS)) == expected


@kinds
def test_after_load_state_dict_the_restore_is_still_pending(name):
    original = CONFIGS[name].make()
    iterator = original.sample(N_OBS)
    next(iterator)
    state = original.state_dict()
    rest = batches(iterator)
    sampler = CONFIGS[name].make()
    sampler.load_state_dict(state)
    copy = clone(sampler)
    assert copy.state_dict() == state
    assert batches(copy.sample(N_OBS)) == rest


@pytest.mark.parametrize("name", ["random", "sequential", "class", "weighted", "random-global"])
def test_sample_arrays_mid_epoch(name):
    sampler = CONFIGS[name].make()
    iterator = sampler.sample_arrays(N_OBS)
    next(iterator)
    copy = clone(sampler)
    rest = []
    for starts, stops, positions, offsets in iterator:
        rows = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])
        rest.extend(rows[positions[offsets[i] : offsets[i + 1]]].tolist() for i in range(len(offsets) - 1))
    assert batches(copy.sample(N_OBS)) == rest


def test_assigned_mask_and_rng_are_kept():
    sampler = CONFIGS["random"].make()
    sampler.mask = slice(100, 400)
    sampler.rng = np.random.default_rng(99)
    copy = clone(sampler)
    assert copy.mask == slice(100, 400) and copy.seed == sampler.seed
    assert as_lists(epoch_batches(copy, N_OBS)) == as_lists(epoch_batches(sampler, N_OBS))
    assert {o for b in epoch_batches(copy, N_OBS) for o in b.tolist()} == set(range(100, 400))


def test_a_mixture_keeps_updated_weights():
    sampler = CONFIGS["mixture-global"].make()
    sampler.update_weights([0.0, 1.0, 0.0])
    copy = clone(sampler)
    assert copy.sampler.weights == [0.0, 1.0, 0.0]
    expected = as_lists(epoch_batches(sampler, N_OBS))
    assert as_lists(epoch_batches(copy, N_OBS)) == expected
    assert all(300 <= o < 500 for b in expected for o in b)


def test_a_distributed_sampler_does_not_call_dist_info_again():
    calls = []

    def dist_info():
        calls.append(1)
        return (1, 3)

    sampler = cs.DistributedSampler(CONFIGS["random"].base(), dist_info=dist_info, mode="global")
    copy = clone(clone(sampler))
    assert len(calls) == 1
    assert (copy.rank, copy.world_size, copy.mode) == (1, 3, "global")
    assert as_lists(epoch_batches(copy, N_OBS)) == as_lists(epoch_batches(sampler, N_OBS))


def test_a_class_sampler_carries_its_codes_to_another_process():
    """The copy does not need the array it was made from: it is unpickled where that array is not."""
    samplers = {name: CONFIGS[name].make() for name in ["class", "class-global", "weighted", "weighted-contiguous"]}
    for sampler in samplers.values():
        it = sampler.sample(N_OBS)
        next(it)
    expected = {name: [batches(s.sample(N_OBS)), as_lists(epoch_batches(s, N_OBS))] for name, s in
                {n: clone(s) for n, s in samplers.items()}.items()}
    code = (
        "import pickle, sys\n"
        "import numpy as np\n"
        "samplers = pickle.loads(sys.stdin.buffer.read())\n"
        "out = {}\n"
        "for name, s in samplers.items():\n"
        "    epochs = []\n"
        "    for _ in range(2):\n"
        "        epoch = []\n"
        "        for r in s.sample(600):\n"
        "            rows = np.concatenate([np.arange(x.start, x.stop) for x in r['requests']])\n"
        "            epoch.extend(rows[split].tolist() for split in r['splits'])\n"
        "        epochs.append(epoch)\n"
        "    out[name] = epochs\n"
        "sys.stdout.buffer.write(pickle.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(samplers), capture_output=True, check=True)
    assert pickle.loads(result.stdout) == expected


@pytest.mark.parametrize("kind", ["ClassSampler", "WeightedClassSampler"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_a_class_sampler_pickles_its_runs_not_its_codes(kind, dtype):
    # 10^6 codes in 4 runs: the pickle carries the runs (and settings), so it stays small whatever
    # the codes' count and type, and the unpickled sampler (or a DataLoader worker's copy) plans the
    # same epochs as the original without them.
    codes = np.repeat(np.array([0, 1, 2, 1], dtype=dtype), 250_000)
    sampler = getattr(cs, kind)(100, 4, 200, classes=codes, num_samples=4_000, rng=np.random.default_rng(3))
    data = pickle.dumps(sampler)
    assert len(data) < 4_096, len(data)
    copy = pickle.loads(data)
    for _ in range(2):
        assert as_lists(epoch_batches(copy, codes.size)) == as_lists(epoch_batches(sampler, codes.size))
    wrapped = pickle.dumps(cs.DistributedSampler(sampler, dist_info=lambda: (1, 2)))
    assert len(wrapped) < 4_096, len(wrapped)
