#!/usr/bin/env bash
# Builds the benchmarks in Release and prints chunksampler beside libtorch's
# DistributedRandomSampler and the shuffle floor as one Markdown table (progress on stderr).
#   scripts/bench.sh                        # N = 10^6 ... 10^9, and 10^12 for chunksampler alone
#   scripts/bench.sh --sizes 1e6,1e7        # a quicker look
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages
ensure_packages libbenchmark-dev libtorch-dev
cmake --preset bench -S "$root" >/dev/null
cmake --build "$root/build/bench" --target chunksampler_bench -j "$(nproc)" >/dev/null
exec "$root/build/bench/benchmarks/chunksampler_bench" "$@"
