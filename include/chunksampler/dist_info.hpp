// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/errors.hpp>

#include <charconv>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace chunksampler {

/// A process's place in a data-parallel job.
struct DistInfo {
  std::int64_t rank = 0;        ///< this process, in [0, world_size)
  std::int64_t world_size = 1;  ///< processes in the job, >= 1

  friend constexpr bool operator==(const DistInfo&, const DistInfo&) noexcept = default;
};

/// Anything `DistributedSampler` can ask once for rank and world size: a callable returning `DistInfo`.
template <class F>
concept DistInfoSource = std::invocable<F&> && std::convertible_to<std::invoke_result_t<F&>, DistInfo>;

namespace detail {

struct LauncherVariables {
  std::string_view rank;
  std::string_view world_size;
};

/// The launchers' variables, most specific first: torchrun and most launchers, OpenMPI, PMI
/// (MPICH, Intel MPI, Slurm's PMI), Slurm.
inline constexpr LauncherVariables launcher_variables[] = {
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
};

[[nodiscard]] inline std::int64_t parse_env_integer(std::string_view variable, std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty())
    throw_config("dist::from_env: {}={:?} is not an integer", variable, std::string(text));
  return value;
}

/// Rank and world size from the first launcher whose rank variable `lookup` finds.
/// `lookup(name)` returns the variable's value, or a null pointer when it is unset.
template <class Lookup>
[[nodiscard]] DistInfo dist_info_from(Lookup&& lookup) {
  for (const LauncherVariables& vars : launcher_variables) {
    const char* rank = lookup(std::string(vars.rank).c_str());
    if (rank == nullptr) continue;
    const char* world_size = lookup(std::string(vars.world_size).c_str());
    if (world_size == nullptr) throw_environment("dist::from_env: {} is set but {} is not", vars.rank, vars.world_size);
    return {parse_env_integer(vars.rank, rank), parse_env_integer(vars.world_size, world_size)};
  }
  throw_environment("dist::from_env: no launcher variables found; looked for RANK/WORLD_SIZE, "
                    "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE and SLURM_PROCID/SLURM_NTASKS");
}

}  // namespace detail

namespace dist {

/// Reads rank and world size from the launcher's environment when called.
class EnvDistInfo {
 public:
  /// `RANK`/`WORLD_SIZE`, else `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, else
  /// `PMI_RANK`/`PMI_SIZE`, else `SLURM_PROCID`/`SLURM_NTASKS`. Throws `std::runtime_error`
  /// listing them all when none is set, `std::invalid_argument` when a value is not an integer.
  [[nodiscard]] DistInfo operator()() const {
    return detail::dist_info_from([](const char* name) { return std::getenv(name); });
  }
};

/// Rank and world size from the launcher's environment (torchrun, mpirun, srun, ...).
///
///     cs::DistributedSampler sampler(base, cs::dist::from_env());
[[nodiscard]] inline EnvDistInfo from_env() noexcept { return {}; }

}  // namespace dist
}  // namespace chunksampler
