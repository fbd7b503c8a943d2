# SPDX-License-Identifier: MIT
"""chunksampler's ClassSampler and WeightedClassSampler beside annbatch 0.3.1's, in one process.

For each layout of classes (10, 1,000 and 100,000 classes in runs of ``chunk_size`` rows, run j
of class j mod C; and 1,000 classes of Zipf-distributed sizes), each sampler is built from the
same ``pandas.Categorical`` with the same keywords (chunk 256, preload 64, batches of 256,
``num_samples`` = N; the weighted samplers weigh class c by 1 / (c + 1)), and a whole epoch of
``sample(N)`` is walked, every split of every request visited (``n += len(split)``). Best of
``--repeats`` epochs, the two libraries in turn; construction is timed apart.

    python benchmarks/python/bench_class.py                       # N = 10^6 and 10^7
    python benchmarks/python/bench_class.py --sizes 1e6 --repeats 3
    python benchmarks/python/bench_class.py --smoke               # N = 10^5, once: checks it runs

It needs annbatch 0.3.1 (Python 3.12), pandas and chunksampler installed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

CHUNK, PRELOAD, BATCH = 256, 64, 256


def layout_codes(n: int, classes: int, zipf: bool) -> pd.Categorical:
    runs = n // CHUNK
    if zipf:
        shares = 1.0 / np.arange(1, classes + 1)
        rng = np.random.default_rng(42)
        run_class = rng.choice(classes, size=runs, p=shares / shares.sum())
    else:
        run_class = np.arange(runs) % classes
    codes = np.repeat(run_class, CHUNK)
    codes = np.concatenate([codes, np.full(n - codes.size, run_class[-1])])
    dtype = np.int8 if classes <= 127 else np.int16 if classes <= 32767 else np.int32
    return pd.Categorical.from_codes(codes.astype(dtype), categories=[f"c{c}" for c in range(classes)])


def walk(sampler, n: int) -> int:
    total = 0
    for request in sampler.sample(n):
        for split in request["splits"]:
            total += len(split)
    return total


def timed(make, n: int, repeats: int):
    start = time.perf_counter()
    sampler = make()
    built = time.perf_counter() - start
    best = float("inf")
    positions = 0
    for _ in range(repeats):
        start = time.perf_counter()
        positions = walk(sampler, n)
        best = min(best, time.perf_counter() - start)
    return built, best, positions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1e6,1e7")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import annbatch.samplers as ab
    import chunksampler as cs

    sizes = [100_000] if args.smoke else [int(float(s)) for s in args.sizes.split(",")]
    repeats = 1 if args.smoke else args.repeats
    layouts = [(10, False), (1_000, False), (100_000, False), (1_000, True)]
    print("| sampler | classes | N | annbatch ns/position | chunksampler ns/position | speed-up | "
          "annbatch built in | chunksampler built in |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in sizes:
        for classes, zipf in layouts:
            if classes * CHUNK > n and not args.smoke:
                continue  # fewer runs than classes: not the layout the row names
            codes = layout_codes(n, classes, zipf)
            weights = 1.0 / np.arange(1, classes + 1)
            common = dict(classes=codes, num_samples=n)
            kinds = {
                "ClassSampler": ("ClassSampler", {}),
                "WeightedClassSampler": ("WeightedClassSampler", {"class_weights": weights}),
            }
            for name, (attr, extra) in kinds.items():
                results = {}
                # In turn, ours second then first, so neither always runs in the other's wake.
                order = [("annbatch", ab), ("chunksampler", cs)]
                for library, module in order if n % 2 == 0 else reversed(order):
                    rng = np.random.default_rng(0)
                    results[library] = timed(
                        lambda m=module: getattr(m, attr)(CHUNK, PRELOAD, BATCH, rng=rng, **common, **extra),
                        n, repeats)
                a_built, a_best, a_pos = results["annbatch"]
                c_built, c_best, c_pos = results["chunksampler"]
                if not a_pos == c_pos == n:
                    raise SystemExit(f"{name}, {classes} classes: epochs of {a_pos} and {c_pos} positions, not {n}")
                label = f"{classes:,}" + (" (Zipf)" if zipf else "")
                print(f"| {name} | {label} | {n:.0e} | {a_best / a_pos * 1e9:.1f} | {c_best / c_pos * 1e9:.1f} | "
                      f"{a_best / c_best:.1f}x | {a_built * 1e3:.1f} ms | {c_built * 1e3:.1f} ms |", flush=True)


if __name__ == "__main__":
    main()
