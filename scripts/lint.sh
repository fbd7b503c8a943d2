#!/usr/bin/env bash
# Lints the C++ sources: their layout against .clang-format (scripts/format.sh --check), then
# clang-tidy with .clang-tidy over the example programs and translation units that together
# include every public header: the dev build's TUs of the umbrella <chunksampler.hpp>, of
# <chunksampler/checkpoint.hpp> and of <chunksampler/torch.hpp> (libtorch-dev), and the MPI tests'
# main, which includes <chunksampler/mpi.hpp>. The examples leave one slow check out
# (examples/.clang-tidy says which and why); those TUs hold every check for the library's headers.
# It configures the dev build for its compile_commands.json but builds nothing. About 3 minutes
# on 2 cores.
#   scripts/lint.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages
ensure_packages "${lint_packages[@]}"

status=0
echo "lint: clang-format" >&2
if ! report="$("$root/scripts/format.sh" --check 2>&1)"; then
  # clang-format quotes every misformatted line; one line per file says where they start instead.
  violations="$(sed -n 's/^\([^ ]*\):\([0-9]*\):[0-9]*: error: code should be clang-formatted.*/\1 \2/p' <<<"$report")"
  if [ -n "$violations" ]; then
    awk '!seen[$0]++ { if (!($1 in n)) { order[++files] = $1; first[$1] = $2 } n[$1]++ }
         END { for (i = 1; i <= files; i++) printf "%s:%s: %d place%s to reformat\n", order[i], first[order[i]], n[order[i]], n[order[i]] == 1 ? "" : "s" }' \
      <<<"$violations" >&2
    echo "lint: not laid out as .clang-format says; scripts/format.sh rewrites them (git diff shows how)" >&2
  else
    echo "$report" >&2
  fi
  status=1
fi

echo "lint: clang-tidy" >&2
build="$root/build/dev"
cmake --preset dev -S "$root" -DCHUNKSAMPLER_REQUIRE_MPI=ON >/dev/null
# run-clang-tidy takes regular expressions: the root's own characters match literally.
quoted_root="$(printf '%s' "$root" | sed 's/[][\.*^$+?(){}|]/\\&/g')"
units="^$quoted_root/(examples/.*|build/dev/tests/headers/chunksampler_(checkpoint_|torch_)?hpp|tests/mpi/main)\\.cpp\$"
# clang 19 reads GCC 12's libstdc++, whose std::stable_sort calls the deprecated
# get_temporary_buffer inside the system header; GCC's own builds still report our deprecated uses.
if ! run-clang-tidy-19 -p "$build" -j 2 -quiet -extra-arg=-Wno-deprecated-declarations "$units"; then
  echo "lint: clang-tidy found the problems above (.clang-tidy says which checks run)" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "lint: clean" >&2
exit "$status"
