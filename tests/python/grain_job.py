"""One process of a 2-process jax.distributed job on CPU (test_grain.py starts them together, through
launch.run_together), reading a zarr store through chunksampler.grain.ChunkDataset with Grain's
iterator, without workers and with 2 (mp_prefetch). Each process writes what it saw to
OUT/<part>-process<ID>.json; the test compares them with the sampler's own plan.

    python grain_job.py PART PROCESS_ID NUM_PROCESSES PORT OUT

PART is
- ``run``: two epochs, uninterrupted, for 0 and 2 workers, then the first batches again from the
  state taken before the first (``set_state`` on the same iterator); the refusals (a sampler of another
  process, a Grain shard option on top of a DistributedSampler, seeds that differ between the
  processes, a state of another seed); then, for 0 and 2 workers, the same epochs until
  ``n_batches + 5`` batches and a checkpoint (Grain's CheckpointHandler for 0 workers, Orbax's
  CheckpointManager for 2), after which the process ends at once (os._exit, its workers stopped).
- ``resume``: new processes restore the checkpoints and read the rest.

Process 0 writes the store (OUT/cells.zarr: "x" with each row's id in column 0, "row" the id) while
the other waits at a barrier.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

N_OBS = 1003
CHUNK_ROWS = 16  # the zarr store's chunk rows, and the sampler's chunk_size
EPOCHS = 2
SEED = 5
WORKERS = (0, 2)


def sampler(seed: int = SEED):
    import chunksampler

    return chunksampler.RandomSampler(chunk_size=CHUNK_ROWS, preload_nchunks=2, batch_size=8,
                                      rng=np.random.default_rng(seed))


def write_store(path: Path) -> None:
    import zarr

    group = zarr.open_group(path, mode="w")
    x = group.create_array("x", shape=(N_OBS, 3), chunks=(CHUNK_ROWS, 3), dtype="float32")
    x[:] = np.stack([np.arange(N_OBS), np.ones(N_OBS), np.arange(N_OBS) % 7], axis=1)
    row = group.create_array("row", shape=(N_OBS,), chunks=(CHUNK_ROWS,), dtype="int64")
    row[:] = np.arange(N_OBS)


def pipeline(data, workers: int, seed: int = SEED):
    """The dataset (a plain sampler: the job shards it by process) and what is iterated."""
    import grain

    import chunksampler.grain

    dataset = chunksampler.grain.ChunkDataset(data, sampler(seed), num_epochs=EPOCHS)
    if workers == 0:
        return dataset, dataset
    return dataset, dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))


def rows(batch) -> list[int]:
    assert (batch["x"][:, 0].astype(np.int64) == batch["row"]).all(), "x and row read from different rows"
    return batch["row"].tolist()


def attempt(action) -> dict:
    try:
        action()
    except Exception as error:  # noqa: BLE001: the test checks the type
        return {"error": type(error).__name__, "message": str(error)}
    return {"error": None}


def refusals(data, me: int) -> dict:
    import grain

    import chunksampler
    import chunksampler.grain

    report = {}
    # Both processes' samplers say rank 0: process 1's disagrees with JAX, and both refuse.
    report["other_rank"] = attempt(lambda: chunksampler.grain.ChunkDataset(
        data, chunksampler.DistributedSampler(sampler(), dist_info=lambda: (0, 2))))
    report["stacked"] = attempt(lambda: chunksampler.grain.ChunkDataset(
        data, chunksampler.DistributedSampler(sampler(), dist_info="jax"),
        shard_options=grain.sharding.ShardByJaxProcess()))
    report["seeds_differ"] = attempt(lambda: chunksampler.grain.ChunkDataset(data, sampler(seed=SEED + me)))
    by_options = chunksampler.grain.ChunkDataset(data, sampler(), shard_options=grain.sharding.ShardByJaxProcess())
    report["shard_options"] = {"rank": by_options.sampler.rank, "world_size": by_options.sampler.world_size,
                               "first": rows(next(iter(by_options)))}
    state = next_state(pipeline(data, 0)[1], 3)
    other = iter(pipeline(data, 0, seed=SEED + 1)[1])
    report["other_seed"] = attempt(lambda: other.set_state(state))
    return report


def next_state(iterable, k: int) -> dict:
    it = iter(iterable)
    for _ in range(k):
        next(it)
    return it.get_state()


def main() -> None:
    part = sys.argv[1]
    me, processes, port = map(int, sys.argv[2:5])
    out = Path(sys.argv[5])
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's mp_prefetch reads an absl flag (as under absl.app.run)
    import jax
    import zarr
    from jax.experimental import multihost_utils

    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=processes,
                               process_id=me, initialization_timeout=60)
    store = out / "cells.zarr"
    if me == 0 and not store.exists():
        write_store(store)
    multihost_utils.sync_global_devices("store written")
    group = zarr.open_group(store, mode="r")
    data = {"x": group["x"], "row": group["row"]}

    report: dict = {"process": [jax.process_index(), jax.process_count()]}
    if part == "run":
        for workers in WORKERS:
            dataset, iterable = pipeline(data, workers)
            report["n_batches"] = dataset.n_batches
            report["shard"] = [dataset.sampler.rank, dataset.sampler.world_size]
            it = iter(iterable)
            # The state before the first batch: under mp_prefetch Grain takes it in this process, where
            # the dataset is not split among the workers, and each worker must take it as its start.
            at_start = json.loads(json.dumps(it.get_state()))
            report[f"w{workers}"] = [rows(batch) for batch in it]
            it.set_state(at_start)
            report[f"again-w{workers}"] = [rows(next(it)) for _ in range(3)]
            it.close()
        report["refusals"] = refusals(data, me)
        for workers in WORKERS:
            dataset, iterable = pipeline(data, workers)
            it = iter(iterable)
            report[f"crash-w{workers}"] = [rows(next(it)) for _ in range(dataset.n_batches + 5)]  # into epoch 2
            save(it, out / f"checkpoint-w{workers}", workers)
            it.close()  # its worker processes stopped, or they would outlive the crash
    else:
        for workers in WORKERS:
            it = iter(pipeline(data, workers)[1])
            restore(it, out / f"checkpoint-w{workers}", workers)
            report[f"resume-w{workers}"] = [rows(batch) for batch in it]
            it.close()
    (out / f"{part}-process{me}.json").write_text(json.dumps(report))
    multihost_utils.sync_global_devices("reported")
    if part == "run":
        os._exit(0)  # a crash: nothing of the process's state survives but the checkpoints


def save(it, directory: Path, workers: int) -> None:
    import grain
    from etils import epath

    if workers == 0:
        directory.mkdir(exist_ok=True)
        grain.checkpoint.CheckpointHandler().save(epath.Path(directory), item=it)
        return
    import orbax.checkpoint as ocp

    manager = ocp.CheckpointManager(directory.absolute(), item_names=("data",))
    manager.save(1, args=ocp.args.Composite(data=grain.checkpoint.CheckpointSave(it)))
    manager.wait_until_finished()


def restore(it, directory: Path, workers: int) -> None:
    import grain
    from etils import epath

    if workers == 0:
        grain.checkpoint.CheckpointHandler().restore(epath.Path(directory), item=it)
        return
    import orbax.checkpoint as ocp

    manager = ocp.CheckpointManager(directory.absolute(), item_names=("data",))
    manager.restore(manager.latest_step(), args=ocp.args.Composite(data=grain.checkpoint.CheckpointRestore(it)))


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
