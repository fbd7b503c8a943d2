// SPDX-License-Identifier: MIT
#pragma once

// The members the samplers share, in two CRTP bases: `SamplerBase` (every sampler: its random
// stream, and the epochs `EpochDriver` drives over its whole plan) and `ChunkSamplerBase`
// (RandomSampler and SequentialSampler: their settings and plan). Each sampler's own header lists
// what it adds.

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/checks.hpp>
#include <chunksampler/detail/chunk_plan.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/epoch_driver.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace chunksampler {

/// The members every sampler shares: epochs, counting, sampling (a worker's share, from a
/// restored point), `state` and `restore`, all of `EpochDriver`, which reads the whole
/// plan of each epoch here. `RandomSampler`, `SequentialSampler`, `ClassSampler` and
/// `MixtureSampler` derive from it (CRTP); `DistributedSampler` drives its epochs alike.
///
///     cs::RandomSampler sampler({.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128});
///     sampler.set_epoch(3);                                  // as PyTorch's set_epoch
///     cs::Epoch epoch = sampler.sample(n_obs);               // epoch 3, checked here
///     std::int64_t steps = epoch.n_batches();
///     for (const cs::LoadRequest& request : epoch) { /* train */ }
///     cs::SamplerState state = epoch.state(steps);           // the point after those batches
///
/// `Derived` provides `name`, `plan(n_obs, epoch)` returning a `Plan` (validating first),
/// `fingerprint()` and `order_generation` (the generation of its order, which its states record;
/// 1 if it declares none).
template <class Derived, EpochPlan Plan>
class SamplerBase : public EpochDriver<Derived, Plan> {
 public:
  /// The random stream every draw comes from.
  [[nodiscard]] const Rng& rng() const noexcept { return rng_; }

 protected:
  explicit SamplerBase(std::uint64_t seed) : rng_(seed) {}

  Rng rng_;

 private:
  friend class EpochDriver<Derived, Plan>;

  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  // The layout policy of a sampler read whole: one reader, every batch of the plan.
  [[nodiscard]] std::uint64_t seed() const noexcept { return rng_.seed(); }
  [[nodiscard]] static constexpr std::int64_t readers() noexcept { return 1; }
  [[nodiscard]] static constexpr bool redeals(const detail::StateFields&, const WorkerInfo&) noexcept { return false; }
  void check_restore(const SamplerState& state) const {
    detail::check_state_of(Derived::name, state, self().fingerprint(), rng_.seed(),
                           {Derived::name, detail::order_generation_of<Derived>,
                            detail::oldest_order_generation_of(self())});
    const detail::StateFields& f = detail::StateAccess::fields(state);
    if (f.world_size != 1 || f.plan_world_size != 1 || f.runs)
      detail::throw_state_mismatch(
          "{}: restore: the state is of a distributed sampler (world_size {}); restore it into one", Derived::name,
          f.world_size);
  }
  [[nodiscard]] EpochLayout<Plan> lay_out(std::int64_t n_obs, std::uint64_t epoch, const detail::StateFields*,
                                          bool) const {
    Plan plan = self().plan(n_obs, epoch);
    const std::int64_t total = plan.n_batches();
    return {.plan = std::move(plan), .runs = {{0, total}}, .dealt = std::nullopt, .dealt_at = 0, .plan_world_size = 1};
  }
};

}  // namespace chunksampler

namespace chunksampler::detail {

/// The settings shared by the chunk samplers, in one place so both check them alike.
struct ChunkConfig {
  std::int64_t chunk_size;
  std::int64_t preload_nchunks;
  std::int64_t batch_size;
  bool drop_last;
  std::optional<Ranges> mask;
  bool shuffle;
  bool replacement;
  std::optional<std::int64_t> num_samples;
  bool grid_starts = false;
  /// Set by `with_shard`: the positions an epoch holds, superseding `num_samples`; above the
  /// stream's rows the last request repeats rows (padding).
  std::optional<std::int64_t> budget = std::nullopt;
};

/// The fingerprint of a state: the sampler's kind and every setting that shapes an epoch.
[[nodiscard]] inline std::uint64_t fingerprint_of(std::string_view kind, const ChunkConfig& c) noexcept {
  std::uint64_t h = fingerprint_seed(kind);
  const std::int64_t fields[] = {
      c.chunk_size,          c.preload_nchunks,     c.batch_size,
      c.drop_last ? 1 : 0,   c.mask ? 1 : 0,        c.mask ? static_cast<std::int64_t>(c.mask->hash()) : 0,
      c.shuffle ? 1 : 0,     c.replacement ? 1 : 0, c.num_samples.value_or(-1),
      c.budget.value_or(-1), c.grid_starts ? 1 : 0};
  for (const std::int64_t f : fields) h = derive(h, static_cast<std::uint64_t>(f));
  return h;
}

}  // namespace chunksampler::detail

namespace chunksampler {

/// One epoch of `RandomSampler` or `SequentialSampler` as an `EpochPlan` (what `plan()`
/// returns): `n_batches()`, `n_requests()`, `request_of(batch)`, `request_begin(request)` and
/// `fill(request, buffers)`, each request computable alone in O(request).
using ChunkPlan = detail::ChunkPlan;

/// The members `RandomSampler` and `SequentialSampler` share, beyond those of `SamplerBase`
/// (above): their settings, `validate`, `plan`, and what
/// `DistributedSampler` needs (`epoch_size`, `with_shard`, `fingerprint`). `Derived` names
/// itself in messages (`Derived::name`) and is what `with_shard` returns.
template <class Derived>
class ChunkSamplerBase : public SamplerBase<Derived, ChunkPlan> {
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
  /// The observations sampled; `std::nullopt` is all of `[0, n_obs)`.
  [[nodiscard]] const std::optional<Ranges>& mask() const noexcept { return config_.mask; }
  /// A hash of every setting that shapes an epoch; states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept { return detail::fingerprint_of(Derived::name, config_); }

  /// Throws `ConfigError` if an epoch over `n_obs` observations cannot be served.
  void validate(std::int64_t n_obs) const {
    if (n_obs < 0 || n_obs > detail::max_size)
      detail::throw_config("{}: n_obs ({}) must be in [0, 2^62]", Derived::name, n_obs);
    const std::int64_t size = detail::check_mask_within(Derived::name, config_.mask, n_obs);
    // A union shorter than a chunk is served as annbatch serves a short range: one short chunk
    // at a uniform random start, which holds at most the union.
    if (config_.replacement && size < config_.chunk_size) {
      const std::int64_t budget = config_.budget.value_or(config_.num_samples.value_or(size));
      if (budget > size)
        detail::throw_config(
            "{}: with replacement the sampled range ({} observations) is smaller than chunk_size ({}): it is read "
            "as one short chunk, so the epoch's {} ({}) must be <= {}",
            Derived::name, size, config_.chunk_size, config_.budget ? "share" : "num_samples", budget, size);
    }
    // A shard's budget (checked by DistributedSampler against the whole range) replaces num_samples.
    if (!config_.replacement && !config_.budget && config_.num_samples && *config_.num_samples > size)
      detail::throw_config("{}: num_samples ({}) cannot exceed the observation range ({}) without replacement",
                           Derived::name, *config_.num_samples, size);
  }

  /// Observations one epoch holds before `drop_last`: `num_samples` if set, else the mask's size.
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return config_.budget.value_or(
        config_.num_samples.value_or(detail::check_mask_within(Derived::name, config_.mask, n_obs)));
  }

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] ChunkPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    validate(n_obs);
    return ChunkPlan(layout(n_obs), detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_order),
                     detail::RngAccess::key(rng_, epoch, detail::Purpose::positions));
  }

  /// A copy restricted to `shard.mask`, on the stream `rng().spawn(shard.stream)`, whose epochs
  /// hold `shard.budget` positions (repeating rows when that exceeds the rows it may read).
  [[nodiscard]] Derived with_shard(const Shard& shard) const {
    detail::check_shard_budget(Derived::name, shard);
    Derived copy = static_cast<const Derived&>(*this);
    copy.config_.mask = shard.mask;
    copy.config_.budget = shard.budget;
    copy.rng_ = rng_.spawn(shard.stream);
    return copy;
  }

 protected:
  ChunkSamplerBase(const detail::ChunkConfig& config, std::uint64_t seed)
      : SamplerBase<Derived, ChunkPlan>(seed), config_(config) {
    check_config();
  }

  using SamplerBase<Derived, ChunkPlan>::rng_;
  detail::ChunkConfig config_;

 private:
  void check_config() const {
    detail::check_request_shape(Derived::name, config_.chunk_size, config_.preload_nchunks, config_.batch_size);
    if (config_.num_samples) detail::check_num_samples(Derived::name, *config_.num_samples);
  }

  [[nodiscard]] detail::ChunkLayout layout(std::int64_t n_obs) const {
    const Ranges ranges = config_.mask ? config_.mask->resolve(n_obs) : Ranges(0, n_obs);
    const std::int64_t size = ranges.count();
    const std::int64_t budget = config_.budget.value_or(config_.num_samples.value_or(size));
    return {.mask = ranges,
            .chunk_size = config_.chunk_size,
            .preload_nchunks = config_.preload_nchunks,
            .batch_size = config_.batch_size,
            .stream_obs = config_.replacement ? budget : size,
            .used_obs = config_.drop_last ? detail::round_down(budget, config_.batch_size) : budget,
            .shuffle = config_.shuffle,
            .replacement = config_.replacement,
            .grid_starts = config_.grid_starts};
  }
};

}  // namespace chunksampler
