#!/usr/bin/env bash
# Formats our C++ sources (every .hpp/.cpp under include/, tests/, examples/, benchmarks/ and
# python/src/ that git tracks or would track, so never build/ or the fuzz corpus) with the root .clang-format.
#   scripts/format.sh            # rewrites the files in place
#   scripts/format.sh --check    # changes nothing; prints each misformatted line, fails if any
# Pinned to clang-format 19 (Debian's clang-format-19): each version lays some code out differently,
# and 14, Debian's default, garbles a concept of sampler.hpp and the requires-clauses.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

mode=(-i)
case "${1:-}" in
  "") ;;
  --check) mode=(--dry-run -Werror) ;;
  -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac

source "$root/scripts/deps.sh"
ensure_packages clang-format-19
cd "$root"
# Tracked files and new ones not yet added (never ignored ones), that still exist.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  'include/*.hpp' 'tests/*.hpp' 'tests/*.cpp' 'examples/*.hpp' 'examples/*.cpp' 'benchmarks/*.hpp' 'benchmarks/*.cpp' 'python/src/*.hpp' 'python/src/*.cpp' |
  sort -u | while read -r file; do [ -f "$file" ] && echo "$file"; done)
[ ${#files[@]} -gt 0 ] || { echo "no sources found under $root" >&2; exit 1; }
clang-format-19 --style=file "${mode[@]}" "${files[@]}"
