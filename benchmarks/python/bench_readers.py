"""Loaders that read a chunked store, side by side: rows per second, and the chunk reads each makes
an epoch, of chunksampler's torch ``ChunkDataLoader`` and Grain ``ChunkDataset`` (both reading
through ``chunksampler.reader``), annbatch 0.3.1's ``Loader`` and scDataset 0.3, on one sampler's
plan, beside the store's floor.

Stores (``--rows`` rows, 200,000 by default; bench_loader.py's writers and matrices):

* ``dense``: 256 float32 columns, ``annbatch.write_sharded`` at its defaults (64-row chunks, Blosc
  lz4, one shard at this size);
* ``zarr``: the same matrix as a plain zarr v3 array of 64-row chunks, no shards;
* ``csr``: 2,000 columns at 5% density, ``annbatch.write_sharded``'s CSR;
* ``h5ad``: the CSR matrix in an ``.h5ad`` file (``anndata.write_h5ad``), read backed
  (``read_h5ad(backed="r")``), as single-cell users hold most of their data. annbatch's Loader
  reads zarr only: it has no figure here.

Readers, each over ``X``, batch 256, chunk 64, ``preload_nchunks`` 32 (``--preload``):

* ``torch``: ``ChunkDataLoader(X, RandomSampler(64, P, 256))`` with 0 and 2 DataLoader workers
  (``--workers``): each request read whole, in process with the next one read ahead, or by a
  worker;
* ``grain``: ``ChunkDataset(X, the same sampler, num_epochs=2)``, in process and under
  ``mp_prefetch`` with the same worker count;
* ``annbatch``: ``annbatch.Loader(batch_sampler=the same sampler, preload_to_gpu=False,
  to=None).add_dataset(X)``, in process (the Loader has no workers);
* ``scDataset``: ``scDataset(X, BlockShuffling(block_size=64), batch_size=256, fetch_factor=64 P
  / 256)`` in a torch DataLoader (``batch_size=None``, the same worker counts), each fetch one
  orthogonal read of its sorted rows (``oindex``; a backed CSR dataset indexed at them): blocks of
  64 rows, P of them a fetch, the reads of one of our requests;
* ``floor``: the store's rows read in order in slices of 65,536 rows: what the store gives at all.

Every reader reads through one zarr codec pipeline (``--pipeline``): zarrs where it is installed
(annbatch's advice for local stores, ``annbatch[zarrs]``), else zarr-python's own. The chunk reads
are counted through a wrapper store, which zarrs does not read (it reads local files itself): they
are zarr-python's reads of the same requests.

Method: every file of the stores read once first (the page cache). Each run builds its reader
afresh and plays two epochs (workers persistent), and only the second is timed, from the first
epoch's last batch: worker start-up (a spawned process imports torch or Grain) and first reads
are not timed; the
readers alternate, their order reversed each repetition, ``--repeats`` times (5); reported is the
median rows/s. Before the timed runs one untimed in-process epoch of each zarr reader goes through
a store that counts its reads of each chunk's key (a shard's index apart): the chunk reads per
epoch, against the store's chunk count (on the dense stores, where the rows are whole chunks, ours
must read each exactly once, or the script exits 1). Each run's rows are checked: every reader
hands out the epoch's rows.

    python bench_readers.py                       # about 20 minutes on 2 cores
    python bench_readers.py --rows 20000 --repeats 1 --stores dense --workers 0
    python bench_readers.py --json readers.json --cache ~/.cache/cs-readers
    python bench_readers.py --stores dense --readers torch,annbatch --sweep 4,8,16,32,64,128 \
        --json docs/performance/bench_readers_sweep.json   # the performance page's plot against preload_nchunks
    python bench_readers.py --smoke               # 4,096 rows, once: its checks (tests/python/test_bench_smoke.py)

Needs annbatch 0.3.1, scdataset 0.3, grain, torch, zarr 3, anndata and chunksampler installed
(``scripts/bench_readers.sh`` makes that environment).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

BATCH, GRID, FLOOR_SLICE = 256, 64, 65_536
STORES = ("dense", "zarr", "csr", "h5ad")
READERS = ("torch", "grain", "annbatch", "scDataset", "floor")
ZARRS = "zarrs.ZarrsCodecPipeline"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the stores ------------------------------------------------------------------------------------


def ensure_stores(directory: Path, rows: int) -> dict[str, Path]:
    import anndata as ad
    import bench_loader  # beside this file: the matrices and annbatch's writers
    import bench_stores

    sizes = bench_loader.Sizes(n_obs=rows, dense_vars=256, csr_vars=2_000, csr_density=0.05)
    expected = {"format": 1, "seed": bench_loader.SEED, **sizes.__dict__}
    paths, reused = bench_stores.kept(directory, "bench_readers.json", expected, ("dense", "zarr", "csr"))
    paths["h5ad"] = directory / "csr.h5ad"
    if reused and paths["h5ad"].exists():
        log(f"stores: reusing {directory}")
        return paths
    started = time.perf_counter()
    rng = np.random.default_rng(bench_loader.SEED)
    dense = bench_loader.dense_matrix(sizes, rng)
    bench_loader.write_store(paths["dense"], dense, rows)
    bench_loader.write_unsharded(paths["zarr"], dense)
    del dense
    csr = bench_loader.csr_matrix(sizes, rng)
    bench_loader.write_store(paths["csr"], csr, rows)
    ad.AnnData(X=csr).write_h5ad(paths["h5ad"])
    (directory / "bench_readers.json").write_text(json.dumps(expected))
    log(f"stores: written to {directory} in {time.perf_counter() - started:.1f} s")
    return paths


def counting(store: Any) -> tuple[Any, Counter[str]]:
    """``store`` in a zarr WrapperStore, and the count of its reads of each key (a shard's index apart);
    the count is shared by the copies zarr makes of the wrapper (``with_read_only``)."""
    from zarr.abc.store import SuffixByteRequest
    from zarr.storage import WrapperStore

    reads: Counter[str] = Counter()

    def count(key: str, byte_range: Any = None, times: int = 1) -> None:
        if not key.endswith(("zarr.json", ".zattrs", ".zgroup", ".zarray", ".zmetadata")) and not isinstance(
            byte_range, SuffixByteRequest
        ):
            reads[key] += times

    class CountingStore(WrapperStore):
        # A plain chunk (or a shard's index) through get/get_sync; a shard's inner chunks through
        # get_ranges, one range each (zarr may merge neighbours into one read of the file).
        async def get(self, key, prototype=None, byte_range=None):
            count(key, byte_range)
            return await super().get(key, prototype=prototype, byte_range=byte_range)

        def get_sync(self, key, *, prototype=None, byte_range=None):
            count(key, byte_range)
            return super().get_sync(key, prototype=prototype, byte_range=byte_range)

        def get_ranges(self, key, byte_ranges, **kwargs):
            count(key, None, len(byte_ranges))
            return super().get_ranges(key, byte_ranges, **kwargs)

    return CountingStore(store), reads


def open_x(path: Path, store: Any = None) -> Any:
    """``X`` of a store, backed: a zarr array, a backed CSR dataset (zarr or HDF5)."""
    import anndata as ad
    import zarr

    if path.suffix == ".h5ad":
        return ad.read_h5ad(path, backed="r").X
    group = zarr.open_group(store if store is not None else path, mode="r")
    x = group["X"]
    return ad.io.sparse_dataset(x) if x.attrs.get("encoding-type") == "csr_matrix" else x


def chunk_count(x: Any) -> int:
    """Storage chunks of X's data (a CSR's ``data`` array; its ``indices`` have as many again)."""
    array = x if hasattr(x, "chunks") else x.group["data"]
    return int(np.prod([-(-s // c) for s, c in zip(array.shape, array.chunks)]))


# --- the readers -----------------------------------------------------------------------------------


def sampler(preload: int, seed: int) -> Any:
    import chunksampler

    return chunksampler.RandomSampler(chunk_size=GRID, preload_nchunks=preload, batch_size=BATCH,
                                      rng=np.random.default_rng(seed))


def rows_of(batch: Any) -> int:
    if isinstance(batch, dict):
        batch = batch["X"]
    return int(batch.shape[0])


class Rows:
    """An array-like over X for scDataset: ``len()``, and one read of a fetch's sorted rows. Its
    DataLoader workers are spawned under zarrs (zarrs' thread pool does not survive fork), and each
    opens X again under the parent's codec pipeline (an unpickled array takes the default one)."""

    def __init__(self, x: Any, pipeline: str | None) -> None:
        self.x, self.pipeline = x, pipeline

    def __getstate__(self) -> dict[str, Any]:
        return {"x": self.x, "pipeline": self.pipeline}

    def __setstate__(self, state: dict[str, Any]) -> None:
        import zarr

        self.x, self.pipeline = state["x"], state["pipeline"]
        if self.pipeline is not None:
            zarr.config.set({"codec_pipeline.path": self.pipeline})
            self.x = pickle.loads(pickle.dumps(self.x))

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def __getitem__(self, rows: np.ndarray) -> Any:
        return self.x.oindex[rows] if hasattr(self.x, "oindex") else self.x[rows]


def make(reader: str, x: Any, workers: int, preload: int, seed: int, zarrs: bool = True,
         epochs: int = 1) -> Iterable[Any] | None:
    """``epochs`` epochs of ``reader`` over ``x`` with ``workers`` workers (persistent: started once),
    None where it does not run; ours read through a Reader that takes zarrs where installed, or not
    (``zarrs``)."""
    if not runs(reader, x, workers):
        return None
    if reader not in ("grain", "floor"):
        once = make_one(reader, x, workers, preload, seed, zarrs)
        return itertools.chain.from_iterable(itertools.repeat(once, epochs))
    return make_one(reader, x, workers, preload, seed, zarrs, epochs)


def make_one(reader: str, x: Any, workers: int, preload: int, seed: int, zarrs: bool, epochs: int = 1) -> Any:
    if reader == "torch":
        from chunksampler.reader import Reader
        from chunksampler.torch import ChunkDataLoader

        return ChunkDataLoader(Reader(x, sparse="csr", zarrs=zarrs), sampler(preload, seed), num_workers=workers,
                               persistent_workers=workers > 0)
    if reader == "grain":
        import grain
        from chunksampler.grain import ChunkDataset
        from chunksampler.reader import Reader

        dataset = ChunkDataset(Reader(x, zarrs=zarrs), sampler(preload, seed), num_epochs=epochs)
        return dataset if workers == 0 else dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    if reader == "annbatch":
        import annbatch

        return annbatch.Loader(batch_sampler=sampler(preload, seed), preload_to_gpu=False, to=None).add_dataset(x)
    if reader == "scDataset":
        import torch.utils.data
        from scdataset import BlockShuffling, scDataset

        dataset = scDataset(Rows(x, ZARRS if zarrs else None), BlockShuffling(block_size=GRID), batch_size=BATCH,
                            fetch_factor=GRID * preload // BATCH, seed=seed)
        on_zarr = hasattr(x, "oindex") or "zarr" in type(getattr(x, "group", None)).__module__
        context = "spawn" if workers and zarrs and on_zarr else None
        return torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, multiprocessing_context=context,
                                           persistent_workers=workers > 0)
    assert reader == "floor"
    n = int(x.shape[0])
    return (x[start : min(start + FLOOR_SLICE, n)] for _ in range(epochs) for start in range(0, n, FLOOR_SLICE))


def runs(reader: str, x: Any, workers: int) -> bool:
    """Whether ``reader`` runs over ``x`` with ``workers``: the floor and annbatch's Loader in process
    only, annbatch's Loader over zarr only."""
    if reader == "floor":
        return workers == 0
    if reader == "annbatch":
        return workers == 0 and (hasattr(x, "oindex") or "zarr" in type(getattr(x, "group", None)).__module__)
    return True


def distinct_chunks(preload: int, rows: int, seed: int = 1) -> dict[str, float]:
    """Over one epoch of ``sampler(preload)``: how many of its request's chunks each batch draws rows
    from (mean, fewest), what a batch's rows cost in reads; what the trade with ``preload`` buys."""
    counts = []
    for request in sampler(preload, seed).sample_arrays(rows):
        lengths = np.asarray(request.stops) - np.asarray(request.starts)
        chunk_of = np.repeat(np.arange(len(lengths)), lengths)  # buffer row -> its chunk
        offsets = np.asarray(request.offsets)
        for begin, end in zip(offsets[:-1], offsets[1:]):
            counts.append(len(np.unique(chunk_of[np.asarray(request.positions)[begin:end]])))
    return {"mean": float(np.mean(counts)), "min": int(min(counts))}


def rates(x: Any, readers: list[str], workers: int, preload: int, repeats: int, zarrs: bool) -> dict[str, list[float]]:
    """rows/s of each reader that runs over ``x`` with ``workers``, one figure a repetition, the
    readers alternating and their order reversed each repetition."""
    rates_by: dict[str, list[float]] = {}
    order = [r for r in readers if runs(r, x, workers)]
    for repeat in range(repeats):
        for reader in order if repeat % 2 == 0 else order[::-1]:
            gc.collect()
            iterable = make(reader, x, workers, preload, 100 + repeat, zarrs, epochs=2)
            rows, seconds = timed(iterable, int(x.shape[0]))
            if rows != int(x.shape[0]):
                raise SystemExit(f"{reader} {workers} workers: {rows} rows, not {x.shape[0]}")
            del iterable  # its worker processes end before the next run starts
            gc.collect()
            rates_by.setdefault(reader, []).append(rows / seconds)
    return rates_by


def sweep(x: Any, store: str, readers: list[str], preloads: list[int], repeats: int, zarrs: bool) -> list[dict[str, Any]]:
    """Rows/s in process and each batch's distinct chunks against ``preload_nchunks``: the points a
    user picks from (the performance page's plot)."""
    points = []
    row_bytes = int(np.prod(x.shape[1:])) * np.dtype(x.dtype).itemsize if hasattr(x, "dtype") else None
    for preload in preloads:
        point: dict[str, Any] = {"preload_nchunks": preload, "distinct_chunks": distinct_chunks(preload, int(x.shape[0])),
                                 "buffer_bytes": None if row_bytes is None else GRID * preload * row_bytes,
                                 "rows_per_s": {}}
        for reader, found in rates(x, readers, 0, preload, repeats, zarrs).items():
            point["rows_per_s"][reader] = {"median": statistics.median(found), "runs": found}
            log(f"{store} preload {preload} {reader}: {statistics.median(found):,.0f} rows/s")
        points.append(point)
    return points


def timed(iterable: Iterable[Any], epoch_rows: int) -> tuple[int, float]:
    """Rows of the second epoch of ``iterable`` (two epochs of ``epoch_rows`` rows), and its seconds:
    the clock starts as the first epoch's last batch is handed out, so a loader's start-up (worker
    processes spawned, importing torch or Grain) and its first reads are not timed."""
    rows, started, last = 0, None, 0.0
    for batch in iterable:
        rows += rows_of(batch)
        last = time.perf_counter()
        if started is None and rows >= epoch_rows:
            if rows != epoch_rows:
                raise SystemExit(f"the first epoch handed out {rows} rows, not {epoch_rows}")
            started = last
    if started is None:
        raise SystemExit(f"one epoch handed out {rows} rows, not {epoch_rows}")
    # To the last batch: the end of the iteration (a loader's wind-down) is not the epoch's reading.
    return rows - epoch_rows, last - started


# --- the run ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--preload", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--pipeline", choices=("zarr", "zarrs"), default=None,
                        help="zarr's codec pipeline for every reader (default: zarrs where installed)")
    parser.add_argument("--sweep", metavar="P,P,...",
                        help="in process, each --preload of this list in turn: rows/s and each batch's distinct chunks "
                             "(the performance page's plot); no chunk counts, no table")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true",
                        help="4,096 rows, once, in process, without scDataset where it is not installed: its checks, not its figures")
    args = parser.parse_args()
    if args.smoke:
        import importlib.util

        args.rows, args.repeats, args.workers = 4_096, 1, "0"
        if importlib.util.find_spec("scdataset") is None:
            args.readers = ",".join(r for r in args.readers.split(",") if r != "scDataset")
    stores, readers = args.stores.split(","), args.readers.split(",")
    worker_counts = [int(w) for w in args.workers.split(",")]
    if not set(stores) <= set(STORES) or not set(readers) <= set(READERS):
        parser.error(f"--stores takes some of {','.join(STORES)}, --readers some of {','.join(READERS)}")
    warnings.filterwarnings("ignore")
    import bench_stores
    import zarr
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's worker processes read an absl flag, as under absl.app.run

    import importlib.util

    pipeline = args.pipeline or ("zarrs" if importlib.util.find_spec("zarrs") else "zarr")
    zarrs = pipeline == "zarrs"
    if zarrs:  # every store opened from here on reads through zarrs: annbatch's, scDataset's and the floor's too
        zarr.config.set({"codec_pipeline.path": ZARRS})
    started = time.perf_counter()
    results: dict[str, Any] = {"pipeline": pipeline, "rows": args.rows, "preload_nchunks": args.preload, "repeats": args.repeats,
                               "cores": os.cpu_count(), "load_before": os.getloadavg()[0], "stores": {}}
    with tempfile.TemporaryDirectory(prefix="bench_readers.") as scratch:
        paths = ensure_stores(args.cache or Path(scratch), args.rows)
        log(f"page cache: read {bench_stores.warm_page_cache(paths[s] for s in stores) / 2**20:,.0f} MiB")
        for store in stores:
            x = open_x(paths[store])
            entry: dict[str, Any] = {"reads": {}, "rows_per_s": {}, "chunks": None}
            results["stores"][store] = entry
            if store != "h5ad" and not args.sweep:
                entry["chunks"] = chunk_count(x)
                for reader in readers:
                    local, reads = counting(zarr.storage.LocalStore(paths[store], read_only=True))
                    iterable = make(reader, open_x(paths[store], local), 0, args.preload, 1, zarrs)
                    if iterable is None:
                        continue
                    rows = sum(rows_of(batch) for batch in iterable)
                    data_reads = sum(n for key, n in reads.items() if key.startswith(("X/c/", "X/data/c/")))
                    entry["reads"][reader] = {"data_chunk_reads": data_reads, "rows": rows}
                    if reader in ("torch", "grain") and store in ("dense", "zarr") and rows % GRID == 0:
                        # Whole chunks only: ours read each of them exactly once an epoch.
                        if data_reads != entry["chunks"]:
                            raise SystemExit(f"{store} {reader}: {data_reads} chunk reads for {entry['chunks']} chunks")
                    log(f"{store} {reader}: {data_reads:,} reads of X's data chunks ({entry['chunks']:,} chunks), "
                        f"{rows:,} rows")
            if args.sweep:
                entry["sweep"] = sweep(x, store, readers, [int(p) for p in args.sweep.split(",")], args.repeats, zarrs)
                continue
            for workers in worker_counts:
                for reader, found in rates(x, readers, workers, args.preload, args.repeats, zarrs).items():
                    entry["rows_per_s"][f"{reader}/{workers}"] = {"median": statistics.median(found), "runs": found}
                    log(f"{store} {reader} {workers} workers: {statistics.median(found):,.0f} rows/s")
    results["seconds"] = time.perf_counter() - started
    results["load_after"] = os.getloadavg()[0]
    print(sweep_table(results) if args.sweep else table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def table(results: dict[str, Any]) -> str:
    lines = [
        f"zarr codec pipeline {results['pipeline']}; {results['rows']:,} rows, chunk {GRID}, preload_nchunks {results['preload_nchunks']}, batch {BATCH}; "
        f"median of {results['repeats']}; {results['cores']} cores, load {results['load_before']:.1f} before, "
        f"{results['load_after']:.1f} after; {results['seconds']:.0f} s",
        "",
        "| store | reader | workers | rows/s | vs annbatch | vs scDataset | vs floor | chunk reads / chunks |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for store, entry in results["stores"].items():
        rates = {key: value["median"] for key, value in entry["rows_per_s"].items()}
        for key, rate in rates.items():
            reader, workers = key.split("/")
            base = rates.get("annbatch/0")
            sc = rates.get(f"scDataset/{workers}")
            floor = rates.get("floor/0")
            reads = entry["reads"].get(reader) if workers == "0" else None
            lines.append(
                f"| {store} | {reader} | {workers} | {rate:,.0f} | "
                f"{f'{rate / base:.2f}x' if base and reader != 'annbatch' else ''} | "
                f"{f'{rate / sc:.2f}x' if sc and reader != 'scDataset' else ''} | "
                f"{f'{rate / floor:.2f}x' if floor and reader != 'floor' else ''} | "
                f"{f'{reads['data_chunk_reads'] / entry['chunks']:.2f}' if reads and entry['chunks'] else ''} |"
            )
    return "\n".join(lines)


def sweep_table(results: dict[str, Any]) -> str:
    lines = [
        f"zarr codec pipeline {results['pipeline']}; {results['rows']:,} rows, chunk {GRID}, batch {BATCH}; in process; "
        f"median of {results['repeats']}; {results['cores']} cores, load {results['load_before']:.1f} before, "
        f"{results['load_after']:.1f} after; {results['seconds']:.0f} s",
        "",
        "| store | preload_nchunks | buffer | chunks a batch draws from: mean (fewest) | reader | rows/s |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for store, entry in results["stores"].items():
        for point in entry["sweep"]:
            buffer = point["buffer_bytes"]
            chunks = point["distinct_chunks"]
            for reader, rate in point["rows_per_s"].items():
                lines.append(f"| {store} | {point['preload_nchunks']} | "
                             f"{'' if buffer is None else f'{buffer / 2**20:.1f} MiB'} | "
                             f"{chunks['mean']:.1f} ({chunks['min']}) | {reader} | {rate['median']:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
