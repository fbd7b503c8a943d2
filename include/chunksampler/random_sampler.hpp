// SPDX-License-Identifier: MIT
#pragma once

// RandomSampler's members: its constructor and those declared below, and those of its bases in
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

/// Options of `RandomSampler`, in annbatch's order; designated initializers read as keywords.
struct RandomOptions {
  std::int64_t chunk_size = 0;       ///< observations per chunk read (>= 1)
  std::int64_t preload_nchunks = 0;  ///< chunks per request (>= 1)
  std::int64_t batch_size = 0;       ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;            ///< drop the epoch's last, short batch
  std::optional<Ranges> mask =
      std::nullopt;                   ///< observations to sample (one range or many); all of [0, n_obs) by default
  std::uint64_t seed = default_seed;  ///< every random choice descends from it
  bool replacement = false;           ///< chunks at random starts, observations may repeat
  std::optional<std::int64_t> num_samples = std::nullopt;  ///< observations per epoch; the mask's size by default
  bool grid_starts = false;  ///< with replacement: chunks start where grid chunks do, each equally likely
};

/// Shuffled chunk sampler: reads contiguous chunks in random order and shuffles positions
/// within each request, as annbatch's `RandomSampler`.
///
/// Without replacement an epoch reads every observation of the mask exactly once (or the
/// first `num_samples` of the epoch's order): the chunks of the storage grid over the mask
/// (full ones on multiples of `chunk_size`, short ones at range edges) in a uniform order from
/// a keyed bijection, each request filled to `chunk_size * preload_nchunks` rows. With
/// replacement it reads `num_samples` observations as chunks of `chunk_size` consecutive
/// observations of the mask at uniform random starts (or, with `grid_starts`, at the starts of
/// uniform grid chunks), one piece per range they touch.
///
///     cs::RandomSampler sampler({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256, .seed = 7});
///     for (const cs::LoadRequest& request : sampler.sample(20'000)) { /* read, then train */ }
class RandomSampler : public ChunkSamplerBase<RandomSampler> {
 public:
  static constexpr std::string_view name = "RandomSampler";
  /// Of its order: bumped when it changes; states record it. Generation 2 (chunksampler 0.4)
  /// orders the slots of a mask's short chunks where it has more than 256 of them.
  static constexpr std::uint32_t order_generation = 2;

  /// The oldest generation whose states it restores: 1 where generation 2 changed none of its
  /// orders, with replacement or over at most 128 ranges (at most 256 short chunks, in any
  /// shard of them); else 2.
  [[nodiscard]] std::uint32_t oldest_order_generation() const noexcept {
    const std::optional<Ranges>& mask = config_.mask;
    return config_.replacement || !mask || mask->size() <= 128 ? 1U : 2U;
  }

  /// Checks `options`; throws `ConfigError` naming the first bad one.
  explicit RandomSampler(const RandomOptions& options)
      : ChunkSamplerBase({.chunk_size = options.chunk_size,
                          .preload_nchunks = options.preload_nchunks,
                          .batch_size = options.batch_size,
                          .drop_last = options.drop_last,
                          .mask = options.mask,
                          .shuffle = true,
                          .replacement = options.replacement,
                          .num_samples = options.num_samples,
                          .grid_starts = options.grid_starts},
                         options.seed) {}

  /// Whether chunks are drawn with replacement.
  [[nodiscard]] bool replacement() const noexcept { return config_.replacement; }
  /// Whether chunks drawn with replacement start on the storage grid.
  [[nodiscard]] bool grid_starts() const noexcept { return config_.grid_starts; }
  /// Observations per epoch, if fixed; otherwise the mask's size.
  [[nodiscard]] const std::optional<std::int64_t>& num_samples() const noexcept { return config_.num_samples; }
};

}  // namespace chunksampler
