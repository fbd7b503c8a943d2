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
