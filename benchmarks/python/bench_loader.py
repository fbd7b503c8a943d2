"""End to end in annbatch's own Loader: rows per second over whole epochs, chunksampler's samplers
against annbatch 0.3.1's, same process, same store, same chunk_size, preload_nchunks and batch_size.

chunksampler cuts every chunk on the storage grid (``[k * chunk_size, (k + 1) * chunk_size)`` in
absolute rows, cut to the sampled range); annbatch cuts chunks from the start of the sampled range
(its mask, or a rank's shard). Where that start is off the store's 64-row grid, every chunk of
annbatch's straddles two storage chunks, and zarr decodes both. This script measures what that costs
where a user feels it, ``annbatch.Loader(batch_sampler=...)``, on three stores of 200,000 rows:

* ``dense``: 256 float32 columns, written by annbatch's own writer (``annbatch.write_sharded`` at its
  defaults: 64-row chunks, Blosc lz4, shards of up to 1 GB, so one shard here);
* ``dense-unsharded``: the same matrix as a plain zarr array of 64-row chunks, no shards;
* ``csr``: 2,000 columns at 5% density, ``annbatch.write_sharded``'s CSR (chunks of 64 rows' worth
  of non-zeros, one shard),

each read under zarr's two codec pipelines: zarr-python's own and zarrs (Rust), which annbatch's docs
ask for on a local file system (``annbatch[zarrs]``; ``--pipelines`` chooses, by default those
installed).

Scenarios (rows are the store's; n = 200,000, or 10,000 with --quick):

* ``mask off grid``: ``RandomSampler(mask=slice(16, 16 + 0.9 n))``.
* ``mask on grid``: ``RandomSampler(mask=slice(0, m))``, ``m`` the multiple of 64 nearest below
  0.9 n, the control: both samplers cut the same whole grid chunks, so the two should be equal.
  (Its length matters as much as its start: annbatch gives the range's one short chunk, the last
  it reads, a random place on disk and shifts every chunk after it by the short length, so a range
  that starts on the grid but whose length is not a multiple of 64 is read off the grid from a
  random point on; the train split below is one.)
* ``rank 1/3, chunk 100``: ``DistributedSampler(RandomSampler(chunk_size=100, preload_nchunks=64))``,
  rank 1 of 3 (``dist_info=lambda: (1, 3)``); chunk 100 is on no 64-row grid, so neither sampler is.
  (preload 64: annbatch wants ``chunk_size * preload_nchunks`` divisible by ``batch_size``.)
* ``rank 1/3, chunk 64``: the same with chunk 64 and ``enforce_equal_batches=False``, so that the
  shard, ``n // 3`` rows from ``n // 3``, starts off the grid (with equal batches a shard is a
  multiple of 256 rows and starts on it).
* ``split <name>``: a ``split`` column in obs in three disk-ordered blocks, 70% train, 15% validation
  and 15% test, boundaries off the grid; each split read as ``mask=slice(a, b)`` (one range, as
  annbatch takes it) by a RandomSampler, and the validation split also by a SequentialSampler (an
  evaluation pass). The ranges come from the column (``split_ranges``).

Every (scenario, store, pipeline) builds one sampler of each library with the same keywords and a
seeded ``rng``, then one ``Loader(batch_sampler=sampler, preload_to_gpu=False, to=None)`` over ``X``
alone (no obs columns, so that reading rows is the only work). Each sampler's first batch, from a
Loader with ``return_index=True``, must hold the store's values for the rows it names. Then
``--repeats`` timed epochs of each, interleaved, the order alternating (A B, B A, ...) so that the
drift of a shared machine falls on both alike. Every timed epoch is checked after its clock stops:
its batches hold each row of the mask or shard exactly once (the Loader's requests are kept by a
thin pass-through sampler) and the Loader yielded that many rows, so both samplers read the same
rows. Before anything is timed every file of the stores is read once, so that both read from the
page cache, and the harness's objects are frozen out of the garbage collector (a full collection
otherwise lands 80 ms on a random epoch).

Reported: each sampler's median rows/s (wall clock); the ratio, chunksampler's rows/s over
annbatch's in each repetition (its two epochs ran back to back), the median of those; the spread,
their lowest and highest; and the same median ratio from the CPU time of the process (every
thread), which other processes on a shared machine disturb less than wall time. Paired ratios,
since a shared machine moves between busier and quieter spells of a few seconds: the medians of
each sampler's own epochs can fall in different spells, the two epochs of a pair rarely do.
``--json PATH`` keeps every epoch's wall and CPU time.

    python bench_loader.py                       # 5 repetitions, stores in a temporary directory
    python bench_loader.py --cache ~/.cache/cs   # stores kept there and reused
    python bench_loader.py --quick               # 10,000 rows, 1 repetition: a smoke test
    python bench_loader.py --pipelines zarrs --stores dense --only "mask" --repeats 9

Needs annbatch 0.3.1 and chunksampler installed (scripts/bench_loader.sh makes that environment).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import anndata as ad
import annbatch
import annbatch.samplers
import numpy as np
import pandas as pd
import scipy.sparse as sp
import zarr

import chunksampler

import bench_stores  # beside this file

# The stores' chunk rows: annbatch.write_sharded's default n_obs_per_chunk, and the chunk_size set
# to match it (as annbatch's docs advise for dense stores).
GRID = 64
PRELOAD = 32  # annbatch.Loader's default preload_nchunks
BATCH = 256
SEED = 20_260_421
# Bumped when the stores' contents change, so that a --cache of an older layout is rewritten.
STORE_FORMAT = 1
# annbatch.write_sharded's default compressors.
ANNBATCH_COMPRESSORS = (zarr.codecs.BloscCodec(cname="lz4", clevel=3, shuffle="shuffle"),)
STORES = {
    "dense": "annbatch.write_sharded: 64-row chunks in one shard",
    "dense-unsharded": "zarr.create_array: 64-row chunks, no shards",
    "csr": "annbatch.write_sharded: chunks of 64 rows' worth of non-zeros in one shard",
}
# zarr's codec pipelines: zarr-python's own, and zarrs (Rust), which annbatch's docs say is needed
# for performance on a local file system (the annbatch[zarrs] extra).
PIPELINES = {"zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline", "zarrs": "zarrs.ZarrsCodecPipeline"}


@dataclass(frozen=True)
class Sizes:
    n_obs: int
    dense_vars: int
    csr_vars: int
    csr_density: float


FULL = Sizes(n_obs=200_000, dense_vars=256, csr_vars=2_000, csr_density=0.05)
QUICK = Sizes(n_obs=10_000, dense_vars=256, csr_vars=2_000, csr_density=0.05)


def off_grid(row: int) -> int:
    """``row``, moved 16 rows on if it falls on the grid: split boundaries must be off it."""
    return row if row % GRID else row + 16


def split_bounds(n_obs: int) -> tuple[int, int]:
    """Where train ends and validation ends: 70% and 85% of the rows, off the grid."""
    return off_grid(round(0.70 * n_obs)), off_grid(round(0.85 * n_obs))


def split_column(n_obs: int) -> pd.Categorical:
    train_end, validation_end = split_bounds(n_obs)
    codes = np.zeros(n_obs, dtype=np.int8)
    codes[train_end:validation_end] = 1
    codes[validation_end:] = 2
    return pd.Categorical.from_codes(codes, categories=["train", "validation", "test"])


# --- the stores -----------------------------------------------------------------------------------


def dense_matrix(sizes: Sizes, rng: np.random.Generator) -> np.ndarray:
    """Log-normalised expression-like values: log1p of Poisson counts with per-variable means from
    a log-normal (about half of the values zero), float32."""
    means = rng.lognormal(mean=-0.5, sigma=1.2, size=sizes.dense_vars)
    out = np.empty((sizes.n_obs, sizes.dense_vars), dtype=np.float32)
    for start in range(0, sizes.n_obs, 20_000):
        stop = min(start + 20_000, sizes.n_obs)
        out[start:stop] = np.log1p(rng.poisson(means, size=(stop - start, sizes.dense_vars)))
    return out


def csr_matrix(sizes: Sizes, rng: np.random.Generator) -> sp.csr_matrix:
    """Counts at ``csr_density`` on average, each row's density drawn from a log-normal (rows of
    cells hold very different numbers of genes), values 1 + Poisson(1), float32."""
    row_density = sizes.csr_density * rng.lognormal(mean=-0.125, sigma=0.5, size=sizes.n_obs)
    blocks = []
    for start in range(0, sizes.n_obs, 10_000):
        stop = min(start + 10_000, sizes.n_obs)
        hits = rng.random((stop - start, sizes.csr_vars), dtype=np.float32) < row_density[start:stop, None]
        block = sp.csr_matrix(hits, dtype=np.float32)
        block.data = (1 + rng.poisson(1.0, size=block.nnz)).astype(np.float32)
        blocks.append(block)
    return sp.vstack(blocks, format="csr")


def write_store(path: Path, x: np.ndarray | sp.csr_matrix, n_obs: int) -> None:
    """An AnnData zarr store as annbatch writes it (annbatch.write_sharded at its defaults)."""
    obs = pd.DataFrame({"split": split_column(n_obs)}, index=pd.RangeIndex(n_obs).astype(str))
    var = pd.DataFrame(index=pd.RangeIndex(x.shape[1]).astype(str))
    adata = ad.AnnData(X=x, obs=obs, var=var)
    annbatch.write_sharded(zarr.open_group(path, mode="w", zarr_format=3), adata)


def write_unsharded(path: Path, x: np.ndarray) -> None:
    """The same dense matrix as a plain zarr array, one object per 64-row chunk and no shards (zarr's
    layout without sharding), with the compressor annbatch.write_sharded uses."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    array = group.create_array(
        "X", shape=x.shape, dtype=x.dtype, chunks=(GRID, x.shape[1]), compressors=ANNBATCH_COMPRESSORS
    )
    array[:] = x
    array.attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})


def ensure_stores(directory: Path, sizes: Sizes) -> dict[str, Path]:
    """The stores under ``directory``, written unless a previous run left them there with the same
    sizes (a ``bench_loader.json`` beside them records what they hold)."""
    expected = {"format": STORE_FORMAT, "seed": SEED, "annbatch": annbatch.__version__, **sizes.__dict__}
    paths, reused = bench_stores.kept(directory, "bench_loader.json", expected, STORES)
    if reused:
        log(f"stores: reusing {directory}")
        return paths
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    dense = dense_matrix(sizes, rng)
    write_store(paths["dense"], dense, sizes.n_obs)
    write_unsharded(paths["dense-unsharded"], dense)
    del dense
    write_store(paths["csr"], csr_matrix(sizes, rng), sizes.n_obs)
    (directory / "bench_loader.json").write_text(json.dumps(expected))
    log(f"stores: written to {directory} in {time.perf_counter() - started:.1f} s")
    return paths


def open_x(path: Path) -> zarr.Array | ad.abc.CSRDataset:
    """``X`` backed by the store, as annbatch's ``load_all_aligned`` backs it: a zarr array for
    dense, ``anndata.io.sparse_dataset`` for CSR."""
    group = zarr.open_group(path, mode="r")
    if group["X"].attrs.get("encoding-type") == "csr_matrix":
        return ad.io.sparse_dataset(group["X"])
    return group["X"]


def read_obs(path: Path) -> pd.DataFrame:
    return ad.io.read_elem(zarr.open_group(path, mode="r")["obs"])


def describe(path: Path) -> str:
    group = zarr.open_group(path, mode="r")
    x = group["X"]
    if x.attrs.get("encoding-type") == "csr_matrix":
        data = x["data"]
        return (
            f"CSR {tuple(x.attrs['shape'])}, nnz {data.shape[0]:,} ({data.dtype}, indices {x['indices'].dtype}), "
            f"chunks of {data.chunks[0]:,} non-zeros in shards of {data.shards[0]:,}, {data.compressors[0]}"
        )
    return f"dense {x.shape} {x.dtype}, chunks {x.chunks}, shards {x.shards}, {x.compressors[0]}"


def warm_page_cache(paths: dict[str, Path]) -> int:
    """Reads every file of the stores once, so that every epoch reads from memory."""
    return bench_stores.warm_page_cache(paths.values())


# --- the scenarios --------------------------------------------------------------------------------


def split_ranges(obs: pd.DataFrame, split: str, chunk_size: int) -> list[slice]:
    """The rows of ``obs`` whose ``split`` is ``split``, as ranges: the runs of the column's values
    (np.flatnonzero of where it changes). Where chunksampler has ``split_mask``, its ranges are
    used, after checking that they are these."""
    values = obs["split"].to_numpy()
    edges = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts, stops = np.r_[0, edges], np.r_[edges, len(values)]
    ranges = [slice(int(a), int(b)) for a, b in zip(starts, stops, strict=True) if values[a] == split]
    if hasattr(chunksampler, "split_mask"):
        theirs, _report = chunksampler.split_mask(obs, groupby=["split"], select=[(split,)], chunk_size=chunk_size)
        assert [(s.start, s.stop) for s in theirs] == [(s.start, s.stop) for s in ranges], (
            f"chunksampler.split_mask gives {theirs} for {split!r}, the column's runs are {ranges}"
        )
        return list(theirs)
    return ranges


@dataclass
class Scenario:
    name: str
    # Makes the sampler from a library's samplers module: annbatch.samplers or chunksampler, which
    # take the same keywords (chunksampler is a drop-in), so both get the same call.
    make: Callable[[ModuleType, np.random.Generator], Any]
    # The rows one epoch must read, each once.
    rows: slice


def one_range(ranges: list[slice], what: str) -> slice:
    assert len(ranges) == 1, f"{what} is {len(ranges)} ranges; annbatch's mask takes one"
    return ranges[0]


def scenarios(n_obs: int, obs: pd.DataFrame) -> list[Scenario]:
    masked = round(0.9 * n_obs)
    world, rank = 3, 1

    def shard(per_rank: int) -> slice:
        return slice(rank * per_rank, (rank + 1) * per_rank)

    def random(mask: slice) -> Callable[[ModuleType, np.random.Generator], Any]:
        return lambda lib, rng: lib.RandomSampler(GRID, PRELOAD, BATCH, mask=mask, rng=rng)

    def distributed(chunk: int, preload: int, enforce: bool) -> Callable[[ModuleType, np.random.Generator], Any]:
        return lambda lib, rng: lib.DistributedSampler(
            lib.RandomSampler(chunk, preload, BATCH, rng=rng),
            dist_info=lambda: (rank, world),
            enforce_equal_batches=enforce,
        )

    off, on = slice(16, 16 + masked), slice(0, masked // GRID * GRID)
    equal = n_obs // world // BATCH * BATCH
    out = [
        Scenario(f"mask off grid {fmt(off)}", random(off), off),
        Scenario(f"mask on grid {fmt(on)}, whole chunks (control)", random(on), on),
        Scenario(f"rank 1/3, chunk 100, shard {fmt(shard(equal))}", distributed(100, 64, True), shard(equal)),
        Scenario(
            f"rank 1/3, chunk 64, unequal batches, shard {fmt(shard(n_obs // world))}",
            distributed(GRID, PRELOAD, False),
            shard(n_obs // world),
        ),
    ]
    for split in ("train", "validation", "test"):
        rows = one_range(split_ranges(obs, split, GRID), f"split {split!r}")
        out.append(Scenario(f"split {split} {fmt(rows)}", random(rows), rows))
    rows = one_range(split_ranges(obs, "validation", GRID), "split 'validation'")
    out.append(
        Scenario(
            f"split validation {fmt(rows)}, sequential",
            lambda lib, rng, rows=rows: lib.SequentialSampler(GRID, PRELOAD, BATCH, mask=rows),
            rows,
        )
    )
    return out


def fmt(s: slice) -> str:
    return f"[{s.start}, {s.stop})"


# --- measuring ------------------------------------------------------------------------------------

LIBRARIES = {"annbatch": annbatch.samplers, "chunksampler": chunksampler}


def loader(sampler: Any, x: Any, *, return_index: bool = False) -> annbatch.Loader:
    return annbatch.Loader(batch_sampler=sampler, preload_to_gpu=False, to=None, return_index=return_index).add_dataset(
        x
    )


def check_values(name: str, sampler: Any, x: Any) -> None:
    """The first batch a Loader yields holds the store's values for the indices it names."""
    batches = iter(loader(sampler, x, return_index=True))
    first = next(batches)
    batches.close()
    some = first["index"][:8]
    got = first["X"][:8][np.argsort(some)]
    want = x[np.sort(some)]
    if sp.issparse(got):
        got, want = got.toarray(), want.toarray()
    assert np.array_equal(np.asarray(got), np.asarray(want)), f"{name}: a batch's values differ from the store's rows"


class Recorder:
    """A sampler as the Loader sees it, which keeps each request the Loader is given, so that every
    timed epoch is checked afterwards (keeping a request is a list append; the check runs after the
    clock stops)."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.requests: list[Any] = []

    @property
    def batch_size(self) -> int:
        return self.sampler.batch_size

    @property
    def shuffle(self) -> bool:
        return self.sampler.shuffle

    def n_batches(self, n_obs: int) -> int:
        return self.sampler.n_batches(n_obs)

    def validate(self, n_obs: int) -> None:
        self.sampler.validate(n_obs)

    def sample(self, n_obs: int) -> Any:
        for request in self.sampler.sample(n_obs):
            self.requests.append(request)
            yield request

    def batched_rows(self) -> np.ndarray:
        """The rows of every batch of the requests kept since the last call, sorted."""
        rows = []
        for request in self.requests:
            chunks = np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])
            rows.extend(chunks[split] for split in request["splits"])
        self.requests = []
        return np.sort(np.concatenate(rows))


def timed_epoch(the_loader: annbatch.Loader) -> tuple[int, float, float]:
    """Rows read, wall seconds and CPU seconds (all threads) of one whole epoch."""
    rows = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in the_loader:
        rows += batch["X"].shape[0]
    return rows, time.perf_counter() - wall, time.process_time() - cpu


@dataclass
class Result:
    scenario: str
    store: str
    pipeline: str
    rows: int
    epochs: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def rates(self, lib: str, clock: str = "wall_s") -> list[float]:
        return [self.rows / e[clock] for e in self.epochs[lib]]

    def median(self, lib: str, clock: str = "wall_s") -> float:
        return statistics.median(self.rates(lib, clock))

    def pair_ratios(self, clock: str = "wall_s") -> list[float]:
        """chunksampler's rate over annbatch's in each repetition, whose two epochs ran back to back."""
        return [c / a for a, c in zip(self.rates("annbatch", clock), self.rates("chunksampler", clock), strict=True)]

    def ratio(self, clock: str = "wall_s") -> float:
        """The median of the paired ratios. A shared machine moves between busier and quieter
        spells of a few seconds; the two epochs of a pair share one, where the medians of each
        sampler's own epochs could come from different ones."""
        return statistics.median(self.pair_ratios(clock))


def run(scenario: Scenario, store: str, pipeline: str, x: Any, repeats: int) -> Result:
    where = f"{scenario.name}, {store}, {pipeline}"
    for lib, module in LIBRARIES.items():
        check_values(f"{where}, {lib}", scenario.make(module, np.random.default_rng(SEED + 1)), x)
    samplers = {lib: Recorder(scenario.make(module, np.random.default_rng(SEED))) for lib, module in LIBRARIES.items()}
    loaders = {lib: loader(s, x) for lib, s in samplers.items()}
    expected = np.arange(scenario.rows.start, scenario.rows.stop)
    result = Result(scenario.name, store, pipeline, expected.size, {lib: [] for lib in LIBRARIES})
    order = list(LIBRARIES)
    # A full garbage collection walks every object of the process (numpy, pandas, zarr, anndata
    # and the stores' metadata): about 80 ms, which lands on either sampler's epoch at random.
    # Frozen, the harness's own objects are not walked again; what an epoch allocates still is.
    gc.collect()
    gc.freeze()
    for repeat in range(repeats):
        for lib in order if repeat % 2 == 0 else order[::-1]:
            rows, wall, cpu = timed_epoch(loaders[lib])
            # Both samplers read the same rows, each once: every row of the mask or shard.
            read = samplers[lib].batched_rows()
            assert np.array_equal(read, expected), (
                f"{where}, {lib}: an epoch's batches hold {read.size} rows in [{read[0]}, {read[-1]}], "
                f"not each row of {fmt(scenario.rows)} once"
            )
            assert rows == expected.size, f"{where}, {lib}: an epoch yielded {rows} rows, not {expected.size}"
            result.epochs[lib].append({"wall_s": wall, "cpu_s": cpu})
    gc.unfreeze()
    log(
        f"{where}: annbatch {result.median('annbatch'):,.0f} rows/s, "
        f"chunksampler {result.median('chunksampler'):,.0f} rows/s ({result.ratio():.2f}x, CPU {result.ratio('cpu_s'):.2f}x)"
    )
    return result


# --- reporting ------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"bench_loader: {message}", file=sys.stderr, flush=True)


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | store | rows/epoch | annbatch rows/s | chunksampler rows/s | ratio | spread | CPU ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        pairs = r.pair_ratios()
        spread = f"{min(pairs):.2f}–{max(pairs):.2f}" if len(pairs) > 1 else "–"
        lines.append(
            f"| {r.scenario} | {r.store} | {r.rows:,} | {r.median('annbatch'):,.0f} | "
            f"{r.median('chunksampler'):,.0f} | {r.ratio():.2f} | {spread} | {r.ratio('cpu_s'):.2f} |"
        )
    return "\n".join(lines)


def available_pipelines() -> list[str]:
    return [name for name, path in PIPELINES.items() if importlib.util.find_spec(path.split(".")[0]) is not None]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10,000 rows and 1 repetition: a smoke test")
    parser.add_argument(
        "--repeats", type=int, help="timed epochs of each sampler per scenario (default 5, 1 with --quick)"
    )
    parser.add_argument("--cache", type=Path, help="keep the stores in this directory and reuse them")
    parser.add_argument("--json", type=Path, help="write every epoch's timings here")
    parser.add_argument("--stores", default=",".join(STORES), help=f"which stores, of {','.join(STORES)} (default all)")
    parser.add_argument(
        "--pipelines", help=f"zarr codec pipelines, of {','.join(PIPELINES)} (default: those installed)"
    )
    parser.add_argument("--only", help="run only the scenarios whose name contains this text")
    args = parser.parse_args()
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    stores = args.stores.split(",")
    if not set(stores) <= set(STORES):
        parser.error(f"--stores takes some of {','.join(STORES)}, not {args.stores!r}")
    pipelines = args.pipelines.split(",") if args.pipelines else available_pipelines()
    if not set(pipelines) <= set(PIPELINES):
        parser.error(f"--pipelines takes some of {','.join(PIPELINES)}, not {args.pipelines!r}")
    missing = sorted(set(pipelines) - set(available_pipelines()))
    if missing:
        parser.error(f"--pipelines {','.join(missing)}: not installed (pip install 'annbatch[zarrs]')")
    sizes = QUICK if args.quick else FULL
    # annbatch warns once per store that obs-aligned elements are ignored (none are here), and zarr
    # that consolidated metadata, which annbatch.write_sharded writes, is not in the v3 spec.
    warnings.filterwarnings("ignore", category=FutureWarning, module="annbatch")
    warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)

    started = time.perf_counter()
    load_before = load()
    versions = {
        "python": platform.python_version(),
        **{name: version(name) for name in ("annbatch", "chunksampler", "zarr", "anndata", "numpy")},
        **({"zarrs": version("zarrs")} if "zarrs" in pipelines else {}),
    }
    log(f"load average {load_before} on {os.cpu_count()} cores; " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_loader.") as scratch:
        paths = ensure_stores(args.cache or Path(scratch), sizes)
        descriptions = {name: f"{STORES[name]}; {describe(paths[name])}" for name in stores}
        for name in stores:
            log(f"{name}: {descriptions[name]}")
        log(f"page cache: read {warm_page_cache({k: paths[k] for k in stores}) / 2**20:,.0f} MiB of stores")
        obs = read_obs(paths["dense"])
        chosen = [s for s in scenarios(sizes.n_obs, obs) if args.only is None or args.only in s.name]
        if not chosen:
            parser.error(f"no scenario's name contains {args.only!r}")
        for pipeline in pipelines:
            # An array takes its codec pipeline when it is opened.
            with zarr.config.set({"codec_pipeline.path": PIPELINES[pipeline]}):
                for store in stores:
                    x = open_x(paths[store])
                    for scenario in chosen:
                        results.append(run(scenario, store, pipeline, x, repeats))
    load_after = load()
    elapsed = time.perf_counter() - started

    print(
        f"annbatch.Loader, {sizes.n_obs:,} rows; chunk_size {GRID} (100 where named), preload_nchunks {PRELOAD} "
        f"(64 at chunk 100), batch_size {BATCH}; median of {repeats} epoch(s) each, interleaved; "
        f"{os.cpu_count()} cores, load average {load_before} before, {load_after} after; {elapsed:.0f} s in all."
    )
    for pipeline in pipelines:
        print(f"\nzarr codec pipeline: {pipeline} ({PIPELINES[pipeline]})\n")
        print(table([r for r in results if r.pipeline == pipeline]))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "sizes": sizes.__dict__,
                    "stores": descriptions,
                    "chunk_size": GRID,
                    "preload_nchunks": PRELOAD,
                    "batch_size": BATCH,
                    "repeats": repeats,
                    "load_average": {"before": load_before, "after": load_after},
                    "cores": os.cpu_count(),
                    "seconds": elapsed,
                    "versions": versions,
                    "results": [
                        {
                            "scenario": r.scenario,
                            "store": r.store,
                            "pipeline": r.pipeline,
                            "rows_per_epoch": r.rows,
                            "annbatch_rows_per_s": r.median("annbatch"),
                            "chunksampler_rows_per_s": r.median("chunksampler"),
                            "ratio": r.ratio(),
                            "pair_ratios": r.pair_ratios(),
                            "cpu_ratio": r.ratio("cpu_s"),
                            "cpu_pair_ratios": r.pair_ratios("cpu_s"),
                            "epochs": r.epochs,
                        }
                        for r in results
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
