"""One process of a jax.distributed job on CPU (test_jax.py starts NUM_PROCESSES of them, each with
RANK and WORLD_SIZE set as a launcher would): DistributedSampler(dist_info="jax") before and after
jax.distributed.initialize(), plain and inside annbatch's Loader over a DatasetCollection, in each
shard mode. Each process writes what it saw to OUT/process<ID>.json; the test compares them.

    python jax_ranks.py PROCESS_ID NUM_PROCESSES PORT COLLECTION OUT

Process 0 writes the collection (two small .h5ad files through annbatch's DatasetCollection, X's
column 0 holding each cell's id, obs["cell"] the same id) while the others wait at a barrier.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

import chunksampler

PLAIN_N_OBS = 203
CELLS = (700, 500)  # the two input files; the collection holds 1,200 rows, shuffled


def attempt(make):
    """``make()``'s (rank, world_size), or the exception it raised, as JSON."""
    try:
        sampler = make()
    except Exception as error:  # noqa: BLE001: the test checks the type
        return {"error": type(error).__name__, "runtime_error": isinstance(error, RuntimeError), "message": str(error)}
    return {"rank": sampler.rank, "world_size": sampler.world_size}


def base(chunk_size, batch_size):
    return chunksampler.RandomSampler(chunk_size=chunk_size, preload_nchunks=2, batch_size=batch_size,
                                      rng=np.random.default_rng(7))


def make_collection(path: Path) -> None:
    import anndata as ad
    from annbatch import DatasetCollection

    inputs = []
    for file, n in enumerate(CELLS):
        cell = np.arange(n) + 10_000 * file
        x = np.zeros((n, 4), dtype=np.float32)
        x[:, 0] = cell
        adata = ad.AnnData(X=x, obs={"cell": cell})
        adata.obs_names = [f"f{file}c{i}" for i in range(n)]
        inputs.append(path.parent / f"input{file}.h5ad")
        adata.write_h5ad(inputs[-1])
    DatasetCollection(path).add_adatas(inputs, n_obs_per_chunk=16, shard_size=64, dataset_size=1000,
                                       shuffle_chunk_size=50, rng=np.random.default_rng(1))


def main() -> None:
    process_id, num_processes, port = map(int, sys.argv[1:4])
    collection_path, out = Path(sys.argv[4]), Path(sys.argv[5])
    import jax
    from jax._src import xla_bridge
    from jax.experimental import multihost_utils

    report: dict = {"environment": [os.environ["RANK"], os.environ["WORLD_SIZE"]]}
    # Before initialize(): refused, and JAX's backend left alone so that initialize() still works.
    report["before"] = attempt(lambda: chunksampler.DistributedSampler(base(8, 4), dist_info="jax"))
    report["before"]["backend_started"] = xla_bridge.backends_are_initialized()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=num_processes,
                               process_id=process_id, initialization_timeout=60)
    report["jax"] = [jax.process_index(), jax.process_count()]

    report["plain"] = {}
    for mode in ("contiguous", "global"):
        sampler = chunksampler.DistributedSampler(base(8, 4), dist_info="jax", mode=mode)
        epochs = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            epochs.append([
                rows[split].tolist()
                for request in sampler.sample(PLAIN_N_OBS)
                for rows in [np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])]
                for split in request["splits"]
            ])
        report["plain"][mode] = {"rank": sampler.rank, "world_size": sampler.world_size,
                                 "n_batches": sampler.n_batches(PLAIN_N_OBS), "epochs": epochs}

    if process_id == 0 and not collection_path.exists():
        make_collection(collection_path)
    multihost_utils.sync_global_devices("collection written")
    from annbatch import DatasetCollection, Loader

    collection = DatasetCollection(collection_path, mode="r")
    if process_id == 0:
        report["collection_cells"] = collection.obs(columns=["cell"])["cell"].tolist()
    report["loader"] = {}
    for mode in ("contiguous", "global"):
        sampler = chunksampler.DistributedSampler(base(16, 16), dist_info="jax", mode=mode)
        loader = Loader(batch_sampler=sampler, preload_to_gpu=False, to=None, return_index=True)
        loader.use_collection(collection)
        batches = list(loader)
        report["loader"][mode] = {
            "len": len(loader),
            "index": [batch["index"].tolist() for batch in batches],
            "cell": [batch["obs"]["cell"].tolist() for batch in batches],
            "x": [np.asarray(batch["X"])[:, 0].astype(np.int64).tolist() for batch in batches],
        }

    # The launcher's variables against JAX's count: more processes than JAX joined is refused,
    # fewer leaves JAX's count standing.
    for world_size in (num_processes + 1, 1):
        os.environ["WORLD_SIZE"] = str(world_size)
        report[f"launcher_says_{world_size}"] = attempt(
            lambda: chunksampler.DistributedSampler(base(8, 4), dist_info="jax"))
    (out / f"process{process_id}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
