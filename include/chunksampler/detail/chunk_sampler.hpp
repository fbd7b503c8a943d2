// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/checks.hpp>
#include <chunksampler/detail/chunk_plan.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/planned_sampler.hpp>
#include <chunksampler/detail/stream.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

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
  /// Set by `with_shard`: the positions an epoch holds, superseding `num_samples`; above the
  /// stream's rows the last request repeats rows (padding).
  std::optional<std::int64_t> budget = std::nullopt;
};

/// The fingerprint of a state: the sampler's kind and every setting that shapes an epoch.
[[nodiscard]] inline std::uint64_t fingerprint_of(std::string_view kind, const ChunkConfig& c) noexcept {
  std::uint64_t h = 0x6368756e6b73616dULL;  // "chunksam"
  for (const char ch : kind) h = derive(h, static_cast<unsigned char>(ch));
  const std::int64_t fields[] = {c.chunk_size, c.preload_nchunks, c.batch_size, c.drop_last ? 1 : 0,
                                 c.mask ? 1 : 0, c.mask ? c.mask->start : 0, c.mask ? c.mask->stop : 0,
                                 c.shuffle ? 1 : 0, c.replacement ? 1 : 0, c.num_samples.value_or(-1),
                                 c.budget.value_or(-1)};
  for (const std::int64_t f : fields) h = derive(h, static_cast<std::uint64_t>(f));
  return h;
}

/// The purposes a sampler draws for, each its own stream within an epoch.
enum class Purpose : std::uint64_t { chunk_order = 1, positions = 2 };

/// The body of `RandomSampler` and `SequentialSampler`; `Derived` names itself in messages
/// (`Derived::name`) and is what `with_shard` returns.
template <class Derived>
class ChunkSamplerBase : public PlannedSampler<Derived, ChunkPlan> {
 public:

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
  /// A hash of every setting that shapes an epoch; states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept { return fingerprint_of(Derived::name, config_); }

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
    // A range shorter than a chunk is served as annbatch serves it: one short chunk at a uniform
    // random start, which holds at most the range.
    if (config_.replacement && range.size() < config_.chunk_size) {
      const std::int64_t budget = config_.budget.value_or(config_.num_samples.value_or(range.size()));
      if (budget > range.size())
        throw_invalid(
            "{}: with replacement a sampled range shorter than a chunk ({} observations, chunk_size {}) is read as "
            "one short chunk, so the epoch's {} ({}) must be <= {}",
            Derived::name, range.size(), config_.chunk_size, config_.budget ? "share" : "num_samples", budget,
            range.size());
    }
    // A shard's budget (checked by DistributedSampler against the whole range) replaces num_samples.
    if (!config_.replacement && !config_.budget && config_.num_samples && *config_.num_samples > range.size())
      throw_invalid("{}: num_samples ({}) must be <= the sampled range ({} observations) without replacement",
                    Derived::name, *config_.num_samples, range.size());
  }

  /// Observations one epoch holds before `drop_last`: `num_samples` if set, else the mask's size.
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return config_.budget.value_or(config_.num_samples.value_or(resolved_mask(n_obs).size()));
  }

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] ChunkPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    validate(n_obs);
    return ChunkPlan(layout(n_obs), rng_.key(epoch, static_cast<std::uint64_t>(Purpose::chunk_order)),
                     rng_.key(epoch, static_cast<std::uint64_t>(Purpose::positions)));
  }

  /// A copy restricted to `shard.mask`, on the stream `rng().spawn(shard.stream)`, whose epochs
  /// hold `shard.budget` positions (repeating rows when that exceeds the rows it may read).
  [[nodiscard]] Derived with_shard(const Shard& shard) const {
    if (shard.budget < 1 || shard.budget > max_size)
      throw_invalid("{}: a shard's budget ({}) must be in [1, 2^62]", Derived::name, shard.budget);
    Derived copy = static_cast<const Derived&>(*this);
    copy.config_.mask = shard.mask;
    copy.config_.budget = shard.budget;
    copy.rng_ = rng_.spawn(shard.stream);
    return copy;
  }

 protected:
  ChunkSamplerBase(const ChunkConfig& config, std::uint64_t seed)
      : PlannedSampler<Derived, ChunkPlan>(seed), config_(config) {
    check_config();
  }

  using PlannedSampler<Derived, ChunkPlan>::rng_;
  ChunkConfig config_;

 private:
  void check_config() const {
    check_request_shape(Derived::name, config_.chunk_size, config_.preload_nchunks, config_.batch_size);
    check_mask(Derived::name, config_.mask);
    if (config_.num_samples) check_num_samples(Derived::name, *config_.num_samples);
  }

  [[nodiscard]] Slice resolved_mask(std::int64_t n_obs) const noexcept {
    return config_.mask ? config_.mask->resolve(n_obs) : Slice{0, n_obs};
  }

  [[nodiscard]] ChunkLayout layout(std::int64_t n_obs) const noexcept {
    const Slice range = resolved_mask(n_obs);
    const std::int64_t budget = config_.budget.value_or(config_.num_samples.value_or(range.size()));
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
