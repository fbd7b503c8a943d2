#!/usr/bin/env bash
# Regenerates the pictures in docs/images/: the shard planner (Release) draws one small job under each
# shard mode and remainder policy, 3 epochs of 4 ranks over 950 observations (chunk 25, preload 2,
# batch 25), a size that leaves 50 observations over so that each policy shows what it does, and
# the same job over a mask of three ranges, two of them off the 25-row storage grid.
# Every run also checks its plan; the script stops at the first that fails.
#   scripts/pictures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
planner="$(build_planner "$root")"

mkdir -p "$root/docs/images"
job=(--n-obs 950 --world-size 4 --chunk-size 25 --preload 2 --batch-size 25 --epochs 3)
# draw NAME ARGS...: docs/images/NAME.svg of the job with ARGS, or the planner's report and exit 1.
draw() {
  local picture="$1" report
  shift
  if ! report="$("$planner" "${job[@]}" "$@" --svg "$root/docs/images/$picture.svg" 2>&1)"; then
    echo "$report" >&2
    exit 1
  fi
  echo "docs/images/$picture.svg ($(wc -c <"$root/docs/images/$picture.svg") bytes)"
}
for picture in contiguous-drop contiguous-pad contiguous-rotate global-drop; do
  draw "$picture" --mode "${picture%-*}" --remainder "${picture#*-}"
done
draw ranges-contiguous-drop --mask 0:180,260:530,610: --mode contiguous --remainder drop
