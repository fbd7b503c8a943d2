// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/chunk_sampler.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace chunksampler {

/// Options of `SequentialSampler`: those of `RandomOptions` up to `seed`, in the same order.
struct SequentialOptions {
  std::int64_t chunk_size = 0;       ///< observations per chunk read (>= 1)
  std::int64_t preload_nchunks = 0;  ///< chunks per request (>= 1)
  std::int64_t batch_size = 0;       ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;            ///< drop the epoch's last, short batch
  std::optional<Slice> mask = std::nullopt;  ///< observations to read; all of [0, n_obs) by default
  std::uint64_t seed = default_seed;         ///< kept for a uniform interface; the order uses no randomness
};

/// In-order chunk sampler for evaluation: chunks in order, positions in order, `shuffle()`
/// false, as annbatch's `SequentialSampler`. Every epoch is the same.
///
///     cs::SequentialSampler eval({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
///     for (const cs::LoadRequest& request : eval.sample(20'000)) { /* read, then evaluate */ }
class SequentialSampler : public detail::ChunkSamplerBase<SequentialSampler> {
 public:
  static constexpr std::string_view name = "SequentialSampler";

  /// Checks `options`; throws `std::invalid_argument` naming the first bad one.
  explicit SequentialSampler(const SequentialOptions& options)
      : ChunkSamplerBase({.chunk_size = options.chunk_size,
                          .preload_nchunks = options.preload_nchunks,
                          .batch_size = options.batch_size,
                          .drop_last = options.drop_last,
                          .mask = options.mask,
                          .shuffle = false,
                          .replacement = false,
                          .num_samples = std::nullopt},
                         options.seed) {}
};

}  // namespace chunksampler
