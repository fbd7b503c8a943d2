"""The performance page's plots, drawn from the benchmarks' own JSON output.

- ``docs/performance/chunksampler_bench.json`` (``chunksampler_bench --json``, scripts/bench.sh):
  ns per position and peak memory against N for chunksampler's samplers, the shuffle floor and
  libtorch's ``DistributedRandomSampler``;
- ``docs/performance/bench_loader.json`` (``bench_loader.py --json``, scripts/bench_loader.sh):
  rows per second in annbatch's ``Loader``, chunksampler's over annbatch's, per scenario and store;
- ``docs/performance/bench_readers_sweep.json`` (``bench_readers.py --sweep ... --json``,
  scripts/bench_readers.sh): rows per second and each batch's distinct chunks against
  ``preload_nchunks``, the trade a user tunes.

Each plot names the machine and the run in its caption. The SVGs are committed beside the pages
(``docs/images/perf-*.svg``) so that a reader of ``docs/`` sees them without a build; scripts/docs.sh
redraws them into a temporary directory and fails if they differ from the committed ones, so a
plot cannot drift from its JSON.

    python docs/tools/plots.py [--out DIR]     # default: docs/images
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DOCS = Path(__file__).resolve().parents[1]
RESULTS = DOCS / "performance"
# Byte-identical SVGs from the same JSON and matplotlib: fixed ids, no date.
matplotlib.rcParams.update({"svg.hashsalt": "chunksampler", "svg.fonttype": "none", "font.size": 10})
METADATA = {"Date": None, "Creator": "docs/tools/plots.py"}

STYLE = {  # sampler -> (colour, marker, line)
    "shuffle floor": ("#777777", "s", "--"),
    "chunksampler contiguous": ("#1f6fb4", "o", "-"),
    "chunksampler global": ("#2ca02c", "^", "-"),
    "chunksampler sequential": ("#9467bd", "D", "-"),
    "libtorch DistributedRandomSampler": ("#d62728", "v", "-"),
}


def _saved(fig: Any, path: Path, rect: tuple[float, float, float, float]) -> Path:
    """``fig`` laid out within ``rect`` (room for its caption), written to ``path`` and closed."""
    fig.tight_layout(rect=rect)
    fig.savefig(path, metadata=METADATA)
    plt.close(fig)
    return path


def _by_sampler(rows: list[dict], field: str) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        if row["sampler"] in STYLE and row.get(field) is not None:
            series.setdefault(row["sampler"], []).append((row["n"], row[field]))
    return {name: sorted(points) for name, points in series.items()}


def sampler_plots(bench: dict, out: Path) -> list[Path]:
    machine = f"{bench['cpu']}, {bench['cores']} cores, {bench['compiler']}, {bench['build']}"
    drawn = []
    for field, ylabel, name, scale in [
        ("ns_per_position", "ns per position (log)", "perf-ns-per-position.svg", 1.0),
        ("peak_memory_bytes", "peak memory, MiB (log)", "perf-peak-memory.svg", 1 / 2**20),
    ]:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for sampler, points in _by_sampler(bench["rows"], field).items():
            colour, marker, line = STYLE[sampler]
            ax.plot([n for n, _ in points], [v * scale for _, v in points], line, color=colour, marker=marker,
                    label=sampler)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N, observations in the epoch (log)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
        ax.set_title("Rank 0 of 8, batches of 256 (chunk 256, preload 64)", fontsize=10)
        fig.text(0.01, 0.01, machine, fontsize=7, color="#555555")
        drawn.append(_saved(fig, out / name, rect=(0, 0.03, 1, 1)))
    return drawn


def loader_plot(loader: dict, out: Path) -> list[Path]:
    pipelines = sorted({r["pipeline"] for r in loader["results"]})
    stores = list(dict.fromkeys(r["store"] for r in loader["results"]))
    scenarios = list(dict.fromkeys(r["scenario"] for r in loader["results"]))
    fig, axes = plt.subplots(1, len(pipelines), figsize=(5.2 * len(pipelines), 0.42 * len(scenarios) * len(stores) / 2 + 2),
                             sharey=True, squeeze=False)
    width = 0.8 / len(stores)
    colours = ["#1f6fb4", "#ff7f0e", "#2ca02c", "#9467bd"]
    for ax, pipeline in zip(axes[0], pipelines):
        for s, store in enumerate(stores):
            ys, ratios, lows, highs = [], [], [], []
            for i, scenario in enumerate(scenarios):
                found = [r for r in loader["results"]
                         if r["pipeline"] == pipeline and r["store"] == store and r["scenario"] == scenario]
                if not found:
                    continue
                r = found[0]
                ys.append(i + (s - (len(stores) - 1) / 2) * width)
                ratios.append(r["ratio"])
                lows.append(r["ratio"] - min(r["pair_ratios"]))
                highs.append(max(r["pair_ratios"]) - r["ratio"])
            ax.barh(ys, ratios, height=width, color=colours[s % len(colours)], label=store,
                    xerr=[lows, highs], error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.axvline(1.0, color="#333333", linewidth=0.8)
        ax.set_title(f"zarr codec pipeline: {pipeline}", fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    # One y axis for all (sharey): its ticks and its direction are set once, the first scenario on top.
    axes[0][0].set_yticks(range(len(scenarios)))
    axes[0][0].set_yticklabels(scenarios, fontsize=7)
    axes[0][0].invert_yaxis()
    fig.supxlabel("rows/s, chunksampler ÷ annbatch: median of paired epochs, bars from the lowest to the highest pair",
                  fontsize=8, y=0.035)
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=8, loc="upper right", ncol=len(stores))
    versions = ", ".join(f"{k} {v}" for k, v in sorted(loader.get("versions", {}).items()))
    fig.text(0.01, 0.005, f"annbatch.Loader, {loader['sizes']['n_obs']:,} rows; {loader['cores']} cores; "
             f"median of {loader['repeats']} epochs each; {versions}", fontsize=6.5, color="#555555")
    return [_saved(fig, out / "perf-loader-ratio.svg", rect=(0, 0.05, 1, 0.95))]


def sweep_plot(sweep: dict, out: Path) -> list[Path]:
    store, entry = next(iter(sweep["stores"].items()))
    points = entry["sweep"]
    preloads = [p["preload_nchunks"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    names = {"torch": ("chunksampler ChunkDataLoader", "#1f6fb4", "o"), "annbatch": ("annbatch Loader", "#ff7f0e", "s"),
             "grain": ("chunksampler ChunkDataset (Grain)", "#2ca02c", "^")}
    for reader in dict.fromkeys(r for p in points for r in p["rows_per_s"]):
        label, colour, marker = names.get(reader, (reader, "#777777", "x"))
        ax.plot(preloads, [p["rows_per_s"][reader]["median"] / 1e3 for p in points], "-", color=colour,
                marker=marker, label=f"{label}, rows/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(preloads)
    ax.set_xticklabels([f"{p['preload_nchunks']}\n{p['buffer_bytes'] / 2**20:g} MiB" for p in points], fontsize=8)
    ax.set_xlabel("preload_nchunks (64-row chunks a load request), and a request's buffer")
    ax.set_ylabel("thousand rows/s, in process")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    twin = ax.twinx()
    twin.plot(preloads, [p["distinct_chunks"]["mean"] for p in points], "--", color="#555555", marker="D",
              label="chunks a batch of 256 draws from (mean)")
    twin.set_ylabel("distinct chunks per batch (mean)")
    twin.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, loc="lower right")
    ax.set_title(f"Reads against batch diversity: {store} store, {sweep['rows']:,} rows, zarr pipeline "
                 f"{sweep['pipeline']}", fontsize=10)
    fig.text(0.01, 0.01, f"{sweep['cores']} cores; median of {sweep['repeats']} epochs each; "
             f"RandomSampler(chunk_size=64, preload_nchunks=P, batch_size=256)", fontsize=7, color="#555555")
    return [_saved(fig, out / "perf-preload-sweep.svg", rect=(0, 0.03, 1, 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    drawn = sampler_plots(json.loads((RESULTS / "chunksampler_bench.json").read_text()), args.out)
    drawn += loader_plot(json.loads((RESULTS / "bench_loader.json").read_text()), args.out)
    drawn += sweep_plot(json.loads((RESULTS / "bench_readers_sweep.json").read_text()), args.out)
    for path in drawn:
        print(f"plots.py: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
