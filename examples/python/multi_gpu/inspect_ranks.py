"""Step 2 of the multi-GPU walk-through: how a 2-rank job would split the collection, seen from
one process. chunksampler's DistributedSampler wraps a RandomSampler and takes its rank and world
size from a callable here (under torchrun it is ``dist_info="torch"``), so each rank's loader can be
built and counted without launching anything. annbatch's Loader takes chunksampler's samplers as
it takes its own.

    python inspect_ranks.py DIR          # DIR holds ddp_collection.zarr (make_collection.py); reads only

Each rank's shard is half of the 20,000 cells; the default remainder policy ("drop", annbatch's)
keeps whole batches of 256, 9,984 cells, so both ranks run the same 39 steps an epoch.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import zarr
from annbatch import DatasetCollection, Loader
from chunksampler import DistributedSampler, RandomSampler

WORLD_SIZE = 2
warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


def read_x(group: zarr.Group) -> ad.AnnData:
    """A dataset of the collection as its sparse matrix alone, read lazily from disk."""
    return ad.AnnData(X=ad.io.sparse_dataset(group["X"]))


def rank_sampler(rank: int, world_size: int) -> DistributedSampler:
    """Rank ``rank``'s sampler: 32 chunks of 64 cells a read, batches of 256. The seed is the same
    on every rank (each shuffles its own shard; mode="global" would need it to be)."""
    return DistributedSampler(
        RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=np.random.default_rng(0)),
        dist_info=lambda: (rank, world_size),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="the folder holding ddp_collection.zarr")
    where = parser.parse_args().dir
    collection = DatasetCollection(zarr.open(where / "ddp_collection.zarr", mode="r"))
    for rank in range(WORLD_SIZE):
        loader = Loader(batch_sampler=rank_sampler(rank, WORLD_SIZE), preload_to_gpu=False)
        loader.use_collection(collection, load_adata=read_x)
        print(f"rank {rank} of {WORLD_SIZE} → {len(loader)} batches/epoch")


if __name__ == "__main__":
    main()
