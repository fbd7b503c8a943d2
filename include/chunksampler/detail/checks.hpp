// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace chunksampler::detail {

/// The rules every chunk-reading sampler shares for the shape of its requests: `chunk_size`,
/// `preload_nchunks` and `batch_size` are at least 1, a request (`chunk_size *
/// preload_nchunks`) fits in 2^62 and `batch_size` divides it, so every request splits into
/// whole batches. `name` opens the message.
inline void check_request_shape(std::string_view name, std::int64_t chunk_size, std::int64_t preload_nchunks,
                                std::int64_t batch_size) {
  if (chunk_size < 1) throw_config("{}: chunk_size ({}) must be >= 1", name, chunk_size);
  if (preload_nchunks < 1) throw_config("{}: preload_nchunks ({}) must be >= 1", name, preload_nchunks);
  if (!product_fits(chunk_size, preload_nchunks))
    throw_config("{}: chunk_size * preload_nchunks ({} * {}) must be <= 2^62", name, chunk_size, preload_nchunks);
  const std::int64_t request = chunk_size * preload_nchunks;
  if (batch_size < 1) throw_config("{}: batch_size ({}) must be >= 1", name, batch_size);
  if (batch_size > request)
    throw_config("{}: batch_size ({}) must be <= chunk_size * preload_nchunks ({})", name, batch_size, request);
  if (request % batch_size != 0)
    throw_config("{}: batch_size ({}) must divide chunk_size * preload_nchunks ({})", name, batch_size, request);
}

/// A mask is a non-empty range inside `[0, 2^62]`, or `Slice::from(start)` with `start < 2^62`
/// (`[start, n_obs)`, checked against each `n_obs`).
inline void check_mask(std::string_view name, Slice mask) {
  if (mask.start < 0) throw_config("{}: mask.start ({}) must be >= 0", name, mask.start);
  if (mask.open_ended()) {
    if (mask.start >= max_size) throw_config("{}: mask.start ({}) must be < 2^62", name, mask.start);
    return;
  }
  if (mask.start >= mask.stop)
    throw_config("{}: mask.start ({}) must be < mask.stop ({})", name, mask.start, mask.stop);
  if (mask.stop > max_size) throw_config("{}: mask.stop ({}) must be <= 2^62", name, mask.stop);
}
inline void check_mask(std::string_view name, const std::optional<Slice>& mask) {
  if (mask) check_mask(name, *mask);
}

/// `num_samples`, when given, is in `[1, 2^62]`.
inline void check_num_samples(std::string_view name, std::int64_t num_samples) {
  if (num_samples < 1 || num_samples > max_size)
    throw_config("{}: num_samples ({}) must be in [1, 2^62]", name, num_samples);
}

/// A shard's budget, as `with_shard` takes it, is in `[1, 2^62]`.
inline void check_shard_budget(std::string_view name, const Shard& shard) {
  if (shard.budget < 1 || shard.budget > max_size)
    throw_config("{}: a shard's budget ({}) must be in [1, 2^62]", name, shard.budget);
}

/// Where every sampler's fingerprint starts: a constant and the sampler's kind, so samplers of
/// different kinds never share a fingerprint by their settings alone.
[[nodiscard]] inline std::uint64_t fingerprint_seed(std::string_view kind) noexcept {
  std::uint64_t h = 0x6368756e6b73616dULL;  // "chunksam"
  for (const char ch : kind) h = derive(h, static_cast<unsigned char>(ch));
  return h;
}

}  // namespace chunksampler::detail
