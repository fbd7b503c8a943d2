"""dist_info="jax": what it does before jax.distributed.initialize() and without jax (here, in
this process), and under a real jax.distributed job on CPU: 3 processes joined on 127.0.0.1 reading
disjoint shards of equal batch counts, plain and inside annbatch's Loader over a DatasetCollection
(jax_ranks.py, one per process); and examples/python/jax_train.py training on 2 processes."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, assert_tree_clean, epoch_batches, free_port, rng, shown_output
from launch import LAUNCHER_VARIABLES, child_env, run_together

import chunksampler as cs

HERE = Path(__file__).resolve().parent
JAX_TRAIN = HERE.parents[1] / "examples" / "python" / "jax_train.py"

@pytest.fixture
def no_launcher(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def base():
    return cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=rng(7))


# --- in this process ------------------------------------------------------------------------------


def test_without_jax_it_is_an_import_error_naming_the_package(no_launcher):
    no_launcher.setitem(sys.modules, "jax", None)  # `import jax` fails as where it is not installed
    with pytest.raises(ModuleNotFoundError, match=r"dist_info='jax' needs the jax package.*pip install jax") as caught:
        cs.DistributedSampler(base(), dist_info="jax")
    assert caught.value.name == "jax"
    assert isinstance(caught.value.__cause__, ImportError)


@pytest.mark.parametrize(
    "variables",
    [
        {"RANK": "1", "WORLD_SIZE": "3"},
        {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"},
        {"PMI_RANK": "1", "PMI_SIZE": "3"},
        {"SLURM_PROCID": "1", "SLURM_NTASKS": "3"},
    ],
    ids=["torchrun", "openmpi", "pmi", "slurm"],
)
def test_before_initialize_it_refuses_naming_initialize_and_what_the_launcher_says(no_launcher, variables):
    pytest.importorskip("jax")
    from jax._src import xla_bridge

    started_before = xla_bridge.backends_are_initialized()
    for name, value in variables.items():
        no_launcher.setenv(name, value)
    with pytest.raises(cs.DistEnvironmentError) as caught:
        cs.DistributedSampler(base(), dist_info="jax")
    assert isinstance(caught.value, RuntimeError)
    message = str(caught.value)
    assert message.startswith("dist_info='jax': JAX distributed is not initialized")  # annbatch's words, kept
    assert "say this is rank 1 of 3" in message
    assert "Call jax.distributed.initialize() in every process, before any other JAX call" in message
    # Nothing in JAX was asked: its backend is as it was, so initialize() can still be called.
    assert xla_bridge.backends_are_initialized() == started_before


@pytest.mark.parametrize("variables", [{}, {"RANK": "0", "WORLD_SIZE": "1"}, {"RANK": "x", "WORLD_SIZE": "3"},
                                       {"RANK": "2"}], ids=["none", "one-process", "not-an-integer", "no-world-size"])
def test_before_initialize_it_refuses_whatever_the_launcher_says(no_launcher, variables):
    pytest.importorskip("jax")
    for name, value in variables.items():
        no_launcher.setenv(name, value)
    # The launcher's variables only add to the message; one process, or none readable, adds nothing.
    with pytest.raises(cs.DistEnvironmentError, match=r"not initialized \(jax.distributed.initialize\(\) was not called; "
                       r"on CPU and GPU, JAX then counts every process as process 0 of 1, and each would read the whole dataset\)\. Call jax") as caught:
        cs.DistributedSampler(base(), dist_info="jax")
    assert "launcher" not in str(caught.value)


# --- child processes ------------------------------------------------------------------------------


N_PROCESSES = 3
PLAIN_N_OBS = 203  # jax_ranks.py's numbers
COLLECTION_N_OBS = 1200


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Runs jax_ranks.py as 3 jax.distributed processes; RANK and WORLD_SIZE say what a launcher would."""
    pytest.importorskip("jax")
    pytest.importorskip("annbatch")
    out = tmp_path_factory.mktemp("jax_job")
    port = str(free_port())
    commands = [([sys.executable, str(HERE / "jax_ranks.py"), str(i), str(N_PROCESSES), port,
                  str(out / "collection.zarr"), str(out)], child_env(RANK=str(i), WORLD_SIZE=str(N_PROCESSES)))
                for i in range(N_PROCESSES)]
    run_together(commands, timeout=JOB_TIMEOUT)
    return [json.loads((out / f"process{i}.json").read_text()) for i in range(N_PROCESSES)]


def test_processes_are_refused_before_initialize_and_can_initialize_after(job):
    for i, process in enumerate(job):
        assert process["environment"] == [str(i), "3"]
        before = process["before"]
        assert before["error"] == "DistEnvironmentError" and before["runtime_error"]
        assert "the launcher's variables (RANK/WORLD_SIZE, " in before["message"]
        assert f"say this is rank {i} of 3. Call jax.distributed.initialize()" in before["message"]
        assert before["backend_started"] is False
        assert process["jax"] == [i, 3]  # then jax.distributed.initialize() worked


def shares_of(batches_by_process: list[list[list[int]]]) -> list[set[int]]:
    shares = [{i for batch in batches for i in batch} for batches in batches_by_process]
    for share, batches in zip(shares, batches_by_process):
        assert len(share) == sum(map(len, batches)), "a process read an observation twice in an epoch"
    for a in range(len(shares)):
        for b in range(a + 1, len(shares)):
            assert not shares[a] & shares[b], f"processes {a} and {b} share observations"
    return shares


@pytest.mark.parametrize("mode", ["contiguous", "global"])
def test_plain_shards_are_disjoint_with_equal_batch_counts(job, mode):
    # 203 rows over 3 processes, batches of 4: 16 batches each, 192 rows read, 11 left out (drop).
    for epoch in range(2):
        batches = [process["plain"][mode]["epochs"][epoch] for process in job]
        assert [len(b) for b in batches] == [16, 16, 16]
        assert all(len(batch) == 4 for b in batches for batch in b)
        assert sum(map(len, shares_of(batches))) == 192
    for i, process in enumerate(job):
        got = process["plain"][mode]
        assert (got["rank"], got["world_size"], got["n_batches"]) == (i, 3, 16)
        # Exactly what rank i of 3 reads, given its (rank, world_size) directly.
        expected = cs.DistributedSampler(base(), dist_info=lambda i=i: (i, 3), mode=mode)
        for epoch in range(2):
            expected.set_epoch(epoch)
            assert got["epochs"][epoch] == [b.tolist() for b in epoch_batches(expected, PLAIN_N_OBS)]


@pytest.mark.parametrize("mode", ["contiguous", "global"])
def test_loader_shards_are_disjoint_with_equal_batch_counts(job, mode):
    # 1,200 rows of a shuffled collection over 3 processes, batches of 16: 25 batches each, every row read once.
    cells_at = np.array(job[0]["collection_cells"])
    assert len(cells_at) == COLLECTION_N_OBS
    assert sorted(cells_at.tolist()) == list(range(700)) + list(range(10_000, 10_500))
    for i, process in enumerate(job):
        got = process["loader"][mode]
        assert got["len"] == len(got["index"]) == 25
        sampler = cs.DistributedSampler(
            cs.RandomSampler(chunk_size=16, preload_nchunks=2, batch_size=16, rng=rng(7)),
            dist_info=lambda i=i: (i, 3), mode=mode)
        # The Loader yields the sampler's batches, in its order, and the rows they name.
        assert got["index"] == [b.tolist() for b in epoch_batches(sampler, COLLECTION_N_OBS)]
        assert got["cell"] == [cells_at[batch].tolist() for batch in got["index"]]
        assert got["x"] == got["cell"]  # X's column 0 holds the cell's id
    shares = shares_of([process["loader"][mode]["cell"] for process in job])
    assert set().union(*shares) == set(cells_at.tolist())


def test_launcher_naming_more_processes_than_jax_joined_is_refused_fewer_is_not(job):
    for i, process in enumerate(job):
        refused = process["launcher_says_4"]
        assert refused["error"] == "DistEnvironmentError" and refused["runtime_error"]
        assert refused["message"].startswith(f"dist_info='jax': jax.distributed joined 3 process(es) (this is "
                                             f"process {i}), but the launcher's variables")
        assert f"say there are 4 (this is rank {i}): the processes outside JAX's job would read the same shards" \
            in refused["message"]
        assert process["launcher_says_1"] == {"rank": i, "world_size": 3}


# --- examples/python/jax_train.py -------------------------------------------------------------------


def test_jax_train_example_learns_on_two_processes_of_disjoint_shards(example_tree):
    pytest.importorskip("jax")
    pytest.importorskip("annbatch")
    # The page's command, with its relative paths, in an example tree.
    command = [sys.executable, str(JAX_TRAIN), "work/jax/cells.zarr", "--make-data", "--launch", "2",
               "--epochs", "3", "--record", "work/jax/record"]
    out = run_together([(command, child_env())], timeout=JOB_TIMEOUT, cwd=example_tree)[0]
    records = [json.loads((example_tree / "work/jax/record" / f"process{i}.json").read_text()) for i in range(2)]
    # 4,000 cells over 2 processes, batches of 64: 31 batches each, 3,968 cells read every epoch.
    assert "process 0 of 2: 31 batches of 64 per epoch from rows [0, 1984) of the 4000 cells" in out
    assert "process 1 of 2: 31 batches of 64 per epoch from rows [1984, 3968) of the 4000 cells" in out
    for epoch in range(3):
        batches = [record["epochs"][epoch]["cells"] for record in records]
        assert [len(b) for b in batches] == [31, 31]
        assert all(len(batch) == 64 for b in batches for batch in b)
        assert sum(map(len, shares_of(batches))) == 3968
    # Contiguous mode: each process reads its own shard every epoch.
    assert all(len({frozenset(c for batch in e["cells"] for c in batch) for e in r["epochs"]}) == 1 for r in records)
    # The gradients are averaged over the processes: both end with the same parameters.
    assert records[0]["params"] == records[1]["params"]
    assert records[0]["params"]["b1"] != [0.0] * 32  # and they moved
    losses = [e["loss"] for e in records[0]["epochs"]]
    assert losses == [e["loss"] for e in records[1]["epochs"]]
    assert losses[0] > losses[1] > losses[2] and losses[2] < 0.7 * losses[0], losses
    printed = [float(line.split("loss ")[1].split(",")[0]) for line in out.splitlines() if line.startswith("epoch ")]
    assert printed == [round(loss, 4) for loss in losses]
    # The documentation shows a 5-epoch run: the same lines of both processes, and epoch lines of the same
    # form (their losses are that machine's).
    shown = shown_output("jax-train").splitlines()
    numbers = re.compile(r"\d+\.\d+")
    assert [line for line in out.splitlines() if line.startswith("process ")] == [
        line for line in shown if line.startswith("process ")]
    assert [numbers.sub("#", line) for line in out.splitlines() if line.startswith("epoch ")] == [
        numbers.sub("#", line) for line in shown if line.startswith("epoch ")][:3]
    # The collection, its two inputs and the records went under work/jax, which .gitignore ignores.
    assert sorted(p.name for p in (example_tree / "work/jax").iterdir()) == [
        "cells.zarr", "cells_donor0.h5ad", "cells_donor1.h5ad", "record"]
    assert_tree_clean(example_tree, "jax_train.py")
