"""Step 3 of the multi-GPU walk-through: the real job. torchrun starts one process per rank; each
joins torch.distributed, builds its DistributedSampler with ``dist_info="torch"`` (rank and world
size from the process group), and streams its shard of the collection through annbatch's Loader
onto its own device (its GPU if there is one, else the CPU), densifying each sparse batch there.

    torchrun --standalone --nproc-per-node 2 stream.py DIR [--rows ROWS.npz]

Each rank prints what it streamed, in rank order; then the ranks exchange the cells they read and
rank 0 checks that no cell was read twice (exit status 1 if one was) and, given ``--rows``, saves
each rank's cells, in the order read, to ROWS.npz (arrays ``rank0``, ``rank1``, ...). It writes
nothing else.

With chunksampler's samplers, annbatch's tutorial script (``ddp_train.py``) changes in two lines:
the import of ``DistributedSampler`` and ``RandomSampler``, and the seed the ``RandomSampler`` is
given. The other differences serve the walk-through: the folder is an argument, the device is the
CPU where there is no GPU, and the Loader returns torch tensors and each batch's cell indices,
which the ranks exchange for the check.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import torch
import torch.distributed as dist
import zarr
from annbatch import DatasetCollection, Loader
from chunksampler import DistributedSampler, RandomSampler

warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


def in_rank_order(text: str) -> None:
    """Prints ``text`` on every rank, rank 0 first, so the job's output reads the same every run."""
    for rank in range(dist.get_world_size()):
        if rank == dist.get_rank():
            print(text, flush=True)
        dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="the folder holding ddp_collection.zarr")
    parser.add_argument("--rows", type=Path, help="where rank 0 saves every rank's cells (.npz)")
    parser.add_argument("--preload-to-gpu", action="store_true",
                        help="annbatch reads each request into GPU memory (cupy) before it splits the batches")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # on GPUs, "nccl" for the training's own collectives
    rank, world = dist.get_rank(), dist.get_world_size()
    if torch.cuda.is_available():
        # One GPU per rank where there are enough; ranks share them round-robin otherwise.
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    collection = DatasetCollection(zarr.open(args.dir / "ddp_collection.zarr", mode="r"))
    # The same seed on every rank (each shuffles its own shard; mode="global" would need it to be);
    # the rank and world size come from the process group.
    sampler = DistributedSampler(
        RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=np.random.default_rng(0)),
        dist_info="torch",
    )
    loader = Loader(batch_sampler=sampler, preload_to_gpu=args.preload_to_gpu, return_index=True, to="torch")
    loader.use_collection(collection, load_adata=lambda g: ad.AnnData(X=ad.io.sparse_dataset(g["X"])))

    rows, batches, cells = 0, 0, []
    for batch in loader:
        x = batch["X"].to(device).to_dense()  # a sparse CSR batch, densified on this rank's device
        if rows == 0 and args.preload_to_gpu:
            assert batch["X"].is_cuda, f"preload_to_gpu=True gave a batch on {batch['X'].device}"
        rows += x.shape[0]
        batches += 1
        cells.append(batch["index"])
    in_rank_order(f"[rank {rank}/{world}] {device} streamed {rows} rows in {batches} batches")

    mine = np.concatenate(cells)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    read = np.concatenate(everyone)
    distinct = np.unique(read).size
    if rank == 0:
        print(f"{world} shards, disjoint: {distinct} distinct cells of {loader.n_obs} read once each, "
              f"{loader.n_obs - distinct} left out", flush=True)
        if args.rows is not None:
            args.rows.parent.mkdir(parents=True, exist_ok=True)
            np.savez(args.rows, **{f"rank{r}": cells for r, cells in enumerate(everyone)})
    dist.barrier()
    dist.destroy_process_group()
    if distinct != read.size:
        raise SystemExit(f"rank {rank}: the shards overlap: {read.size - distinct} cells were read twice")


if __name__ == "__main__":
    main()
