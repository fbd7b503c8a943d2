"""ClassSampler: codes from a pandas.Categorical or an integer array of any width, one class per
batch, class_weights (0 excludes), mask, the run-length and n_obs rules, workers, ranks, and the
class of each draw following the weights (a chi-square test over many seeds)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import epoch_batches, observations
from support import as_lists

import chunksampler as cs

# Runs of 3 classes, each at least 10 long; 600 observations.
CODES = np.repeat([0, 1, 2, 0, 2, 1, 0], [100, 60, 120, 80, 90, 70, 80]).astype(np.int64)


def sampler(codes=CODES, **kwargs):
    args = {"chunk_size": 10, "preload_nchunks": 3, "batch_size": 5, "num_samples": 300, "rng": np.random.default_rng(0)}
    return cs.ClassSampler(**{**args, **kwargs}, classes=codes)


def classes_of(batches, codes=CODES):
    return [set(codes[np.asarray(b)].tolist()) for b in batches]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_every_integer_width_gives_the_same_epochs(dtype):
    expected = as_lists(epoch_batches(sampler(), 600))
    assert as_lists(epoch_batches(sampler(CODES.astype(dtype)), 600)) == expected


def test_a_pandas_categorical_is_read_by_its_codes():
    pd = pytest.importorskip("pandas")
    names = np.array(["B cell", "T cell", "NK cell"])
    categorical = pd.Categorical(names[CODES], categories=list(names))
    assert np.array_equal(categorical.codes, CODES)
    assert as_lists(epoch_batches(sampler(categorical), 600)) == as_lists(epoch_batches(sampler(), 600))
    # Another order of the categories is other codes, so other classes: the codes are what count.
    reordered = pd.Categorical(names[CODES], categories=list(names[::-1]))
    batches = epoch_batches(sampler(reordered), 600)
    assert all(len(c) == 1 for c in classes_of(batches))


def test_every_batch_is_of_one_class_and_the_epoch_has_num_samples_positions():
    s = sampler(preload_nchunks=4, batch_size=20)
    for epoch in range(3):
        batches = epoch_batches(s, 600)
        assert sum(map(len, batches)) == 300
        assert all(len(c) == 1 for c in classes_of(batches)), epoch
        assert len({tuple(b) for b in as_lists(batches)}) > 1


def test_a_request_reads_chunks_inside_runs_of_their_class():
    for request in sampler().sample(600):
        for chunk in request["requests"]:
            assert chunk.stop - chunk.start == 10
            assert len(set(CODES[chunk.start : chunk.stop].tolist())) == 1


def test_class_weights_zero_excludes_a_class():
    s = sampler(class_weights=[1.0, 0.0, 2.0])
    seen = set().union(*classes_of(epoch_batches(s, 600)), *classes_of(epoch_batches(s, 600)))
    assert seen == {0, 2}
    assert s.class_weights.tolist() == [1.0, 0.0, 2.0]


def test_mask_keeps_draws_inside_it():
    s = sampler(mask=slice(150, 450))
    assert s.mask == slice(150, 450)
    obs = np.concatenate(epoch_batches(s, 600))
    assert obs.min() >= 150 and obs.max() < 450
    s.mask = slice(0, 100)  # one run of class 0
    assert classes_of(epoch_batches(s, 600)) == [{0}] * 60


def test_a_short_run_of_a_sampled_class_is_a_config_error():
    codes = np.repeat([0, 1, 0], [50, 7, 50])
    with pytest.raises(cs.ConfigError, match=r"at least chunk_size \(10\).*class 1") as info:
        sampler(codes)
    assert isinstance(info.value, ValueError)
    # Weight 0 excludes the class, and its short run with it.
    assert classes_of(epoch_batches(sampler(codes, class_weights=[1.0, 0.0]), 107), codes) == [{0}] * 60


def test_with_a_categorical_the_short_run_error_names_labels_and_weights_follow_categories():
    pd = pytest.importorskip("pandas")
    categorical = pd.Categorical(["T"] * 30 + ["B"] * 3 + ["NK"] * 30)  # codes: B=0, NK=1, T=2
    with pytest.raises(cs.ConfigError, match=r"class 0 \(1 short run, shortest 3\).*by label: classes \['B'\]"):
        sampler(categorical)
    # One weight per category, whatever codes occur: 2 weights for 3 categories is refused ...
    with pytest.raises(cs.ConfigError, match=r"class_weights has 2 entries; .* classes.categories \(3\)"):
        sampler(categorical, class_weights=[1.0, 1.0])
    # ... and a Series, whose index may order the weights otherwise than the categories, too.
    with pytest.raises(TypeError, match="not a pandas Series"):
        sampler(categorical, class_weights=pd.Series([0.0, 1.0, 1.0], index=["NK", "B", "T"]))
    # B excluded by weight 0: its short run no longer matters, and no batch holds it.
    batches = epoch_batches(sampler(categorical, class_weights=[0.0, 1.0, 1.0]), 63)
    assert set().union(*classes_of(batches, categorical.codes)) == {1, 2}


def test_n_obs_must_be_the_number_of_codes():
    s = sampler()
    with pytest.raises(cs.ConfigError, match=r"the class codes' length \(600\) does not match loader n_obs \(599\)"):
        s.sample(599)
    with pytest.raises(cs.ConfigError, match="n_obs"):
        s.n_batches(601)
    assert s.epoch == 0


@pytest.mark.parametrize("num_workers", [2, 3])
def test_workers_read_disjoint_requests_that_make_the_epoch(num_workers):
    s = sampler()
    whole = [as_lists(observations(r)) for r in s.sample(600)]
    assert len(whole) >= num_workers
    for worker in range(num_workers):
        s.set_epoch(0)
        mine = [as_lists(observations(r)) for r in s.sample(600, worker=(worker, num_workers))]
        assert mine == whole[worker::num_workers]


@pytest.mark.parametrize("mode", ["contiguous", "global"])
def test_distributed_ranks(mode):
    world = 3
    per_rank = []
    for rank in range(world):
        d = cs.DistributedSampler(sampler(num_samples=600), dist_info=lambda rank=rank: (rank, world), mode=mode)
        if mode == "contiguous":
            shard = d.shard(600)
            assert shard == slice(200 * rank, 200 * rank + 200)
        batches = epoch_batches(d, 600)
        assert len(batches) == d.n_batches(600)
        assert all(len(c) == 1 for c in classes_of(batches))
        if mode == "contiguous":
            obs = np.concatenate(batches)
            assert obs.min() >= shard.start and obs.max() < shard.stop
        per_rank.append(as_lists(batches))
    assert len({len(b) for b in per_rank}) == 1
    assert per_rank[0] != per_rank[1]


# Upper 0.1% points of the chi-square distribution, by degrees of freedom.
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266}


def chi_square(counts, probabilities):
    n = sum(counts)
    return sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probabilities))


def test_class_draws_follow_the_weights():
    # Batch = chunk, one request of 4 chunks: every batch is one draw of a class. 300 seeds of 40
    # draws each: 12000 draws. The seeds are fixed, so the test is deterministic; the threshold
    # is the 0.1% point, so a correct sampler fails it for about one set of seeds in a thousand.
    codes = np.repeat([0, 1, 2, 3, 1], [300, 100, 200, 50, 350])  # class 3 has weight 0 below
    weights = np.array([1.0, 2.0, 3.0, 0.0])
    counts = np.zeros(4, dtype=np.int64)
    for seed in range(300):
        s = cs.ClassSampler(10, 4, 10, classes=codes, num_samples=400, class_weights=weights,
                            rng=np.random.default_rng(seed))
        for batch in epoch_batches(s, len(codes)):
            (c,) = set(codes[batch].tolist())
            counts[c] += 1
    assert counts.sum() == 12000 and counts[3] == 0
    expected = weights[:3] / weights[:3].sum()
    assert chi_square(counts[:3], expected) < CHI2_999[2], counts
    # The test has power: equal weights, or the valid starts' shares, are far off.
    assert chi_square(counts[:3], [1 / 3] * 3) > 10 * CHI2_999[2]
    starts = np.array([300 - 9, 450 - 18, 200 - 9])
    assert chi_square(counts[:3], starts / starts.sum()) > 10 * CHI2_999[2]


def test_bad_classes_and_weights():
    with pytest.raises(TypeError, match="classes"):
        sampler("abc")
    with pytest.raises(TypeError, match="classes"):
        sampler(CODES.astype(np.float64))
    with pytest.raises(TypeError, match="classes"):
        sampler(CODES.reshape(2, -1))
    with pytest.raises(TypeError, match="classes"):
        sampler(CODES > 0)
    with pytest.raises(cs.ConfigError, match="class code|code"):
        sampler(np.concatenate([CODES, [-1] * 10]).astype(np.int8))
    with pytest.raises(TypeError, match="class_weights"):
        sampler(class_weights="x")
    with pytest.raises(cs.ConfigError, match="class_weights"):
        sampler(class_weights=[1.0, -1.0, 1.0])
    with pytest.raises(cs.ConfigError, match="class_weights"):
        sampler(class_weights=[0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="num_samples"):
        sampler(num_samples=None)


def test_the_short_run_error_carries_every_class_code_as_data():
    # 25 classes of short runs (2 rows each, chunk 3) between long runs of class 25: the message lists
    # 20 of them, the error's codes hold all 25 (ascending), a copy and a pickle keep them.
    codes = np.concatenate([np.repeat(np.arange(25), 2), np.full(30, 25)]).astype(np.int32)
    with pytest.raises(cs.ShortRunsError) as info:
        cs.ClassSampler(classes=codes, chunk_size=3, preload_nchunks=1, batch_size=1, num_samples=10)
    assert info.value.codes == list(range(25))
    assert "class 19 (1 short run, shortest 2) and 5 more" in str(info.value)
    assert isinstance(info.value, cs.ConfigError)
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is cs.ShortRunsError and again.codes == info.value.codes and str(again) == str(info.value)
