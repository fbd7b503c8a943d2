#!/usr/bin/env bash
# The chaos test for longer (a soak): builds the chaos driver and its MPI job (dev preset) and
# plays many rounds of killing and relaunching a checkpointing job under mpirun; every option is
# the driver's (build/dev/examples/chaos/chaos --help lists them).
#   scripts/chaos.sh                                 # 200 rounds from a fresh random seed
#   scripts/chaos.sh --rounds 50 --seed 0x1234       # the same 50 rounds every time
#   scripts/chaos.sh --replay 0x3e4e98c3ee83c1e8     # one round again, by the seed it printed
# The rounds' logs and checkpoints are kept in build/dev/examples/chaos/soak (--work DIR moves
# them). ctest's chaos.mpirun plays the first 10 rounds of seed 2 (4 under the sanitizers).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in
  -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
esac

source "$root/scripts/deps.sh"
ensure_build_packages
ensure_example_packages
ensure_packages libopenmpi-dev openmpi-bin
cmake --preset dev -S "$root" -DCHUNKSAMPLER_REQUIRE_MPI=ON >/dev/null
cmake --build "$root/build/dev" -j "$(nproc)" --target chaos >/dev/null

# A seed of its own unless one is given (the driver prints it, so any round can be replayed);
# options given later override these defaults.
seed="0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
# OpenMPI refuses to run as root unless told twice.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$root/build/dev/examples/chaos/chaos" --rounds 200 --seed "$seed" --work "$root/build/dev/examples/chaos/soak" "$@"
