// SPDX-License-Identifier: MIT
#pragma once

// SequentialSampler's members: its constructor and those declared below, and those of its bases in
// <chunksampler/sampler_base.hpp>: the settings, `validate`, `plan`, `epoch_size`, `with_shard`
// and `fingerprint` of `ChunkSamplerBase`; `rng` of `SamplerBase`; and `sample`, `n_batches`,
// `n_batches_left`, `epoch`, `set_epoch`, `state` and `restore` of `EpochDriver`
// (<chunksampler/epoch_driver.hpp>).

#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler_base.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace chunksampler {

/// Options of `SequentialSampler`: those of `RandomOptions` before `seed`, in the same order (an
/// in-order sampler draws nothing, so it takes no seed).
struct SequentialOptions {
  std::int64_t chunk_size = 0;       ///< observations per chunk read (>= 1)
  std::int64_t preload_nchunks = 0;  ///< chunks per request (>= 1)
  std::int64_t batch_size = 0;       ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;            ///< drop the epoch's last, short batch
  std::optional<Ranges> mask =
      std::nullopt;  ///< observations to read (one range or many); all of [0, n_obs) by default
};

/// In-order chunk sampler for evaluation: chunks in order, positions in order, `shuffle()`
/// false, as annbatch's `SequentialSampler`. Every epoch is the same.
///
///     cs::SequentialSampler eval({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
///     for (const cs::LoadRequest& request : eval.sample(20'000)) { /* read, then evaluate */ }
class SequentialSampler : public ChunkSamplerBase<SequentialSampler> {
 public:
  static constexpr std::string_view name = "SequentialSampler";
  static constexpr std::uint32_t order_generation = 1;  ///< of its order: bumped when it changes; states record it

  /// Checks `options`; throws `ConfigError` naming the first bad one.
  explicit SequentialSampler(const SequentialOptions& options)
      : ChunkSamplerBase({.chunk_size = options.chunk_size,
                          .preload_nchunks = options.preload_nchunks,
                          .batch_size = options.batch_size,
                          .drop_last = options.drop_last,
                          .mask = options.mask,
                          .shuffle = false,
                          .replacement = false,
                          .num_samples = std::nullopt},
                         default_seed) {}
};

}  // namespace chunksampler
