#!/usr/bin/env bash
# Builds and runs every test: the suite in a Debug build (with the MPI tests and both CMake
# consumers), then the suite again under AddressSanitizer and UndefinedBehaviorSanitizer.
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_build_packages
# The multi-process jobs: mpirun, torchrun, HDF5 and AnnData (for the .h5ad fixture).
ensure_packages catch2 libopenmpi-dev openmpi-bin python3-torch libhdf5-dev python3-anndata
# The benchmarks, built and run once on a tiny N, beside their libtorch peer.
ensure_packages libbenchmark-dev libtorch-dev

jobs=$(nproc)
cmake --preset dev -DCHUNKSAMPLER_REQUIRE_MPI=ON
cmake --build --preset dev -j "$jobs"
ctest --preset dev -j "$jobs"

cmake --preset sanitize -DCHUNKSAMPLER_REQUIRE_MPI=ON -DCHUNKSAMPLER_TEST_CONSUMERS=OFF -DCHUNKSAMPLER_BUILD_BENCHMARKS=OFF
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"
