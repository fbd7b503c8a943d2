# shellcheck shell=bash
# Sourced by the other scripts: installs the Debian 12 packages a command needs when they are
# missing (as root, after one `apt-get update`), or says what to install otherwise.

ensure_packages() {
  local missing=()
  local package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}; run this script as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${CHUNKSAMPLER_APT_UPDATED:-}" ]; then
    apt-get update -qq
    export CHUNKSAMPLER_APT_UPDATED=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The packages of each stage, named once: each script ensures its own, and scripts/test.sh installs
# them all in one apt transaction at its start (one download, one round of dpkg triggers).
# What every build needs: a compiler, CMake and the library's own dependencies.
build_packages=(g++ cmake make libfmt-dev libpcg-cpp-dev)
# What the example programs need beyond the library: CLI11 parses their command lines.
example_packages=(libcli11-dev)
# The Python stages (scripts/test_python.sh): Debian's Python with numpy, and what the tests use
# beside the package: PyTorch (the DataLoader and torchrun tests), pandas (ClassSampler's
# categoricals), h5py and AnnData (the training example's .h5ad). The build tools and pytest come
# from the Python package index.
# git: the tests that run the examples check `git status` in a scratch repository afterwards.
python_test_packages=(python3-venv python3-numpy python3-dev python3-pip python3-torch python3-pandas python3-h5py
  python3-anndata git)
# The documentation site (scripts/docs.sh): Doxygen reads the headers, Chromium opens the pages.
docs_packages=(doxygen chromium)
# The lint (scripts/lint.sh): the dev configuration needs Catch2, MPI for the MPI examples and
# libtorch for <chunksampler/torch.hpp>.
lint_packages=(catch2 libopenmpi-dev libtorch-dev clang-format-19 clang-tidy-19)
# The libFuzzer targets (scripts/fuzz.sh): clang and its sanitizer runtimes.
fuzz_packages=(clang libclang-rt-14-dev)

ensure_build_packages() {
  ensure_packages "${build_packages[@]}"
}

ensure_example_packages() {
  ensure_packages "${example_packages[@]}"
}

# Builds the shard planner in Release (the main job's binary) and prints its path.
build_planner() {
  local root="$1"
  ensure_build_packages
  ensure_example_packages
  cmake --preset release -S "$root" -DCHUNKSAMPLER_BUILD_TESTS=OFF >/dev/null
  cmake --build "$root/build/release" --target shard_plan -j "$(nproc)" >/dev/null
  echo "$root/build/release/examples/shard_plan/shard_plan"
}

# Prints a Python 3.12 that can make virtual environments: $CHUNKSAMPLER_PYTHON312, else pyenv's 3.12,
# else python3.12 on PATH. Debian 12's Python is 3.11; annbatch 0.3.1 requires 3.12
# (scripts/test_annbatch.sh, scripts/bench_loader.sh).
find_python312() {
  local candidates=("${CHUNKSAMPLER_PYTHON312:-}")
  if command -v pyenv >/dev/null; then
    candidates+=("$(pyenv root)"/versions/3.12*/bin/python3.12)
  fi
  candidates+=("$(command -v python3.12 || true)")
  local candidate
  for candidate in "${candidates[@]}"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] &&
      "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "$(basename "$0"): no Python 3.12 with venv found (annbatch 0.3.1 needs 3.12); set CHUNKSAMPLER_PYTHON312" >&2
  return 1
}

# The requirements of pyproject.toml's extras NAMES (`all` includes the others), one per line, as
# PYTHON (3.11 or later: tomllib) reads them: what the stacks' environment is made of.
extras_requirements() {
  local python="$1" root="$2"
  shift 2
  "$python" - "$root/pyproject.toml" "$@" <<'EOF'
import re, sys, tomllib
with open(sys.argv[1], "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
wanted: list[str] = []
def add(name: str) -> None:
    for requirement in extras[name]:
        self_reference = re.fullmatch(r"chunksampler\[(.+)\]", requirement)
        if self_reference:
            for other in self_reference.group(1).split(","):
                add(other.strip())
        elif requirement not in wanted:
            wanted.append(requirement)
for name in sys.argv[2:]:
    add(name)
print("\n".join(wanted))
EOF
}

# Prints the directory of the Python 3.12 environment of PyPI's training stacks: pyproject.toml's
# extras `all` and `test` (torch 2, Lightning, torchdata, scvi-tools, Accelerate, transformers, Ray
# Train, JAX, annbatch, pytest), installed through the extras so that they cannot rot, with every
# version pinned by tests/stacks/requirements.txt (pip's constraints). Made the first time on a
# machine (about 3 minutes and 6 GB, CUDA libraries included) and reused while the pins and the
# extras are unchanged: their hash names the directory, under $CHUNKSAMPLER_STACKS_DIR, else
# ~/.cache/chunksampler. Nothing of ours is installed there: thin_stacks_env layers a fresh
# environment over it for each run.
ensure_stacks_env() {
  local root="$1"
  local pins="$root/tests/stacks/requirements.txt"
  local python312 wanted key
  python312=$(find_python312)
  wanted=$(extras_requirements "$python312" "$root" all test)
  key=$( (cat "$pins"; echo "$wanted") | sha256sum | cut -c1-16)
  local parent="${CHUNKSAMPLER_STACKS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/chunksampler}"
  local dir="$parent/stacks-$key"
  mkdir -p "$parent"
  (
    # One maker at a time; a run that waited finds the environment done.
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      echo "$(basename "$0"): making the training stacks' environment $dir (once per machine)" >&2
      rm -rf "$dir"
      "$python312" -m venv "$dir"
      echo "$wanted" >"$dir/extras-requirements.txt"
      "$dir/bin/pip" install --quiet --disable-pip-version-check --no-input --no-compile \
        -c "$pins" -r "$dir/extras-requirements.txt" >&2
      touch "$dir/.complete"
    fi
    # Every module's bytecode, written once here: where PYTHONDONTWRITEBYTECODE is set (as on our
    # CI machines) Python would otherwise compile each module's source again in every process, about
    # 11 of the 20 seconds `import lightning` takes, in each rank of each multi-process job. A file
    # that does not compile is one no test imports (a template, a Python 2 script), so its failure
    # is not fatal.
    if [ ! -f "$dir/.compiled" ]; then
      "$dir/bin/python" -m compileall -q -q -j 0 "$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
      touch "$dir/.compiled"
    fi
  ) 9>"$parent/.lock"
  echo "$dir"
}

# Makes DIR a fresh Python 3.12 environment that sees the stacks' environment BASE behind its own
# packages (a .pth line), so a wheel installed into DIR is tested with the stacks without touching
# BASE. `DIR/bin/python -m pip` works (pip comes from BASE) and installs into DIR.
thin_stacks_env() {
  local base="$1" dir="$2"
  "$base/bin/python" -m venv --without-pip "$dir"
  local site
  site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  "$base/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$site/_chunksampler_stacks.pth"
}

# Builds chunksampler's wheel for the stacks' Python 3.12 (BASE, from ensure_stacks_env) into OUT,
# with warnings as errors, in BUILD_DIR: the build tools in a thin environment over the stacks,
# whose numpy nanobind's stub generator imports.
build_wheel() {
  local root="$1" base="$2" out="$3" build_dir="$4"
  local env="$build_dir-env"
  thin_stacks_env "$base" "$env"
  "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "scikit-build-core>=0.10" "nanobind>=2.0"
  "$env/bin/python" -m pip wheel "$root" --quiet --disable-pip-version-check --no-input --wheel-dir "$out" --no-deps \
    --no-build-isolation --config-settings=cmake.define.CHUNKSAMPLER_WERROR=ON --config-settings=build-dir="$build_dir"
}
