"""split_mask and check_disjoint: a worked example with exact numbers from a DataFrame of
categoricals (one and two columns), codes of every integer type, the fragmented refusal with its
report, the C++ messages for bad selections and overlapping splits; for random columns
(hypothesis) the result equals a row-by-row numpy model and the C++ library's own result for the
same columns (tests/python/oracle/plan_dump.cpp, sampler=split), refusals with the same message.
The codes are read where they lie (no copy) and scanned without the GIL."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_gil import another_thread_ran_during

import chunksampler as cs

# 270 rows in blocks, as a file grouped by donor would hold them (chunk_size 32 below):
#   split      train 100 | validation 30 | train 50 | test 20 | train 5 | validation 40 | test 25
#   cell_line  K562 [0, 60), HepG2 [60, 150), K562 [150, 270)
SPLIT = ["train"] * 100 + ["validation"] * 30 + ["train"] * 50 + ["test"] * 20 + ["train"] * 5 + ["validation"] * 40 + ["test"] * 25
LINE = ["K562"] * 60 + ["HepG2"] * 90 + ["K562"] * 120
OBS = pd.DataFrame({"split": pd.Categorical(SPLIT), "cell_line": pd.Categorical(LINE)})


def test_worked_example_one_column():
    train, report = cs.split_mask(OBS, "split", ["train"], chunk_size=32)
    assert train == [slice(0, 100), slice(130, 180), slice(200, 205)]
    assert report == cs.SplitReport(runs=3, rows=155, short_runs=1, short_rows=5, short_share=5 / 155)
    validation, report = cs.split_mask(OBS, groupby=["split"], select=[("validation",)], chunk_size=32)
    assert validation == [slice(100, 130), slice(205, 245)]
    assert report == cs.SplitReport(runs=2, rows=70, short_runs=1, short_rows=30, short_share=30 / 70)
    test, report = cs.split_mask(OBS, "split", ["test"], chunk_size=16)
    assert test == [slice(180, 200), slice(245, 270)]
    assert report == cs.SplitReport(runs=2, rows=45, short_runs=0, short_rows=0, short_share=0.0)
    assert repr(report) == "SplitReport(runs=2, rows=45, short_runs=0, short_rows=0, short_share=0.0)"
    cs.check_disjoint({"train": train, "validation": validation, "test": test})
    # Two values of one column: the runs they make together, adjacent ones merged.
    both, report = cs.split_mask(OBS, "split", ["validation", "test"], chunk_size=32)
    assert both == [slice(100, 130), slice(180, 200), slice(205, 270)]
    assert (report.runs, report.rows, report.short_runs, report.short_rows) == (3, 115, 2, 50)


def test_worked_example_two_columns():
    mask, report = cs.split_mask(OBS, ["split", "cell_line"], [("train", "K562")], chunk_size=32)
    assert mask == [slice(0, 60), slice(150, 180), slice(200, 205)]
    assert report == cs.SplitReport(runs=3, rows=95, short_runs=2, short_rows=35, short_share=35 / 95)
    # train/HepG2 is [60, 100) and [130, 150), validation/HepG2 [100, 130): one run of 90 rows.
    mask, report = cs.split_mask(OBS, ["split", "cell_line"], [("train", "HepG2"), ["validation", "HepG2"]],
                                 chunk_size=32)
    assert mask == [slice(60, 150)]
    assert report == cs.SplitReport(runs=1, rows=90, short_runs=0, short_rows=0, short_share=0.0)


def test_a_split_mask_is_a_sampler_mask():
    train, _ = cs.split_mask(OBS, "split", ["train"], chunk_size=32)
    sampler = cs.SequentialSampler(chunk_size=32, preload_nchunks=2, batch_size=16, mask=train)
    assert sampler.mask == train
    rows = [r for req in sampler.sample(len(OBS)) for s in req["requests"] for r in range(s.start, s.stop)]
    assert rows == [i for i, value in enumerate(SPLIT) if value == "train"]
    one, _ = cs.split_mask(OBS, "split", ["validation", "test"], chunk_size=32)
    ranks = [cs.DistributedSampler(cs.RandomSampler(8, 2, 8, mask=one), dist_info=lambda r=r: (r, 2)) for r in range(2)]
    # 115 rows, 7 batches of 8 per rank: rank 0 the first 56 of the union, rank 1 the next 56.
    assert [r.shard(len(OBS)) for r in ranks] == [[slice(100, 130), slice(180, 200), slice(205, 211)], slice(211, 267)]


def test_fragmented_split_is_refused_with_its_report():
    with pytest.raises(cs.FragmentedSplitError) as raised:
        cs.split_mask(OBS, "split", ["test"], chunk_size=32, max_short_share=0.5)
    error = raised.value
    assert isinstance(error, cs.ConfigError) and isinstance(error, ValueError)
    assert error.report == cs.SplitReport(runs=2, rows=45, short_runs=2, short_rows=45, short_share=1.0)
    assert error.columns == ["split"]
    assert str(error) == (
        'split_mask: the selection "test" is fragmented on disk: 45 of its 45 rows (short_share 1) lie in 2 of its '
        "2 runs that are shorter than chunk_size (32), above max_short_share (0.5); each such run is read as short "
        "chunks. Reorder the data on disk by 'split' (sort the rows by that column) so that each split is a few long runs"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.report == error.report and copy.columns == ["split"]
    # At the limit it passes: 30 of validation's 70 rows are short, 0.43 <= 0.5.
    assert cs.split_mask(OBS, "split", ["validation"], chunk_size=32, max_short_share=0.5)[1].short_runs == 1


@pytest.mark.parametrize(
    ("groupby", "select", "message"),
    [
        (["split", "cell_line"], [("train", "Jurkat")],
         'split_mask: select[0][1] = "Jurkat" is not a category of column \'cell_line\' (its categories: "HepG2", "K562")'),
        ("split", ["training"],
         'split_mask: select[0] = "training" is not a category of column \'split\' (its categories: "test", "train", '
         '"validation")'),
        ("split", [], "split_mask: select is empty; give at least one key (one value per column)"),
        (["split", "cell_line"], [("test", "HepG2")],
         'split_mask: the selection ("test", "HepG2") selects no row of the 270 rows of columns \'split\', '
         "'cell_line'; a mask needs at least one row"),
        (["split", "cell_line"], ["train"],
         "split_mask: select[0] = (\"train\") has 1 value, but there are 2 columns ('split', 'cell_line'); a key holds "
         "one value per column"),
        ([], ["train"], "split_mask: columns is empty; a selection needs at least one CategoryColumn"),
    ],
)
def test_bad_selections_raise_the_cpp_message(groupby, select, message):
    with pytest.raises(cs.ConfigError) as raised:
        cs.split_mask(OBS, groupby, select, chunk_size=32)
    assert str(raised.value) == message


def test_bad_options_raise_the_cpp_message():
    with pytest.raises(cs.ConfigError, match=r"^split_mask: chunk_size \(0\) must be in \[1, 2\^62\]$"):
        cs.split_mask(OBS, "split", ["train"], chunk_size=0)
    with pytest.raises(cs.ConfigError, match=r"^split_mask: max_short_share \(1.5\) must be in \[0, 1\]$"):
        cs.split_mask(OBS, "split", ["train"], chunk_size=4, max_short_share=1.5)
    with pytest.raises(cs.ConfigError, match="columns\\[1\\] 'b' has 3 rows, but columns\\[0\\] 'a' has 2"):
        cs.split_mask({"a": np.zeros(2, np.int8), "b": np.zeros(3, np.int8)}, ["a", "b"], [(0, 0)], chunk_size=4)


def test_type_errors():
    with pytest.raises(TypeError, match="select must be a list of keys"):
        cs.split_mask(OBS, "split", "train", chunk_size=4)
    with pytest.raises(TypeError, match="groupby must be a column name or a list of column names"):
        cs.split_mask(OBS, 3, ["train"], chunk_size=4)
    with pytest.raises(KeyError, match="obs has no column 'donor'"):
        cs.split_mask(OBS, "donor", ["train"], chunk_size=4)
    with pytest.raises(TypeError, match=r"obs\['x'\] must be categorical or a 1-D array of integer codes, got 1-D object"):
        cs.split_mask(pd.DataFrame({"x": ["a", "b"]}), "x", ["a"], chunk_size=4)
    with pytest.raises(TypeError, match="got 1-D float64"):
        cs.split_mask({"x": np.zeros(4)}, "x", [0], chunk_size=4)
    with pytest.raises(TypeError, match="got 1-D bool"):
        cs.split_mask({"x": np.zeros(4, bool)}, "x", [0], chunk_size=4)
    with pytest.raises(TypeError, match=r"select\[0\] must be an int, got float"):
        cs.split_mask({"x": np.zeros(4, np.int8)}, "x", [0.5], chunk_size=4)
    with pytest.raises(TypeError, match="must be a real number"):
        cs.split_mask(OBS, "split", ["train"], chunk_size=4, max_short_share="0.5")


def test_check_disjoint_names_the_overlap():
    train, _ = cs.split_mask(OBS, "split", ["train"], chunk_size=32)
    with pytest.raises(cs.ConfigError) as raised:
        cs.check_disjoint({"train": train, "validation": [slice(90, 130)], "test": slice(245, None)})
    assert str(raised.value) == (
        'check_disjoint: splits[0] "train" and splits[1] "validation" share row 90 ([0, 100) and [90, 130)); '
        "splits must be disjoint"
    )
    with pytest.raises(cs.ConfigError, match=r'splits\[0\] "all" and splits\[1\] "test" share row 245'):
        cs.check_disjoint({"all": None, "test": [slice(245, 270)]})
    cs.check_disjoint({"a": slice(0, 10), "b": (slice(10, 20), slice(30, None)), "c": [slice(20, 30)]})
    with pytest.raises(TypeError, match="mapping of split name to mask"):
        cs.check_disjoint([train])
    with pytest.raises(cs.ConfigError, match=r"^Ranges: ranges\[0\] = \[20, 30\) and ranges\[1\] = \[0, 5\) are not sorted"):
        cs.check_disjoint({"a": [slice(20, 30), slice(0, 5)]})


@pytest.mark.parametrize(("n_categories", "dtype"), [(3, np.int8), (200, np.int16), (40_000, np.int32)])
def test_categorical_codes_of_every_width(n_categories, dtype):
    # pandas stores codes in the narrowest type that holds the categories' count.
    rng = np.random.default_rng(n_categories)
    codes = np.repeat(rng.integers(-1, n_categories, size=400), rng.integers(1, 9, size=400)).astype(dtype)
    column = pd.Categorical.from_codes(codes, categories=[f"c{i}" for i in range(n_categories)])
    assert column.codes.dtype == dtype
    picked = [int(codes[0]) if codes[0] >= 0 else 0, n_categories - 1]
    got, report = cs.split_mask(pd.DataFrame({"x": column}), "x", [f"c{c}" for c in picked], chunk_size=4)
    assert (got, report) == model({"x": codes}, [[c] for c in picked], chunk_size=4)
    # The same by code, from the codes alone, in every width the binding reads in place.
    for width in (np.int8, np.int16, np.int32, np.int64, np.uint16):
        if np.iinfo(width).max >= n_categories:
            assert cs.split_mask({"x": codes.astype(width)}, "x", picked, chunk_size=4) == (got, report)


def test_integer_categories_are_selected_by_label():
    obs = pd.DataFrame({"donor": pd.Categorical([101, 101, 205, 205, 101, 307])})
    assert cs.split_mask(obs, "donor", [101, np.int64(307)], chunk_size=2)[0] == [slice(0, 2), slice(4, 6)]
    assert cs.split_mask(obs, "donor", ["205"], chunk_size=2)[0] == [slice(2, 4)]


def test_na_rows_belong_to_no_split():
    obs = pd.DataFrame({"split": pd.Categorical(["train", None, "train", "test"])})
    assert obs["split"].cat.codes.tolist() == [1, -1, 1, 0]
    assert cs.split_mask(obs, "split", ["train"], chunk_size=1)[0] == [slice(0, 1), slice(2, 3)]


def test_codes_are_read_in_place():
    # 20 MB of int8 codes: a copy anywhere between pandas and C++ would show in the peak.
    n = 20_000_000
    obs = pd.DataFrame({"split": pd.Categorical.from_codes(np.repeat(np.arange(4, dtype=np.int8) % 3, n // 4),
                                                           categories=["train", "validation", "test"])})
    cs.split_mask(obs, "split", ["train"], chunk_size=64)  # imports and caches outside the measure
    tracemalloc.start()
    try:
        mask, report = cs.split_mask(obs, "split", ["train"], chunk_size=64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.rows == n // 2 and mask == [slice(0, n // 4), slice(3 * n // 4, n)]
    assert peak < n // 100, f"{peak} bytes allocated while scanning {n} codes"


def test_a_strided_column_is_copied_to_be_read():
    codes = np.array([0, 9, 0, 9, 1, 9, 1, 9], dtype=np.int16)[::2]
    assert cs.split_mask({"x": codes}, "x", [1], chunk_size=1)[0] == [slice(2, 4)]


def test_the_gil_is_released_during_the_scan():
    n = 100_000_000
    codes = np.repeat(np.arange(n // 1000, dtype=np.int8) % 2, 1000)  # 100 MB, tens of milliseconds to scan
    assert any(another_thread_ran_during(lambda: cs.split_mask({"x": codes}, "x", [1], chunk_size=4)) for _ in range(3))


# --- random columns: a row-by-row numpy model, and the C++ library's own answer -----------------


def model(columns: dict[str, np.ndarray], keys: list[list[int]], chunk_size: int) -> tuple[list[slice], cs.SplitReport]:
    """split_mask row by row: a row is selected when its codes equal some key's codes, column by
    column; the runs are the maximal stretches of selected rows."""
    codes = list(columns.values())
    selected = np.zeros(len(codes[0]), dtype=bool)
    for key in keys:
        selected |= np.logical_and.reduce([column == code for column, code in zip(codes, key)])
    edges = np.flatnonzero(np.diff(np.concatenate([[0], selected.astype(np.int8), [0]])))
    runs = [slice(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]
    lengths = [r.stop - r.start for r in runs]
    short = [n for n in lengths if n < chunk_size]
    rows = sum(lengths)
    return runs, cs.SplitReport(len(runs), rows, len(short), sum(short), sum(short) / rows if rows else 0.0)


NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
DTYPES = [np.int8, np.int16, np.int32, np.int64]


@st.composite
def selections(draw):
    """1 to 3 columns of codes in runs (-1 among them, as pandas' NA), named or not, of one integer
    type each; a selection of 1 to 4 keys, now and then with an unknown name or an out-of-range
    code; chunk_size and max_short_share."""
    n_columns = draw(st.integers(1, 3))
    n_rows = draw(st.integers(1, 120))
    columns, categories = {}, {}
    for c in range(n_columns):
        n_cat = draw(st.integers(1, 4))
        runs = draw(st.lists(st.tuples(st.integers(-1, n_cat - 1), st.integers(1, 12)), min_size=1, max_size=20))
        codes = np.repeat([code for code, _ in runs], [length for _, length in runs])
        codes = np.resize(codes, n_rows).astype(draw(st.sampled_from(DTYPES)))
        name = f"col{c}"
        columns[name] = codes
        if draw(st.booleans()):
            categories[name] = draw(st.lists(NAMES, min_size=n_cat, max_size=n_cat, unique=True))
    keys = []
    for _ in range(draw(st.integers(1, 4))):
        # Mostly the key of some row (so that several columns select something), else any codes,
        # now and then one past the categories (an unknown name, or a code no row has).
        row = draw(st.integers(0, n_rows - 1)) if draw(st.integers(0, 3)) else None
        key = []
        for name in columns:
            n_cat = len(categories[name]) if name in categories else int(columns[name].max(initial=0)) + 1
            if row is not None:
                code = max(int(columns[name][row]), 0)
            else:
                code = draw(st.integers(0, max(n_cat - 1, 0))) if draw(st.integers(0, 5)) else n_cat + 2
            if name in categories:
                key.append(categories[name][code] if code < n_cat else "zz")  # "zz": an unknown name
            else:
                key.append(code)
        keys.append(key)
    bare = n_columns == 1 and draw(st.booleans())
    return {
        "columns": columns, "categories": categories, "keys": keys, "bare": bare,
        "chunk_size": draw(st.integers(1, 10)),
        "max_short_share": draw(st.none() | st.sampled_from([0.0, 0.25, 0.5, 1.0])),
    }


def python_split(case):
    obs = {
        name: pd.Categorical.from_codes(codes, categories=case["categories"][name])
        if name in case["categories"] else codes
        for name, codes in case["columns"].items()
    }
    select = [key[0] for key in case["keys"]] if case["bare"] else [tuple(key) for key in case["keys"]]
    return cs.split_mask(obs, list(obs), select, chunk_size=case["chunk_size"],
                         max_short_share=case["max_short_share"])


def codes_of(case) -> list[list[int]] | None:
    """The keys as codes, or None when one names no category (or a code past the categories)."""
    out = []
    for key in case["keys"]:
        codes = []
        for name, value in zip(case["columns"], key):
            names = case["categories"].get(name)
            if names is not None:
                if value not in names:
                    return None
                value = names.index(value)
            codes.append(value)
        out.append(codes)
    return out


@settings(max_examples=200, deadline=None)
@given(selections())
def test_split_mask_equals_a_row_by_row_model(case):
    keys = codes_of(case)
    try:
        got = python_split(case)
    except cs.FragmentedSplitError as error:
        event("fragmented")
        runs, report = model(case["columns"], keys, case["chunk_size"])
        assert error.report == report and report.short_share > case["max_short_share"]
        return
    except cs.ConfigError as error:
        event("refused")
        runs, _ = model(case["columns"], keys, case["chunk_size"]) if keys is not None else ([], None)
        assert keys is None or not runs, f"refused ({error}) a selection of {len(runs)} runs"
        return
    event(f"{len(case['columns'])} columns, {'bare' if case['bare'] else 'keys'}")
    assert keys is not None
    runs, report = model(case["columns"], keys, case["chunk_size"])
    assert got == (runs, report)
    # The codes were those the model read, in their own type (pandas keeps its Categorical's).
    assert all(np.issubdtype(codes.dtype, np.integer) for codes in case["columns"].values())


PLAN_DUMP = os.environ.get("CHUNKSAMPLER_PLAN_DUMP")


def oracle_args(case) -> list[str]:
    """plan_dump's sampler=split arguments for ``case``, the codes in the type Python passes them in."""
    args = ["sampler=split", f"columns={','.join(case['columns'])}", f"chunk_size={case['chunk_size']}"]
    for name, codes in case["columns"].items():
        if name in case["categories"]:
            # A Categorical's codes: pandas' narrowest type, which the binding reads as it is.
            dtype = pd.Categorical.from_codes(codes, categories=case["categories"][name]).codes.dtype
            args.append(f"categories.{name}={','.join(case['categories'][name])}")
        else:
            dtype = codes.dtype
        args += [f"codes.{name}={','.join(map(str, codes.tolist()))}", f"dtype.{name}={np.dtype(dtype).name}"]
    keys = [[v if isinstance(v, str) else f"#{v}" for v in key] for key in case["keys"]]
    args.append("select=" + ";".join(",".join(key) for key in keys))
    if case["bare"]:
        args.append("one_column=1")
    if case["max_short_share"] is not None:
        args.append(f"max_short_share={case['max_short_share']!r}")
    return args


@pytest.mark.skipif(not PLAN_DUMP, reason="CHUNKSAMPLER_PLAN_DUMP is not set (see test_oracle.py)")
@settings(max_examples=150, deadline=None)
@given(selections())
def test_split_mask_equals_the_cpp_result(case):
    result = subprocess.run([PLAN_DUMP, *oracle_args(case)], capture_output=True, text=True, timeout=60)
    try:
        mask, report = python_split(case)
    except cs.ConfigError as error:
        event("refused by both")
        assert result.returncode == 2, f"Python refused ({error}), C++ did not"
        assert result.stderr == f"plan_dump: {error}\n"
        return
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout)
    assert [[s.start, s.stop] for s in mask] == theirs["ranges"]
    assert [report.runs, report.rows, report.short_runs, report.short_rows, report.short_share] == theirs["report"]
