#!/usr/bin/env bash
# The Python package's cost per index beside the C++ loop's (benchmarks/python/bench_python.py):
# builds the C++ references in Release (benchmarks/python/cxx_epoch.cpp, and chunksampler_bench
# without the libtorch peer, whose memory probe would take minutes at 10^9) and the wheel into a
# virtual environment, all under build/bench-python/, then prints two Markdown tables from outside
# the tree: annbatch's configuration (chunk 64, preload 32) against cxx_epoch, and the C++
# benchmark's (chunk 256, preload 64) against chunksampler_bench itself.
#   scripts/bench_python.sh                     # N = 10^6 ... 10^9, about 5 minutes on 2 cores
#   scripts/bench_python.sh --sizes 1e6,1e7     # a quicker look
#   scripts/bench_python.sh --smoke             # N = 10^5, once: checks it works
#   PYTHON=/path/to/python scripts/bench_python.sh   # a Python with chunksampler installed: no wheel built
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages
ensure_packages libbenchmark-dev python3-venv python3-numpy python3-dev python3-pip
out="$root/build/bench-python"
mkdir -p "$out"

# The same flags as CMake's Release build of chunksampler_bench, its loops aligned as there.
g++ -std=c++20 -O3 -DNDEBUG -falign-functions=64 -falign-loops=64 -I"$root/include" "$root/benchmarks/python/cxx_epoch.cpp" -o "$out/cxx_epoch" -lfmt
cmake -S "$root" -B "$out/cmake" -DCMAKE_BUILD_TYPE=Release -DCHUNKSAMPLER_BUILD_TESTS=OFF \
  -DCHUNKSAMPLER_BUILD_EXAMPLES=OFF -DCHUNKSAMPLER_BUILD_BENCHMARKS=ON -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON >/dev/null
cmake --build "$out/cmake" --target chunksampler_bench -j "$(nproc)" >/dev/null

python="${PYTHON:-}"
if [ -z "$python" ]; then
  # Debian's python3 (its numpy), the build backend and nanobind; the build directory is kept,
  # so a second run recompiles only what changed.
  [ -x "$out/venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$out/venv"
  "$out/venv/bin/pip" install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0"
  rm -rf "$out/wheels"
  "$out/venv/bin/pip" wheel "$root" --quiet --wheel-dir "$out/wheels" --no-deps --no-build-isolation \
    --disable-pip-version-check --config-settings=build-dir="$out/wheel-build"
  "$out/venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$out"/wheels/chunksampler-*.whl
  python="$out/venv/bin/python"
fi

# From outside the tree, so that `import chunksampler` finds the installed package.
cd /tmp
"$python" "$root/benchmarks/python/bench_python.py" --cxx-epoch "$out/cxx_epoch" "$@"
echo
"$python" "$root/benchmarks/python/bench_python.py" --chunk 256 --preload 64 \
  --cxx-bench "$out/cmake/benchmarks/chunksampler_bench" "$@"
