"""The one cursor every loader keeps its place in (chunksampler._cursor), through the loaders that use
it: a state at any point resumes exactly the rest, a state at an epoch's end the next epoch, a
refused state leaves the loader as it was, set_epoch keeps a restore of its own epoch, and one
envelope is written and every older shape read."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import rng
from support import batch_sizes

import chunksampler as cs
from chunksampler import _cursor

torch = pytest.importorskip("torch")
from chunksampler.torch import BatchSampler, ChunkDataLoader  # noqa: E402


def rows(batch) -> list[int]:
    return [int(i) for i in batch]


def epoch(loader) -> list[list[int]]:
    return [rows(batch) for batch in loader]


def config(seed: int):
    """A random sampler, dataset size and world size (global or contiguous mode), from ``seed``."""
    draw = np.random.default_rng(seed)
    chunk, preload = int(draw.integers(1, 9)), int(draw.integers(1, 5))
    batch = int(draw.choice(batch_sizes(chunk, preload)))
    n_obs = int(draw.integers(chunk * preload, 400))
    drop_last = bool(draw.integers(2))
    world_size = int(draw.integers(1, 4))
    mode = ("global", "contiguous")[int(draw.integers(2))]

    def make():
        base = cs.RandomSampler(chunk, preload, batch, drop_last=drop_last, rng=rng(seed))
        if world_size == 1:
            return base
        return cs.DistributedSampler(base, dist_info=lambda: (world_size - 1, world_size), mode=mode)

    return make, n_obs


@pytest.mark.parametrize("seed", range(60))
def test_a_state_after_any_batch_resumes_exactly_the_rest_and_its_epochs_end_the_next_epoch(seed):
    make, n_obs = config(seed)
    reference = ChunkDataLoader(range(n_obs), make())
    epoch0, epoch1 = epoch(reference), epoch(reference)
    points = sorted({0, 1, len(epoch0) // 2, len(epoch0) - 1, len(epoch0)} & set(range(len(epoch0) + 1)))
    for k in points:
        first = ChunkDataLoader(range(n_obs), make())
        batches = iter(first)
        for _ in range(k):
            next(batches)
        state = first.state_dict()
        assert (state["epoch"], state["batches_done"]) == (0, k)
        resumed = ChunkDataLoader(range(n_obs), make())
        resumed.load_state_dict(state)
        assert len(resumed) == (len(epoch0) if k < len(epoch0) else len(epoch1))
        if k < len(epoch0):
            assert epoch(resumed) == epoch0[k:]
            assert epoch(resumed) == epoch1
        else:  # at its epoch's end: the next epoch, from its start
            assert epoch(resumed) == epoch1


@pytest.mark.parametrize("seed", range(20))
def test_set_epoch_keeps_a_restore_of_its_own_epoch_and_drops_it_for_another(seed):
    make, n_obs = config(seed)
    reference = ChunkDataLoader(range(n_obs), make())
    epochs = [epoch(reference) for _ in range(3)]
    if len(epochs[0]) < 2:
        return
    first = ChunkDataLoader(range(n_obs), make())
    batches = iter(first)
    next(batches)
    state = first.state_dict()
    # The loader's set_epoch and the sampler's own (Lightning's call on loader.sampler) keep it.
    for keep in (lambda loader: loader.set_epoch(0), lambda loader: loader.sampler.set_epoch(0)):
        resumed = ChunkDataLoader(range(n_obs), make())
        resumed.load_state_dict(state)
        keep(resumed)
        assert resumed.state_dict() == state
        assert epoch(resumed) == epochs[0][1:]
    for other in (1, 2):
        resumed = ChunkDataLoader(range(n_obs), make())
        resumed.load_state_dict(state)
        resumed.set_epoch(other)
        assert resumed.state_dict()["batches_done"] == 0
        assert epoch(resumed) == epochs[other]


def test_a_refused_state_leaves_each_loader_where_it_was():
    def sampler(seed=1):
        return cs.RandomSampler(4, 2, 4, rng=rng(seed))

    other = ChunkDataLoader(range(100), sampler(seed=2))
    next(iter(other))
    for make in (lambda: ChunkDataLoader(range(100), sampler()), lambda: BatchSampler(sampler(), 100)):
        loader = make()
        it = iter(loader)
        for _ in range(3):
            next(it)
        before = loader.state_dict()
        with pytest.raises(cs.StateMismatchError, match="load_state_dict: the state is not one of this loader's"):
            loader.load_state_dict(other.state_dict())
        smaller = ChunkDataLoader(range(90), sampler())
        next(iter(smaller))
        with pytest.raises(cs.StateMismatchError, match="dataset size"):
            loader.load_state_dict(smaller.state_dict())
        with pytest.raises(TypeError, match="state_dict must be a dict"):
            loader.load_state_dict("epoch=0")
        assert loader.state_dict() == before
        assert rows(next(it)) == rows(list(make())[3])


def test_a_state_taken_while_workers_prefetch_is_the_start_of_the_pass_until_a_batch_is_handed_out():
    loader = ChunkDataLoader(range(200), cs.RandomSampler(4, 2, 4, rng=rng(3)), num_workers=1)
    whole = epoch(ChunkDataLoader(range(200), cs.RandomSampler(4, 2, 4, rng=rng(3))))
    batches = iter(loader)
    first = next(batches)
    assert rows(first) == whole[0] and loader.state_dict()["batches_done"] == 1
    del batches
    state = loader.state_dict()
    resumed = ChunkDataLoader(range(200), cs.RandomSampler(4, 2, 4, rng=rng(3)))
    resumed.load_state_dict(state)
    assert epoch(resumed) == whole[1:]


def test_a_batch_sampler_restores_an_epochs_end_as_its_sampler_does():
    """BatchSampler stands for a sampler: a state at an epoch's end restores that epoch's empty rest
    (which the next set_epoch leaves), where a loader goes on to the next epoch."""
    make = lambda: cs.RandomSampler(4, 2, 4, rng=rng(4))  # noqa: E731
    batches = BatchSampler(make(), 60)
    epoch0, epoch1 = list(batches), list(batches)
    end = BatchSampler(make(), 60)
    it = iter(end)
    for _ in epoch0:
        next(it)
    state = end.state_dict()
    assert (state["epoch"], state["batches_done"]) == (0, len(epoch0))
    resumed = BatchSampler(make(), 60)
    resumed.load_state_dict(state)
    assert list(resumed) == [] and list(resumed) == epoch1
    loader = ChunkDataLoader(range(60), make())
    loader.load_state_dict(state)
    assert epoch(loader) == epoch1


# --- the envelope ---------------------------------------------------------------------------------


def test_the_envelope_round_trips_and_every_older_shape_is_read():
    loader = ChunkDataLoader(range(100), cs.RandomSampler(4, 2, 4, rng=rng(5)))
    next(iter(loader))
    state = loader.state_dict()
    envelope = _cursor.write_state(state)
    assert envelope == {"format": "chunksampler.loaders/1", "train": state, "world_size": 1}
    assert _cursor.write_state(state, summary=True) == {**envelope, "epoch": 0, "batches_done": 1}
    assert _cursor.write_state(None) == {}
    for shape in (
        envelope,
        {**envelope, "epoch": 0, "batches_done": 1},
        {"format": "chunksampler.scvi/1", "train": state, "world_size": 1},  # 0.3's scvi data module
        {"train": state},  # 0.3's ChunkDataModule
        {"format": "chunksampler.grain/1", **state},  # 0.4's Grain iterator
        dict(state),  # 0.4's Trainer checkpoint file: the bare state
    ):
        assert _cursor.read_state("X", copy.deepcopy(shape)) == state
    assert _cursor.read_state("X", {}) is None
    with pytest.raises(cs.StateFormatError, match="'chunksampler.loaders/2' is unknown .a newer chunksampler"):
        _cursor.read_state("X", {**envelope, "format": "chunksampler.loaders/2"})
    with pytest.raises(cs.StateFormatError, match="expected"):
        _cursor.read_state("X", {**envelope, "extra": 1})
    with pytest.raises(TypeError, match="expected"):
        _cursor.read_state("X", [state])


def test_each_kind_of_split_wraps_a_plain_sampler_as_the_table_says():
    base = cs.SequentialSampler(4, 2, 4)
    train = _cursor.shard("train", base, lambda: (1, 3))
    evaluation = _cursor.shard("eval", base, lambda: (1, 3))
    gathered = _cursor.shard("eval_gathered", base, lambda: (1, 3))
    assert (train.rank, train.world_size, train.mode, train.enforce_equal_batches) == (1, 3, "contiguous", True)
    assert (evaluation.mode, evaluation.enforce_equal_batches) == ("global", False)
    assert (gathered.mode, gathered.enforce_equal_batches) == ("global", True)
    assert _cursor.shard("train", base, lambda: (0, 2), remainder="drop").remainder == "drop"
