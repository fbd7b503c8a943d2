#!/usr/bin/env bash
# Regenerates the pictures in docs/: the shard planner (Release) draws one small job under each
# shard mode and remainder policy, 3 epochs of 4 ranks over 950 observations (chunk 25, preload 2,
# batch 25), a size that leaves 50 observations over so that each policy shows what it does.
# Every run also checks its plan; the script stops at the first that fails.
#   scripts/pictures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
planner="$(build_planner "$root")"

mkdir -p "$root/docs"
job=(--n-obs 950 --world-size 4 --chunk-size 25 --preload 2 --batch-size 25 --epochs 3)
for picture in contiguous-drop contiguous-pad contiguous-rotate global-drop; do
  mode="${picture%-*}"
  remainder="${picture#*-}"
  if ! report="$("$planner" "${job[@]}" --mode "$mode" --remainder "$remainder" --svg "$root/docs/$picture.svg" 2>&1)"; then
    echo "$report" >&2
    exit 1
  fi
  echo "docs/$picture.svg ($(wc -c <"$root/docs/$picture.svg") bytes)"
done
