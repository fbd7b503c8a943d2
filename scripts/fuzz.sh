#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, AddressSanitizer and UBSan) and runs
# each for a while from a fresh working corpus seeded with the committed one
# (tests/fuzz/corpus/<target>), then prints per target the inputs it ran and whether it failed.
#   scripts/fuzz.sh                  # 120 s per target, one after the other
#   scripts/fuzz.sh --seconds 30     # a quicker look
# A failing input is left in build/fuzz/long/<target>/artifacts/: run the target on it to see the
# report again (CHUNKSAMPLER_FUZZ_SHOW=1 also prints the configuration each input decodes to),
# then add it to tests/fuzz/corpus/<target>/, which stays small (under 100 files in all).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

seconds=120
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

source "$root/scripts/deps.sh"
ensure_build_packages
ensure_packages "${fuzz_packages[@]}"
cmake --preset fuzz -S "$root" >/dev/null
cmake --build "$root/build/fuzz" -j "$(nproc)" >/dev/null

status=0
for target in fuzz_config fuzz_state fuzz_resume; do
  work="$root/build/fuzz/long/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$root/tests/fuzz/corpus/$target/"* "$work/corpus/"
  log="$work/fuzz.log"
  result=ok
  UBSAN_OPTIONS=print_stacktrace=1 "$root/build/fuzz/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$log" 2>&1 ||
    result=FAILED
  # libFuzzer's final statistics; a crash may cut them short, then its last progress line counts.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
  printf '%-12s %12s executions in %s s  %s\n' "$target" "${execs:-?}" "$seconds" "$result"
  if [ "$result" != ok ]; then
    status=1
    grep -E 'fuzz property broken|^  input: |runtime error|ERROR:|SUMMARY:' "$log" | head -n 8 | sed 's/^/    /'
    echo "    input: $(find "$work/artifacts" -type f | head -n 1); log: $log"
  fi
done
exit "$status"
