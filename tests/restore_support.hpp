// SPDX-License-Identifier: MIT
#pragma once

// The job the restore tests restart (test_restore_checks.cpp, alloc/test_restore_alloc.cpp): a
// RandomSampler read by ranks in global mode, and its state 37 batches into epoch 0 on 4 ranks,
// which a restart on another world size re-deals.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler_state.hpp>

#include <cstdint>

namespace support::restore {

namespace cs = chunksampler;

using Dist = cs::DistributedSampler<cs::RandomSampler>;

inline const cs::RandomSampler issue_base({.chunk_size = 16, .preload_nchunks = 4, .batch_size = 32});
inline constexpr cs::DistributedOptions global{.mode = cs::ShardMode::global};

/// The state after 37 batches of epoch 0 of rank 0 of 4, global mode, over `n_obs`.
[[nodiscard]] inline cs::SamplerState state_at_37(std::int64_t n_obs) {
  Dist a(issue_base, cs::DistInfo{.rank = 0, .world_size = 4}, global);
  (void)a.sample(n_obs);
  return a.state(37);
}

}  // namespace support::restore
