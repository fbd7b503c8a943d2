// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/dist_info.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace chunksampler {

/// Options of `DistributedSampler`.
struct DistributedOptions {
  /// Round every rank's share down to whole batches, so all ranks yield the same number of
  /// full batches; otherwise each rank's last batch may be short.
  bool enforce_equal_batches = true;
};

/// Gives each rank of a data-parallel job a disjoint, contiguous shard of any sampler's range.
///
/// With the wrapped sampler covering `[start, start + size)` (its mask, or all of `n_obs`),
/// every rank gets `per_rank = size / world_size` observations, rounded down to a multiple of
/// `batch_size()` when `enforce_equal_batches`, and rank r reads
/// `[start + r * per_rank, start + (r + 1) * per_rank)`, shuffled by the wrapped sampler on the
/// rank's own stream `rng().spawn(rank)`. The shard is computed from `n_obs` at each call; the
/// wrapped sampler is copied at construction and never changed by the caller's later edits.
///
///     cs::RandomSampler base({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
///     cs::DistributedSampler dist(base, cs::dist::from_env());
///     for (const cs::LoadRequest& request : dist.sample(n_obs)) { /* this rank's reads */ }
template <DistributableSampler S>
class DistributedSampler {
 public:
  /// Wraps a copy of `sampler`; calls `dist_info` exactly once, here. Throws
  /// `std::invalid_argument` unless `world_size >= 1` and `0 <= rank < world_size`.
  template <DistInfoSource F>
  DistributedSampler(const S& sampler, F&& dist_info, DistributedOptions options = {})
      : DistributedSampler(sampler, static_cast<DistInfo>(std::forward<F>(dist_info)()), options) {}

  /// Wraps a copy of `sampler` for the rank and world size in `info`.
  DistributedSampler(const S& sampler, DistInfo info, DistributedOptions options = {})
      : sampler_(sampler), info_(info), options_(options) {
    if (info_.world_size < 1) detail::throw_invalid("DistributedSampler: world_size ({}) must be >= 1", info_.world_size);
    if (info_.rank < 0 || info_.rank >= info_.world_size)
      detail::throw_invalid("DistributedSampler: rank ({}) must be in [0, world_size) = [0, {})", info_.rank,
                            info_.world_size);
  }

  /// This process's rank.
  [[nodiscard]] std::int64_t rank() const noexcept { return info_.rank; }
  /// Processes in the job.
  [[nodiscard]] std::int64_t world_size() const noexcept { return info_.world_size; }
  /// The options given at construction.
  [[nodiscard]] const DistributedOptions& options() const noexcept { return options_; }
  /// The wrapped copy (its mask is the whole job's range, not this rank's shard).
  [[nodiscard]] const S& sampler() const noexcept { return sampler_; }
  [[nodiscard]] auto batch_size() const noexcept { return sampler_.batch_size(); }
  [[nodiscard]] bool shuffle() const noexcept { return sampler_.shuffle(); }
  /// The wrapped sampler's mask: the range all ranks together cover.
  [[nodiscard]] std::optional<Slice> mask() const { return sampler_.mask(); }
  /// The random stream this rank draws from: the wrapped sampler's, spawned by rank.
  [[nodiscard]] Rng rng() const
    requires requires(const S& s) {
      { s.rng() } -> std::convertible_to<Rng>;
    }
  {
    return Rng(sampler_.rng()).spawn(static_cast<std::uint64_t>(info_.rank));
  }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return sampler_.epoch(); }
  void set_epoch(std::uint64_t epoch) { sampler_.set_epoch(epoch); }

  /// This rank's observations for a dataset of `n_obs`; throws if the wrapped sampler cannot
  /// serve `n_obs` or the shard would be empty.
  [[nodiscard]] Slice shard(std::int64_t n_obs) const {
    sampler_.validate(n_obs);
    const Slice range = sampler_.mask().value_or(Slice{0, n_obs});
    std::int64_t per_rank = range.size() / info_.world_size;
    if (options_.enforce_equal_batches) per_rank = detail::round_down(per_rank, sampler_.batch_size());
    if (per_rank < 1)
      detail::throw_invalid(
          "DistributedSampler: {} observations over world_size ({}) leave {} per rank (batch_size {}, "
          "enforce_equal_batches {}); every rank needs at least {}",
          range.size(), info_.world_size, range.size() / info_.world_size, sampler_.batch_size(),
          options_.enforce_equal_batches, options_.enforce_equal_batches ? "one whole batch" : "one observation");
    const std::int64_t start = range.start + info_.rank * per_rank;
    return {start, start + per_rank};
  }

  /// Throws `std::invalid_argument` if this rank's epoch over `n_obs` cannot be served.
  void validate(std::int64_t n_obs) const { local(n_obs).validate(n_obs); }

  /// Batches this rank yields per epoch; the same on every rank.
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs) const { return local(n_obs).n_batches(n_obs); }
  /// Synonym of `n_batches`.
  [[nodiscard]] std::int64_t n_iters(std::int64_t n_obs) const { return n_batches(n_obs); }

  /// This rank's requests for epoch `epoch()`; then moves to the next epoch.
  [[nodiscard]] auto sample(std::int64_t n_obs) {
    S rank_sampler = local(n_obs);
    auto range = rank_sampler.sample(n_obs);
    sampler_.set_epoch(sampler_.epoch() + 1);
    return range;
  }

 private:
  [[nodiscard]] S local(std::int64_t n_obs) const {
    S rank_sampler = sampler_.with_shard(
        {.mask = shard(n_obs), .rank = info_.rank, .world_size = info_.world_size,
         .equal_batches = options_.enforce_equal_batches});
    rank_sampler.validate(n_obs);
    return rank_sampler;
  }

  S sampler_;
  DistInfo info_;
  DistributedOptions options_;
};

}  // namespace chunksampler
