"""Two designs of a chunk-local Grain pipeline, measured before choosing ``ChunkDataset``'s, on
bench_grain.py's plain zarr store (64-row chunks, 256 float32 columns):

* ``IterDataset`` (what ``chunksampler.grain`` ships): ``ChunkDataset``, an ``IterDataset`` that
  plays the sampler's epoch, reading each load request as it comes; Grain's workers each play the
  sampler's worker share.
* ``IterDataset, 4 threads``: the same under ``grain.experimental.multithread_prefetch(dataset,
  num_threads=4)``, which gives thread ``i`` the worker share ``(i, 4)`` (the workers' slicing, in
  threads of this process) and interleaves their batches.
* ``MapDataset``: a ``MapDataset`` whose element ``i`` is read group ``i`` of the epoch (the
  sampler's requests listed up front, one copy of its four arrays each), read and cut into batches
  by ``.map()``, ``.to_iter_dataset()`` (which reads ahead in Grain's 16 threads), and flattened into
  batches by Grain's ``FlatMapIterDataset``; Grain's workers take every ``N``-th read group.

Both read the same chunks (``RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=256)``,
seed 0): one epoch each, 0 and 2 worker processes, rows per second from the first batch on (the first batch,
with the workers' start, apart), ``--repeats`` times (3), the designs' order alternating; medians.
Every epoch is checked to read every row once.

    python bench_grain_designs.py                   # 100,000 rows (about 3 minutes on 2 cores)
    python bench_grain_designs.py --rows 20000 --repeats 1 --cache DIR
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import bench_grain  # beside this file: the store, its reader, the sampler's settings

# (design, worker processes)
RUNS = (("IterDataset", 0), ("IterDataset", 2), ("IterDataset, 4 threads", 0), ("MapDataset", 0), ("MapDataset", 2))


class ReadGroup:
    """Reads one load request's chunks from the zarr array at ``path`` and cuts them into batches, as
    ChunkDataset does; pickles as its path (for Grain's workers)."""

    def __init__(self, path: str) -> None:
        self.path, self._x = path, None

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.path, self._x = state["path"], None

    def __call__(self, request: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        if self._x is None:
            self._x = bench_grain.open_x(Path(self.path))
        starts, stops, positions, offsets = request
        buffer = np.concatenate([self._x[s:e] for s, e in zip(starts.tolist(), stops.tolist())])[positions]
        return [buffer[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def map_design(path: Path, workers: int):
    import grain

    import chunksampler

    sampler = chunksampler.RandomSampler(chunk_size=bench_grain.GRID, preload_nchunks=bench_grain.PRELOAD,
                                         batch_size=bench_grain.BATCH, rng=np.random.default_rng(0))
    n_obs = bench_grain.open_x(path).shape[0]
    requests = [tuple(np.array(a) for a in r) for r in sampler.sample_arrays(n_obs)]

    class Flatten(grain.experimental.FlatMapTransform):
        max_fan_out = bench_grain.PRELOAD * bench_grain.GRID // bench_grain.BATCH

        def flat_map(self, element):
            return element

    groups = grain.MapDataset.source(requests).map(ReadGroup(str(path))).to_iter_dataset()
    if workers:
        groups = groups.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    return grain.experimental.FlatMapIterDataset(groups, Flatten())


def one_epoch(design: str, path: Path, workers: int, n_obs: int) -> tuple[float, float]:
    """(seconds to the first batch, rows per second after it) of one epoch, checked."""
    started = time.perf_counter()
    if design == "MapDataset":
        pipeline = map_design(path, workers)
    elif design == "IterDataset":
        pipeline = bench_grain.ours(path, workers)
    else:
        import grain

        pipeline = grain.experimental.multithread_prefetch(bench_grain.ours(path, 0), num_threads=4, buffer_size=2)
    it = iter(pipeline)
    ids = [next(it)[:, 0]]
    first = time.perf_counter()
    ids += [batch[:, 0] for batch in it]
    ended = time.perf_counter()
    bench_grain.close(it)
    rows = np.sort(np.concatenate(ids).astype(np.int64))
    if not np.array_equal(rows, np.arange(n_obs)):
        sys.exit(f"{design} with {workers} workers: the epoch did not read every row once")
    return first - started, (rows.size - ids[0].size) / (ended - first)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, help="keep the store in CACHE (bench_grain.py's layout)")
    args = parser.parse_args()
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's workers read an absl flag
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.cache or Path(scratch)
        path = bench_grain.ensure_stores(directory, args.rows, annbatch_writer=False)["zarr"]
        bench_grain.warm_page_cache({"zarr": path})
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for repeat in range(args.repeats):
            for design, workers in RUNS if repeat % 2 == 0 else RUNS[::-1]:
                results.setdefault((design, workers), []).append(one_epoch(design, path, workers, args.rows))
                bench_grain.settle()
    print(f"{args.rows:,} rows, {args.repeats} repetitions, medians\n")
    print("| design | workers | rows/s | first batch |\n| --- | ---: | ---: | ---: |")
    for design, workers in RUNS:
        runs = results[design, workers]
        speed = statistics.median(r[1] for r in runs)
        first = statistics.median(r[0] for r in runs)
        print(f"| {design} | {workers} | {speed:,.0f} | {first:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
