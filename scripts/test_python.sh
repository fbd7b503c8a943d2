#!/usr/bin/env bash
# The Python package's stage of the CI: builds the wheel (pip wheel .), installs it into a fresh
# virtual environment and runs tests/python there, from outside the source tree, so what is
# tested is the installed package. About a minute on 2 cores, most of it the compile.
#   scripts/test_python.sh [PYTEST_ARGS...]   e.g. -k mask, -x, -v
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/deps.sh
ensure_build_packages
# Debian's Python with numpy, and what the tests use beside the package: PyTorch (the
# DataLoader and torchrun tests), pandas (ClassSampler's categoricals), h5py and AnnData (the
# training example's .h5ad). The build tools and pytest come from the Python package index.
ensure_packages python3-venv python3-numpy python3-dev python3-pip python3-torch python3-pandas python3-h5py \
  python3-anndata

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The build environment: Debian's python3 (its numpy), plus the build backend and nanobind.
/usr/bin/python3 -m venv --system-site-packages "$work/build-env"
"$work/build-env/bin/pip" install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0"
"$work/build-env/bin/pip" wheel "$root" --wheel-dir "$work/wheels" --no-deps --no-build-isolation \
  --disable-pip-version-check --config-settings=cmake.define.CHUNKSAMPLER_WERROR=ON \
  --config-settings=build-dir="$work/build"

# A fresh environment with nothing but the wheel (numpy from Debian) and the test tools.
/usr/bin/python3 -m venv --system-site-packages "$work/test-env"
"$work/test-env/bin/pip" install --quiet --disable-pip-version-check "$work"/wheels/chunksampler-*.whl pytest hypothesis

# The C++ oracle tests/python/test_oracle.py compares the Python samplers' requests with: the same
# headers, driven from C++ (Release, warnings as errors).
cmake -S "$root/tests/python/oracle" -B "$work/oracle" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/oracle" -j "$(nproc)" >/dev/null
export CHUNKSAMPLER_PLAN_DUMP="$work/oracle/chunksampler_plan_dump"

# From a directory outside the tree, so `import chunksampler` finds the installed package.
cd "$work"
"$work/test-env/bin/python" -m pytest -p no:cacheprovider -q "$root/tests/python" "$@"
