#!/usr/bin/env bash
# Runs annbatch 0.3.1's own sampler tests (tests/test_sampler.py, tests/test_class_sampler.py of
# its sdist) against chunksampler, the drop-in claim checked by annbatch's tests rather than ours.
# In a temporary directory: builds our wheel for Python 3.12 (annbatch needs it), installs it with
# the real annbatch 0.3.1 and pytest into a fresh 3.12 virtual environment, downloads annbatch's
# sdist, rewrites the two files to import chunksampler's samplers (tests/annbatch/rewrite.py) and
# runs them with tests/annbatch/differences_plugin.py: the tests in tests/annbatch/differences.toml
# are strict xfails, everything else must pass; beside them tests/annbatch/test_drop_in.py, our own
# checks there (registration with annbatch.abc.Sampler, annbatch.Loader over our samplers), and the
# smoke run of the Loader benchmark (benchmarks/python/bench_loader.py --quick).
# Nothing of annbatch's is kept in this repository.
# On 2 cores: 45 to 60 s with pip's cache warm, about 90 s with it empty; pytest itself takes 7 to 14 s.
#   scripts/test_annbatch.sh [PYTEST_ARGS...]   e.g. -x, -k workers, -v
#   scripts/test_annbatch.sh --baseline          annbatch's tests on annbatch itself, unrewritten
#                                                (checks the environment, e.g. after new constraints)
# Python 3.12: $CHUNKSAMPLER_PYTHON312, else pyenv's 3.12, else python3.12 on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/deps.sh
ensure_build_packages

baseline=0
if [ "${1:-}" = "--baseline" ]; then
  baseline=1
  shift
fi

python312=$(find_python312)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip_quiet=(--quiet --disable-pip-version-check --no-input)
# Installs skip compiling every module to bytecode (half of the test environment's install time);
# the few modules the tests import compile as they load.
pip_install=(install "${pip_quiet[@]}" --no-compile)
version=0.3.1
SECONDS=0

# The test environment, set up in the background while the wheel compiles: annbatch (its
# dependencies at the versions in tests/annbatch/constraints.txt) and pytest, then annbatch's
# sdist, unpacked (--no-binary names annbatch alone: `:all:` would also build hatchling and every
# other build dependency of the sdist from source, five minutes without a cache). Its output goes
# to a log, shown if it fails; fd 3 still reaches stderr.
exec 3>&2
(
  "$python312" -m venv "$work/test-env"
  "$work/test-env/bin/pip" "${pip_install[@]}" --constraint "$root/tests/annbatch/constraints.txt" \
    "annbatch==$version" pytest
  "$work/test-env/bin/pip" download "${pip_quiet[@]}" --no-binary annbatch --no-deps --dest "$work/sdist" \
    "annbatch==$version"
  tar -xzf "$work/sdist/annbatch-$version.tar.gz" -C "$work"
  echo "test_annbatch.sh: annbatch $version, its dependencies and its sdist installed in ${SECONDS}s" >&3
) >"$work/test-env.log" 2>&1 &
test_env=$!

# Our wheel for 3.12: from $CHUNKSAMPLER_WHEEL_DIR (scripts/test.sh builds it once for this script
# and scripts/test_python.sh), else built here.
wheels="${CHUNKSAMPLER_WHEEL_DIR:-}"
if [ -z "$wheels" ]; then
  wheels="$work/wheels"
  "$python312" -m venv "$work/build-env"
  "$work/build-env/bin/pip" "${pip_install[@]}" "scikit-build-core>=0.10" "nanobind>=2.0"
  "$work/build-env/bin/pip" wheel "$root" "${pip_quiet[@]}" --wheel-dir "$wheels" --no-deps --no-build-isolation \
    --config-settings=cmake.define.CHUNKSAMPLER_WERROR=ON --config-settings=build-dir="$work/build"
  echo "test_annbatch.sh: wheel built in ${SECONDS}s" >&2
fi

if ! wait "$test_env"; then
  cat "$work/test-env.log" >&2
  echo "test_annbatch.sh: setting up the test environment failed (above)" >&2
  exit 1
fi
"$work/test-env/bin/pip" "${pip_install[@]}" --no-deps "$wheels"/chunksampler-*-cp312-*.whl
echo "test_annbatch.sh: environments ready in ${SECONDS}s" >&2

tests=(tests/test_sampler.py tests/test_class_sampler.py)
sdist="$work/annbatch-$version"
cd "$sdist"
# From the unpacked sdist, so annbatch's pytest configuration (warnings are errors) and its
# tests/conftest.py fixtures apply; `annbatch` and `chunksampler` are the installed packages.
status=0
if [ "$baseline" -eq 1 ]; then
  "$work/test-env/bin/python" -m pytest -p no:cacheprovider -q "${tests[@]}" "$@" || status=$?
else
  "$work/test-env/bin/python" "$root/tests/annbatch/rewrite.py" "$sdist"
  # Our own checks in this environment: registration and annbatch.Loader over our samplers.
  cp "$root/tests/annbatch/test_drop_in.py" tests/
  tests+=(tests/test_drop_in.py)
  PYTHONPATH="$root/tests/annbatch" "$work/test-env/bin/python" -m pytest -p no:cacheprovider -p differences_plugin \
    -q -rfEX --tb=short "${tests[@]}" "$@" || status=$?
  # The Loader benchmark's smoke run (benchmarks/python/bench_loader.py --quick: 10,000 rows, once,
  # zarr-python only, 10 to 20 s): through annbatch.Loader, every epoch of both samplers in every
  # scenario must read each row of its mask or shard once, and a batch hold the store's values.
  # Its timings are not checked.
  bench_started=$SECONDS
  if "$work/test-env/bin/python" "$root/benchmarks/python/bench_loader.py" --quick >"$work/bench_loader.log" 2>&1; then
    echo "test_annbatch.sh: bench_loader.py --quick passed in $((SECONDS - bench_started))s" >&2
  else
    cat "$work/bench_loader.log" >&2
    echo "test_annbatch.sh: bench_loader.py --quick failed (above)" >&2
    status=1
  fi
fi
echo "test_annbatch.sh: done in ${SECONDS}s" >&2
exit "$status"
