"""Zarr stores for the reading tests (test_reader.py, test_loader_reads.py): one in memory that counts
its reads and can fail some, and the rows the tests write into them."""

from __future__ import annotations

from collections import Counter

import numpy as np
import zarr
from zarr.abc.store import SuffixByteRequest
from zarr.storage import MemoryStore


class CountingStore(MemoryStore):
    """A zarr store in memory that counts the reads of each chunk's key (a shard's index apart, counted
    in ``index_reads``), or appends them to the file ``log`` (DataLoader workers forked with a copy of
    the store count too), and fails the reads of the keys in ``failing``."""

    def __init__(self, log=None) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()
        self.index_reads: Counter[str] = Counter()
        self.failing: set[str] = set()
        self.log = log

    async def get(self, key, prototype=None, byte_range=None):
        if not key.endswith("zarr.json"):
            if key in self.failing:
                raise OSError(f"the disk holding {key} is gone")
            if isinstance(byte_range, SuffixByteRequest):
                self.index_reads[key] += 1
            elif self.log is None:
                self.reads[key] += 1
            else:
                with open(self.log, "a") as log:
                    log.write(key + "\n")
        return await super().get(key, prototype=prototype, byte_range=byte_range)


def rows_of(n_obs: int) -> np.ndarray:
    """Row i is [i, i + 0.5, i + 0.25]: the first column names the observation."""
    return (np.arange(n_obs, dtype=np.float32)[:, None] + np.array([0, 0.5, 0.25], np.float32)).copy()


def zarr_array(data: np.ndarray, chunk: int, shard: int | None = None, store=None):
    """``data`` in a zarr v3 array of ``chunk``-row chunks (in ``shard``-row shards where given)."""
    array = zarr.create_array(store if store is not None else MemoryStore(), shape=data.shape, dtype=data.dtype,
                              chunks=(chunk, data.shape[1]), shards=(shard, data.shape[1]) if shard else None)
    array[:] = data
    return array
