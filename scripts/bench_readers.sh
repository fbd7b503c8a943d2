#!/usr/bin/env bash
# Loaders that read a chunked store, side by side (benchmarks/python/bench_readers.py): rows per
# second and chunk reads per epoch of chunksampler's torch ChunkDataLoader and Grain ChunkDataset,
# annbatch 0.3.1's Loader and scDataset 0.3, beside the store's floor, on four stores (annbatch's
# dense sharded, a plain zarr v3 array, annbatch's CSR, a backed h5ad). Runs in a fresh environment
# over the training stacks' (scripts/deps.sh: torch, Grain, annbatch, zarrs) with this repository's
# wheel and scdataset, which only this benchmark needs; everything lives in build/bench-readers/.
#   scripts/bench_readers.sh                                       # the performance page's tables (~25 minutes on 2 cores)
#   scripts/bench_readers.sh --pipeline zarr                       # under zarr-python's own codec pipeline
#   scripts/bench_readers.sh --cache build/bench-readers/stores    # the stores kept and reused
#   scripts/bench_readers.sh --smoke                               # 4,096 rows, once: checks it works
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages
out="$root/build/bench-readers"
stacks=$(ensure_stacks_env "$root")
rm -rf "$out/wheels" "$out/env"
mkdir -p "$out"
build_wheel "$root" "$stacks" "$out/wheels" "$out/wheel-build"
thin_stacks_env "$stacks" "$out/env"
# scdataset is pinned here so that a new release cannot move the numbers.
"$out/env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input scdataset==0.3.0
"$out/env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps "$out"/wheels/chunksampler-*.whl
"$out/env/bin/python" "$root/benchmarks/python/bench_readers.py" "$@"
