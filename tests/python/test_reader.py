"""The reading of a load request's rows (chunksampler.reader, which every loader of ours reads
through): the rows equal the source's at the request's positions for every kind of source, and a
zarr store sees each chunk read once an epoch and a shard's index once a request (a counting
store)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import rng

import chunksampler as cs
from chunksampler._integration import request_rows
from chunksampler.reader import Reader, _Column, read_order

zarr = pytest.importorskip("zarr")
from stores import CountingStore, rows_of, zarr_array  # noqa: E402


def sources(data: np.ndarray, chunk: int, tmp_path) -> dict[str, list]:
    """The kinds of source, each as the parts a column of a Reader takes, holding ``data``."""
    import h5py
    import scipy.sparse

    tmp_path.mkdir(parents=True)
    memmap = np.lib.format.open_memmap(tmp_path / "rows.npy", mode="w+", dtype=data.dtype, shape=data.shape)
    memmap[:] = data
    h5 = h5py.File(tmp_path / "rows.h5", "w")
    h5["x"] = data
    half = len(data) // 2
    return {
        "numpy": [data],
        "memmap": [memmap],
        "zarr": [zarr_array(data, chunk)],
        "zarr sharded": [zarr_array(data, chunk, shard=4 * chunk)],
        "h5py": [h5["x"]],
        "scipy csr": [scipy.sparse.csr_matrix(data)],
        "zarr then numpy": [zarr_array(data[:half], chunk), data[half:]],
    }


@pytest.mark.parametrize("mode", ["contiguous", "global"])
def test_the_rows_read_are_the_sources_rows_at_the_requests_positions(tmp_path, mode):
    generator = np.random.default_rng(5)
    for trial in range(12):
        chunk = int(generator.integers(1, 9))
        n_obs = int(generator.integers(1, 40)) * chunk + int(generator.integers(0, chunk))
        data = rows_of(n_obs)
        preload = int(generator.integers(1, 6))
        divisors = [b for b in range(1, chunk * preload + 1) if chunk * preload % b == 0]
        # Every third with replacement: a request's chunks may then repeat or overlap.
        base = cs.RandomSampler(chunk_size=chunk, preload_nchunks=preload, batch_size=int(generator.choice(divisors)),
                                replacement=trial % 3 == 0, rng=rng(trial))
        world = int(generator.integers(1, 4))
        kinds = sources(data, chunk, tmp_path / str(trial))
        for rank in range(world):
            sampler = cs.DistributedSampler(base, dist_info=lambda r=rank: (r, world), mode=mode, remainder="pad")
            for name, parts in kinds.items():
                column = _Column("test", name, parts)
                for request in sampler.sample_arrays(n_obs):
                    got = column.ordered(request, None)
                    got = got.toarray() if hasattr(got, "toarray") else np.asarray(got)
                    np.testing.assert_array_equal(got, data[request_rows(request)], err_msg=f"{name}, trial {trial}")


def test_read_order_sorts_the_chunks_and_moves_the_positions():
    # Chunks [8, 12), [0, 4), [20, 24) and [4, 8), read as [0, 4), [4, 8), [8, 12), [20, 24).
    request = (np.array([8, 0, 20, 4]), np.array([12, 4, 24, 8]), np.array([0, 4, 12, 8, 3]), np.array([0, 5]))
    starts, stops, moved = read_order(request)
    assert starts.tolist() == [0, 4, 8, 20] and stops.tolist() == [4, 8, 12, 24]
    # Position 0 is row 8, at 8 in row order; position 4 (row 0) at 0; position 12 (row 4) at 4;
    # position 8 (row 20) at 12; position 3 (row 11) at 11.
    assert moved.tolist() == [8, 0, 4, 12, 11]


@pytest.mark.parametrize("world", [1, 3])
def test_a_zarr_store_reads_each_chunk_once_an_epoch(world):
    chunk, n_obs = 16, 16 * 50
    data = rows_of(n_obs)
    store = CountingStore()
    column = _Column("test", "x", [zarr_array(data, chunk, store=store)])
    base = cs.RandomSampler(chunk_size=chunk, preload_nchunks=4, batch_size=32, rng=rng(3))
    named = []
    for rank in range(world):
        sampler = cs.DistributedSampler(base, dist_info=lambda r=rank: (r, world))
        for request in sampler.sample_arrays(n_obs):
            named += (np.asarray(request.starts) // chunk).tolist()
            column.ordered(request, None)
    # Every rank's shard together: each storage chunk the requests name read once, by one call each
    # (all 50 on one rank; 3 ranks leave out the 2 their equal shards cannot hold).
    assert len(named) == len(set(named)) == (50 if world == 1 else 48)
    assert store.reads == Counter(f"c/{i}/0" for i in named)


def test_a_sharded_zarr_store_reads_a_shards_index_once_a_request():
    chunk, shard, n_obs = 8, 64, 8 * 64
    data = rows_of(n_obs)
    store = CountingStore()
    column = _Column("test", "x", [zarr_array(data, chunk, shard=shard, store=store)])
    sampler = cs.RandomSampler(chunk_size=chunk, preload_nchunks=8, batch_size=16, rng=rng(4))
    shards_touched = 0
    for request in sampler.sample_arrays(n_obs):
        starts = np.asarray(request.starts)
        shards_touched += len(set((starts // shard).tolist()))
        column.ordered(request, None)
    # One index read per shard a request touches, not one per chunk (64 chunks in all).
    assert sum(store.index_reads.values()) == shards_touched < 64
    # The chunks' bytes, besides the indexes: at most one read each (zarr merges neighbours within a
    # shard into one read).
    assert sum(store.reads.values()) <= 64


def test_under_zarrs_a_local_store_reads_the_same_rows_in_one_call_per_array(tmp_path):
    # zarrs (installed with the stacks) reads a local store's request as joined row ranges, through
    # zarr's indexers; zarr's own pipeline through an orthogonal selection. The same rows either way.
    pytest.importorskip("zarrs")
    anndata = pytest.importorskip("anndata")
    import scipy.sparse

    import chunksampler.reader as reader_module

    n_obs, chunk = 3_000, 50
    generator = np.random.default_rng(8)
    data = (generator.random((n_obs, 40)) < 0.2) * generator.random((n_obs, 40)).astype(np.float32)
    dense = zarr.create_array(tmp_path / "dense.zarr", shape=data.shape, dtype=data.dtype, chunks=(chunk, 40),
                              shards=(8 * chunk, 40))
    dense[:] = data
    plain = zarr.create_array(tmp_path / "plain.zarr", shape=data.shape, dtype=data.dtype, chunks=(chunk, 40))
    plain[:] = data
    anndata.AnnData(X=scipy.sparse.csr_matrix(data)).write_zarr(tmp_path / "csr.zarr")
    csr = anndata.io.sparse_dataset(zarr.open_group(tmp_path / "csr.zarr", mode="r")["X"])
    for source in (dense, plain, csr):
        fast, slow = Reader(source, sparse="csr"), Reader(source, sparse="csr", zarrs=False)
        leaf = fast._leaves[0]
        assert reader_module._pipeline(leaf._parts[0] if reader_module._is_zarr(source) else
                                       reader_module._under_zarrs(source.group["data"])).startswith("zarrs")
        sampler = cs.RandomSampler(chunk_size=chunk, preload_nchunks=6, batch_size=25, rng=rng(6))
        for request in sampler.sample_arrays(n_obs):
            got, expected = fast.read(request), slow.read(request)
            got = got.toarray() if hasattr(got, "toarray") else got
            expected = expected.toarray() if hasattr(expected, "toarray") else expected
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_array_equal(got, data[request_rows(request)])


@pytest.mark.parametrize(
    "shape, chunks, shards, dtype, zarr_format",
    [
        ((1_000, 6), (64, 4), (128, 4), "f4", 3),  # columns split across chunks, shards of two row chunks
        ((1_000, 6), (64, 4), (192, 8), "f4", 3),  # a shard wider than the array
        ((999, 5), (50, 2), None, "f8", 2),  # zarr v2, a short last chunk each way
        ((777,), (40,), (160,), "i4", 3),  # one axis (a CSR's data), a short last shard
        ((500, 3, 4), (30, 2, 3), None, "u2", 3),  # three axes
        ((640, 6), (64, 6), None, "i8", 3),  # two chunks never written: the fill value
    ],
)
def test_under_zarrs_rows_handed_straight_to_its_pipeline_are_zarrs_rows(tmp_path, shape, chunks, shards, dtype,
                                                                         zarr_format):
    # A request's chunks go straight to zarrs's Rust pipeline (its ChunkItems built here): any grid,
    # shards or not, v2 or v3, chunks split across the other axes or short at the edges.
    pytest.importorskip("zarrs")
    import chunksampler.reader as reader_module

    path = tmp_path / "rows.zarr"
    array = zarr.create_array(path, shape=shape, chunks=chunks, dtype=dtype, zarr_format=zarr_format,
                              **({"shards": shards} if shards else {}))
    generator = np.random.default_rng(sum(shape))
    data = (generator.random(shape) * 1_000).astype(dtype)
    if dtype == "i8":
        data[64:192] = 0  # equal to the fill value: zarr writes neither chunk
    array[:] = data
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
        fast = zarr.open_array(path, mode="r")
    assert reader_module._rust_pipeline(fast) is not None
    for _ in range(40):
        cuts = np.sort(generator.choice(shape[0] + 1, 8, replace=False)).tolist()
        runs = list(zip(cuts[0::2], cuts[1::2]))
        out = np.empty((sum(stop - start for start, stop in runs), *shape[1:]), dtype)
        reader_module._read_runs([(fast, runs, out)])
        np.testing.assert_array_equal(out, np.concatenate([data[start:stop] for start, stop in runs]))


def test_a_zarrs_without_the_chunk_items_it_takes_is_named_and_read_through_zarr(monkeypatch, tmp_path):
    pytest.importorskip("zarrs")
    import zarrs._internal

    import chunksampler.reader as reader_module

    data = rows_of(300)
    zarr.create_array(tmp_path / "rows.zarr", shape=data.shape, dtype=data.dtype, chunks=(20, 3))[:] = data
    monkeypatch.delattr(zarrs._internal, "ChunkItem")
    reader_module._zarrs_items.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"zarrs .* lacks .*ChunkItem.* through zarr's indexers instead"):
            reader = Reader(zarr.open_array(tmp_path / "rows.zarr", mode="r"))
            sampler = cs.RandomSampler(chunk_size=20, preload_nchunks=4, batch_size=10, rng=rng(2))
            for request in sampler.sample_arrays(300):
                np.testing.assert_array_equal(reader.read(request), data[request_rows(request)])
        assert reader_module._rust_pipeline(reader._leaves[0]._parts[0]) is None
    finally:
        monkeypatch.undo()
        reader_module._zarrs_items.cache_clear()
    assert reader_module._zarrs_items() is not None


def test_a_zarr_without_the_chunk_keys_the_straight_reads_need_is_named_and_left_to_its_indexers():
    # An array under zarrs whose zarr names its chunk keys otherwise (its metadata without
    # encode_chunk_key): said once, and its reads go through zarr's indexers (None here).
    pytest.importorskip("zarrs")
    from types import SimpleNamespace

    import chunksampler.reader as reader_module

    class Metadata:
        pass

    inner = SimpleNamespace(codec_pipeline=SimpleNamespace(impl=object()), metadata=Metadata(), store_path="")
    array = SimpleNamespace(_async_array=inner, dtype=np.dtype("f4"), fill_value=0.0)
    reader_module._lacking.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"zarr .* lacks Metadata\.encode_chunk_key.* zarr's indexers"):
            assert reader_module._rust_pipeline(array) is None
    finally:
        reader_module._lacking.cache_clear()
    inner.metadata.encode_chunk_key = lambda coords: "c/" + "/".join(map(str, coords))
    assert reader_module._rust_pipeline(array) is inner.codec_pipeline.impl


def test_a_zarr_without_the_internals_joined_reads_need_is_named_and_read_otherwise(monkeypatch):
    import chunksampler.reader as reader_module

    monkeypatch.delattr(zarr.AsyncArray, "_get_selection")
    reader_module._joined_reads.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"zarr .* lacks .*_get_selection.* one orthogonal selection instead"):
            assert reader_module._joined_reads() is None
    finally:
        monkeypatch.undo()
        reader_module._joined_reads.cache_clear()
    assert reader_module._joined_reads() is not None


def test_the_modules_examples_run():
    import doctest

    import chunksampler.reader as reader_module

    failures, tried = doctest.testmod(reader_module)
    assert tried >= 3 and failures == 0
