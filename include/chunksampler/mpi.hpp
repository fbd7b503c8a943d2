// SPDX-License-Identifier: MIT
#pragma once

// Optional MPI integration: include it (and link MPI) only where rank and world size come from MPI.
// The umbrella header <chunksampler.hpp> never includes it.

#include <chunksampler/detail/errors.hpp>
#include <chunksampler/dist_info.hpp>

#include <mpi.h>

namespace chunksampler::dist {

/// Reads rank and world size of an MPI communicator when called.
class MpiDistInfo {
 public:
  explicit MpiDistInfo(MPI_Comm comm) noexcept : comm_(comm) {}

  /// Throws `std::runtime_error` unless MPI is initialized and not yet finalized.
  [[nodiscard]] DistInfo operator()() const {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized == 0 || finalized != 0)
      detail::throw_environment("dist::from_mpi: MPI is {}; call MPI_Init before constructing the sampler",
                                initialized == 0 ? "not initialized" : "already finalized");
    int rank = 0;
    int size = 0;
    if (MPI_Comm_rank(comm_, &rank) != MPI_SUCCESS || MPI_Comm_size(comm_, &size) != MPI_SUCCESS)
      detail::throw_environment("dist::from_mpi: MPI_Comm_rank or MPI_Comm_size failed on the communicator");
    return {rank, size};
  }

 private:
  MPI_Comm comm_;
};

/// Rank and world size from an MPI communicator (`MPI_COMM_WORLD` by default).
///
///     MPI_Init(&argc, &argv);
///     cs::DistributedSampler sampler(base, cs::dist::from_mpi());
[[nodiscard]] inline MpiDistInfo from_mpi(MPI_Comm comm = MPI_COMM_WORLD) noexcept { return MpiDistInfo(comm); }

}  // namespace chunksampler::dist
