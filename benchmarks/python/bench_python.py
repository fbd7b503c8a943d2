"""The Python package's cost per index beside the C++ loop's, as one Markdown table.

Rank 0 of 8, ``DistributedSampler(RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256))``
in both shard modes, one whole epoch at a time, for N = 10^6 ... 10^9:

* dict path: ``for request in sampler.sample(N): for split in request["splits"]: n += len(split)``
  (every split of every request visited: annbatch's ``LoadRequest`` dicts);
* arrays path: ``for r in sampler.sample_arrays(N): n += int(r.offsets[-1])`` (every request
  visited, its batches counted through the offsets: ``offsets[-1]`` is the sum of the batch
  lengths ``offsets[b + 1] - offsets[b]``; no Python object per batch);
* the C++ figure: the same epoch walked in C++ with every position of every batch summed, from
  ``cxx_epoch`` (this folder; any configuration) or ``chunksampler_bench`` (the C++ benchmark suite;
  its one configuration, chunk 256 and preload 64).

ns per index is an epoch's wall time over the indices rank 0 yields (the sampler made beforehand),
the best of all repetitions: the run makes several rounds over every (mode, N), C++ and Python
in each and the loop bodies interleaved, so that a busy minute on a shared machine falls on all
alike and every figure gets a quiet moment. Each (mode, N) of a round runs in a fresh interpreter, which also measures the peak resident memory one epoch adds
(VmHWM reset through /proc/self/clear_refs, then read after the epoch); the first request is timed
from constructing the sampler (the numpy Generator included) to the first request in hand. A
second table splits the cost: an empty loop body, the touch above, and real numpy work on every
position (``split.sum()`` per split; ``positions.sum()`` per request of the arrays path).

    python bench_python.py --cxx-epoch build/bench-python/cxx_epoch      # the issue's table
    python bench_python.py --chunk 256 --preload 64 --cxx-bench build/bench-python/benchmarks/chunksampler_bench
    python bench_python.py --smoke                                         # N = 10^5, once: a test
    python bench_python.py --annbatch --sizes 1e8 --chunk 256 --preload 64 --rounds 9   # beside annbatch's sample()

Progress and the machine's state go to stderr, the tables to stdout; ``--json FILE`` keeps every
repetition. Exit status 1 if a check fails (the paths disagree on the indices, or with C++).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

PATHS = ("dict", "arrays")
# Loop bodies, per path: what the ``profile`` table compares.
VARIANTS = ("dict_empty", "dict", "dict_sum", "arrays_empty", "arrays", "arrays_sum")


def parse_size(text: str) -> int:
    """``1e9``, ``10^9`` or ``1000000000``."""
    match = re.fullmatch(r"(\d+)(?:([eE^])(\d+))?", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1e6")
    mantissa, sign, exponent = match.groups()
    if sign == "^":
        if mantissa != "10":
            raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 10^6")
        mantissa = "1"
    return int(mantissa) * 10 ** int(exponent or 0)


def size_name(n: int) -> str:
    exponent, rest = 0, n
    while rest >= 10 and rest % 10 == 0:
        rest, exponent = rest // 10, exponent + 1
    return f"10^{exponent}" if rest == 1 and exponent >= 3 else str(n)


def duration(ns: float) -> str:
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def kib(b: float) -> str:
    return f"{b / 1024:.0f} KiB" if b < 1 << 20 else f"{b / (1 << 20):.1f} MiB"


# --- the child: one (mode, N) in a fresh interpreter ------------------------------------------


def status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> bool:
    """Sets VmHWM to the current VmRSS (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def make_sampler(args: argparse.Namespace, mode: str, seed: int) -> Any:
    import numpy as np

    import chunksampler

    base = chunksampler.RandomSampler(
        chunk_size=args.chunk,
        preload_nchunks=args.preload,
        batch_size=args.batch,
        rng=np.random.default_rng(seed),
    )
    return chunksampler.DistributedSampler(base, dist_info=lambda: (0, args.world), mode=mode)


def epoch(sampler: Any, n_obs: int, variant: str) -> tuple[float, int]:
    """One epoch's wall time in ns with the given loop body, and the indices it yielded."""
    n = 0
    total = 0
    if variant == "dict":
        start = time.perf_counter_ns()
        for request in sampler.sample(n_obs):
            for split in request["splits"]:
                n += len(split)
    elif variant == "dict_empty":
        start = time.perf_counter_ns()
        for _ in sampler.sample(n_obs):
            pass
    elif variant == "dict_sum":
        start = time.perf_counter_ns()
        for request in sampler.sample(n_obs):
            for split in request["splits"]:
                total += split.sum()
                n += len(split)
    elif variant == "arrays":
        start = time.perf_counter_ns()
        for request in sampler.sample_arrays(n_obs):
            n += int(request.offsets[-1])
    elif variant == "arrays_empty":
        start = time.perf_counter_ns()
        for _ in sampler.sample_arrays(n_obs):
            pass
    elif variant == "arrays_sum":
        start = time.perf_counter_ns()
        for request in sampler.sample_arrays(n_obs):
            total += request.positions.sum()
            n += len(request.positions)
    else:
        raise ValueError(variant)
    elapsed = time.perf_counter_ns() - start
    return float(elapsed), n


def versus_annbatch(args: argparse.Namespace, sizes: list[int]) -> int:
    """``sample()`` beside annbatch 0.3.1's (``--annbatch``): the same sampler settings, rank 0 of
    ``--world`` (each package's ``DistributedSampler``, contiguous shards), the dict path's loop (every
    split of every request, its ``len()`` taken), in one process. Each round runs one epoch of each,
    in alternating order; a figure is the best of all rounds. Prints one Markdown table."""
    import annbatch.samplers as ab
    import numpy as np

    import chunksampler as cs

    def make(package: Any, seed: int) -> Any:
        base = package.RandomSampler(args.chunk, args.preload, args.batch, rng=np.random.default_rng(seed))
        return package.DistributedSampler(base, dist_info=lambda: (0, args.world))

    rounds = 1 if args.smoke else args.rounds
    print("| N | annbatch ns/index | chunksampler ns/index | speed-up |")
    print("| ---: | ---: | ---: | ---: |")
    for n_obs in sizes:
        best = {"annbatch": float("inf"), "chunksampler": float("inf")}
        counts = {}
        samplers = {"annbatch": make(ab, 0), "chunksampler": make(cs, 0)}
        for r in range(rounds):
            order = ["annbatch", "chunksampler"] if r % 2 == 0 else ["chunksampler", "annbatch"]
            for name in order:
                elapsed, n = epoch(samplers[name], n_obs, "dict")
                best[name] = min(best[name], elapsed / n)
                counts[name] = n
            print(f"  round {r + 1}/{rounds} at N={size_name(n_obs)}: "
                  f"{best['annbatch']:.2f} / {best['chunksampler']:.2f} ns", file=sys.stderr, flush=True)
        if counts["annbatch"] != counts["chunksampler"]:
            print(f"the packages yielded {counts} indices at N={n_obs}", file=sys.stderr)
            return 1
        ratio = best["annbatch"] / best["chunksampler"]
        print(f"| {size_name(n_obs)} | {best['annbatch']:.2f} | {best['chunksampler']:.2f} | {ratio:.2f}x |")
    return 0


def child(args: argparse.Namespace) -> None:
    """Measures one (mode, N): memory of one path's first epoch, then (unless --memory-only) every
    variant's epochs and the first request. Prints one JSON object."""
    mode, n_obs = args.child_mode, args.child_n
    result: dict[str, Any] = {"mode": mode, "n": n_obs}

    # Peak memory first, while nothing of an epoch has run in this process yet.
    sampler = make_sampler(args, mode, 1)
    can_reset = reset_peak()
    before = status_kib("VmRSS")
    baseline = before if can_reset else status_kib("VmHWM")
    path = args.memory_path
    epoch(sampler, n_obs, path)
    result["memory"] = {
        "path": path,
        "peak_growth_bytes": max(0, status_kib("VmHWM") - baseline) * 1024,
        "rss_before_bytes": before * 1024,
        "peak_reset": can_reset,
    }
    if args.memory_only:
        print(json.dumps(result))
        return

    expected = sampler.n_batches(n_obs)  # batches per epoch (each sample() plays the next epoch)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    indices: dict[str, int] = {}
    for _ in range(args.reps):
        for variant in VARIANTS:
            elapsed, n = epoch(sampler, n_obs, variant)
            times[variant].append(elapsed)
            if not variant.endswith("_empty"):
                indices[variant] = n
    result["times_ns"] = times
    result["indices"] = indices
    result["n_batches"] = expected

    # The first request: from nothing (the Generator and both samplers made) to the first request
    # and its first split in hand; and sample() alone on a made sampler.
    first_dict, first_arrays, first_sample = [], [], []
    for rep in range(max(args.reps, 10)):
        start = time.perf_counter_ns()
        fresh = make_sampler(args, mode, rep)
        request = next(iter(fresh.sample(n_obs)))
        len(request["splits"][0])
        first_dict.append(float(time.perf_counter_ns() - start))

        start = time.perf_counter_ns()
        fresh = make_sampler(args, mode, rep)
        arrays = next(iter(fresh.sample_arrays(n_obs)))
        int(arrays.offsets[1])
        first_arrays.append(float(time.perf_counter_ns() - start))

        start = time.perf_counter_ns()
        request = next(iter(fresh.sample(n_obs)))
        len(request["splits"][0])
        first_sample.append(float(time.perf_counter_ns() - start))
    result["first_ns"] = {"dict": first_dict, "arrays": first_arrays, "sample_only": first_sample}
    print(json.dumps(result))


# --- the C++ figures -----------------------------------------------------------------------------


def run_checked(command: list[str]) -> str:
    """The command's stdout; its stderr and exit status if it fails."""
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"bench_python: {' '.join(command)} failed ({run.returncode}):\n{run.stderr}")
    return run.stdout


def cxx_epoch(path: str, args: argparse.Namespace, mode: str, n_obs: int, reps: int) -> dict[str, Any]:
    """The helper's epochs and first batches at this script's configuration."""
    command = [path, mode, str(n_obs), str(reps), str(args.chunk), str(args.preload), str(args.batch), str(args.world)]
    data = json.loads(run_checked(command))
    return {"positions": data["positions"], "epoch_ns": data["epoch_ns"], "first_ns": data["first_ns"]}


def cxx_bench(path: str, args: argparse.Namespace, sizes: list[int]) -> dict[tuple[str, int], dict[str, Any]]:
    """chunksampler_bench's epochs and first batches of both chunksampler modes. Its table names the
    configuration; a run whose configuration differs from this script's is refused."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "bench.json")
        command = [
            path,
            "--sizes",
            ",".join(str(n) for n in sizes),
            "--benchmark_filter=^(epoch|first)/chunksampler (contiguous|global)/",
            f"--benchmark_out={out_json}",
            # Its repetitions of a tenth of a second, not half: this script makes several rounds.
            "--benchmark_min_time=0.1",
            "--benchmark_out_format=json",
        ]
        if args.smoke:
            command.append("--once")
        # Exit status 1 is expected: the filter leaves the table's other cells empty.
        run = subprocess.run(command, capture_output=True, text=True)
        header = re.search(r"chunk (\d+), preload (\d+)", run.stdout)
        if header is None or not os.path.exists(out_json):
            raise SystemExit(f"bench_python: {path} printed no table:\n{run.stdout}{run.stderr[-2000:]}")
        chunk, preload = map(int, header.groups())
        if (chunk, preload) != (args.chunk, args.preload):
            raise SystemExit(
                f"bench_python: chunksampler_bench measures chunk {chunk}, preload {preload}; run with "
                f"--chunk {chunk} --preload {preload}, or use --cxx-epoch for chunk {args.chunk}, preload {args.preload}"
            )
        with open(out_json) as f:
            runs = json.load(f)["benchmarks"]
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    found: dict[tuple[str, int], dict[str, Any]] = {}
    by_name = {size_name(n): n for n in sizes}
    for run in runs:
        if run.get("run_type") != "iteration" or run.get("error_occurred"):
            continue
        what, workload, size = run["name"].split("/")[:3]
        mode = workload.removeprefix("chunksampler ")
        cell = found.setdefault((mode, by_name[size]), {"positions": 0, "epoch_ns": [], "first_ns": []})
        cell[f"{what}_ns"].append(run["real_time"] * scale[run["time_unit"]])
        if what == "epoch":
            cell["positions"] = int(run["positions"])
    return found


# --- the machine ---------------------------------------------------------------------------------


def cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def process_cpu() -> dict[int, tuple[str, int]]:
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        out[int(pid)] = (name, int(fields[11]) + int(fields[12]))
    return out


def machine_load(window: float = 0.5) -> tuple[float, str]:
    """How many cores were busy over ``window`` seconds (this process sleeps meanwhile), and by whom."""
    total0, idle0 = cpu_times()
    procs0 = process_cpu()
    time.sleep(window)
    total1, idle1 = cpu_times()
    procs1 = process_cpu()
    busy = 1 - (idle1 - idle0) / max(1, total1 - total0)
    ticks = os.sysconf("SC_CLK_TCK") * window
    # By name, so that a build's many short compiler processes add up (those that ended inside
    # the window are missed: the cores' total above still counts them).
    shares: dict[str, float] = {}
    for pid, (name, t) in procs1.items():
        if pid != os.getpid():
            shares[name] = shares.get(name, 0.0) + (t - procs0.get(pid, (name, 0))[1]) / ticks
    users = sorted(((share, name) for name, share in shares.items() if share >= 0.05), reverse=True)
    top = ", ".join(f"{name} {share:.0%}" for share, name in users[:4])
    load = open("/proc/loadavg").read().split()[:3]
    cores = busy * (os.cpu_count() or 1)
    return cores, f"load {' '.join(load)}{'; ' + top if top else ''}"


def cpu_model() -> str:
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


# --- the parent ----------------------------------------------------------------------------------


def run_child(args: argparse.Namespace, mode: str, n_obs: int, reps: int, memory_path: str, memory_only: bool) -> dict:
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child-mode",
        mode,
        "--child-n",
        str(n_obs),
        "--memory-path",
        memory_path,
        "--reps",
        str(reps),
        "--chunk",
        str(args.chunk),
        "--preload",
        str(args.preload),
        "--batch",
        str(args.batch),
        "--world",
        str(args.world),
    ]
    if memory_only:
        command.append("--memory-only")
    return json.loads(run_checked(command))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1e6,1e7,1e8,1e9", help="N, comma-separated (1e6, 10^6 or 1000000)")
    parser.add_argument("--modes", default="contiguous,global")
    parser.add_argument("--rounds", type=int, default=5, help="passes over all (N, mode), C++ and Python in each")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per round (default 3 up to 10^7, then 1)")
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--preload", type=int, default=32)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument("--cxx-epoch", metavar="PATH", help="the cxx_epoch helper: the C++ figure at any configuration")
    parser.add_argument("--cxx-bench", metavar="PATH", help="chunksampler_bench: the C++ figure at its configuration")
    parser.add_argument("--smoke", action="store_true", help="N = 10^5, one repetition: checks the script works")
    parser.add_argument("--json", metavar="FILE", help="write every repetition here")
    parser.add_argument("--annbatch", action="store_true",
                        help="sample() beside annbatch 0.3.1's in one process (needs annbatch, Python 3.12)")
    parser.add_argument("--child-mode", help=argparse.SUPPRESS)
    parser.add_argument("--child-n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--memory-path", choices=PATHS, default="dict", help=argparse.SUPPRESS)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_mode:
        child(args)
        return 0
    if args.cxx_epoch and args.cxx_bench:
        parser.error("give one of --cxx-epoch and --cxx-bench")

    sizes = [10**5] if args.smoke else [parse_size(s) for s in args.sizes.split(",")]
    if args.annbatch:
        return versus_annbatch(args, sizes)
    modes = args.modes.split(",")

    rounds = 1 if args.smoke else args.rounds

    def reps_at(n: int) -> int:
        if args.smoke:
            return 1
        return args.reps or (3 if n <= 10**7 else 1)

    import numpy

    import chunksampler

    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    # Other processes come and go (a build next door takes a core for seconds at a time), so the
    # run makes several rounds over every (N, mode), C++ beside Python in each, and keeps the best
    # of all: each figure needs one quiet moment, not a quiet run. Between rounds this process
    # sleeps half a second and notes how busy the cores were without it.
    loads: list[tuple[float, str]] = []
    cxx: dict[tuple[str, int], dict[str, Any]] = {}
    results: dict[tuple[str, int], dict[str, Any]] = {}
    source = "cxx_epoch" if args.cxx_epoch else "chunksampler_bench" if args.cxx_bench else "–"
    started = time.time()

    def merge(into: dict[str, Any], new: dict[str, Any]) -> None:
        for key, value in new.items():
            if isinstance(value, list):
                into.setdefault(key, []).extend(value)
            elif isinstance(value, dict):
                merge(into.setdefault(key, {}), value)
            elif key.endswith("_bytes"):
                into[key] = max(into.get(key, 0), value)  # the worst of the rounds' fresh processes
            else:
                into[key] = value

    for round_ in range(rounds):
        loads.append(machine_load())
        log(f"round {round_ + 1} of {rounds}; {loads[-1][0]:.1f} cores busy, {loads[-1][1]}")
        if args.cxx_bench:
            for key, value in cxx_bench(args.cxx_bench, args, sizes).items():
                merge(cxx.setdefault(key, {}), value)
        for n_obs in sizes:
            for mode in modes:
                log(f"  {mode} at N = {size_name(n_obs)}")
                if args.cxx_epoch:
                    merge(cxx.setdefault((mode, n_obs), {}), cxx_epoch(args.cxx_epoch, args, mode, n_obs, reps_at(n_obs)))
                result = run_child(args, mode, n_obs, reps_at(n_obs), "dict", memory_only=False)
                result["memory_arrays"] = run_child(args, mode, n_obs, 1, "arrays", memory_only=True)["memory"]
                merge(results.setdefault((mode, n_obs), {}), result)
    loads.append(machine_load())
    log(f"after the run ({time.time() - started:.0f} s); {loads[-1][0]:.1f} cores busy, {loads[-1][1]}")
    quiet, busy = min(loads), max(loads)

    # --- checks: both paths and C++ agree on the indices of an epoch --------------------------
    failures = []
    for (mode, n_obs), r in results.items():
        counts = {v: r["indices"][v] for v in ("dict", "dict_sum", "arrays", "arrays_sum")}
        if len(set(counts.values())) != 1 or counts["dict"] <= 0:
            failures.append(f"{mode} N={n_obs}: the paths yield different indices: {counts}")
        if r["n_batches"] * args.batch < counts["dict"]:
            failures.append(f"{mode} N={n_obs}: {counts['dict']} indices in {r['n_batches']} batches")
        c = cxx.get((mode, n_obs))
        if c and c["positions"] != counts["dict"]:
            failures.append(f"{mode} N={n_obs}: C++ yields {c['positions']} indices, Python {counts['dict']}")

    # --- the tables ---------------------------------------------------------------------------
    def per_index(r: dict, variant: str, f: Any = min) -> float:
        return f(r["times_ns"][variant]) / r["indices"]["dict"]

    print(
        f"Rank 0 of {args.world}, RandomSampler(chunk_size={args.chunk}, preload_nchunks={args.preload}, "
        f"batch_size={args.batch}); {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"numpy {numpy.__version__}, chunksampler {chunksampler.__version__}; C++ from {source}. "
        f"Best of {'/'.join(str(rounds * reps_at(n)) for n in sizes)} repetitions at N = "
        f"{', '.join(map(size_name, sizes))}, in {rounds} rounds. Other processes between rounds: "
        f"{quiet[0]:.1f} to {busy[0]:.1f} of {os.cpu_count()} cores busy ({busy[1]}).\n"
    )
    print(
        "| mode | N | C++ ns/index | dict ns/index (× C++) | arrays ns/index (× C++) | first request (C++ first batch) "
        "| peak RSS Δ dict / arrays |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n_obs in sizes:
        for mode in modes:
            r = results[(mode, n_obs)]
            c = cxx.get((mode, n_obs))
            c_ns = min(c["epoch_ns"]) / c["positions"] if c and c["epoch_ns"] else None
            cells = []
            for path in PATHS:
                ns = per_index(r, path)
                cells.append(f"{ns:.2f} ({ns / c_ns:.2f}×)" if c_ns else f"{ns:.2f}")
            first = duration(min(r["first_ns"]["dict"]))
            if c and c["first_ns"]:
                first += f" ({duration(min(c['first_ns']))})"
            memory = f"{kib(r['memory']['peak_growth_bytes'])} / {kib(r['memory_arrays']['peak_growth_bytes'])}"
            print(
                f"| {mode} | {size_name(n_obs)} | {f'{c_ns:.2f}' if c_ns else '–'} | {cells[0]} | {cells[1]} "
                f"| {first} | {memory} |"
            )

    print("\nWhere the time goes: ns per index of each loop body (best; median/best − 1 in brackets).\n")
    print(
        "| mode | N | dict, empty body | dict, len(split) | dict, split.sum() | arrays, empty body "
        "| arrays, offsets[-1] | arrays, positions.sum() | sample() to first request |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n_obs in sizes:
        for mode in modes:
            r = results[(mode, n_obs)]
            cells = []
            for v in VARIANTS:
                best, median = per_index(r, v), per_index(r, v, statistics.median)
                cells.append(f"{best:.2f} (+{median / best - 1:.0%})")
            print(
                f"| {mode} | {size_name(n_obs)} | {' | '.join(cells)} | {duration(min(r['first_ns']['sample_only']))} |"
            )

    # --- the targets ------------------------------------------------------------------
    def worst(path: str) -> tuple[float, str]:
        return max(
            (per_index(r, path) / (min(cxx[k]["epoch_ns"]) / cxx[k]["positions"]), f"{k[0]} {size_name(k[1])}")
            for k, r in results.items()
            if cxx.get(k, {}).get("epoch_ns")
        )

    verdict = {True: "met", False: "MISSED"}
    print("\nTargets:")
    if cxx:
        for path, bound in (("dict", 2.0), ("arrays", 1.2)):
            ratio, where = worst(path)
            print(f"- {path} path within {bound}× the C++ loop: worst {ratio:.2f}× ({where}): {verdict[ratio <= bound]}")
    largest = max(sizes)
    first = max(min(results[(m, largest)]["first_ns"]["dict"]) for m in modes)
    print(f"- first request under 1 ms at N = {size_name(largest)}: {duration(first)}: {verdict[first < 1e6]}")
    peaks = [r[key]["peak_growth_bytes"] for r in results.values() for key in ("memory", "memory_arrays")]
    # Flat: nothing that grows with N (rank 0's positions at 10^9 would be 1 GB), so the spread
    # over all N stays within what allocator noise makes of a few request buffers.
    flat = max(peaks) - min(peaks) < 1 << 20
    print(f"- memory flat in N: peak growth {kib(min(peaks))} to {kib(max(peaks))} over N = "
          f"{size_name(min(sizes))} ... {size_name(largest)}: {verdict[flat]}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "config": vars(args),
                    "machine": {"cpu": cpu_model(), "between_rounds": [text for _, text in loads]},
                    "python": {f"{m} {n}": r for (m, n), r in results.items()},
                    "cxx": {f"{m} {n}": c for (m, n), c in cxx.items()},
                },
                f,
                indent=1,
            )
    for failure in failures:
        print(f"bench_python: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
