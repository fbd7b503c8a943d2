// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>

#include <cstdint>

namespace chunksampler {

/// Which data-loading worker inside a rank is asking, as torch's `get_worker_info()`.
///
///     for (const cs::LoadRequest& r : sampler.sample(n_obs, cs::WorkerInfo{.id = 1, .num_workers = 4})) ...
struct WorkerInfo {
  std::int64_t id = 0;           ///< this worker, in [0, num_workers)
  std::int64_t num_workers = 1;  ///< workers of the rank, in [1, 2^62]

  friend constexpr bool operator==(const WorkerInfo&, const WorkerInfo&) noexcept = default;
};

namespace detail {
inline void check_worker(const WorkerInfo& worker) {
  // At most 2^62, as a state's workers: a worker's next request index (below 2^62) plus
  // num_workers then stays below 2^63.
  if (worker.num_workers < 1 || worker.num_workers > max_size)
    throw_config("WorkerInfo: num_workers ({}) must be in [1, 2^62]", worker.num_workers);
  if (worker.id < 0 || worker.id >= worker.num_workers)
    throw_config("WorkerInfo: id ({}) must be in [0, num_workers) = [0, {})", worker.id, worker.num_workers);
}
}  // namespace detail

}  // namespace chunksampler
