#!/usr/bin/env bash
# The main job: builds the shard planner (Release) and runs it with the given options.
# With none it plans annbatch's multi-GPU tutorial case: 20,000 observations on 2 ranks,
# RandomSampler(chunk 64, preload 32, batch 256) => 39 batches per rank.
#   scripts/run.sh [--n-obs N --world-size W --chunk-size C --preload P --batch-size B ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
planner="$(build_planner "$root")"
exec "$planner" "$@"
