"""ChunkDataLoader over a source (zarr, h5py, a memmap, scipy CSR, AnnData): each load request read
whole through chunksampler.reader, by DataLoader workers or in the loader's process. The batches
are the source's rows at the sampler's indices, whatever the workers; a counting store sees each
chunk read once an epoch; a resume from any point continues exactly; bad sources and failing
stores raise clear errors and leave the loader's state where it was."""

from __future__ import annotations

import copy
import pickle
from collections import Counter

import numpy as np
import pytest
from conftest import rng
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import configs, servable

import chunksampler as cs
from chunksampler.reader import Reader

torch = pytest.importorskip("torch")
zarr = pytest.importorskip("zarr")
from stores import CountingStore, rows_of, zarr_array  # noqa: E402
from zarr.storage import MemoryStore  # noqa: E402

from chunksampler.torch import BatchSampler, ChunkDataLoader  # noqa: E402

WIDTH = 3


def source(kind: str, data: np.ndarray, chunk: int, path):
    """``data`` as a source of ``kind``."""
    if kind == "zarr":
        return zarr_array(data, chunk)
    if kind == "zarr sharded":
        return zarr_array(data, chunk, shard=4 * chunk)
    if kind == "h5py":
        import h5py

        file = h5py.File(path / "rows.h5", "w")
        file.create_dataset("x", data=data, chunks=(chunk, data.shape[1]))
        return file["x"]
    if kind == "memmap":
        memmap = np.lib.format.open_memmap(path / "rows.npy", mode="w+", dtype=data.dtype, shape=data.shape)
        memmap[:] = data
        return Reader(memmap)
    if kind == "numpy":
        return Reader(data)
    assert kind == "scipy csr"
    import scipy.sparse

    return scipy.sparse.csr_matrix(data)


KINDS = ("zarr", "zarr sharded", "h5py", "memmap", "numpy", "scipy csr")


def dense(batch) -> np.ndarray:
    return (batch.to_dense() if batch.layout == torch.sparse_csr else batch).numpy()


def expected_batches(sampler, n_obs: int, epochs: int = 1) -> list[list[int]]:
    """The indices of each batch, as the map-style path hands them out (a copy of ``sampler``)."""
    batches = BatchSampler(copy.deepcopy(sampler), n_obs)
    return [batch for _ in range(epochs) for batch in batches]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs(workers=False), kind=st.sampled_from(KINDS))
def test_the_batches_are_the_sources_rows_at_the_samplers_indices(tmp_path_factory, config, kind):
    sampler = servable(config)
    if sampler is None:
        return
    data = rows_of(config.n_obs)
    expected = expected_batches(sampler, config.n_obs, epochs=2)
    loader = ChunkDataLoader(source(kind, data, config.chunk_size, tmp_path_factory.mktemp("s")), sampler)
    got = [dense(batch) for _ in range(2) for batch in loader]
    assert len(got) == len(expected)
    for batch, indices in zip(got, expected):
        np.testing.assert_array_equal(batch, data[indices])


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_hand_out_the_same_batches_in_the_same_order(workers):
    data = rows_of(1000)
    z = zarr_array(data, 10, shard=40)
    for make in (
        lambda: cs.RandomSampler(chunk_size=10, preload_nchunks=4, batch_size=8, rng=rng(workers)),
        lambda: cs.DistributedSampler(cs.SequentialSampler(chunk_size=10, preload_nchunks=3, batch_size=6),
                                      dist_info=lambda: (1, 3), mode="global"),
        lambda: cs.MixtureSampler(chunk_size=10, preload_nchunks=2, batch_size=5, sizes=[300, 700], rng=rng(2)),
    ):
        expected = expected_batches(make(), 1000)
        loader = ChunkDataLoader(z, make(), num_workers=workers)
        got = [dense(batch)[:, 0].astype(int).tolist() for batch in loader]
        assert got == [list(batch) for batch in expected]


@pytest.mark.parametrize("world", [1, 3])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_store_sees_each_chunk_read_once_an_epoch(world, workers):
    chunk, n_obs = 16, 16 * 60
    store = CountingStore()
    z = zarr_array(rows_of(n_obs), chunk, store=store)
    store.reads.clear()
    base = cs.RandomSampler(chunk_size=chunk, preload_nchunks=4, batch_size=16, rng=rng(3))
    named: list[int] = []
    for rank in range(world):
        sampler = cs.DistributedSampler(base, dist_info=lambda r=rank: (r, world))
        for request in copy.deepcopy(sampler).sample_arrays(n_obs):
            named += (np.asarray(request.starts) // chunk).tolist()
        # fork: the workers count in their own copies of the store; the loader's process reads none.
        loader = ChunkDataLoader(z, sampler, num_workers=workers, multiprocessing_context="fork" if workers else None)
        handed = sum(1 for _ in loader)
        assert handed == sampler.n_batches(n_obs)
    assert len(named) == len(set(named))
    if workers == 0:
        # Every rank's shard together: each chunk the requests name read once (one call a request).
        assert store.reads == Counter(f"c/{i}/0" for i in named)
    else:
        assert store.reads == Counter()


def test_workers_read_each_chunk_once_an_epoch(tmp_path):
    # Each worker (a fork, with its own copy of the store) appends the keys it reads to one file.
    chunk, n_obs = 8, 8 * 48
    store = CountingStore(log=tmp_path / "reads")
    z = zarr_array(rows_of(n_obs), chunk, store=store)
    base = cs.RandomSampler(chunk_size=chunk, preload_nchunks=3, batch_size=12, rng=rng(9))
    for workers in (2, 3):
        (tmp_path / "reads").write_text("")
        loader = ChunkDataLoader(z, copy.deepcopy(base), num_workers=workers, multiprocessing_context="fork")
        for _ in range(2):
            assert sum(1 for _ in loader) == n_obs // 12
        reads = Counter((tmp_path / "reads").read_text().split())
        assert reads == Counter({f"c/{i}/0": 2 for i in range(n_obs // chunk)}), workers


def test_a_resume_from_any_point_continues_exactly():
    data = rows_of(700)
    z = zarr_array(data, 7, shard=28)
    make = lambda: cs.DistributedSampler(  # noqa: E731
        cs.RandomSampler(chunk_size=7, preload_nchunks=4, batch_size=4, rng=rng(11)), dist_info=lambda: (0, 2))
    whole = ChunkDataLoader(z, make())
    expected = [dense(b)[:, 0].astype(int).tolist() for _ in range(2) for b in whole]
    per_epoch = len(expected) // 2
    generator = np.random.default_rng(0)
    for stop in sorted({0, per_epoch - 1, per_epoch, *generator.integers(1, 2 * per_epoch, 6).tolist()}):
        for workers in (0, 2):
            loader = ChunkDataLoader(z, make(), num_workers=workers)
            handed = []
            epoch = 0
            while len(handed) < stop:
                for batch in loader:
                    handed.append(dense(batch)[:, 0].astype(int).tolist())
                    if len(handed) == stop:
                        break
                else:
                    epoch += 1
            state = pickle.loads(pickle.dumps(loader.state_dict()))
            resumed = ChunkDataLoader(z, make(), num_workers=workers)
            resumed.load_state_dict(state)
            rest = []
            while len(handed) + len(rest) < len(expected):
                rest += [dense(b)[:, 0].astype(int).tolist() for b in resumed]
            assert handed + rest == expected, (stop, workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failed_read_leaves_the_loader_where_it_was(workers):
    chunk, n_obs = 10, 400
    store = CountingStore()
    z = zarr_array(rows_of(n_obs), chunk, store=store)
    make = lambda: cs.RandomSampler(chunk_size=chunk, preload_nchunks=2, batch_size=5, rng=rng(5))  # noqa: E731
    expected = [dense(b)[:, 0].astype(int).tolist() for b in ChunkDataLoader(z, make())]
    # The chunk the third request reads first fails.
    requests = list(make().sample(n_obs))
    bad = f"c/{requests[2]['requests'][0].start // chunk}/0"
    loader = ChunkDataLoader(z, make(), num_workers=workers, multiprocessing_context="fork" if workers else None)
    handed = []
    store.failing = {bad}
    with pytest.raises(cs.ReadError) as raised:
        for batch in loader:
            handed.append(dense(batch)[:, 0].astype(int).tolist())
    if workers == 0:
        assert "the disk holding" in str(raised.value.__cause__) and "reading data" in str(raised.value)
    assert len(handed) == 8  # two requests of four batches
    state = loader.state_dict()
    assert (state["epoch"], state["batches_done"]) == (0, 8)
    store.failing = set()
    rest = [dense(b)[:, 0].astype(int).tolist() for b in loader]
    assert handed + rest == expected


def test_anndata_in_memory_and_backed_gives_x_layers_and_obs(tmp_path):
    anndata = pytest.importorskip("anndata")
    import pandas as pd
    import scipy.sparse

    n_obs = 240
    data = rows_of(n_obs)
    obs = pd.DataFrame({"label": pd.Categorical(np.arange(n_obs) % 3), "depth": np.arange(n_obs) * 2.0},
                       index=[str(i) for i in range(n_obs)])
    adata = anndata.AnnData(X=scipy.sparse.csr_matrix(data), obs=obs, layers={"counts": data * 2})
    adata.write_h5ad(tmp_path / "cells.h5ad")
    for given in (adata, anndata.read_h5ad(tmp_path / "cells.h5ad", backed="r")):
        make = lambda: cs.RandomSampler(chunk_size=8, preload_nchunks=3, batch_size=6, rng=rng(1))  # noqa: E731
        expected = expected_batches(make(), n_obs)
        for workers in (0, 2):
            got = list(ChunkDataLoader(given, make(), obs=["label", "depth"], num_workers=workers))
            assert len(got) == len(expected)
            for batch, indices in zip(got, expected):
                assert batch["X"].layout == torch.sparse_csr  # sparse stays sparse for torch
                np.testing.assert_array_equal(batch["X"].to_dense().numpy(), data[indices])
                assert batch["obs"]["label"].tolist() == (np.asarray(indices) % 3).tolist()
                assert batch["obs"]["depth"].tolist() == (np.asarray(indices) * 2.0).tolist()
        layer = next(iter(ChunkDataLoader(given, make(), layer="counts")))
        np.testing.assert_array_equal(layer["X"].numpy(), data[expected[0]] * 2)


def test_bad_sources_are_refused_naming_the_rule(tmp_path):
    import scipy.sparse

    sampler = cs.RandomSampler(chunk_size=4, preload_nchunks=2, batch_size=4)
    z = zarr_array(rows_of(40), 4)
    with pytest.raises(ValueError, match=r"n_obs \(48\) must be the source's length, 40 rows"):
        ChunkDataLoader(z, sampler, n_obs=48)
    with pytest.raises(ValueError, match="sparse CSC matrix, whose rows are not contiguous"):
        ChunkDataLoader(scipy.sparse.csc_matrix(rows_of(40)), sampler)
    with pytest.raises(ValueError, match="0-d .* which has no rows"):
        ChunkDataLoader(zarr.create_array(MemoryStore(), shape=(), dtype="f4"), sampler)
    with pytest.raises(ValueError, match="lengths differ"):
        Reader({"x": rows_of(40), "y": np.arange(41)})
    with pytest.raises(TypeError, match="obs= and layer= are for"):
        ChunkDataLoader(range(40), sampler, obs=["label"])
    with pytest.raises(TypeError, match="a request must be a RequestArrays"):
        Reader(rows_of(40)).read([1, 2])


def test_a_reader_reads_annbatch_load_requests_as_its_own_arrays():
    data = rows_of(300)
    reader = Reader(zarr_array(data, 10))
    sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=3, batch_size=10, rng=rng(2))
    dicts = [
        [batch.copy() for batch in reader.batches(request)] for request in copy.deepcopy(sampler).sample(300)
    ]
    arrays = [[batch.copy() for batch in reader.batches(request)] for request in sampler.sample_arrays(300)]
    assert len(dicts) == len(arrays) == 10
    for left, right in zip(dicts, arrays):
        for a, b in zip(left, right):
            np.testing.assert_array_equal(a, b)


def test_workers_over_zarrs_are_spawned_and_a_fork_is_refused(tmp_path):
    # zarrs' Rust thread pool does not survive fork: a forked worker would wait for it forever.
    pytest.importorskip("zarrs")
    data = rows_of(600)
    z = zarr.create_array(tmp_path / "rows.zarr", shape=data.shape, dtype=data.dtype, chunks=(10, WIDTH))
    z[:] = data
    make = lambda: cs.RandomSampler(chunk_size=10, preload_nchunks=3, batch_size=6, rng=rng(4))  # noqa: E731
    loader = ChunkDataLoader(z, make(), num_workers=2)
    assert loader.reader.under_zarrs
    assert loader.dataloader.multiprocessing_context.get_start_method() == "spawn"
    expected = expected_batches(make(), 600)
    assert [dense(batch)[:, 0].astype(int).tolist() for batch in loader] == [list(b) for b in expected]
    with pytest.raises(cs.ConfigError, match="multiprocessing_context='fork' cannot start workers that read through zarrs"):
        ChunkDataLoader(z, make(), num_workers=2, multiprocessing_context="fork")
    plain = ChunkDataLoader(Reader(z, zarrs=False), make(), num_workers=2, multiprocessing_context="fork")
    assert not plain.reader.under_zarrs
    assert [dense(batch)[:, 0].astype(int).tolist() for batch in plain] == [list(b) for b in expected]


@pytest.mark.parametrize("workers", [0, 2])
def test_lightning_over_a_zarr_store_resumes_exactly_after_a_crash(tmp_path, workers):
    # A Trainer fits a ChunkDataModule over a zarr store, checkpoints mid-epoch and dies; a new Trainer
    # resumed from the checkpoint trains exactly the batches the uninterrupted fit trained after it.
    lightning = pytest.importorskip("lightning.pytorch")
    from chunksampler.lightning import ChunkDataModule

    data = rows_of(640)
    z = zarr_array(data, 16, store=MemoryStore())
    make = lambda: cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=16, rng=rng(12))  # noqa: E731

    class Model(lightning.LightningModule):
        def __init__(self, stop_at: int | None = None) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(WIDTH, 1)
            self.trained: list[list[int]] = []
            self.stop_at = stop_at

        def training_step(self, batch, batch_idx):
            if self.stop_at is not None and self.global_step == self.stop_at:
                raise RuntimeError("the node is gone")
            self.trained.append(batch[:, 0].long().tolist())
            return self.layer(batch).square().mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def fit(model, ckpt_path=None, checkpoint=None):
        trainer = lightning.Trainer(
            accelerator="cpu", devices=1, max_epochs=3, logger=False, enable_progress_bar=False,
            enable_model_summary=False, callbacks=[checkpoint] if checkpoint else [],
            enable_checkpointing=checkpoint is not None,
        )
        trainer.fit(model, ChunkDataModule(z, make(), num_workers=workers), ckpt_path=ckpt_path)

    whole = Model()
    fit(whole)
    assert len(whole.trained) == 3 * 40
    checkpoint = lightning.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=50, save_top_k=-1)
    crashed = Model(stop_at=57)
    with pytest.raises(RuntimeError, match="the node is gone"):
        fit(crashed, checkpoint=checkpoint)
    assert crashed.trained == whole.trained[:57]
    resumed = Model()
    fit(resumed, ckpt_path=str(next(tmp_path.glob("*step=50.ckpt"))))
    assert resumed.trained == whole.trained[50:]
