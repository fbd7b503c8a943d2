"""Masks of many ranges (``mask=[slice(0, 1000), slice(5000, None)]``): every sampler that takes a
mask reads the union of its ranges (each observation once per epoch without replacement, nothing
outside; ClassSampler draws only inside it), DistributedSampler cuts the union into disjoint shards with equal batch counts, ``mask``
and ``shard()`` read back as a slice or a list of slices, pickling and ``state_dict`` keep the
ranges, and a bad mask raises the C++ library's ConfigError. The requests themselves are compared
with the C++ samplers' in test_oracle.py."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import epoch_batches
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support import batch_sizes, many_ranges_of

import chunksampler as cs

fast = settings(max_examples=60, deadline=None)


@st.composite
def masked(draw):
    """A sampler shape, n_obs, and a mask of 2 to 4 ranges (the last open-ended sometimes)."""
    chunk_size = draw(st.integers(1, 16))
    preload_nchunks = draw(st.integers(1, 4))
    batch_size = draw(st.sampled_from(batch_sizes(chunk_size, preload_nchunks)))
    n_obs = draw(st.integers(2, 600))
    ranges = many_ranges_of(draw, n_obs)
    shape = {"chunk_size": chunk_size, "preload_nchunks": preload_nchunks, "batch_size": batch_size}
    return shape, n_obs, [slice(start, stop) for start, stop in ranges], draw(st.integers(0, 2**32))


def rows_of(mask, n_obs: int) -> list[int]:
    """The observations a mask (a slice or a list of slices) selects over ``n_obs``, in order."""
    slices = [mask] if isinstance(mask, slice) else mask
    return [row for s in slices for row in range(s.start, n_obs if s.stop is None else s.stop)]


def merged(ranges: list[slice]) -> list[slice]:
    """The ranges with adjacent ones joined, as C++ merges them."""
    out: list[slice] = []
    for r in ranges:
        if out and out[-1].stop == r.start:
            out[-1] = slice(out[-1].start, r.stop)
        else:
            out.append(r)
    return out


@fast
@given(masked(), st.sampled_from(["random", "sequential"]), st.booleans())
def test_each_observation_of_the_union_once_per_epoch_and_nothing_outside(config, kind, as_tuple):
    shape, n_obs, mask, seed = config
    given_mask = tuple(mask) if as_tuple else mask
    if kind == "random":
        sampler = cs.RandomSampler(**shape, mask=given_mask, rng=np.random.default_rng(seed))
    else:
        sampler = cs.SequentialSampler(**shape, mask=given_mask)
    expected = rows_of(mask, n_obs)
    for _ in range(2):
        batches = epoch_batches(sampler, n_obs)
        assert len(batches) == sampler.n_batches(n_obs)
        assert sorted(np.concatenate(batches).tolist()) == expected
    if kind == "sequential":  # in row order, too
        assert np.concatenate(batches).tolist() == expected


@fast
@given(masked())
def test_with_replacement_and_num_samples_draws_stay_inside_the_union(config):
    shape, n_obs, mask, seed = config
    inside = set(rows_of(mask, n_obs))
    num_samples = len(inside) + 7
    try:
        sampler = cs.RandomSampler(**shape, mask=mask, replacement=True, num_samples=num_samples,
                                   rng=np.random.default_rng(seed))
        sampler.validate(n_obs)
    except cs.ConfigError:
        return  # a range shorter than a chunk caps num_samples: C++'s rule, tested there
    drawn = np.concatenate(epoch_batches(sampler, n_obs))
    assert len(drawn) == num_samples
    assert set(drawn.tolist()) <= inside


@fast
@given(masked())
def test_grid_starts_keeps_every_chunk_inside_one_cell_of_the_grid(config):
    shape, n_obs, mask, seed = config
    inside = set(rows_of(mask, n_obs))
    chunk = shape["chunk_size"]
    try:
        sampler = cs.RandomSampler(**shape, mask=mask, replacement=True, num_samples=2 * len(inside),
                                   grid_starts=True, rng=np.random.default_rng(seed))
        requests = list(sampler.sample(n_obs))
    except cs.ConfigError:
        return  # a union shorter than a chunk caps num_samples: C++'s rule, tested there
    assert sampler.grid_starts and "grid_starts=True" in repr(sampler)
    for request in requests:
        for piece in request["requests"]:
            assert piece.start // chunk == (piece.stop - 1) // chunk, (piece, chunk)
            assert set(range(piece.start, piece.stop)) <= inside
    # Unpickled, it keeps the option.
    assert pickle.loads(pickle.dumps(sampler)).grid_starts


def test_grid_starts_is_off_by_default_and_checked():
    assert not cs.RandomSampler(chunk_size=4, preload_nchunks=1, batch_size=4).grid_starts
    with pytest.raises(TypeError, match="grid_starts must be a bool"):
        cs.RandomSampler(chunk_size=4, preload_nchunks=1, batch_size=4, grid_starts=1)


@fast
@given(masked(), st.integers(1, 3), st.sampled_from([None, "contiguous", "global"]))
def test_class_sampler_draws_only_inside_the_union(config, world, mode):
    shape, n_obs, mask, seed = config
    # Classes in runs of 2 to 5 chunks, so that most ranges hold a whole chunk of some class.
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 6, size=n_obs) * shape["chunk_size"]
    codes = np.repeat(rng.integers(0, 3, size=n_obs), lengths)[:n_obs].astype(np.int8)
    inside = set(rows_of(mask, n_obs))
    try:
        sampler = cs.ClassSampler(**shape, classes=codes, num_samples=60, mask=mask, rng=rng)
        if mode is not None:
            sampler = cs.DistributedSampler(sampler, dist_info=lambda: (world - 1, world), mode=mode)
        sampler.validate(n_obs)
    except cs.ConfigError:
        event("refused")
        return  # no range holds a whole chunk of a class (or a rank's share of one): C++'s rules
    event(f"served, {mode}")
    assert sampler.mask == merged(mask) or [sampler.mask] == merged(mask)
    drawn = np.concatenate(epoch_batches(sampler, n_obs))
    assert set(drawn.tolist()) <= inside
    for batch in epoch_batches(sampler, n_obs):
        assert len(set(codes[batch].tolist())) == 1  # one class per batch, as without a mask


@fast
@given(
    masked(),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from(["contiguous", "global"]),
    st.sampled_from(["drop", "rotate"]),
    st.integers(0, 3),
)
def test_distributed_shards_of_many_ranges_are_disjoint_and_cover_the_union(config, world, equal, mode, remainder, epoch):
    shape, n_obs, mask, seed = config
    union = rows_of(mask, n_obs)
    unit = shape["batch_size"] * world if equal else world
    if len(union) < unit:
        return  # every rank needs a whole batch (or one observation): refused, see test_errors
    per_rank, shards = [], []
    for rank in range(world):
        base = cs.RandomSampler(**shape, mask=mask, rng=np.random.default_rng(seed))
        sampler = cs.DistributedSampler(
            base, dist_info=lambda rank=rank: (rank, world), enforce_equal_batches=equal, mode=mode, remainder=remainder
        )
        assert sampler.mask == merged(mask) or sampler.mask == merged(mask)[0]
        sampler.set_epoch(epoch)
        shards.append(rows_of(sampler.shard(n_obs), n_obs))
        batches = epoch_batches(sampler, n_obs)
        assert len(batches) == sampler.n_batches(n_obs)
        per_rank.append(np.concatenate(batches) if batches else np.array([], dtype=np.int64))
    everything = np.concatenate(per_rank)
    assert len(np.unique(everything)) == len(everything)  # disjoint, no repeats within a rank
    assert set(everything.tolist()) <= set(union)
    if equal:
        assert len({len(rows) for rows in per_rank}) == 1
    if mode == "contiguous":
        # Each rank reads exactly its shard, a cut of the union by observation count: disjoint,
        # in row order, leaving out fewer than one unit per rank.
        assert all(sorted(rows.tolist()) == shard for rows, shard in zip(per_rank, shards))
        assert sum(map(len, shards)) == len(set().union(*map(set, shards)))
        assert len(union) - len(everything) < (shape["batch_size"] if equal else 1) * world + world
    else:
        # Every rank deals from one set: the union, less what the remainder policy leaves out.
        assert all(shard == shards[0] for shard in shards) and set(shards[0]) <= set(union)
        assert set(everything.tolist()) <= set(shards[0])
        if not equal:
            assert sorted(everything.tolist()) == union == shards[0]  # nothing left out


def test_worked_shards_span_ranges():
    # The union of [0, 10) and [20, 40) is 30 observations; 3 ranks of 10 each, cut by count:
    # rank 1's 10 are [10 ... 20) of the union, i.e. rows [20, 30), rank 2's rows [30, 40).
    base = cs.SequentialSampler(chunk_size=5, preload_nchunks=1, batch_size=5, mask=[slice(0, 10), slice(20, 40)])
    shards = [cs.DistributedSampler(base, dist_info=lambda r=r: (r, 3)).shard(50) for r in range(3)]
    assert shards == [slice(0, 10), slice(20, 30), slice(30, 40)]
    # Two ranks: 15 each, rank 0's spanning both ranges.
    shards = [cs.DistributedSampler(base, dist_info=lambda r=r: (r, 2)).shard(50) for r in range(2)]
    assert shards == [[slice(0, 10), slice(20, 25)], slice(25, 40)]


def test_mask_round_trips_as_a_list_and_merges_adjacent_ranges():
    def sampler(mask):
        return cs.RandomSampler(chunk_size=4, preload_nchunks=2, batch_size=4, mask=mask, rng=np.random.default_rng(0))

    assert sampler([slice(0, 1000), slice(5000, None)]).mask == [slice(0, 1000), slice(5000, None)]
    assert sampler((slice(0, 10), slice(20, 30))).mask == [slice(0, 10), slice(20, 30)]
    assert sampler([slice(0, 10), slice(10, 20), slice(30, 40)]).mask == [slice(0, 20), slice(30, 40)]
    assert sampler([slice(0, 10), slice(10, None)]).mask == slice(0, None)  # one range: a slice
    assert sampler([slice(None, 10)]).mask == slice(0, 10)
    assert sampler(slice(5, 50)).mask == slice(5, 50) and sampler(None).mask == slice(0, None)
    s = sampler(None)
    s.mask = [slice(0, 10), slice(20, 30)]
    assert s.mask == [slice(0, 10), slice(20, 30)]
    s.mask = (slice(40, 50),)
    assert s.mask == slice(40, 50)
    s.mask = None
    assert s.mask == slice(0, None)
    codes = np.repeat([0, 1], 50)
    classes = cs.ClassSampler(4, 2, 4, classes=codes, num_samples=16, mask=(slice(0, 8), slice(16, 24), slice(24, 40)))
    assert classes.mask == [slice(0, 8), slice(16, 40)]
    classes.mask = [slice(60, 80), slice(90, None)]
    assert classes.mask == [slice(60, 80), slice(90, None)]
    assert pickle.loads(pickle.dumps(classes)).mask == [slice(60, 80), slice(90, None)]
    seq = cs.SequentialSampler(chunk_size=4, preload_nchunks=2, batch_size=4, mask=[slice(0, 8), slice(16, 24)])
    assert seq.mask == [slice(0, 8), slice(16, 24)]
    assert cs.DistributedSampler(seq, dist_info=lambda: (0, 2)).mask == [slice(0, 8), slice(16, 24)]
    assert "mask=[slice(0, 8, None), slice(16, 24, None)]" in repr(seq)


MASK = [slice(3, 200), slice(260, 400), slice(450, None)]


def _random(mask=MASK):
    return cs.RandomSampler(chunk_size=10, preload_nchunks=3, batch_size=6, mask=mask, rng=np.random.default_rng(5))


def _distributed(mask=MASK):
    return cs.DistributedSampler(_random(mask), dist_info=lambda: (1, 3), mode="global")


@pytest.mark.parametrize("make", [_random, _distributed], ids=["random", "distributed"])
def test_pickled_mid_epoch_with_many_ranges_yields_the_rest(make):
    n_obs = 600
    whole = epoch_batches(make(), n_obs)
    sampler = make()
    iterator = sampler.sample(n_obs)
    for _ in range(3):
        next(iterator)
    done = sampler.state_dict()["batches_done"]
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.mask == sampler.mask == MASK
    rest = epoch_batches(copy, n_obs)
    assert len(rest) == len(whole) - done
    assert all(np.array_equal(a, b) for a, b in zip(rest, whole[done:]))


@pytest.mark.parametrize("make", [_random, _distributed], ids=["random", "distributed"])
def test_state_dict_resumes_with_many_ranges_and_refuses_another_mask(make):
    n_obs = 600
    reference = make()
    whole = epoch_batches(reference, n_obs)
    k = len(whole) // 2
    state = reference.state_dict(batches_done=k)
    sampler = make()
    sampler.load_state_dict(state)
    rest = epoch_batches(sampler, n_obs)
    assert all(np.array_equal(a, b) for a, b in zip(rest, whole[k:])) and len(rest) == len(whole) - k
    other = make([slice(3, 200), slice(260, 400)])
    with pytest.raises(cs.StateMismatchError):
        other.load_state_dict(state)


def _seq(**kwargs):
    return cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5, **kwargs)


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        ([slice(10, 20), slice(0, 5)], "Ranges: ranges[0] = [10, 20) and ranges[1] = [0, 5) are not sorted; ranges must be in row order"),
        ([slice(0, 20), slice(10, 30)], "Ranges: ranges[0] = [0, 20) overlaps ranges[1] = [10, 30)"),
        ([slice(0, 10), slice(20, 20)], "Ranges: ranges[1] = [20, 20) is empty; start must be < stop"),
        ([slice(0, None), slice(20, 30)], "Ranges: ranges[0] = [0, end) is open-ended but not the last of 2 ranges; only the last may be"),
        ([slice(-5, 10), slice(20, 30)], "Ranges: ranges[0] = [-5, 10): start must be >= 0"),
        ([], "Ranges: no ranges given; a mask needs at least one range"),
    ],
)
def test_bad_masks_raise_the_cpp_message(mask, message):
    with pytest.raises(cs.ConfigError) as error:
        _seq(mask=mask)
    assert str(error.value) == message
    sampler = _seq(mask=[slice(0, 10), slice(20, 30)])
    with pytest.raises(cs.ConfigError) as error:
        sampler.mask = mask
    assert str(error.value) == message
    assert sampler.mask == [slice(0, 10), slice(20, 30)]  # a refused assignment changes nothing


def test_a_mask_past_n_obs_is_refused_at_the_epoch_with_the_cpp_message():
    sampler = _seq(mask=[slice(0, 10), slice(20, 30), slice(40, 60)])
    with pytest.raises(cs.ConfigError, match=r"^SequentialSampler: mask\[2\] = \[40, 60\) must end at or before n_obs \(50\)$"):
        sampler.validate(50)
    with pytest.raises(cs.ConfigError, match=r"must start before n_obs \(30\)"):
        _seq(mask=[slice(0, 10), slice(30, None)]).validate(30)


@pytest.mark.parametrize(
    ("mask", "error", "message"),
    [
        ([slice(0, 10), 3], TypeError, "mask[1] must be a slice"),
        ([slice(0, 10), (20, 30)], TypeError, "mask[1] must be a slice"),
        (iter([slice(0, 10)]), TypeError, "mask must be a slice (e.g. slice(0, 1000) or slice(100, None)), a list of slices"),
        ([slice(0, 10), slice(20, 30, 2)], cs.ConfigError, "mask[1].step must be 1, but got 2"),
        ([slice(0, 10), slice("a", 30)], TypeError, "mask[1].start must be an int"),
        ([slice(0, 2**64)], cs.ConfigError, "mask[0].stop (18446744073709551616) must be in [-2^63, 2^63)"),
    ],
)
def test_mask_of_the_wrong_type(mask, error, message):
    with pytest.raises(error) as raised:
        _seq(mask=mask)
    assert str(raised.value).startswith(message)
