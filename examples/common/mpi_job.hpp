// SPDX-License-Identifier: MIT
// What the MPI examples do around their work: start and end MPI, end the whole job when one rank
// fails, and gather every rank's values to rank 0 for the checks. MPI's default error handler
// aborts the job on any failure, so MPI return values are not checked.

#pragma once

#include <fmt/format.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <vector>

namespace examples {

/// Runs `body(rank, world_size)` between MPI_Init and MPI_Finalize and returns the exit status it
/// returns. An exception ends the whole job: the other ranks may be waiting in a collective for
/// this one.
template <class Body>
int mpi_main(int& argc, char**& argv, std::string_view program, Body body) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int status = 1;
  try {
    status = body(rank, world);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: rank {}: {}\n", program, rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else {
    static_assert(std::is_same_v<T, std::int64_t>);
    return MPI_INT64_T;
  }
}

/// Every rank's values, concatenated in rank order on rank 0 (empty elsewhere).
template <class T>
struct PerRank {
  std::vector<T> values;
  std::vector<int> counts;
  std::vector<int> offsets;

  [[nodiscard]] std::span<const T> of(std::size_t rank) const {
    return std::span(values).subspan(static_cast<std::size_t>(offsets[rank]), static_cast<std::size_t>(counts[rank]));
  }
};

/// Gathers `local` from every rank of MPI_COMM_WORLD to rank 0.
template <class T>
PerRank<T> gather_to_root(const std::vector<T>& local, int rank, int world) {
  constexpr auto int_max = std::numeric_limits<int>::max();  // MPI counts and offsets are ints
  if (local.size() > static_cast<std::size_t>(int_max))
    throw std::runtime_error(fmt::format("{} values are too many for one MPI_Gatherv", local.size()));
  const int count = static_cast<int>(local.size());
  PerRank<T> result;
  if (rank == 0) {
    result.counts.resize(static_cast<std::size_t>(world));
    result.offsets.resize(static_cast<std::size_t>(world));
  }
  MPI_Gather(&count, 1, MPI_INT, result.counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::int64_t total = 0;
    for (std::size_t r = 0; r < result.counts.size(); ++r) {
      result.offsets[r] = static_cast<int>(total);
      total += result.counts[r];
      if (total > int_max) throw std::runtime_error("too many values for one MPI_Gatherv");
    }
    result.values.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(local.data(), count, mpi_type<T>(), result.values.data(), result.counts.data(), result.offsets.data(),
              mpi_type<T>(), 0, MPI_COMM_WORLD);
  return result;
}

}  // namespace examples
