"""examples/python/multi_gpu/: annbatch's "Distributed / multi-GPU training" walk-through with
chunksampler's samplers. The three steps run as a user runs them (the job under torchrun with 2
processes), in an example tree on the page's folder work/multi_gpu, and print exactly the lines the
walk-through shows: 39 batches a rank, 9,984 cells each (20,000 cells, 2 ranks, whole batches of
256). The job's saved cells are each rank's sampler epoch as chunksampler computes it, batch for
batch, and the two ranks' cells are disjoint; the steps write nothing outside work/multi_gpu."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import (JOB_TIMEOUT, assert_tree_clean, epoch_batches, free_port, make_example_tree, rng, run_child,
                      shown_output)

for module in ("torch", "annbatch", "anndata", "zarr", "scipy"):
    pytest.importorskip(module)
import torch  # noqa: E402

import chunksampler as cs  # noqa: E402

STEPS = Path(__file__).resolve().parents[2] / "examples" / "python" / "multi_gpu"
N_CELLS, WORLD_SIZE = 20_000, 2
WORK = "work/multi_gpu"  # the steps' folder on the page, relative to the example tree


def run(args: list[str], timeout: float, tree: Path) -> str:
    """Runs this interpreter on ``args`` in ``tree`` (killed with its process group if it outlives
    ``timeout``) and returns its stdout; fails the test on a non-zero exit."""
    child = run_child(args, timeout, cwd=tree)
    assert child.returncode == 0, f"{' '.join(args)} exited with {child.returncode}:\n{child.stdout}\n{child.stderr[-3000:]}"
    return child.stdout


def rank_sampler(rank: int) -> cs.DistributedSampler:
    """The sampler each step builds for ``rank``, with the rank from a callable."""
    base = cs.RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=rng(0))
    return cs.DistributedSampler(base, dist_info=lambda: (rank, WORLD_SIZE))


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """The example tree in which make_collection.py has written WORK."""
    tree = make_example_tree(tmp_path_factory.mktemp("multi_gpu"))
    out = run([str(STEPS / "make_collection.py"), WORK], timeout=120, tree=tree)
    assert out == shown_output("multi-gpu-collection") == (
        "ddp_collection.zarr: 2 datasets of 10000 + 10000 = 20000 cells x 256 genes, CSR, 512000 non-zero values\n")
    return tree


def test_inspecting_the_ranks_prints_39_batches_an_epoch_for_each(collection):
    out = run([str(STEPS / "inspect_ranks.py"), WORK], timeout=120, tree=collection)
    assert out == shown_output("multi-gpu-inspect") == "rank 0 of 2 → 39 batches/epoch\nrank 1 of 2 → 39 batches/epoch\n"
    # 10,000 cells a rank, whole batches of 256: 39, and 16 cells of each shard left out.
    assert [rank_sampler(rank).n_batches(N_CELLS) for rank in range(WORLD_SIZE)] == [39, 39]


def test_torchrun_job_streams_each_rank_its_disjoint_shard(collection):
    rows = f"{WORK}/rows.npz"
    out = run(["-m", "torch.distributed.run", "--nproc_per_node", str(WORLD_SIZE), "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "--monitor_interval", "0.1",
               str(STEPS / "stream.py"), WORK, "--rows", rows], timeout=JOB_TIMEOUT, tree=collection)
    devices = [f"cuda:{rank}" if torch.cuda.device_count() >= WORLD_SIZE else "cpu" for rank in range(WORLD_SIZE)]
    assert out == (f"[rank 0/2] {devices[0]} streamed 9984 rows in 39 batches\n"
                   f"[rank 1/2] {devices[1]} streamed 9984 rows in 39 batches\n"
                   "2 shards, disjoint: 19968 distinct cells of 20000 read once each, 32 left out\n")
    # The documentation shows the CPU run.
    assert out.replace("cuda:0", "cpu").replace("cuda:1", "cpu") == shown_output("multi-gpu-stream")
    saved = np.load(collection / rows)
    cells = [saved[f"rank{rank}"] for rank in range(WORLD_SIZE)]
    for rank, read in enumerate(cells):
        # annbatch's Loader read exactly the batches chunksampler's sampler named, in its order.
        assert read.tolist() == np.concatenate(epoch_batches(rank_sampler(rank), N_CELLS)).tolist()
        assert read.size == 9984 == np.unique(read).size
    assert not set(cells[0].tolist()) & set(cells[1].tolist())
    assert 0 <= min(c.min() for c in cells) and max(c.max() for c in cells) < N_CELLS
    # The steps wrote the collection and the rows, in WORK alone.
    assert sorted(p.name for p in (collection / WORK).iterdir()) == ["ddp_collection.zarr", "rows.npz", "synthetic.zarr"]
    assert_tree_clean(collection, "the multi-GPU walk-through")
