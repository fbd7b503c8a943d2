// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/slice.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
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
    throw_config("{}: batch_size cannot exceed chunk_size * preload_nchunks: batch_size ({}) must be <= {}", name,
                 batch_size, request);
  if (request % batch_size != 0)
    throw_config("{}: chunk_size * preload_nchunks ({}) must be divisible by batch_size ({})", name, request,
                 batch_size);
}

/// Checks `mask` (all of `[0, n_obs)` when absent) against `n_obs`, which is in `[0, 2^62]`,
/// and returns the observations it selects, in O(log ranges). A one-range mask is named as
/// `mask.start`/`mask.stop`, a range of many as `mask[i]`.
inline std::int64_t check_mask_within(std::string_view name, const std::optional<Ranges>& mask, std::int64_t n_obs) {
  if (!mask) {
    if (n_obs == 0)
      throw_config("{}: the sampled range [0, 0) is empty; it needs mask.start < mask.stop <= n_obs (0)", name);
    return n_obs;
  }
  const std::size_t last = mask->size() - 1;
  const Slice back = (*mask)[last];
  if (last == 0) {
    if (!back.open_ended() && back.stop > n_obs)
      throw_config("{}: mask.stop ({}) exceeds loader n_obs ({}): it must be <= n_obs", name, back.stop, n_obs);
    if (back.start >= std::min(back.stop, n_obs))
      throw_config("{}: mask.start ({}) must be < mask.stop ({}{}): the sampled range [{}, {}) is empty", name,
                   back.start, back.resolve(n_obs).stop, back.open_ended() ? ", which is n_obs when open-ended" : "",
                   back.start, back.resolve(n_obs).stop);
    return back.resolve(n_obs).size();
  }
  if (back.open_ended()) {
    if (back.start >= n_obs)
      throw_config("{}: the open-ended mask[{}] = [{}, end) must start before n_obs ({})", name, last, back.start,
                   n_obs);
  } else if (back.stop > n_obs) {
    const std::span<const Slice> ranges = mask->slices();
    const auto past = std::ranges::partition_point(ranges, [n_obs](const Slice& r) { return r.stop <= n_obs; });
    throw_config("{}: mask[{}] = [{}, {}) must end at or before n_obs ({})", name, past - ranges.begin(), past->start,
                 past->stop, n_obs);
  }
  return mask->offset(last) + back.resolve(n_obs).size();
}

/// The one range of a shard's mask, for samplers whose data is one range; `ConfigError` when it
/// has several.
[[nodiscard]] inline Slice shard_range(std::string_view name, const Ranges& mask) {
  if (mask.size() != 1)
    throw_config("{}: a shard's mask must be one range, not {} ranges ({} first)", name, mask.size(),
                 range_text(mask[0]));
  return mask[0];
}

/// `num_samples`, when given, is in `[1, 2^62]`.
inline void check_num_samples(std::string_view name, std::int64_t num_samples) {
  if (num_samples < 1)
    throw_config("{}: num_samples must be greater than 1 or equal to 1 (got {}): it must be in [1, 2^62]", name,
                 num_samples);
  if (num_samples > max_size) throw_config("{}: num_samples ({}) must be in [1, 2^62]", name, num_samples);
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
