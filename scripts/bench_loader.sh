#!/usr/bin/env bash
# End to end in annbatch's own Loader (benchmarks/python/bench_loader.py): rows per second over
# whole epochs with chunksampler's samplers against annbatch 0.3.1's, on stores written by
# annbatch's writer, under zarr-python's codec pipeline and under zarrs (the one annbatch's docs
# ask for on a local file system). Everything lives in build/bench-loader/, kept between runs: a
# Python 3.12 virtual environment with annbatch[zarrs] 0.3.1 (its dependencies at the versions of
# tests/annbatch/constraints.txt) and this repository's wheel, built and installed into it as
# scripts/test_annbatch.sh builds it; a second run only recompiles what changed.
#   scripts/bench_loader.sh                                    # the tables of docs/performance.md (~10 minutes on 2 cores)
#   scripts/bench_loader.sh --cache build/bench-loader/stores  # the stores kept and reused (~420 MiB)
#   scripts/bench_loader.sh --quick                            # 10,000 rows, once: checks it works
#   scripts/bench_loader.sh --pipelines zarrs --stores dense --repeats 9 --json out.json
# Python 3.12: $CHUNKSAMPLER_PYTHON312, else pyenv's 3.12, else python3.12 on PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_build_packages
python312=$(find_python312)
out="$root/build/bench-loader"
mkdir -p "$out"
pip_quiet=(--quiet --disable-pip-version-check --no-input)
# zarrs is not in annbatch's test constraints; pinned here so that a new release cannot move the numbers.
zarrs_version=0.2.3

[ -x "$out/venv/bin/python" ] || "$python312" -m venv "$out/venv"
"$out/venv/bin/pip" install "${pip_quiet[@]}" --constraint "$root/tests/annbatch/constraints.txt" \
  "annbatch[zarrs]==0.3.1" "zarrs==$zarrs_version" "scikit-build-core>=0.10" "nanobind>=2.0"
rm -rf "$out/wheels"
"$out/venv/bin/pip" wheel "$root" "${pip_quiet[@]}" --wheel-dir "$out/wheels" --no-deps --no-build-isolation \
  --config-settings=build-dir="$out/wheel-build"
"$out/venv/bin/pip" install "${pip_quiet[@]}" --force-reinstall --no-deps "$out"/wheels/chunksampler-*.whl

# The script's own folder is first on sys.path, not the source tree: `import chunksampler` is the
# installed wheel.
"$out/venv/bin/python" "$root/benchmarks/python/bench_loader.py" "$@"
