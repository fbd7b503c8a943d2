#!/usr/bin/env bash
# The random and sequential distributed epoch's cost per position, built from other revisions'
# headers beside the working tree's and run in turn (benchmarks/versions/epoch.cpp, compiled as
# chunksampler_bench is: -O3, functions and loops on 64-byte boundaries). For each revision, mode
# and N it prints the median over pairs of (the revision's ns per position / the working tree's),
# each pair measured back to back, so the machine's drift falls on both.
#   scripts/bench_versions.sh                          # HEAD against the working tree: check a change before committing it
#   scripts/bench_versions.sh d94b539 3496ada HEAD     # 0.2, 0.3 and HEAD against the working tree
#   scripts/bench_versions.sh --sizes 1e7 --pairs 9 HEAD
# A ratio above 1 is a revision slower than the working tree. Each run of one build walks
# --epochs epochs (default 3; more at small N, 2 * 10^7 positions at least) after a warm one and
# reports their median.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages

sizes="1e6,1e7,1e8,1e9"
pairs=9
epochs=3
modes="contiguous global sequential"
revisions=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_versions.sh: unknown option $1" >&2; exit 2 ;;
    *) revisions+=("$1"); shift ;;
  esac
done
[ ${#revisions[@]} -gt 0 ] || revisions=(HEAD)

out="$root/build/bench-versions"
mkdir -p "$out"
build() {  # build NAME INCLUDE_DIR
  g++ -std=c++20 -O3 -DNDEBUG -falign-functions=64 -falign-loops=64 -I"$2" \
    "$root/benchmarks/versions/epoch.cpp" -o "$out/$1/epoch" -lfmt
}
mkdir -p "$out/tree"
build tree "$root/include"
names=()
for rev in "${revisions[@]}"; do
  commit="$(git -C "$root" rev-parse --short "$rev^{commit}")"
  mkdir -p "$out/$commit"
  rm -rf "$out/$commit/include"
  git -C "$root" archive "$commit" include | tar -x -C "$out/$commit"
  build "$commit" "$out/$commit/include"
  names+=("$commit")
done

# "1e7" -> 10000000
expand() { python3 -c "import sys; print(int(float(sys.argv[1])))" "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

header="| mode | N | working tree ns/position |"
rule="| --- | ---: | ---: |"
for i in "${!revisions[@]}"; do
  header+=" ${revisions[$i]} (${names[$i]}) ns/position | × working tree |"
  rule+=" ---: | ---: |"
done
echo "$header"
echo "$rule"
IFS=, read -r -a size_list <<<"$sizes"
for size in "${size_list[@]}"; do
  n="$(expand "$size")"
  # At least 2 * 10^7 positions a run (a rank walks N / 8 an epoch), so a small N's run is not
  # the process's start-up.
  runs="$(python3 -c "import sys; print(max(int(sys.argv[1]), round(2e7 / (int(sys.argv[2]) / 8))))" "$epochs" "$n")"
  for mode in $modes; do
    declare -A ratios=() times=()
    tree_times=""
    for ((p = 0; p < pairs; p++)); do
      for name in "${names[@]}"; do
        # In turn first and second, so that neither build always runs in the other's wake.
        if (( p % 2 == 0 )); then
          t="$("$out/tree/epoch" "$mode" "$n" "$runs")"; r="$("$out/$name/epoch" "$mode" "$n" "$runs")"
        else
          r="$("$out/$name/epoch" "$mode" "$n" "$runs")"; t="$("$out/tree/epoch" "$mode" "$n" "$runs")"
        fi
        tree_times+="$t"$'\n'
        times[$name]+="$r"$'\n'
        ratios[$name]+="$(awk -v r="$r" -v t="$t" 'BEGIN { printf "%.6f", r / t }')"$'\n'
      done
    done
    row="| $mode | $size | $(printf '%s' "$tree_times" | median | xargs printf '%.2f') |"
    for name in "${names[@]}"; do
      row+=" $(printf '%s' "${times[$name]}" | median | xargs printf '%.2f') | $(printf '%s' "${ratios[$name]}" | median | xargs printf '%.3f') |"
    done
    echo "$row"
    unset ratios times
  done
done
