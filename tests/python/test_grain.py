"""chunksampler.grain: ChunkDataset, a grain.IterDataset of batches read chunk by chunk. In this
process: the batches against the sampler's own plan, the reads on the chunk grid, exact resume from
any point (through JSON as Grain's checkpoint handler writes it), the sources (arrays, zarr, h5py, AnnData dense and sparse, an annbatch
DatasetCollection) and the refusals. Under a 2-process jax.distributed job on CPU (grain_job.py):
disjoint shards of equal batch counts, every row once per epoch, mp_prefetch's workers reading the
sampler's worker shares, a crash and a resume from Grain's and Orbax's checkpoints with 0 and 2
workers, and the refusals on every process. And
examples/python/grain_train.py stopped and resumed as its page shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, assert_tree_clean, epoch_batches, free_port, rng, shown_output
from launch import child_env, run_in_session, run_together
from support import batch_sizes

import chunksampler as cs

grain = pytest.importorskip("grain")
from chunksampler.grain import ChunkDataset  # noqa: E402

import grain_job as job  # noqa: E402  (tests/python is on sys.path, as for conftest)

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module", autouse=True)
def absl_flags_parsed():
    # Grain's mp_prefetch reads an absl flag when JAX's profiler is importable; a program not run by
    # absl.app.run marks the flags parsed (the page says so).
    from absl import flags

    flags.FLAGS.mark_as_parsed()


class Recording:
    """An array-like over ``array`` that records each row range read from it."""

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.reads = array, []
        self.shape, self.dtype = array.shape, array.dtype

    def __getitem__(self, key):
        assert isinstance(key, slice) and key.step is None, f"read other than a contiguous slice: {key!r}"
        self.reads.append((key.start, key.stop))
        return self.array[key]


def table(n_obs: int) -> dict[str, np.ndarray]:
    return {"x": np.stack([np.arange(n_obs), np.arange(n_obs) % 5], axis=1).astype(np.float32),
            "row": np.arange(n_obs)}


rows = job.rows  # a batch's row ids, checked against its x


def plan(sampler, n_obs: int, epochs: range, worker: tuple[int, int] | None = None) -> list[list[int]]:
    """The sampler's own batches over ``epochs`` (worker ``worker``'s share, if given), as observation
    indices."""
    sampler = sampler.__copy__()
    out = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        out += [batch.tolist() for batch in epoch_batches(sampler, n_obs, worker=worker)]
    return out


def configurations(count: int, seed: int):
    """Random small samplers (plain, class and distributed), each with an n_obs it takes."""
    r = np.random.default_rng(seed)
    made = 0
    while made < count:
        chunk = int(r.integers(1, 9))
        preload = int(r.integers(1, 4))
        batch = int(r.choice(batch_sizes(chunk, preload)))
        n_obs = int(r.integers(1, 120))
        kind = int(r.integers(0, 4))
        seed_rng = rng(int(r.integers(1 << 30)))
        try:
            if kind == 0:
                sampler = cs.RandomSampler(chunk, preload, batch, drop_last=bool(r.integers(0, 2)), rng=seed_rng)
            elif kind == 1:
                sampler = cs.SequentialSampler(chunk, preload, batch)
            elif kind == 2:  # runs of whole chunks of one class
                codes = np.repeat(r.integers(0, 3, size=n_obs // chunk + 1), chunk)[:n_obs]
                sampler = cs.ClassSampler(chunk, preload, batch, classes=codes,
                                          num_samples=int(r.integers(1, 2 * n_obs)), rng=seed_rng)
            else:
                world = int(r.integers(1, 4))
                base = cs.RandomSampler(chunk, preload, batch, rng=seed_rng)
                n_obs = max(n_obs, world * batch)
                sampler = cs.DistributedSampler(base, dist_info=lambda w=world, k=int(r.integers(0, world)): (k, w),
                                                mode=str(r.choice(["contiguous", "global"])))
            sampler.validate(n_obs)
        except cs.ConfigError:  # a class run shorter than a chunk, a shard of no batch, ...
            continue
        made += 1
        yield sampler, n_obs


# --- the batches and the reads --------------------------------------------------------------------


def test_the_batches_are_the_samplers_plan_read_on_the_chunk_grid():
    for sampler, n_obs in configurations(150, seed=1):
        data = table(n_obs)
        recording = Recording(data["x"])
        dataset = ChunkDataset({"x": recording, "row": data["row"]}, sampler, num_epochs=3)
        got = [rows(batch) for batch in dataset]
        assert got == plan(sampler, n_obs, range(3)), repr(sampler)
        assert len(got) == 3 * dataset.n_batches
        # Every read is one contiguous slice, inside one cell of the chunk grid where the sampler keeps
        # to it (a class sampler's chunks start anywhere in a run of their class).
        on_grid = not isinstance(sampler, cs.ClassSampler)
        for start, stop in recording.reads:
            assert 0 <= start < stop <= n_obs
            assert not on_grid or start // sampler.chunk_size == (stop - 1) // sampler.chunk_size, (start, stop)


def test_every_row_once_per_epoch_in_a_new_order_each_epoch():
    n_obs = 1000
    dataset = ChunkDataset(table(n_obs), cs.RandomSampler(10, 4, 20, rng=rng(3)), num_epochs=3)
    got = [rows(batch) for batch in dataset]
    epochs = [sum(got[e * 50 : (e + 1) * 50], []) for e in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(n_obs))
    assert epochs[0] != epochs[1] != epochs[2]


def test_without_num_epochs_the_iterator_plays_epoch_after_epoch():
    dataset = ChunkDataset(table(40), cs.RandomSampler(4, 2, 8, rng=rng(1)))
    it = iter(dataset)
    got = [rows(next(it)) for _ in range(5 * 5)]
    assert got == plan(dataset.sampler, 40, range(5))
    assert it.get_state()["epoch"] == 4 and it.get_state()["batches_done"] == 5


def test_a_dataset_iterates_from_the_samplers_epoch_and_each_iterator_alone():
    sampler = cs.RandomSampler(4, 2, 8, rng=rng(2))
    sampler.set_epoch(3)
    dataset = ChunkDataset(table(40), sampler, num_epochs=2)
    first, second = iter(dataset), iter(dataset)
    a = [rows(next(first)) for _ in range(3)]
    b = [rows(batch) for batch in second]
    assert a == b[:3] and b == plan(sampler, 40, range(3, 5))


# --- resume ---------------------------------------------------------------------------------------


def test_a_state_resumes_exactly_through_json_from_any_point():
    r = np.random.default_rng(9)
    for sampler, n_obs in configurations(60, seed=2):
        dataset = ChunkDataset(table(n_obs), sampler, num_epochs=2)
        whole = [rows(batch) for batch in dataset]
        n = dataset.n_batches  # the start, the first batch, the epoch's end and the next's start, the end
        points = {0, 1, n - 1, n, n + 1, len(whole) - 1, len(whole), *r.integers(0, len(whole) + 1, size=6).tolist()}
        for k in sorted(p for p in points if 0 <= p <= len(whole)):
            it = iter(dataset)
            for _ in range(k):
                next(it)
            state = json.loads(json.dumps(it.get_state()))  # as Grain's CheckpointHandler stores it
            again = iter(dataset)
            again.set_state(state)
            assert [rows(batch) for batch in again] == whole[k:], (repr(sampler), k)


def test_a_resumed_iterator_reads_only_from_the_read_group_in_flight():
    n_obs = 400
    data = table(n_obs)
    sampler = cs.RandomSampler(10, 4, 20, rng=rng(5))  # read groups of 40 rows, 2 batches each
    dataset = ChunkDataset(data, sampler, num_epochs=1)
    it = iter(dataset)
    for _ in range(7):  # the 4th group's first batch
        next(it)
    state = it.get_state()
    recording = Recording(data["x"])
    resumed = iter(ChunkDataset({"x": recording, "row": data["row"]}, sampler, num_epochs=1))
    resumed.set_state(state)
    rest = [rows(batch) for batch in resumed]
    assert len(rest) == 20 - 7
    assert sum(stop - start for start, stop in recording.reads) == n_obs - 3 * 40


def test_grains_checkpoint_handler_saves_and_restores_it(tmp_path):
    from etils import epath

    dataset = ChunkDataset(table(300), cs.RandomSampler(10, 2, 10, rng=rng(4)), num_epochs=2)
    whole = [rows(batch) for batch in dataset]
    it = iter(dataset)
    for _ in range(37):
        next(it)
    grain.checkpoint.CheckpointHandler().save(epath.Path(tmp_path), item=it)
    restored = grain.checkpoint.CheckpointHandler().restore(epath.Path(tmp_path), item=iter(dataset))
    assert [rows(batch) for batch in restored] == whole[37:]


def test_the_state_is_the_loaders_envelope_and_a_state_chunksampler_0_4_wrote_still_resumes():
    dataset = ChunkDataset(table(300), cs.RandomSampler(10, 2, 10, rng=rng(6)), num_epochs=2)
    whole = [rows(batch) for batch in dataset]
    it = iter(dataset)
    for _ in range(33):
        next(it)
    state = it.get_state()
    assert state["format"] == "chunksampler.loaders/1" and state["world_size"] == 1
    assert (state["train"]["epoch"], state["train"]["batches_done"]) == (state["epoch"], state["batches_done"])
    old = {"format": "chunksampler.grain/1", **state["train"]}  # what get_state() returned in 0.4
    for saved in (state, old):
        resumed = iter(dataset)
        resumed.set_state(json.loads(json.dumps(saved)))
        assert [rows(batch) for batch in resumed] == whole[33:]


def test_a_state_of_another_run_is_refused():
    dataset = ChunkDataset(table(200), cs.RandomSampler(10, 2, 10, rng=rng(1)), num_epochs=2)
    it = iter(dataset)
    for _ in range(5):
        next(it)
    state = it.get_state()
    for other, why in [
        (ChunkDataset(table(200), cs.RandomSampler(10, 2, 10, rng=rng(2))), "seed"),
        (ChunkDataset(table(200), cs.RandomSampler(10, 2, 5, rng=rng(1))), "configuration"),
        (ChunkDataset(table(190), cs.RandomSampler(10, 2, 10, rng=rng(1))), "n_obs"),
    ]:
        with pytest.raises(cs.StateMismatchError):
            iter(other).set_state(state)
    # A state taken by worker 0 of 1, past an epoch's start, is not a worker share's of 2.
    sliced = ChunkDataset(table(200), cs.RandomSampler(10, 2, 10, rng=rng(1)))
    sliced.set_slice(slice(1, None, 2))
    with pytest.raises(cs.StateMismatchError, match="worker 0 of 1, but sample\\(\\) was called for worker 1 of 2"):
        iter(sliced).set_state(state)
    with pytest.raises(cs.StateFormatError, match="get_state"):
        it.set_state({"next_index": 3})
    with pytest.raises(cs.StateFormatError, match="another iterator"):
        it.set_state({**state, "format": "other/1"})
    with pytest.raises(cs.StateFormatError):
        it.set_state({**state, "state": "not a state"})
    # The refused states left the iterator where it was.
    assert it.get_state() == state


# --- the sources ----------------------------------------------------------------------------------


def test_one_array_gives_arrays_and_zarr_and_h5py_read_as_numpy(tmp_path):
    zarr = pytest.importorskip("zarr")
    h5py = pytest.importorskip("h5py")
    values = np.arange(300, dtype=np.int64)
    z = zarr.open_array(tmp_path / "a.zarr", mode="w", shape=(300,), chunks=(16,), dtype="int64")
    z[:] = values
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("a", data=values, chunks=(16,))
    sampler = cs.RandomSampler(16, 2, 8, rng=rng(0))
    expected = plan(sampler, 300, range(1))
    for array in (values, z):
        assert [batch.tolist() for batch in ChunkDataset(array, sampler, num_epochs=1)] == expected
    with h5py.File(tmp_path / "a.h5", "r") as f:
        assert [batch.tolist() for batch in ChunkDataset(f["a"], sampler, num_epochs=1)] == expected


def adata_of(n_obs: int, sparse: bool, first: int = 0):
    """Cells ``first, first + 1, ...``: X's column 0 and obs["cell"] hold each cell's number."""
    ad = pytest.importorskip("anndata")
    import pandas as pd
    import scipy.sparse

    cell = first + np.arange(n_obs)
    x = np.zeros((n_obs, 6), dtype=np.float32)
    x[:, 0] = cell
    x[np.arange(n_obs), 1 + cell % 5] = 1.0
    obs = pd.DataFrame({"cell": cell, "kind": pd.Categorical(np.array(["a", "b", "c"])[cell % 3]),
                        "name": [f"c{i}" for i in cell]}, index=[f"c{i}" for i in cell])
    return ad.AnnData(X=scipy.sparse.csr_matrix(x) if sparse else x, obs=obs)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("backed", [False, True], ids=["memory", "h5ad"])
def test_anndata_gives_x_dense_and_the_obs_columns(tmp_path, sparse, backed):
    ad = pytest.importorskip("anndata")
    adata = adata_of(250, sparse)
    if backed:
        adata.write_h5ad(tmp_path / "a.h5ad")
        adata = ad.read_h5ad(tmp_path / "a.h5ad", backed="r")
    sampler = cs.RandomSampler(10, 3, 15, rng=rng(1))
    dataset = ChunkDataset(adata, sampler, obs=["cell", "kind"], num_epochs=1)
    got = list(dataset)
    assert [batch["obs"]["cell"].tolist() for batch in got] == plan(sampler, 250, range(1))
    for batch in got:
        assert isinstance(batch["X"], np.ndarray) and batch["X"].shape[1] == 6
        assert (batch["X"][:, 0] == batch["obs"]["cell"]).all()
        assert (batch["obs"]["kind"] == batch["obs"]["cell"] % 3).all() and batch["obs"]["kind"].dtype == np.int32
    with pytest.raises(ValueError, match="obs column 'name' holds object values"):
        ChunkDataset(adata, sampler, obs=["name"])
    with pytest.raises(ValueError, match="obs has no column 'nope'"):
        ChunkDataset(adata, sampler, obs=["nope"])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_an_annbatch_collection_reads_each_dataset_where_its_rows_are(tmp_path, sparse):
    annbatch = pytest.importorskip("annbatch")
    inputs = []
    for file, n in enumerate((130, 90)):
        inputs.append(tmp_path / f"in{file}.h5ad")
        adata_of(n, sparse, first=1000 * file).write_h5ad(inputs[-1])
    collection = annbatch.DatasetCollection(tmp_path / "c.zarr")
    collection.add_adatas(inputs, n_obs_per_chunk=8, shard_size=32, dataset_size=100, shuffle_chunk_size=10,
                          rng=rng(0))
    collection = annbatch.DatasetCollection(tmp_path / "c.zarr", mode="r")
    cells = collection.obs(columns=["cell"])["cell"].to_numpy()
    sampler = cs.RandomSampler(8, 2, 8, rng=rng(3))
    dataset = ChunkDataset(collection, sampler, obs=["cell"], num_epochs=1)
    assert dataset.n_obs == 220
    got = list(dataset)
    expected = plan(sampler, 220, range(1))
    assert [batch["obs"]["cell"].tolist() for batch in got] == [cells[b].tolist() for b in expected]
    for batch in got:
        assert (batch["X"][:, 0] == batch["obs"]["cell"]).all()
    assert sorted(sum((batch["obs"]["cell"].tolist() for batch in got), [])) == sorted(cells.tolist())


# --- refusals -------------------------------------------------------------------------------------


def test_bad_input_is_refused_naming_it():
    sampler = cs.RandomSampler(4, 2, 4, rng=rng(0))
    with pytest.raises(TypeError, match="sampler must be a chunksampler"):
        ChunkDataset(table(10), object())
    with pytest.raises(TypeError, match="data must be an array-like"):
        ChunkDataset([1, 2, 3], sampler)
    with pytest.raises(ValueError, match="lengths differ"):
        ChunkDataset({"a": np.zeros(10), "b": np.zeros(11)}, sampler)
    with pytest.raises(ValueError, match="empty mapping"):
        ChunkDataset({}, sampler)
    with pytest.raises(TypeError, match="obs= and layer= are for AnnData"):
        ChunkDataset(table(10), sampler, obs=["x"])
    with pytest.raises(cs.ConfigError, match=r"num_epochs \(0\) must be >= 1"):
        ChunkDataset(table(10), sampler, num_epochs=0)
    with pytest.raises(TypeError, match="shard_options must be a grain.sharding.ShardOptions"):
        ChunkDataset(table(10), sampler, shard_options=(0, 2))
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(ValueError, match="sparse CSC matrix"):
        ChunkDataset(scipy_sparse.csc_matrix(np.eye(10)), sampler)
    with pytest.raises(cs.ConfigError, match="would shard the DistributedSampler's shard again"):
        ChunkDataset(table(40), cs.DistributedSampler(sampler, dist_info=lambda: (0, 2)),
                     shard_options=grain.sharding.ShardOptions(shard_index=0, shard_count=2))
    dataset = ChunkDataset(table(10), sampler)
    with pytest.raises(ValueError, match=r"slice\(i, None, n\)"):
        dataset.set_slice(slice(0, 5))


def test_shard_options_shard_a_plain_sampler_and_one_shard_changes_nothing():
    sampler = cs.RandomSampler(4, 2, 4, rng=rng(0))
    sharded = ChunkDataset(table(40), sampler, shard_options=grain.sharding.ShardOptions(shard_index=1, shard_count=2))
    assert (sharded.sampler.rank, sharded.sampler.world_size) == (1, 2)
    alone = ChunkDataset(table(40), sampler, shard_options=grain.sharding.NoSharding())
    assert isinstance(alone.sampler, cs.RandomSampler)


def test_chunksampler_does_not_import_grain_or_jax():
    code = "import sys, chunksampler\nassert 'grain' not in sys.modules and 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- a jax.distributed job ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """grain_job.py's two parts, each a 2-process jax.distributed job: the run (ended by a crash), then
    the resume."""
    out = tmp_path_factory.mktemp("grain_job")
    for part in ("run", "resume"):
        port = str(free_port())
        commands = [([sys.executable, str(HERE / "grain_job.py"), part, str(i), "2", port, str(out)], child_env())
                    for i in range(2)]
        run_together(commands, timeout=JOB_TIMEOUT)
    return {part: [json.loads((out / f"{part}-process{i}.json").read_text()) for i in range(2)]
            for part in ("run", "resume")}


def test_each_process_reads_its_own_shard_every_row_once_per_epoch(reports):
    full = reports["run"]
    assert [r["process"] for r in full] == [[0, 2], [1, 2]]
    assert [r["shard"] for r in full] == [[0, 2], [1, 2]]
    n_batches = full[0]["n_batches"]
    assert full[1]["n_batches"] == n_batches == (job.N_OBS // 2 // 8)
    base = job.sampler()
    for process in range(2):
        oracle = cs.DistributedSampler(base, dist_info=lambda p=process: (p, 2))
        # Without workers: the process's DistributedSampler's plan, batch for batch.
        assert full[process]["w0"] == plan(oracle, job.N_OBS, range(job.EPOCHS))
        # With 2 workers: each worker's share of that plan (whole read groups), interleaved.
        shares = [plan(oracle, job.N_OBS, range(job.EPOCHS), worker=(worker, 2)) for worker in range(2)]
        assert sorted(map(tuple, full[process]["w2"])) == sorted(map(tuple, shares[0] + shares[1]))
        assert sorted(map(tuple, full[process]["w2"])) == sorted(map(tuple, full[process]["w0"]))
        # The state taken before the first batch restores to the first batches, with workers too.
        for workers in ("w0", "w2"):
            assert full[process][f"again-{workers}"] == full[process][workers][:3]
    for workers in ("w0", "w2"):
        counts = [Counter(sum(report[workers], [])) for report in full]
        assert set(counts[0]).isdisjoint(counts[1])
        assert all(count == job.EPOCHS for c in counts for count in c.values())
        # Each process's shard: half the rows, less what makes whole batches of 8 (enforce_equal_batches).
        assert sum(len(c) for c in counts) == 2 * n_batches * 8 == 2 * (job.N_OBS // 2 // 8 * 8)
        assert len(full[0][workers]) == len(full[1][workers]) == job.EPOCHS * n_batches
    first, second = (sum(full[0]["w0"][e * n_batches : (e + 1) * n_batches], []) for e in range(2))
    assert sorted(first) == sorted(second) and first != second  # contiguous shards, reshuffled


@pytest.mark.parametrize("workers", ["w0", "w2"])
def test_a_crash_resumes_from_the_checkpoint_with_exactly_the_rest(reports, workers):
    for process in range(2):
        run = reports["run"][process]
        crash, resume = run[f"crash-{workers}"], reports["resume"][process][f"resume-{workers}"]
        assert len(crash) == run["n_batches"] + 5
        assert crash + resume == run[workers]


def test_mistakes_are_refused_on_every_process(reports):
    refusals = [r["refusals"] for r in reports["run"]]
    for process, r in enumerate(refusals):
        assert r["other_rank"]["error"] == "ConfigError"
        assert "rank 1: dist_info gave rank 0 of world_size 2" in r["other_rank"]["message"]
        assert "jax.distributed job" in r["other_rank"]["message"]
        assert r["stacked"]["error"] == "ConfigError"
        assert "would shard the DistributedSampler's shard again" in r["stacked"]["message"]
        assert r["seeds_differ"]["error"] == "ConfigError" and "same seed" in r["seeds_differ"]["message"]
        assert r["other_seed"]["error"] == "StateMismatchError"
        assert r["shard_options"]["rank"] == process and r["shard_options"]["world_size"] == 2
        assert r["shard_options"]["first"] == reports["run"][process]["w0"][0]


# --- examples/python/grain_train.py ---------------------------------------------------------------


def test_grain_train_example_stops_and_resumes_on_the_samplers_batches(example_tree):
    pytest.importorskip("annbatch")
    example = HERE.parents[1] / "examples" / "python" / "grain_train.py"
    # The page's two commands, with their relative paths, in an example tree; --record keeps what each run trained on.
    stop = [sys.executable, str(example), "work/grain/cells.zarr", "--make-data", "--launch", "2",
            "--checkpoint", "work/grain/checkpoint", "--stop-after", "40", "--record", "work/grain/record"]
    resume = [sys.executable, str(example), "work/grain/cells.zarr", "--launch", "2",
              "--checkpoint", "work/grain/checkpoint", "--record", "work/grain/record"]
    # The stop is a crash: the processes exit with status 3 after their checkpoint (the launcher kills
    # one that is slower to), and the launcher with 1.
    crashed = run_in_session(stop, child_env(), JOB_TIMEOUT, cwd=example_tree)
    assert crashed.returncode == 1 and re.search(r"exit codes \[(3, -?\d+|-?\d+, 3)\]", crashed.stderr), \
        crashed.stdout + crashed.stderr
    outputs = [crashed.stdout, run_together([(resume, child_env())], timeout=JOB_TIMEOUT, cwd=example_tree)[0]]
    numbers = re.compile(r"\d+\.\d+")
    for out, name in zip(outputs, ("grain-train-stop", "grain-train-resume")):
        shown = shown_output(name).splitlines()
        printed = [line for line in out.splitlines() if line.startswith(("process ", "epoch "))]
        # The same lines, the losses and accuracies aside (they are the machine's that ran the page).
        assert [numbers.sub("#", line) for line in printed] == [numbers.sub("#", line) for line in shown], out
    records = {(i, step): json.loads((example_tree / "work/grain/record" / f"process{i}-{step}.json").read_text())
               for i in range(2) for step in (40, 155)}
    cells = annbatch_cells(example_tree / "work/grain/cells.zarr")
    base = cs.RandomSampler(32, 4, 64, rng=rng(0))  # the example's defaults, seed 0
    for process in range(2):
        trained = records[process, 40]["cells"] + records[process, 155]["cells"]
        assert records[process, 155]["first_step"] == 40
        oracle = cs.DistributedSampler(base, dist_info=lambda p=process: (p, 2))
        assert trained == [cells[batch].tolist() for batch in map(np.array, plan(oracle, 4000, range(5)))]
    # The gradients are averaged over the processes: both end with the same parameters.
    assert records[0, 155]["params"] == records[1, 155]["params"]
    assert_tree_clean(example_tree, "grain_train.py")


def annbatch_cells(path: Path) -> np.ndarray:
    """obs["cell"] of the collection, in its row order."""
    import annbatch

    return annbatch.DatasetCollection(path, mode="r").obs(columns=["cell"])["cell"].to_numpy()
