// SPDX-License-Identifier: MIT
// What an epoch promises by the documented formulas (docs/concepts/shard-modes.md), computed
// here rather than asked of the library, so that the examples' checks compare the real job with the
// contract. Equal full batches, as the examples' jobs use them.

#pragma once

#include "common/arith.hpp"

#include <chunksampler.hpp>

#include <cstdint>

namespace examples {

/// One epoch as planned on `world_size` ranks.
struct EpochPromise {
  std::int64_t batches_per_rank = 0;
  cs::Slice window;  // drop and rotate: the observations read; pad: all of them
};

/// Batches per rank and the window an epoch reads, over observations [0, n_obs), batches of
/// `batch_size`. Rotate reads the window at the end of the data in odd epochs.
[[nodiscard]] inline EpochPromise promise_of(cs::ShardMode mode, cs::Remainder remainder, std::int64_t n_obs,
                                             std::int64_t batch_size, std::int64_t world_size, std::uint64_t epoch) {
  const std::int64_t n = n_obs;
  const std::int64_t b = batch_size;
  const bool contiguous = mode == cs::ShardMode::contiguous;
  if (remainder == cs::Remainder::pad) {
    const std::int64_t per_rank = contiguous ? ceil_div(ceil_div(n, world_size), b) : ceil_div(n, world_size * b);
    return {per_rank, {0, n}};
  }
  const std::int64_t read = contiguous ? world_size * round_down(n / world_size, b) : round_down(n, world_size * b);
  const bool at_end = remainder == cs::Remainder::rotate && epoch % 2 == 1;
  return {read / (world_size * b), at_end ? cs::Slice{n - read, n} : cs::Slice{0, read}};
}

}  // namespace examples
