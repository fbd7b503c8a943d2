#!/usr/bin/env bash
# The Python package's stage of the CI: builds the wheel, installs it into a fresh virtual
# environment and runs tests/python there, from outside the source tree, so what is tested is the
# installed package. Twice:
#  1. Python 3.12 with PyPI's training stacks (tests/stacks/requirements.txt: torch 2, Lightning,
#     torchdata, scvi-tools, JAX, annbatch), what our users train with: the whole suite, the
#     integrations' multi-process jobs included. The stacks' environment is made once per machine
#     (scripts/deps.sh, ensure_stacks_env; about 3 minutes the first time) and reused. Nothing may
#     skip here (CHUNKSAMPLER_REQUIRE_STACKS=1): a stack that fails to import fails the stage.
#  2. Debian's Python 3.11 with its numpy and python3-torch 1.13: the same suite on a second Python
#     and the oldest torch we support (the integrations' tests skip, their packages absent). About a
#     minute and a half.
#   scripts/test_python.sh [PYTEST_ARGS...]   e.g. -k mask, -x, -v; -n 0 -s: one process, output shown
# CHUNKSAMPLER_WHEEL_DIR=DIR: take the 3.12 wheel from DIR (scripts/test.sh builds it once for this
# script and scripts/test_annbatch.sh) instead of building it. CHUNKSAMPLER_PYTHON_STAGES=stacks (or
# debian) runs one stage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/deps.sh
ensure_build_packages
ensure_packages "${python_test_packages[@]}"
stages="${CHUNKSAMPLER_PYTHON_STAGES:-stacks debian}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip_quiet=(--quiet --disable-pip-version-check --no-input)

# The C++ oracle tests/python/test_oracle.py compares the Python samplers' requests with: the same
# headers, driven from C++ (Release, warnings as errors).
cmake -S "$root/tests/python/oracle" -B "$work/oracle" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/oracle" -j "$(nproc)" >/dev/null
export CHUNKSAMPLER_PLAN_DUMP="$work/oracle/chunksampler_plan_dump"

pytest_workers=$(($(nproc) < 4 ? $(nproc) : 4))
status=0
for stage in $stages; do
  SECONDS=0
  case "$stage" in
  stacks)
    stacks=$(ensure_stacks_env "$root")
    wheels="${CHUNKSAMPLER_WHEEL_DIR:-}"
    if [ -z "$wheels" ]; then
      wheels="$work/wheels-312"
      build_wheel "$root" "$stacks" "$wheels" "$work/build-312"
    fi
    thin_stacks_env "$stacks" "$work/test-312"
    # Every stack is installed here, so a skip means an import broke: tests/python/conftest.py
    # fails any skip outside its EXPECTED_SKIPS.
    require_stacks=1
    "$work/test-312/bin/python" -m pip install "${pip_quiet[@]}" --no-deps "$wheels"/chunksampler-*-cp312-*.whl
    python="$work/test-312/bin/python"
    ;;
  debian)
    # Debian's python3 (its numpy), plus the build backend and nanobind.
    /usr/bin/python3 -m venv --system-site-packages "$work/build-env"
    "$work/build-env/bin/pip" install "${pip_quiet[@]}" "scikit-build-core>=0.10" "nanobind>=2.0"
    "$work/build-env/bin/pip" wheel "$root" "${pip_quiet[@]}" --wheel-dir "$work/wheels" --no-deps \
      --no-build-isolation --config-settings=cmake.define.CHUNKSAMPLER_WERROR=ON \
      --config-settings=build-dir="$work/build"
    /usr/bin/python3 -m venv --system-site-packages "$work/test-env"
    "$work/test-env/bin/pip" install "${pip_quiet[@]}" "$work"/wheels/chunksampler-*.whl pytest pytest-xdist hypothesis
    python="$work/test-env/bin/python"
    require_stacks=0  # the integrations' tests skip, their packages absent
    ;;
  *)
    echo "test_python.sh: unknown stage '$stage' in CHUNKSAMPLER_PYTHON_STAGES (stacks, debian)" >&2
    exit 2
    ;;
  esac
  "$python" -c 'import sys, torch; print(f"test_python.sh: '"$stage"': Python {sys.version.split()[0]}, torch {torch.__version__}")' >&2
  # From a directory outside the tree, so `import chunksampler` finds the installed package. The
  # ten slowest tests are listed: where the stage's minutes go; and each skip with its reason (-r
  # replaces pytest's default fE, so those stay named). One pytest worker per core (pytest-xdist,
  # at most 4), each taking whole test files (--dist loadfile): a file's multi-process job starts
  # once, in its worker, and one file's job waits on its ranks' rendezvous and imports while
  # another file runs (the stacks stage took 735 s on 2 cores in one process, 592 s in two).
  (cd "$work" && CHUNKSAMPLER_REQUIRE_STACKS=$require_stacks "$python" -m pytest -p no:cacheprovider -q -rfEs \
    --durations=10 -n "$pytest_workers" --dist loadfile "$root/tests/python" "$@") || status=$?
  echo "test_python.sh: $stage stage done in ${SECONDS}s" >&2
done
exit "$status"
