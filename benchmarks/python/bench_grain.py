"""Grain's own pipelines against chunksampler's ``ChunkDataset`` on the same zarr store: rows per
second (wall clock) of shuffled batches of 256, in-process and with Grain's worker processes.

Grain reads one record at a time: ``MapDataset.source(...).shuffle()`` and ``IndexSampler`` shuffle
the records' indices with no locality, so on a chunked store every row is a zarr read of its own
(a chunk found, read and decoded for one row of its 64). ``chunksampler.grain.ChunkDataset`` plays a
sampler's load requests instead: ``preload_nchunks`` whole chunks read as contiguous slices on the
store's chunk grid, shuffled into batches. This script measures both on two stores of the same
dense float32 matrix (200,000 rows by 256 columns by default, ``--rows``; log1p of Poisson counts,
about half zeros; column 0 holds the row's index, for the checks):

* ``zarr``: a plain zarr v3 array of 64-row chunks, no shards, Blosc lz4 (annbatch's compressor);
* ``sharded``: annbatch's layout, written by ``annbatch.write_sharded`` at its defaults (64-row
  chunks inside shards of up to 1 GB, which at this size is one shard).

Pipelines, batch size 256, each with 0 (in-process), 1 and 2 worker processes (``--workers``):

* ``Grain MapDataset``: ``grain.MapDataset.source(src).shuffle(seed=0).batch(256)
  .to_iter_dataset()``, with ``.mp_prefetch(grain.MultiprocessingOptions(num_workers=W))`` for
  workers; ``src[i]`` reads row ``i`` from the zarr array (``ZarrRows``: one read per record, as
  Grain's sources do).
* ``Grain DataLoader``: ``grain.DataLoader(data_source=src, sampler=grain.samplers.IndexSampler(
  num_records=n, shuffle=True, seed=0, num_epochs=1, shard_options=grain.sharding.NoSharding()),
  operations=[grain.transforms.Batch(256)], worker_count=W)``.
* ``ChunkDataset``: ``chunksampler.grain.ChunkDataset(X, chunksampler.RandomSampler(chunk_size=64,
  preload_nchunks=8, batch_size=256, rng=np.random.default_rng(0)), num_epochs=1)``, ``X`` the zarr
  array, with ``.mp_prefetch(...)`` for workers (worker ``i`` reads the sampler's worker share).

Both Grain pipelines run at Grain's defaults, ``ReadOptions(num_threads=16, prefetch_buffer_size=500)``
in each process that reads. One more pipeline reads nothing: ``hand-over``, batches of the same
shape made in memory (``MapDataset.range(400).map(memory_batch)``) passed through ``mp_prefetch``
with 1 and 2 workers, what Grain's workers can hand to the main process at all: the ceiling of
every pipeline with workers.

Method: the stores are written (or reused, ``--cache DIR``) and every file of them read once, so
that every run reads from the page cache. Each run builds its pipeline and iterator afresh; the time
to its first batch (worker processes spawned and started, the first read) is kept apart, and the
rows per second are counted from the first batch on: Grain's pipelines over the next
``--grain-batches`` batches (32 by default: they read 300 to 2,000 rows a second, so an epoch would
take minutes; 32 is a whole number of their read bursts, since each process's 16 threads work on
16 batches at once and finish them together, so the window ends as a burst arrives), ours over the
rest of the epoch (every worker's share), the hand-over over its 400 batches. Grain's threads read
ahead while the first batch is awaited (the DataLoader up to 500 records, about 2 batches), which
favours Grain's figures slightly. After each run its iterator is closed and the script waits for
its prefetch threads and worker processes to end (a closed iterator's threads finish the reads in
flight, up to 2 s of work that would fall on the next run). Every configuration runs ``--repeats``
times (3 by default), the pipelines' order alternating from one repetition to the next; reported is
the median rows/s, our speed-up (our median over each Grain pipeline's median at the same store and
worker count), and the median time to the first batch.

Checks, after each run's clock stops: every batch has 256 rows of 256 columns (of ours, at most
one short batch per worker share, its epoch's last), no row is read twice, the first batch holds
the store's values for the rows it names (column 0); each of our epochs reads every row exactly
once; and a ``ZarrRows`` pickled and unpickled (as Grain's workers get it) reads the same row.
``--json PATH`` writes every run (time to first batch, rows and seconds timed, arrival times of
Grain's batches).

    python bench_grain.py                      # 200,000 rows, 3 repetitions: about 20 minutes on 2 busy cores
    python bench_grain.py --rows 100000 --repeats 1 --workers 0,2
    python bench_grain.py --cache ~/.cache/cs-grain --json grain.json
    python bench_grain.py --smoke              # a smoke test, about 20 s

``--smoke``: 2,560 rows, Grain's pipelines timed over 2 batches, in-process only (``--workers``
adds worker counts), once; its sharded store is written by zarr itself in ``write_sharded``'s layout,
since importing annbatch (torch, JAX, dask) takes 5 to 15 s. Its figures mean nothing; its checks
do.

Needs grain (tested with 0.2.18, under JAX 0.12), zarr 3, annbatch 0.3.1 (for its writer) and
chunksampler installed. Grain's workers are spawned processes: they import this script again, so
it keeps its top level light and its work under ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import multiprocessing
import pickle
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import bench_stores  # beside this file

GRID = 64  # the stores' chunk rows, and the sampler's chunk_size
PRELOAD = 8
BATCH = 256
COLUMNS = 256
SEED = 20_260_421
STORE_FORMAT = 1  # bumped when the stores' contents change, so that a --cache of older ones is rewritten
# annbatch.write_sharded's default compressor, for the plain store too.
COMPRESSORS = (zarr.codecs.BloscCodec(cname="lz4", clevel=3, shuffle="shuffle"),)
STORES = {
    "zarr": "zarr.create_array: 64-row chunks, no shards",
    "sharded": "annbatch.write_sharded: 64-row chunks inside shards of up to 1 GB",
}
PIPELINES = ("Grain MapDataset", "Grain DataLoader", "ChunkDataset")
HANDOVER = "hand-over"  # in-memory batches through mp_prefetch: what Grain's workers can hand on
HANDOVER_BATCHES = 400


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the stores -----------------------------------------------------------------------------------


def dense_matrix(n_obs: int, rng: np.random.Generator) -> np.ndarray:
    """Log-normalised expression-like values: log1p of Poisson counts with per-column means from a
    log-normal (about half of the values zero), float32; column 0 is the row's index."""
    means = rng.lognormal(mean=-0.5, sigma=1.2, size=COLUMNS)
    out = np.empty((n_obs, COLUMNS), dtype=np.float32)
    for start in range(0, n_obs, 20_000):
        stop = min(start + 20_000, n_obs)
        out[start:stop] = np.log1p(rng.poisson(means, size=(stop - start, COLUMNS)))
    out[:, 0] = np.arange(n_obs)  # exact in float32 below 2**24 rows
    return out


def write_plain(path: Path, x: np.ndarray) -> None:
    """A plain zarr v3 array ``X`` of 64-row chunks, one object per chunk."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    array = group.create_array("X", shape=x.shape, dtype=x.dtype, chunks=(GRID, x.shape[1]), compressors=COMPRESSORS)
    array[:] = x


def write_annbatch(path: Path, x: np.ndarray) -> None:
    """An AnnData store as annbatch writes it (``annbatch.write_sharded`` at its defaults)."""
    import anndata as ad  # imported here only: Grain's workers import this script again
    import annbatch
    import pandas as pd

    adata = ad.AnnData(
        X=x,
        obs=pd.DataFrame(index=pd.RangeIndex(x.shape[0]).astype(str)),
        var=pd.DataFrame(index=pd.RangeIndex(x.shape[1]).astype(str)),
    )
    annbatch.write_sharded(zarr.open_group(path, mode="w", zarr_format=3), adata, n_obs_per_chunk=GRID)


def write_sharded_zarr(path: Path, x: np.ndarray) -> None:
    """The array ``X`` of annbatch's layout written by zarr itself, for --smoke: importing annbatch
    (torch, JAX, dask) alone takes 5 to 15 s. 64-row chunks in shards of up to 1 GB whose rows are a
    multiple of 64 (the whole array's, rounded down, where that is less), as write_sharded makes."""
    row_bytes = x.shape[1] * x.dtype.itemsize
    shard_rows = max(GRID, min(10**9 // row_bytes, x.shape[0]) // GRID * GRID)
    group = zarr.open_group(path, mode="w", zarr_format=3)
    array = group.create_array(
        "X", shape=x.shape, dtype=x.dtype, chunks=(GRID, x.shape[1]), shards=(shard_rows, x.shape[1]),
        compressors=COMPRESSORS,
    )
    array[:] = x


def ensure_stores(directory: Path, n_obs: int, annbatch_writer: bool) -> dict[str, Path]:
    """The stores under ``directory``, written unless an earlier run left them there (a
    ``bench_grain.json`` beside them records what they hold)."""
    writer = "annbatch.write_sharded" if annbatch_writer else "zarr"
    expected = {"format": STORE_FORMAT, "seed": SEED, "n_obs": n_obs, "columns": COLUMNS, "writer": writer}
    paths, reused = bench_stores.kept(directory, "bench_grain.json", expected, STORES)
    if reused:
        log(f"stores: reusing {directory}")
        return paths
    started = time.perf_counter()
    x = dense_matrix(n_obs, np.random.default_rng(SEED))
    write_plain(paths["zarr"], x)
    (write_annbatch if annbatch_writer else write_sharded_zarr)(paths["sharded"], x)
    (directory / "bench_grain.json").write_text(json.dumps(expected))
    log(f"stores: written to {directory} in {time.perf_counter() - started:.1f} s")
    return paths


def open_x(path: Path) -> zarr.Array:
    return zarr.open_group(path, mode="r")["X"]


def describe(path: Path) -> str:
    x = open_x(path)
    return f"{x.shape} {x.dtype}, chunks {x.chunks}, shards {x.shards}, {x.compressors[0]}"


def warm_page_cache(paths: dict[str, Path]) -> int:
    """Reads every file of the stores once, so that every run reads from memory."""
    return bench_stores.warm_page_cache(paths.values())


# --- the pipelines ---------------------------------------------------------------------------------


class ZarrRows:
    """Grain's random-access data source over a zarr array's rows: ``src[i]`` reads row ``i`` (one
    zarr read per record, which is how Grain's pipelines read). Pickles as its path: Grain's worker
    processes open the array again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._array = open_x(Path(path))

    def __len__(self) -> int:
        return int(self._array.shape[0])

    def __getitem__(self, i: int) -> np.ndarray:
        return self._array[int(i)]

    def __repr__(self) -> str:
        return f"ZarrRows({self.path!r})"

    def __getstate__(self) -> dict[str, str]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["path"])


def grain_map(path: Path, workers: int) -> Any:
    import grain

    dataset = grain.MapDataset.source(ZarrRows(str(path))).shuffle(seed=0).batch(BATCH).to_iter_dataset()
    return dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)) if workers else dataset


def grain_loader(path: Path, workers: int) -> Any:
    import grain

    source = ZarrRows(str(path))
    sampler = grain.samplers.IndexSampler(
        num_records=len(source), shuffle=True, seed=0, num_epochs=1, shard_options=grain.sharding.NoSharding()
    )
    return grain.DataLoader(
        data_source=source, sampler=sampler, operations=[grain.transforms.Batch(BATCH)], worker_count=workers
    )


def ours(path: Path, workers: int) -> Any:
    import grain

    import chunksampler
    import chunksampler.grain

    sampler = chunksampler.RandomSampler(
        chunk_size=GRID, preload_nchunks=PRELOAD, batch_size=BATCH, rng=np.random.default_rng(0)
    )
    dataset = chunksampler.grain.ChunkDataset(open_x(path), sampler, num_epochs=1)
    return dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)) if workers else dataset


def memory_batch(i: int) -> np.ndarray:
    """Batch ``i`` of the hand-over pipeline: made in memory, column 0 its rows' indices."""
    out = np.zeros((BATCH, COLUMNS), dtype=np.float32)
    out[:, 0] = np.arange(i * BATCH, (i + 1) * BATCH)
    return out


def handover(path: Path | None, workers: int) -> Any:
    """No reading at all: batches made in memory, handed from Grain's workers to this process. What
    ``mp_prefetch`` can pass on, the ceiling of any pipeline with workers."""
    del path
    import grain

    dataset = grain.MapDataset.range(HANDOVER_BATCHES).map(memory_batch).to_iter_dataset()
    return dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)) if workers else dataset


MAKE: dict[str, Callable[[Path | None, int], Any]] = {
    "Grain MapDataset": grain_map,
    "Grain DataLoader": grain_loader,
    "ChunkDataset": ours,
    HANDOVER: handover,
}


def close(iterator: Iterator[Any]) -> None:
    """Stops an iterator's worker processes and threads: Grain's dataset iterators have ``close()``;
    the DataLoader's iterator wraps one (``_iterator``) and has none of its own."""
    for it in (iterator, getattr(iterator, "_iterator", None)):
        if hasattr(it, "close"):
            it.close()
            return


def settle(timeout: float = 60.0) -> float:
    """Waits until the last run's reading has stopped: a closed Grain iterator's prefetch threads
    finish the reads in flight (up to 2 s of 16 threads' work, which would otherwise fall on the
    next run), and its worker processes exit. Returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        threads = [t for t in threading.enumerate() if t.name.startswith("grain-prefetch")]
        if not threads and not multiprocessing.active_children():
            break
        time.sleep(0.05)
    return time.perf_counter() - started


# --- one run ------------------------------------------------------------------------------------


@dataclass
class Run:
    store: str
    pipeline: str
    workers: int
    repeat: int
    first_batch_s: float  # from building the pipeline to its first batch
    rows: int  # rows timed: the batches after the first
    seconds: float
    arrivals: list[float]  # each timed batch's arrival, seconds after the first batch (Grain's only)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def timed(
    pipeline: str, path: Path | None, workers: int, limit: int | None
) -> tuple[float, float, list[float], list[np.ndarray]]:
    """Builds the pipeline, takes its first batch, then ``limit`` more (None: to the end) against the
    clock. Returns the time to the first batch, the time of the rest, the rest's arrivals, and every
    batch's column 0 (the row indices); the batches' other values are dropped as they come."""
    started = time.perf_counter()
    iterator = iter(MAKE[pipeline](path, workers))
    try:
        first = next(iterator)
        clock = time.perf_counter()
        first_batch_s = clock - started
        ids, arrivals, first_values = [first[:, 0].copy()], [], first
        for batch in iterator:
            arrivals.append(time.perf_counter() - clock)
            if batch.shape[1:] != (COLUMNS,) or batch.dtype != np.float32:
                raise AssertionError(f"{pipeline}: a batch of shape {batch.shape} {batch.dtype}")
            ids.append(batch[:, 0].copy())
            if limit is not None and len(arrivals) == limit:
                break
        seconds = time.perf_counter() - clock
    finally:
        close(iterator)
    if path is not None:
        check_values(pipeline, path, first_values)
    return first_batch_s, seconds, arrivals, ids


def check_values(pipeline: str, path: Path, batch: np.ndarray) -> None:
    rows = batch[:, 0].astype(np.int64)
    order = np.argsort(rows)
    expected = open_x(path).get_orthogonal_selection((rows[order], slice(None)))
    if not np.array_equal(batch[order], expected):
        raise AssertionError(f"{pipeline}: the first batch does not hold the store's values for its rows")


def check_rows(pipeline: str, ids: list[np.ndarray], n_obs: int, workers: int, whole_epoch: bool) -> None:
    sizes = [len(batch) for batch in ids]
    short = [size for size in sizes if size != BATCH]
    if len(short) > (max(workers, 1) if whole_epoch else 0):
        raise AssertionError(f"{pipeline}, {workers} workers: {len(short)} batches not of {BATCH} rows: {short[:10]}")
    rows = np.concatenate(ids).astype(np.int64)
    if rows.min() < 0 or rows.max() >= n_obs or len(np.unique(rows)) != len(rows):
        raise AssertionError(f"{pipeline}, {workers} workers: a row read twice or out of range")
    if whole_epoch and len(rows) != n_obs:
        raise AssertionError(f"{pipeline}, {workers} workers: an epoch read {len(rows)} rows of {n_obs}")


def run(store: str, path: Path | None, pipeline: str, workers: int, repeat: int, n_obs: int, grain_batches: int) -> Run:
    whole_epoch = pipeline in ("ChunkDataset", HANDOVER)
    gc.collect()
    first_batch_s, seconds, arrivals, ids = timed(pipeline, path, workers, None if whole_epoch else grain_batches)
    check_rows(pipeline, ids, n_obs, workers, whole_epoch)
    rows = sum(len(batch) for batch in ids[1:])
    del ids
    settle()
    if not whole_epoch and len(arrivals) != grain_batches:
        raise AssertionError(
            f"{pipeline}: the store ran out of batches after {len(arrivals) + 1}; lower --grain-batches"
        )
    result = Run(store, pipeline, workers, repeat, first_batch_s, rows, seconds, [] if whole_epoch else arrivals)
    log(
        f"  {store:8} {pipeline:17} workers {workers}  first batch {first_batch_s:6.2f} s  "
        f"{rows:7,} rows in {seconds:7.2f} s  {result.rows_per_s:10,.0f} rows/s"
    )
    return result


# --- the report -----------------------------------------------------------------------------------


def median_of(runs: list[Run], what: str, store: str, pipeline: str, workers: int) -> float:
    return statistics.median(
        getattr(r, what) for r in runs if (r.store, r.pipeline, r.workers) == (store, pipeline, workers)
    )


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"


def table(runs: list[Run], stores: list[str], workers: list[int]) -> str:
    def median(store: str, pipeline: str, w: int) -> float:
        return median_of(runs, "rows_per_s", store, pipeline, w)

    def first(store: str, pipeline: str, w: int) -> float:
        return median_of(runs, "first_batch_s", store, pipeline, w)

    lines = [
        "| store | workers | Grain MapDataset rows/s | Grain DataLoader rows/s | ChunkDataset rows/s "
        "| speed-up over MapDataset | speed-up over DataLoader | first batch (Map / Loader / ours) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for store in stores:
        for w in workers:
            speeds = [median(store, pipeline, w) for pipeline in PIPELINES]
            firsts = " / ".join(f"{first(store, pipeline, w):.1f}" for pipeline in PIPELINES)
            lines.append(
                f"| {store} | {w} | {speeds[0]:,.0f} | {speeds[1]:,.0f} | {speeds[2]:,.0f} "
                f"| {times(speeds[2] / speeds[0])} | {times(speeds[2] / speeds[1])} | {firsts} s |"
            )
    return "\n".join(lines)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for package in ("grain", "jax", "chunksampler", "zarr", "annbatch", "anndata", "numpy"):
        try:
            out[package] = version(package)
        except Exception:  # noqa: BLE001 - a package installed without metadata is reported as such
            out[package] = "?"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the stores (default 200,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each configuration; the median is reported")
    parser.add_argument("--workers", help="worker counts, comma-separated (0: in-process); default 0,1,2 (--smoke: 0)")
    parser.add_argument(
        "--grain-batches", type=int, default=32, help="batches timed of each Grain pipeline (after the first)"
    )
    parser.add_argument("--stores", default=",".join(STORES), help=f"of {', '.join(STORES)}")
    parser.add_argument(
        "--cache", type=Path, help="keep the stores here and reuse them (default: a temporary directory)"
    )
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument(
        "--smoke", action="store_true", help="2,560 rows, 2 Grain batches, in-process only, once: a smoke test"
    )
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeats, args.grain_batches = 2_560, 1, 2
    workers = [int(w) for w in (args.workers or ("0" if args.smoke else "0,1,2")).split(",")]
    stores = [s for s in args.stores.split(",") if s]
    if unknown := set(stores) - set(STORES):
        parser.error(f"unknown stores {sorted(unknown)}; choose of {list(STORES)}")
    if args.rows < BATCH * (args.grain_batches + 1):
        parser.error(f"--rows {args.rows} holds fewer than --grain-batches + 1 batches of {BATCH}")

    # Grain's worker processes read an absl flag (with jaxlib >= 0.11 installed); a program not run
    # by absl.app.run marks the flags parsed.
    from absl import flags

    flags.FLAGS.mark_as_parsed()

    temporary = None
    if args.cache is None:
        temporary = tempfile.TemporaryDirectory(prefix="bench_grain_")
        directory = Path(temporary.name)
    else:
        directory = args.cache.expanduser()
    try:
        started = time.perf_counter()
        paths = ensure_stores(directory, args.rows, annbatch_writer=not args.smoke)
        paths = {name: paths[name] for name in stores}
        for path in paths.values():  # what Grain's workers get: the source, pickled
            if not np.array_equal(pickle.loads(pickle.dumps(ZarrRows(str(path))))[1], open_x(path)[1]):
                raise AssertionError(f"ZarrRows({str(path)!r}) reads another row 1 once pickled")
        described = {name: describe(path) for name, path in paths.items()}
        for name, text in described.items():
            log(f"{name}: {text}")
        log(f"page cache: read {warm_page_cache(paths) / 2**20:.0f} MiB")
        gc.collect()
        gc.freeze()  # the harness's objects stay out of every later collection
        runs = []
        for repeat in range(args.repeats):
            log(f"repetition {repeat + 1} of {args.repeats}")
            order = PIPELINES if repeat % 2 == 0 else PIPELINES[::-1]
            for store, path in paths.items():
                for w in workers:
                    for pipeline in order:
                        runs.append(run(store, path, pipeline, w, repeat, args.rows, args.grain_batches))
            for w in (w for w in workers if w > 0):
                runs.append(run("memory", None, HANDOVER, w, repeat, HANDOVER_BATCHES * BATCH, 0))
        elapsed = time.perf_counter() - started
    finally:
        if temporary is not None:
            temporary.cleanup()

    info = versions()
    print(
        f"{args.rows:,} rows x {COLUMNS} float32 columns, batch {BATCH}, chunk_size {GRID}, preload_nchunks {PRELOAD}; "
        f"median of {args.repeats}; Grain timed over {args.grain_batches} batches after the first, ChunkDataset over "
        f"its epoch after the first; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"{elapsed:.0f} s in all"
    )
    print(", ".join(f"{k} {v}" for k, v in info.items()))
    print()
    print(table(runs, stores, workers))
    ceilings = [
        f"{w} worker{'s' * (w > 1)} {median_of(runs, 'rows_per_s', 'memory', HANDOVER, w):,.0f}"
        for w in workers
        if w > 0
    ]
    if ceilings:
        print(
            f"\nmp_prefetch's hand-over, batches made in memory and nothing read ({HANDOVER_BATCHES} batches of "
            f"{BATCH} x {COLUMNS} float32), rows/s: " + ", ".join(ceilings)
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": args.rows,
                    "columns": COLUMNS,
                    "batch_size": BATCH,
                    "chunk_size": GRID,
                    "preload_nchunks": PRELOAD,
                    "grain_batches": args.grain_batches,
                    "repeats": args.repeats,
                    "stores": described,
                    "versions": info,
                    "cpus": os.cpu_count(),
                    "seconds": elapsed,
                    "runs": [{**r.__dict__, "rows_per_s": r.rows_per_s} for r in runs],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
