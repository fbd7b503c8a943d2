"""WeightedClassSampler: ClassSampler's chunks, one class per chunk, a request's rows shuffled
together, so batches mix the classes by weight. Worked numbers of both compositions, classes of
chunks and batches against the weights (chi-square over many seeds), stratified requests and
epochs within one chunk of the weights (hypothesis), batches that mix classes where ClassSampler's
hold one, codes viewed in place, masks, workers, ranks, and bad input with the C++ messages. The
requests themselves are compared with the C++ library's in test_oracle.py, resume in
test_state.py, pickling in test_pickle.py."""

from __future__ import annotations

import os
import subprocess
import tracemalloc
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from conftest import epoch_batches, observations
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from support import as_lists, batch_sizes

import chunksampler as cs

# Runs of 3 classes, each a multiple of 10 long; 600 observations.
CODES = np.repeat([0, 1, 2, 0, 2, 1, 0], [100, 60, 120, 80, 90, 70, 80]).astype(np.int64)


def sampler(codes=CODES, **kwargs):
    args = {"chunk_size": 10, "preload_nchunks": 4, "batch_size": 10, "num_samples": 400, "classes": codes,
            "rng": np.random.default_rng(0)}
    return cs.WeightedClassSampler(**{**args, **kwargs})


def chunk_classes(request, codes=CODES) -> list[int]:
    """The class of each chunk of `request` (every chunk lies in one run of one class)."""
    classes = [set(codes[s.start : s.stop].tolist()) for s in request["requests"]]
    assert all(len(c) == 1 for c in classes), classes
    return [c.pop() for c in classes]


def request_counts(s, n_obs=len(CODES), codes=CODES, n_classes=3, **kwargs) -> list[list[int]]:
    """Each request's chunks counted by class."""
    return [np.bincount(chunk_classes(r, codes), minlength=n_classes).tolist() for r in s.sample(n_obs, **kwargs)]


# --- worked numbers ------------------------------------------------------------------------------

EVEN = np.repeat([0, 1, 2], 40)  # class c is rows [40 c, 40 c + 40)


def test_stratified_weights_5_3_2_with_10_chunks_a_request_give_5_3_2_in_every_request():
    pd = pytest.importorskip("pandas")
    names = np.array(["B", "NK", "T"])
    categorical = pd.Categorical(names[EVEN], categories=list(names))
    for weights in ([5, 3, 2], [0.5, 0.3, 0.2], np.array([5.0, 3.0, 2.0])):
        s = cs.WeightedClassSampler(4, 10, 8, classes=categorical, num_samples=6 * 40, class_weights=weights,
                                    composition="stratified", rng=np.random.default_rng(7))
        assert s.n_batches(120) == 30
        assert request_counts(s, 120, EVEN) == [[5, 3, 2]] * 6


def test_stratified_weights_5_3_2_with_8_chunks_a_request():
    # 4, 2.4 and 1.6 chunks a request: 2 requests of (4, 3, 1) and 3 of (4, 2, 2), 20, 12, 8 in all.
    for seed in range(10):
        s = cs.WeightedClassSampler(4, 8, 8, classes=EVEN, num_samples=5 * 32, class_weights=[5, 3, 2],
                                    composition="stratified", rng=np.random.default_rng(seed))
        counts = request_counts(s, 120, EVEN)
        assert sorted(counts) == [[4, 2, 2]] * 3 + [[4, 3, 1]] * 2, seed


def test_stratified_43_chunks_make_5_whole_requests_and_one_of_3():
    # 170 positions in chunks of 4: 43 chunks, the last of 2 rows. The epoch holds 21.5, 12.9 and
    # 8.6 chunks rounded so that they sum to 43; the last request 1.5, 0.9 and 0.6, rounded to 3.
    totals = set()
    for seed in range(20):
        s = cs.WeightedClassSampler(4, 8, 4, classes=EVEN, num_samples=42 * 4 + 2, class_weights=[5, 3, 2],
                                    composition="stratified", rng=np.random.default_rng(seed))
        assert s.n_batches(120) == 43
        requests = list(s.sample(120))
        assert [len(r["requests"]) for r in requests] == [8] * 5 + [3]
        assert requests[-1]["requests"][-1].stop - requests[-1]["requests"][-1].start == 2
        counts = [np.bincount(chunk_classes(r, EVEN), minlength=3).tolist() for r in requests]
        total = tuple(np.sum(counts, axis=0).tolist())
        assert total in {(21, 13, 9), (22, 12, 9), (22, 13, 8)}, seed
        totals.add(total)
        last = counts[-1]
        assert last[0] in (1, 2) and last[1] <= 1 and last[2] <= 1 and sum(last) == 3
    assert len(totals) > 1  # the rounding is the epoch's draw, not a fixed choice


def test_drop_last_drops_the_short_batch_and_does_not_read_its_rows():
    for composition in ("independent", "stratified"):
        s = cs.WeightedClassSampler(4, 8, 4, classes=EVEN, num_samples=170, drop_last=True, composition=composition,
                                    rng=np.random.default_rng(1))
        assert s.n_batches(120) == 42
        requests = list(s.sample(120))
        assert sum(len(r["splits"]) for r in requests) == 42
        assert all(len(split) == 4 for r in requests for split in r["splits"])
        # 168 rows in 42 chunks of 4: the 2-row tail chunk is not read.
        assert sum(s.stop - s.start for r in requests for s in r["requests"]) == 168


def test_independent_counts_vary_from_request_to_request():
    s = cs.WeightedClassSampler(4, 10, 8, classes=EVEN, num_samples=50 * 40, class_weights=[5, 3, 2],
                                rng=np.random.default_rng(7))
    assert s.composition == "independent"
    assert len({tuple(c) for c in request_counts(s, 120, EVEN)}) > 10


def test_independent_reads_class_samplers_chunks_where_a_class_group_is_one_chunk():
    # batch_size divides chunk_size: ClassSampler draws a class per chunk, from the same keys.
    for batch_size in (10, 5):
        def make(cls, **kwargs):
            return cls(10, 4, batch_size, classes=CODES, num_samples=400, class_weights=[1, 2, 3],
                       rng=np.random.default_rng(3), **kwargs)

        coherent = [r["requests"] for r in make(cs.ClassSampler).sample(600)]
        assert [r["requests"] for r in make(cs.WeightedClassSampler).sample(600)] == coherent
        stratified = [r["requests"] for r in make(cs.WeightedClassSampler, composition="stratified").sample(600)]
        assert stratified != coherent


def test_batches_mix_classes_where_class_samplers_batches_hold_one():
    args = {"num_samples": 4000, "class_weights": [5, 3, 2], "rng": np.random.default_rng(4)}
    coherent = epoch_batches(cs.ClassSampler(10, 10, 20, classes=CODES, **args), 600)
    assert all(len(set(CODES[b].tolist())) == 1 for b in coherent)
    for composition in ("independent", "stratified"):
        batches = epoch_batches(sampler(preload_nchunks=10, batch_size=20, composition=composition, **args), 600)
        assert len(batches) == 200
        mixed = [len(set(CODES[b].tolist())) > 1 for b in batches]
        if composition == "stratified":
            # A batch of 20 of a request's 50, 30 and 20 rows of the classes: all of one class has a
            # chance below 10^-6.
            assert all(mixed)
        else:
            assert sum(mixed) > 190


def test_every_request_uses_each_of_its_rows_once():
    for composition in ("independent", "stratified"):
        for request in sampler(batch_size=8, num_samples=396, composition=composition).sample(600):
            rows = np.sort(np.concatenate(request["splits"]))
            size = sum(s.stop - s.start for s in request["requests"])
            assert rows.tolist() == list(range(size))


# --- classes against the weights ------------------------------------------------------------------

# Upper 0.1% points of the chi-square distribution, by degrees of freedom.
CHI2_999 = {2: 13.816, 4: 18.467}


def chi_square(counts, probabilities):
    n = sum(counts)
    return sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probabilities))


def test_independent_chunk_classes_follow_the_weights_each_chunk_its_own_draw():
    # 300 seeds of 10 requests of 4 chunks: 12000 chunks. The seeds are fixed, so the test is
    # deterministic; its thresholds are the 0.1% points. Class 3 has weight 0.
    codes = np.repeat([0, 1, 2, 3, 1], [300, 100, 200, 50, 350])
    weights = np.array([1.0, 2.0, 3.0, 0.0])
    expected = weights[:3] / weights[:3].sum()
    counts = []
    for seed in range(300):
        s = cs.WeightedClassSampler(10, 4, 10, classes=codes, num_samples=400, class_weights=weights,
                                    rng=np.random.default_rng(seed))
        counts += request_counts(s, len(codes), codes, n_classes=4)
    counts = np.array(counts)
    assert counts.shape == (3000, 4) and counts[:, 3].sum() == 0
    total = counts.sum(axis=0)
    assert chi_square(total[:3], expected) < CHI2_999[2], total
    # The test has power: equal weights, or the valid starts' shares, are far off.
    assert chi_square(total[:3], [1 / 3] * 3) > 10 * CHI2_999[2]
    starts = np.array([300 - 9, 450 - 18, 200 - 9])
    assert chi_square(total[:3], starts / starts.sum()) > 10 * CHI2_999[2]
    # Each chunk its own draw: a request's count of class c is Binomial(4, p_c), so the index of
    # dispersion over the 3000 requests has mean 3000 and a standard deviation under 85; a
    # stratified mix (counts within one chunk of 4 p_c), or one class a request, would be far
    # below or far above.
    for c, p in enumerate(expected):
        dispersion = ((counts[:, c] - 4 * p) ** 2).sum() / (4 * p * (1 - p))
        assert abs(dispersion - 3000) < 5 * 85, (c, dispersion)


def test_a_batch_is_a_uniform_sample_of_its_requests_rows():
    # Stratified 5:3:2, chunks of 2 rows, 10 a request: every request holds 10, 6 and 4 rows of
    # the classes, so the class-0 rows of a batch of 4 are hypergeometric (N 20, K 10, n 4). One
    # batch (the first) of each of 5 requests of 400 seeds: 2000 independent batches. Batches cut
    # from the buffer unshuffled would hold whole chunks: 0, 2 or 4 rows of class 0 only.
    codes = np.repeat([0, 1, 2], [100, 100, 100])
    expected = [comb(10, k) * comb(10, 4 - k) / comb(20, 4) for k in range(5)]
    counts = np.zeros(5, dtype=np.int64)
    for seed in range(400):
        s = cs.WeightedClassSampler(2, 10, 4, classes=codes, num_samples=100, class_weights=[5, 3, 2],
                                    composition="stratified", rng=np.random.default_rng(seed))
        for request in s.sample(len(codes)):
            rows = codes[np.concatenate([np.arange(c.start, c.stop) for c in request["requests"]])]
            assert np.bincount(rows, minlength=3).tolist() == [10, 6, 4]
            counts[int((rows[request["splits"][0]] == 0).sum())] += 1
    assert counts.sum() == 2000
    assert chi_square(counts, expected) < CHI2_999[4], counts
    # Power: whole chunks, 0, 2 or 4 rows of class 0, with the chunks' hypergeometric (N 10, K 5, n 2).
    chunks = [comb(5, j) * comb(5, 2 - j) / comb(10, 2) for j in range(3)]
    whole_chunks = [chunks[k // 2] if k % 2 == 0 else 1e-9 for k in range(5)]
    assert chi_square(counts, whole_chunks) > 10 * CHI2_999[4]


# --- stratified: within one chunk of the weights, for random configurations ------------------------


@st.composite
def stratified_configs(draw):
    n_classes = draw(st.integers(1, 4))
    chunk_size = draw(st.integers(1, 6))
    preload_nchunks = draw(st.integers(1, 12))
    batch_size = draw(st.sampled_from(batch_sizes(chunk_size, preload_nchunks)))
    runs = draw(st.lists(st.tuples(st.integers(0, n_classes - 1), st.integers(1, 4)), min_size=0, max_size=8))
    runs = [(c, 1) for c in range(n_classes)] + runs
    codes = np.array([c for c, length in runs for _ in range(length * chunk_size)], dtype=np.int8)
    weights = draw(st.lists(st.integers(0, 6), min_size=n_classes, max_size=n_classes))
    weights[draw(st.integers(0, n_classes - 1))] = draw(st.integers(1, 6))  # one class sampled at least
    return {
        "chunk_size": chunk_size, "preload_nchunks": preload_nchunks, "batch_size": batch_size, "classes": codes,
        "num_samples": draw(st.integers(1, 600)), "class_weights": weights, "drop_last": draw(st.booleans()),
        "rng": np.random.default_rng(draw(st.integers(0, 2**32))), "composition": "stratified",
    }, draw(st.sampled_from([None, 2, 3])), draw(st.integers(0, 3))


def within_one_chunk(counts, weights) -> bool:
    """|count_c - n w_c / W| < 1 for every class c, n the chunks counted, exactly."""
    n, total = sum(counts), sum(weights)
    return all(abs(Fraction(count) - Fraction(n * w, total)) < 1 for count, w in zip(counts, weights))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(stratified_configs())
def test_stratified_requests_and_the_epoch_are_within_one_chunk_of_the_weights(config):
    # Plain, every request and the epoch; in global mode (world 2 or 3) every rank's requests, each
    # a request of the one plan the ranks deal.
    kwargs, world, epoch = config
    codes, weights = kwargs["classes"], kwargs["class_weights"]
    base = cs.WeightedClassSampler(**kwargs)
    ranks = [base] if world is None else [
        cs.DistributedSampler(base, dist_info=lambda r=r: (r, world), mode="global", enforce_equal_batches=False)
        for r in range(world)
    ]
    try:
        ranks[0].validate(len(codes))
        ranks[0].n_batches(len(codes))
    except cs.ConfigError:  # too few positions for the ranks: refused alike by C++ (test_oracle.py)
        assert world is not None
        reject()
    epoch_counts = np.zeros(len(weights), dtype=np.int64)
    for s in ranks:
        s.set_epoch(epoch)
        for request in s.sample(len(codes)):
            counts = np.bincount(chunk_classes(request, codes), minlength=len(weights))
            assert within_one_chunk(counts.tolist(), weights), (counts, weights)
            assert all(c == 0 for c, w in zip(counts, weights) if w == 0)
            epoch_counts += counts
    if world is None:
        assert within_one_chunk(epoch_counts.tolist(), weights), (epoch_counts, weights)


# --- codes, masks, workers, ranks ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_every_integer_width_gives_the_same_epochs(dtype):
    expected = as_lists(epoch_batches(sampler(composition="stratified"), 600))
    assert as_lists(epoch_batches(sampler(CODES.astype(dtype), composition="stratified"), 600)) == expected


def test_the_codes_are_read_in_place():
    # 20 MB of int8 codes (a Categorical's, then an array's): a copy would show in the peak.
    pd = pytest.importorskip("pandas")
    n = 20_000_000
    codes = np.repeat(np.arange(4, dtype=np.int8), n // 4)
    categorical = pd.Categorical.from_codes(codes, categories=["a", "b", "c", "d"])
    for classes in (categorical, codes):
        tracemalloc.start()
        try:
            s = cs.WeightedClassSampler(64, 4, 64, classes=classes, num_samples=1000, composition="stratified")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < n // 100, f"{peak} bytes allocated to read {n} codes"
        assert s.n_batches(n) == 16


def test_a_mask_of_several_ranges_and_assigned_masks_and_rngs():
    s = sampler(mask=[slice(0, 100), slice(280, 360)], composition="stratified")  # class 0's first two runs
    assert s.mask == [slice(0, 100), slice(280, 360)]
    chunks = [c for r in s.sample(600) for c in r["requests"]]
    assert all(0 <= c.start and c.stop <= 100 or 280 <= c.start and c.stop <= 360 for c in chunks)
    assert {c.start < 100 for c in chunks} == {True, False}
    s.mask = slice(100, 280)  # classes 1 and 2
    assert s.epoch == 1
    assert {c for r in s.sample(600) for c in chunk_classes(r)} == {1, 2}
    seed = s.seed
    s.rng = np.random.default_rng(5)
    assert s.seed != seed and s.epoch == 2 and s.composition == "stratified"


def test_with_a_categorical_the_weights_follow_the_categories_and_errors_name_labels():
    pd = pytest.importorskip("pandas")
    categorical = pd.Categorical(["T"] * 30 + ["B"] * 3 + ["NK"] * 30)  # codes: B=0, NK=1, T=2
    with pytest.raises(cs.ConfigError, match=r"^WeightedClassSampler: .*class 0 \(1 short run, shortest 3\).*"
                                             r"by label: classes \['B'\]"):
        sampler(categorical)
    with pytest.raises(cs.ConfigError, match=r"^WeightedClassSampler: class_weights has 2 entries"):
        sampler(categorical, class_weights=[1.0, 1.0])
    s = sampler(categorical, class_weights=[0.0, 1.0, 1.0], num_samples=60)
    assert {c for r in s.sample(63) for c in chunk_classes(r, categorical.codes)} == {1, 2}


@pytest.mark.parametrize("num_workers", [2, 3])
def test_workers_read_disjoint_requests_that_make_the_epoch(num_workers):
    s = sampler(composition="stratified")
    whole = [as_lists(observations(r)) for r in s.sample(600)]
    for worker in range(num_workers):
        s.set_epoch(0)
        mine = [as_lists(observations(r)) for r in s.sample(600, worker=(worker, num_workers))]
        assert mine and mine == whole[worker::num_workers]
        s.set_epoch(0)
        assert s.n_batches(600, worker=(worker, num_workers)) == sum(len(r) for r in mine)


def test_a_dataloaders_workers_take_their_shares_by_themselves():
    torch_data = pytest.importorskip("torch.utils.data")
    s = sampler(composition="stratified")

    class Batches(torch_data.IterableDataset):
        def __iter__(self):
            for request in s.sample(600):  # no worker given: torch's get_worker_info() says which
                yield from (b.tolist() for b in observations(request))

    loader = torch_data.DataLoader(Batches(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    got = [b.tolist() if hasattr(b, "tolist") else b for b in loader]
    whole = as_lists(epoch_batches(sampler(composition="stratified"), 600))
    assert len(got) == len(whole) == 40
    assert sorted(map(tuple, got)) == sorted(map(tuple, whole))


@pytest.mark.parametrize("mode", ["contiguous", "global"])
@pytest.mark.parametrize("composition", ["independent", "stratified"])
def test_distributed_ranks(mode, composition):
    world = 3
    per_rank = []
    for rank in range(world):
        d = cs.DistributedSampler(sampler(num_samples=600, composition=composition),
                                  dist_info=lambda rank=rank: (rank, world), mode=mode)
        assert isinstance(d.sampler, cs.WeightedClassSampler) and d.sampler.composition == composition
        requests = list(d.sample(600))
        batches = [b for r in requests for b in observations(r)]
        assert len(batches) == d.n_batches(600) == 20
        assert max(len(set(CODES[b].tolist())) for b in batches) > 1
        if mode == "contiguous":
            obs = np.concatenate(batches)
            assert obs.min() >= 200 * rank and obs.max() < 200 * rank + 200
        per_rank.append(as_lists(batches))
    assert per_rank[0] != per_rank[1] != per_rank[2]


# --- bad input --------------------------------------------------------------------------------------


def test_composition_must_be_one_of_two_names():
    for bad in ("Stratified", "", None, 1, ["stratified"]):
        with pytest.raises(cs.ConfigError, match=r"^WeightedClassSampler: composition \((.+)\) must be one of "
                                                 r"\['independent', 'stratified'\]$") as info:
            sampler(composition=bad)
        assert info.value.args[0].startswith(f"WeightedClassSampler: composition ({bad!r})")
        assert isinstance(info.value, ValueError)
    with pytest.raises(TypeError):
        cs.WeightedClassSampler(10, 4, 10, CODES, 400)  # classes and the rest are keywords


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"classes": "abc"}, "classes"),
        ({"classes": CODES.astype(np.float64)}, "classes"),
        ({"classes": CODES.reshape(2, -1)}, "classes"),
        ({"class_weights": "x"}, "class_weights"),
        ({"num_samples": None}, "num_samples"),
        ({"mask": 3}, "mask"),
        ({"rng": "x"}, "rng"),
        ({"drop_last": 1}, "drop_last"),
    ],
)
def test_bad_types_are_type_errors_naming_the_parameter(kwargs, match):
    with pytest.raises(TypeError, match=match):
        sampler(**kwargs)


PLAN_DUMP = os.environ.get("CHUNKSAMPLER_PLAN_DUMP")
SHORT = np.repeat([0, 1, 0, 2], [10, 3, 10, 8])

# (keyword arguments, n_obs for validate() or None, plan_dump's arguments for the same, what the
# message must hold, after "WeightedClassSampler: " unless it names another source)
REFUSED = [
    ({"class_weights": [1.0, -0.5, 1.0]}, None, ["class_weights=1,-0.5,1"], "class_weights[1] (-0.5)"),
    ({"class_weights": [0.0, 0.0, 0.0]}, None, ["class_weights=0,0,0"], "class_weights must have at least one positive weight (all 3 are 0)"),
    ({"class_weights": [1.0, float("nan"), 1.0]}, None, ["class_weights=1,nan,1"], "class_weights[1] (nan)"),
    ({"num_samples": 0}, None, ["num_samples=0"], "num_samples must be greater than 1 or equal to 1 (got 0)"),
    ({"batch_size": 3}, None, ["batch_size=3"], "must be divisible by batch_size (3)"),
    ({"mask": slice(0, 700)}, None, ["mask=0:700"], "mask.stop (700) exceeds loader n_obs (600)"),
    # The C++ Ranges' own check, before the sampler is made.
    ({"mask": [slice(0, 50), slice(40, 90)]}, None, ["mask=0:50,40:90"], "Ranges: ranges[0] = [0, 50) overlaps"),
    ({"classes": SHORT}, None, ["codes=" + ",".join(map(str, SHORT))], "class 1 (1 short run, shortest 3)"),
    ({"classes": np.array([0] * 20 + [-1] * 10, dtype=np.int8)}, None,
     ["codes=" + ",".join(["0"] * 20 + ["-1"] * 10)], "the classes contain NA values: codes[20] is -1"),
    ({}, 599, ["n_obs=599"], "the class codes' length (600) does not match loader n_obs (599)"),
    ({"mask": slice(100, 160), "class_weights": [1.0, 0.0, 1.0]}, None, ["mask=100:160", "class_weights=1,0,1"],
     "holds no chunk: no class with a positive weight is present in it"),
]


@pytest.mark.parametrize(("kwargs", "n_obs", "oracle", "holds"), REFUSED)
@pytest.mark.parametrize("composition", ["independent", "stratified"])
def test_refused_configurations_raise_the_cpp_message(kwargs, n_obs, oracle, holds, composition):
    with pytest.raises(cs.ConfigError) as info:
        s = sampler(composition=composition, **kwargs)
        s.validate(600 if n_obs is None else n_obs)
    message = str(info.value)
    assert holds in message and (message.startswith("WeightedClassSampler: ") or message.startswith(holds)), message
    if not PLAN_DUMP:
        return
    args = {"sampler": "weighted", "n_obs": 600, "chunk_size": 10, "preload_nchunks": 4, "batch_size": 10,
            "num_samples": 400, "codes": ",".join(map(str, CODES)), "composition": composition}
    args.update(arg.split("=", 1) for arg in oracle)
    result = subprocess.run([PLAN_DUMP, *(f"{k}={v}" for k, v in args.items())], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stderr == f"plan_dump: {message}\n"
