#!/usr/bin/env bash
# Builds and runs every test: the suite in a plain Debug build (with the MPI and libtorch tests,
# both CMake consumers and the benchmarks), the Python package's tests (scripts/test_python.sh: with
# PyPI's torch 2 and its training stacks, and with Debian's Python and torch), annbatch's own sampler
# tests against it (scripts/test_annbatch.sh), the documentation site (scripts/docs.sh) and the lint
# (scripts/lint.sh), then the suite and the example programs with their multi-process jobs under
# AddressSanitizer and UndefinedBehaviorSanitizer, the threaded tests and examples under
# ThreadSanitizer, and the fuzz targets briefly. Each phase's time is printed as it ends
# ("test.sh: PHASE took Ns").
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
phase_start=$SECONDS
took() {
  echo "test.sh: $1 took $((SECONDS - phase_start))s (${SECONDS}s in all)" >&2
  phase_start=$SECONDS
}
# Every stage's Debian packages in one transaction (scripts/deps.sh names them): the builds and the
# example programs; the multi-process jobs (mpirun, torchrun, HDF5 and AnnData for the .h5ad
# fixture); the benchmarks, run once on a tiny N beside their libtorch peer; the Python stages, the
# documentation site, the lint and the fuzz targets.
ensure_packages "${build_packages[@]}" "${example_packages[@]}" catch2 libopenmpi-dev openmpi-bin python3-torch \
  libhdf5-dev python3-anndata libbenchmark-dev libtorch-dev "${python_test_packages[@]}" "${docs_packages[@]}" \
  "${lint_packages[@]}" "${fuzz_packages[@]}"
took "the Debian packages"

# The Python training stacks' environment (below) is a download of about 5 GB the first time on a
# machine: made in the background while the dev build compiles. ensure_stacks_env takes a lock, so
# the stage that needs it waits for this maker; if the maker failed, that stage tries again and
# reports why.
(ensure_stacks_env "$(pwd)" >/dev/null) &
stacks_maker=$!

# The suite in a plain Debug build (no sanitizer): the unit tests, the MPI and libtorch tests, the
# pages' C++ programs, each header compiled alone, both CMake consumers and the benchmarks. The
# example programs and their multi-process jobs are built and run under the sanitizers below (ASan
# + UBSan, then TSan), with the same warnings as errors; the suite runs again under ASan + UBSan.
# Its own build directory: build/dev stays the developer's (and the lint's) full dev preset.
jobs=$(nproc)
cmake --preset dev -B build/plain -DCHUNKSAMPLER_REQUIRE_MPI=ON -DCHUNKSAMPLER_BUILD_EXAMPLES=OFF
cmake --build build/plain -j "$jobs"
ctest --test-dir build/plain -j "$jobs" --output-on-failure --no-tests=error
took "the Debug build and its ctest"

# The Python package, built once for Python 3.12 into a wheel both stages below install. Its
# tests (tests/python) in a fresh virtual environment over PyPI's training stacks (torch 2,
# Lightning, torchdata, scvi-tools, JAX; made once per machine, in the background since the start),
# the integrations' multi-process jobs included, then on Debian's Python 3.11 and torch 1.13.
wait "$stacks_maker" || true
stacks=$(ensure_stacks_env "$(pwd)")
python_work=$(mktemp -d)
trap 'rm -rf "$python_work"' EXIT
build_wheel "$(pwd)" "$stacks" "$python_work/wheels" "$python_work/build"
export CHUNKSAMPLER_WHEEL_DIR="$python_work/wheels"
took "the stacks' environment and the wheel"
bash scripts/test_python.sh
took "the Python stages"
# annbatch 0.3.1's own sampler tests against the package, in Python 3.12 with the real annbatch
# (about a minute).
bash scripts/test_annbatch.sh
took "annbatch's sampler tests"
# The documentation site, built strictly (warnings and broken cross references fail), its API
# reference checked against the public names, and three pages opened in headless Chromium (about a
# minute). The pages' Python examples ran in the Python stages above (tests/python/test_readme.py,
# against this wheel, every stack installed): the build checks their blocks and excerpts without
# running them again.
CHUNKSAMPLER_DOCS_EXAMPLES_TESTED=1 bash scripts/docs.sh
unset CHUNKSAMPLER_WHEEL_DIR
took "the documentation site"

# clang-format and clang-tidy (about 4 minutes). A finding fails the run at its end, after the
# sanitizer and fuzz runs below have still had their say.
lint_status=0
bash scripts/lint.sh || lint_status=$?
took "the lint"

cmake --preset sanitize -DCHUNKSAMPLER_REQUIRE_MPI=ON -DCHUNKSAMPLER_TEST_CONSUMERS=OFF -DCHUNKSAMPLER_BUILD_BENCHMARKS=OFF
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"
took "the ASan + UBSan build and its ctest"

# Under ThreadSanitizer: what starts threads. The test files that do (the tsan preset's
# CHUNKSAMPLER_TEST_FILES), which check the thread-safety rules of docs/concepts/threads.md
# (tests/test_threads.cpp), the libtorch adapter's tests, and the example programs that do (its
# CHUNKSAMPLER_EXAMPLES: the chaos job's ranks, the libtorch trainer and its .h5ad fixture).
cmake --preset tsan -DCHUNKSAMPLER_REQUIRE_MPI=ON
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"
took "the TSan build and its ctest"

# The libFuzzer targets (tests/fuzz), built with clang under AddressSanitizer and UBSan, each run
# for 10 s from a copy of its committed corpus; scripts/fuzz.sh runs them for longer.
cmake --preset fuzz
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz
took "the fuzz targets"

if [ "$lint_status" -ne 0 ]; then
  echo "scripts/lint.sh failed (see its report above)" >&2
  exit "$lint_status"
fi
