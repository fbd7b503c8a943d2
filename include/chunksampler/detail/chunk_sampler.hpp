// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/chunk_plan.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/request_range.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace chunksampler::detail {

/// The settings shared by the chunk samplers, in one place so both check them alike.
struct ChunkConfig {
  std::int64_t chunk_size;
  std::int64_t preload_nchunks;
  std::int64_t batch_size;
  bool drop_last;
  std::optional<Slice> mask;
  bool shuffle;
  bool replacement;
  std::optional<std::int64_t> num_samples;
};

/// The purposes a sampler draws for, each its own stream within an epoch.
enum class Purpose : std::uint64_t { chunk_order = 1, positions = 2 };

/// The body of `RandomSampler` and `SequentialSampler`; `Derived` names itself in messages
/// (`Derived::name`) and is what `with_shard` returns.
template <class Derived>
class ChunkSamplerBase {
 public:
  /// The range `sample()` returns.
  using range_type = RequestRange<ChunkPlan>;

  /// Positions per batch; the last batch of an epoch may have fewer unless `drop_last()`.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return config_.batch_size; }
  /// The length of every chunk but the remainder.
  [[nodiscard]] std::int64_t chunk_size() const noexcept { return config_.chunk_size; }
  /// Chunks per request.
  [[nodiscard]] std::int64_t preload_nchunks() const noexcept { return config_.preload_nchunks; }
  /// Whether the last, short batch of an epoch is dropped.
  [[nodiscard]] bool drop_last() const noexcept { return config_.drop_last; }
  /// Whether chunk order and positions are random.
  [[nodiscard]] bool shuffle() const noexcept { return config_.shuffle; }
  /// The observation range sampled; `std::nullopt` is all of `[0, n_obs)`.
  [[nodiscard]] const std::optional<Slice>& mask() const noexcept { return config_.mask; }
  /// The random stream every draw comes from.
  [[nodiscard]] const Rng& rng() const noexcept { return rng_; }
  /// The epoch the next `sample()` plays.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// Pins the next `sample()` to epoch `epoch`; later calls go on from there.
  void set_epoch(std::uint64_t epoch) noexcept { epoch_ = epoch; }

  /// Throws `std::invalid_argument` if an epoch over `n_obs` observations cannot be served.
  void validate(std::int64_t n_obs) const {
    if (n_obs < 0 || n_obs > max_size)
      throw_invalid("{}: n_obs ({}) must be in [0, 2^62]", Derived::name, n_obs);
    const Slice range = resolved_mask(n_obs);
    if (range.stop > n_obs)
      throw_invalid("{}: mask.stop ({}) must be <= n_obs ({})", Derived::name, range.stop, n_obs);
    if (range.empty())
      throw_invalid("{}: the sampled range [{}, {}) is empty; it needs mask.start < mask.stop <= n_obs ({})",
                    Derived::name, range.start, range.stop, n_obs);
    if (config_.replacement && range.size() < config_.chunk_size)
      throw_invalid("{}: with replacement the sampled range ({} observations) must hold one chunk (chunk_size {})",
                    Derived::name, range.size(), config_.chunk_size);
    if (!config_.replacement && config_.num_samples && *config_.num_samples > range.size())
      throw_invalid("{}: num_samples ({}) must be <= the sampled range ({} observations) without replacement",
                    Derived::name, *config_.num_samples, range.size());
  }

  /// Batches one epoch over `n_obs` observations yields: `ceil(n / batch_size)`, or the floor
  /// with `drop_last`, where `n` is `num_samples` if set and the mask's size otherwise.
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs) const {
    validate(n_obs);
    return ChunkPlan(layout(n_obs), 0, 0).n_batches();
  }
  /// Synonym of `n_batches`, as annbatch's `n_iters`.
  [[nodiscard]] std::int64_t n_iters(std::int64_t n_obs) const { return n_batches(n_obs); }

  /// The requests of epoch `epoch()` over `n_obs` observations; then moves to the next epoch.
  /// Validates first: throws before anything is yielded.
  [[nodiscard]] range_type sample(std::int64_t n_obs) {
    validate(n_obs);
    const std::uint64_t epoch = epoch_++;
    return range_type(ChunkPlan(layout(n_obs), rng_.key(epoch, static_cast<std::uint64_t>(Purpose::chunk_order)),
                                rng_.key(epoch, static_cast<std::uint64_t>(Purpose::positions))));
  }

  /// A copy restricted to `shard.mask`, on the rank's own stream `rng().spawn(rank)`, with a
  /// `1 / world_size` share of `num_samples` (whole batches when `shard.equal_batches`).
  [[nodiscard]] Derived with_shard(const Shard& shard) const {
    Derived copy = static_cast<const Derived&>(*this);
    copy.config_.mask = shard.mask;
    copy.rng_ = rng_.spawn(static_cast<std::uint64_t>(shard.rank));
    if (config_.num_samples) {
      std::int64_t share = *config_.num_samples / shard.world_size;
      if (shard.equal_batches) share = round_down(share, config_.batch_size);
      if (share < 1)
        throw_invalid("{}: num_samples ({}) split over world_size ({}) leaves no {} per rank", Derived::name,
                      *config_.num_samples, shard.world_size, shard.equal_batches ? "whole batch" : "observation");
      copy.config_.num_samples = share;
    }
    return copy;
  }

 protected:
  ChunkSamplerBase(const ChunkConfig& config, std::uint64_t seed) : config_(config), rng_(seed) { check_config(); }

  ChunkConfig config_;
  Rng rng_;
  std::uint64_t epoch_ = 0;

 private:
  void check_config() const {
    constexpr std::string_view name = Derived::name;
    const ChunkConfig& c = config_;
    if (c.chunk_size < 1) throw_invalid("{}: chunk_size ({}) must be >= 1", name, c.chunk_size);
    if (c.preload_nchunks < 1) throw_invalid("{}: preload_nchunks ({}) must be >= 1", name, c.preload_nchunks);
    if (!product_fits(c.chunk_size, c.preload_nchunks))
      throw_invalid("{}: chunk_size * preload_nchunks ({} * {}) must be <= 2^62", name, c.chunk_size,
                    c.preload_nchunks);
    const std::int64_t request = c.chunk_size * c.preload_nchunks;
    if (c.batch_size < 1) throw_invalid("{}: batch_size ({}) must be >= 1", name, c.batch_size);
    if (c.batch_size > request)
      throw_invalid("{}: batch_size ({}) must be <= chunk_size * preload_nchunks ({})", name, c.batch_size, request);
    if (request % c.batch_size != 0)
      throw_invalid("{}: batch_size ({}) must divide chunk_size * preload_nchunks ({})", name, c.batch_size, request);
    if (c.mask) {
      if (c.mask->start < 0) throw_invalid("{}: mask.start ({}) must be >= 0", name, c.mask->start);
      if (c.mask->start >= c.mask->stop)
        throw_invalid("{}: mask.start ({}) must be < mask.stop ({})", name, c.mask->start, c.mask->stop);
      if (c.mask->stop > max_size) throw_invalid("{}: mask.stop ({}) must be <= 2^62", name, c.mask->stop);
    }
    if (c.num_samples && (*c.num_samples < 1 || *c.num_samples > max_size))
      throw_invalid("{}: num_samples ({}) must be in [1, 2^62]", name, *c.num_samples);
  }

  [[nodiscard]] Slice resolved_mask(std::int64_t n_obs) const noexcept { return config_.mask.value_or(Slice{0, n_obs}); }

  [[nodiscard]] ChunkLayout layout(std::int64_t n_obs) const noexcept {
    const Slice range = resolved_mask(n_obs);
    const std::int64_t budget = config_.num_samples.value_or(range.size());
    return {.mask = range,
            .chunk_size = config_.chunk_size,
            .preload_nchunks = config_.preload_nchunks,
            .batch_size = config_.batch_size,
            .stream_obs = config_.replacement ? budget : range.size(),
            .used_obs = config_.drop_last ? round_down(budget, config_.batch_size) : budget,
            .shuffle = config_.shuffle,
            .replacement = config_.replacement};
  }
};

}  // namespace chunksampler::detail
