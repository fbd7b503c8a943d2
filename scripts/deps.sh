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

# What every build needs: a compiler, CMake and the library's own dependencies.
ensure_build_packages() {
  ensure_packages g++ cmake make libfmt-dev libpcg-cpp-dev
}

# What the example programs need beyond the library: CLI11 parses their command lines.
ensure_example_packages() {
  ensure_packages libcli11-dev
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
