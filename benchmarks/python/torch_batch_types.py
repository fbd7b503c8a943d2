"""What a BatchSampler batch should be: measures a list of ints (what it yields) against a numpy
int64 array and a torch tensor, through DataLoader's default fetch and collate, for a map-style
dataset read item by item (``range``: the index itself; ``Items``: a row of an array) and one
read whole through ``__getitems__`` (``Rows``), without workers (w0) and with two (w2). Not a test; run it by hand:

    python benchmarks/python/torch_batch_types.py
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import chunksampler
from chunksampler.torch import BatchSampler, _rows

N_OBS, FEATURES = 200_000, 32


class ArrayBatches(BatchSampler):
    """The same batches as numpy int64 arrays."""

    @staticmethod
    def _batches(requests, iteration):
        for request in requests:
            rows = _rows(request)
            bounds = request.offsets.tolist()
            for begin, end in zip(bounds[:-1], bounds[1:]):
                iteration.yielded += 1
                yield rows[begin:end]


class TensorBatches(BatchSampler):
    """The same batches as int64 tensors (sharing the arrays' memory)."""

    @staticmethod
    def _batches(requests, iteration):
        for batch in ArrayBatches._batches(requests, iteration):
            yield torch.from_numpy(batch)


class Items(Dataset):
    """Read row by row: DataLoader calls ``dataset[i]`` for each index of the batch."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Rows(Items):
    """Read a batch at once: DataLoader passes the batch to ``__getitems__`` and collates its rows."""

    def __getitems__(self, batch):
        return torch.from_numpy(self.x[np.asarray(batch)])


def collate_whole(data):
    return data


def seconds(make, dataset, num_workers: int, repeat: int = 7) -> float:
    """Best of ``repeat``: this process's CPU time without workers (steadier on a loaded machine),
    wall time with them (the work is in the workers)."""
    clock = time.process_time if num_workers == 0 else time.perf_counter
    best = float("inf")
    for _ in range(repeat):
        base = chunksampler.RandomSampler(64, 32, 256, rng=np.random.default_rng(0))
        kwargs = {"collate_fn": collate_whole} if isinstance(dataset, Rows) else {}
        loader = DataLoader(dataset, batch_sampler=make(base, N_OBS), num_workers=num_workers, **kwargs)
        start = clock()
        for _ in loader:
            pass
        best = min(best, clock() - start)
    return best


def main() -> None:
    x = np.random.default_rng(0).standard_normal((N_OBS, FEATURES), dtype=np.float32)
    n_batches = len(BatchSampler(chunksampler.RandomSampler(64, 32, 256), N_OBS))
    print(f"{N_OBS} observations x {FEATURES} float32, batch 256 ({n_batches} batches); best of 7, us per batch")
    for name, make in (("list", BatchSampler), ("array", ArrayBatches), ("tensor", TensorBatches)):
        sampler_only = min(
            _timed(lambda: sum(1 for _ in make(chunksampler.RandomSampler(64, 32, 256), N_OBS))) for _ in range(7)
        )
        row = [f"sampler alone {sampler_only / n_batches * 1e6:6.1f}"]
        for dataset, workers in ((range(N_OBS), 0), (Items(x), 0), (Items(x), 2), (Rows(x), 0), (Rows(x), 2)):
            t = seconds(make, dataset, workers)
            row.append(f"{type(dataset).__name__} w{workers} {t / n_batches * 1e6:7.1f}")
        print(f"{name:6}  " + "  ".join(row))


def _timed(f) -> float:
    start = time.process_time()
    f()
    return time.process_time() - start


if __name__ == "__main__":
    main()
