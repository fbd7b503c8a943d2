// SPDX-License-Identifier: MIT
#pragma once

// MixtureSampler's members: its constructors and those declared below, `rng` of `SamplerBase`
// (<chunksampler/sampler_base.hpp>), and `sample`, `n_batches`, `n_batches_left`, `epoch`,
// `set_epoch`, `state` and `restore` of `EpochDriver` (<chunksampler/epoch_driver.hpp>).

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/checks.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/mixture_plan.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_base.hpp>
#include <chunksampler/slice.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace chunksampler {

/// Options of `MixtureSampler`: those of `RandomOptions` without the mask and replacement, then
/// the mixture's weights and temperature.
struct MixtureOptions {
  std::int64_t chunk_size = 0;        ///< observations per chunk read (>= 1, <= every dataset's size)
  std::int64_t preload_nchunks = 0;   ///< chunks per request, all of one dataset (>= 1)
  std::int64_t batch_size = 0;        ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;             ///< drop the epoch's last, short batch
  std::uint64_t seed = default_seed;  ///< every random choice descends from it
  std::optional<std::int64_t> num_samples = std::nullopt;  ///< positions per epoch; the sizes' sum by default
  std::vector<double> weights = {};  ///< one per dataset, finite, >= 0, one > 0; none: equal weights
  double temperature = 1.0;          ///< finite, > 0: shares follow weight^(1 / temperature)
};

/// One epoch of `MixtureSampler` as an `EpochPlan` (what `plan()` returns).
using MixturePlan = detail::MixturePlan;

/// Samples several datasets laid end to end as a weighted mixture (KempnerForge's
/// `MixtureSampler`), with chunk-local, dataset-local requests.
///
/// Dataset d is `[b_d, b_d + sizes[d])`, `b_0 = 0`, `b_{d+1} = b_d + sizes[d]`; rows from `b_D`
/// on are not sampled. Dataset d's share is `p_d`, proportional to `weights[d]^(1 /
/// temperature)` (temperature 1: the weights as given; larger: closer to uniform over the
/// datasets of weight > 0; weight 0 excludes a dataset).
///
/// An epoch holds `num_samples` positions (by default the sizes' sum; with `drop_last`, rounded
/// down to whole batches) in `R = ceil(positions / (chunk_size * preload_nchunks))` requests,
/// every one full but the last. **A request is `preload_nchunks` chunks of one dataset**, so all
/// the batches of a request come from that dataset. Dataset d gets `q_d` requests by
/// largest-remainder rounding of `R * p_d` (ties to the lower index): the epoch splits by the
/// weights to within one request, the same way every epoch; a keyed bijection of the request
/// slots interleaves the datasets at random.
///
/// Within dataset d the chunks are its aligned grid of `m_d = sizes[d] / chunk_size` full chunks
/// (`[b_d + i * chunk_size, b_d + (i + 1) * chunk_size)`): its last `sizes[d] % chunk_size` rows
/// are never read (choose a `chunk_size` that divides the sizes to read everything). The
/// dataset's chunks of an epoch come in passes over the grid, each pass a new random order, and
/// the epoch's short last request is its dataset's last: `c_d <= m_d` chunks read no row twice;
/// more **oversample by repetition**, whole passes, every chunk of the grid read
/// `floor(c_d / m_d)` or `ceil(c_d / m_d)` times. Positions are shuffled within each request and
/// cut into batches; the epoch's last request has its last chunk cut to the epoch's end.
///
/// Every choice is keyed by (seed, epoch, request), so any request is computed alone: exact
/// resume, workers and `DistributedSampler` work as for every sampler, and memory is O(datasets)
/// whatever `n_obs` and `num_samples`. `update_weights` changes the mixture from the next
/// `sample()` on.
///
///     cs::MixtureSampler mix({60'000, 20'000, 20'000},
///                            {.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128,
///                             .weights = {0.5, 0.3, 0.2}});
///     for (const cs::LoadRequest& request : mix.sample(100'000)) { /* one dataset's chunks */ }
class MixtureSampler : public SamplerBase<MixtureSampler, MixturePlan> {
 public:
  static constexpr std::string_view name = "MixtureSampler";
  static constexpr std::uint32_t order_generation = 1;  ///< of its order: bumped when it changes; states record it

  /// Datasets of `sizes[d]` observations laid end to end from 0. Throws `ConfigError`
  /// naming the first bad option: every option as `RandomSampler`'s, every dataset at least one
  /// chunk, the sizes' sum at most 2^62, weights and temperature as `MixtureOptions` says.
  explicit MixtureSampler(std::vector<std::int64_t> sizes, const MixtureOptions& options)
      : SamplerBase(options.seed),
        chunk_size_(options.chunk_size),
        preload_nchunks_(options.preload_nchunks),
        batch_size_(options.batch_size),
        drop_last_(options.drop_last),
        num_samples_(options.num_samples),
        sizes_(std::move(sizes)) {
    check_options();
    boundaries_.reserve(sizes_.size() + 1);
    boundaries_.push_back(0);
    for (const std::int64_t size : sizes_) boundaries_.push_back(boundaries_.back() + size);
    parts_.reserve(sizes_.size());
    for (std::size_t d = 0; d < sizes_.size(); ++d) parts_.push_back({boundaries_[d], boundaries_[d + 1]});
    set_mixture(options.weights, options.temperature, "MixtureSampler");
  }

  /// The datasets `[boundaries[d], boundaries[d + 1])`, with `0 = boundaries[0] < boundaries[1]
  /// < ... <= 2^62`.
  ///
  ///     auto mix = cs::MixtureSampler::from_boundaries({0, 60'000, 100'000}, {.chunk_size = 64,
  ///                                                     .preload_nchunks = 8, .batch_size = 128});
  [[nodiscard]] static MixtureSampler from_boundaries(std::vector<std::int64_t> boundaries,
                                                      const MixtureOptions& options) {
    if (boundaries.size() < 2)
      detail::throw_config("MixtureSampler: boundaries has {} values; it needs at least two (0 and one end)",
                           boundaries.size());
    if (boundaries.front() != 0)
      detail::throw_config("MixtureSampler: boundaries[0] ({}) must be 0", boundaries.front());
    std::vector<std::int64_t> sizes;
    sizes.reserve(boundaries.size() - 1);
    for (std::size_t d = 1; d < boundaries.size(); ++d) {
      if (boundaries[d] <= boundaries[d - 1])
        detail::throw_config("MixtureSampler: boundaries[{}] ({}) must be > boundaries[{}] ({})", d, boundaries[d],
                             d - 1, boundaries[d - 1]);
      if (boundaries[d] > detail::max_size)
        detail::throw_config("MixtureSampler: boundaries[{}] ({}) must be <= 2^62", d, boundaries[d]);
      sizes.push_back(boundaries[d] - boundaries[d - 1]);
    }
    return MixtureSampler(std::move(sizes), options);
  }

  /// Positions per batch; the last batch of an epoch may have fewer unless `drop_last()`.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return batch_size_; }
  /// The length of every chunk but an epoch's last.
  [[nodiscard]] std::int64_t chunk_size() const noexcept { return chunk_size_; }
  /// Chunks per request, all of one dataset.
  [[nodiscard]] std::int64_t preload_nchunks() const noexcept { return preload_nchunks_; }
  /// Whether the last, short batch of an epoch is dropped.
  [[nodiscard]] bool drop_last() const noexcept { return drop_last_; }
  /// Positions per epoch, if fixed; otherwise the sizes' sum.
  [[nodiscard]] const std::optional<std::int64_t>& num_samples() const noexcept { return num_samples_; }
  /// The weights, one per dataset (all 1 when none were given).
  [[nodiscard]] const std::vector<double>& weights() const noexcept { return weights_; }
  /// The temperature the weights are raised to the inverse of.
  [[nodiscard]] double temperature() const noexcept { return temperature_; }
  /// The effective share `p_d` of each dataset, summing to 1: what the quotas divide by.
  /// (Computed as integers of up to 53 bits: a share below about 2^-53 of the largest is 0.)
  [[nodiscard]] const std::vector<double>& probabilities() const noexcept { return probabilities_; }
  /// The datasets' sizes.
  [[nodiscard]] const std::vector<std::int64_t>& sizes() const noexcept { return sizes_; }
  /// Where the datasets start, then where the last ends: `sizes().size() + 1` values from 0.
  [[nodiscard]] const std::vector<std::int64_t>& boundaries() const noexcept { return boundaries_; }
  /// Always true: chunk order, dataset order and positions are random.
  [[nodiscard]] static constexpr bool shuffle() noexcept { return true; }
  /// The range the datasets cover, `[0, b_D)`; under `with_shard`, the fraction of each dataset
  /// the shard designates is read instead.
  [[nodiscard]] std::optional<Slice> mask() const noexcept { return Slice{0, boundaries_.back()}; }

  /// Sets new weights, checked as the constructor does, keeping the temperature; they shape the
  /// epochs of later `sample()` and `plan()` calls (a range already returned keeps its plan).
  /// The fingerprint changes with them, so a state taken under other weights is refused:
  /// restore after calling `update_weights` with the weights it was taken under. A state speaks
  /// of the current weights, so change them between epochs if states are taken mid-epoch.
  /// Throws `ConfigError` for bad weights or while a restore under other weights is pending.
  ///
  ///     mix.update_weights({0.2, 0.3, 0.5});  // the next epoch favours the last dataset
  void update_weights(std::vector<double> weights) { update_weights(std::move(weights), temperature_); }
  /// Sets new weights and a new temperature, as above.
  ///
  ///     mix.update_weights({0.2, 0.3, 0.5}, 2.0);  // flatter: shares follow weight^(1/2)
  void update_weights(std::vector<double> weights, double temperature) {
    MixtureSampler updated = *this;
    updated.set_mixture(weights, temperature, "MixtureSampler: update_weights");
    // A pending restore was checked against the old weights; sampling it under others would
    // continue an epoch that was never played.
    if (const auto& pending = this->pending(); pending && pending->fingerprint() != updated.fingerprint())
      detail::throw_config(
          "MixtureSampler: update_weights: a restored state is pending under other weights; call update_weights "
          "before restore");
    weights_ = std::move(updated.weights_);
    temperature_ = updated.temperature_;
    shares_ = std::move(updated.shares_);
    probabilities_ = std::move(updated.probabilities_);
  }

  /// Throws `ConfigError` unless `n_obs` is in `[0, 2^62]` and holds every dataset.
  void validate(std::int64_t n_obs) const {
    if (n_obs < 0 || n_obs > detail::max_size)
      detail::throw_config("MixtureSampler: n_obs ({}) must be in [0, 2^62]", n_obs);
    if (n_obs < boundaries_.back())
      detail::throw_config("MixtureSampler: n_obs ({}) must be >= the end of the last dataset ({})", n_obs,
                           boundaries_.back());
  }

  /// Positions one epoch holds before `drop_last`: a shard's budget, else `num_samples`, else the
  /// sizes' sum.
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return budget();
  }

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] MixturePlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    validate(n_obs);
    const std::int64_t used = drop_last_ ? detail::round_down(budget(), batch_size_) : budget();
    return detail::MixturePlan({.parts = parts_,
                                .shares = shares_,
                                .chunk_size = chunk_size_,
                                .preload_nchunks = preload_nchunks_,
                                .batch_size = batch_size_,
                                .used_obs = used},
                               {.request_order = detail::RngAccess::key(rng_, epoch, detail::Purpose::request_order),
                                .chunk_order = detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_order),
                                .positions = detail::RngAccess::key(rng_, epoch, detail::Purpose::positions)});
  }

  /// A copy that reads, of every dataset, the fraction `shard.mask` designates within `[0,
  /// b_D)`, cut on the dataset's grid of `m_d = sizes[d] / chunk_size` whole chunks: for the
  /// mask `[a, b)`, dataset d's part is its chunks `[floor(a * m_d / b_D), floor(b * m_d / b_D))`,
  /// so disjoint masks give disjoint parts of every dataset, and masks that tile `[0, b_D)` give
  /// parts that tile every dataset's grid (no chunk is split between ranks, so no row of the
  /// grid is left to nobody). It draws from `rng().spawn(shard.stream)`, holds
  /// `shard.budget` positions per epoch and keeps the weights, temperature and epoch; a shard
  /// of a shard is cut from the whole datasets again. Throws `ConfigError` if the
  /// mask is empty or outside `[0, b_D)`, or a part holds less than one chunk.
  [[nodiscard]] MixtureSampler with_shard(const Shard& shard) const {
    detail::check_shard_budget(name, shard);
    const std::int64_t total = boundaries_.back();
    const Slice mask = detail::shard_range(name, shard.mask);
    if (mask.start < 0 || mask.start >= mask.stop || mask.stop > total)
      detail::throw_config("MixtureSampler: a shard's mask [{}, {}) must be a non-empty range inside [0, {})",
                           mask.start, mask.stop, total);
    MixtureSampler copy = *this;
    for (std::size_t d = 0; d < sizes_.size(); ++d) {
      const Slice part =
          detail::shard_part({boundaries_[d], boundaries_[d + 1]}, chunk_size_, mask.start, mask.stop, total);
      if (part.size() < chunk_size_)
        detail::throw_config(
            "MixtureSampler: the shard [{}, {}) leaves dataset {} a part [{}, {}) of {} observations, fewer than "
            "chunk_size ({}); every part needs one chunk",
            mask.start, mask.stop, d, part.start, part.stop, part.size(), chunk_size_);
      copy.parts_[d] = part;
    }
    copy.shard_mask_ = mask;
    copy.budget_ = shard.budget;
    copy.rng_ = rng_.spawn(shard.stream);
    return copy;
  }

  /// A hash of every setting that shapes an epoch (the weights and temperature among them);
  /// states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept {
    std::uint64_t h = detail::fingerprint_seed(name);
    const std::int64_t fields[] = {chunk_size_,
                                   preload_nchunks_,
                                   batch_size_,
                                   drop_last_ ? 1 : 0,
                                   num_samples_.value_or(-1),
                                   budget_.value_or(-1),
                                   shard_mask_ ? shard_mask_->start : -1,
                                   shard_mask_ ? shard_mask_->stop : -1,
                                   static_cast<std::int64_t>(sizes_.size())};
    for (const std::int64_t f : fields) h = detail::derive(h, static_cast<std::uint64_t>(f));
    for (const std::int64_t size : sizes_) h = detail::derive(h, static_cast<std::uint64_t>(size));
    for (const double w : weights_) h = detail::derive(h, std::bit_cast<std::uint64_t>(w));
    return detail::derive(h, std::bit_cast<std::uint64_t>(temperature_));
  }

 private:
  [[nodiscard]] std::int64_t budget() const noexcept {
    return budget_.value_or(num_samples_.value_or(boundaries_.back()));
  }

  void check_options() const {
    detail::check_request_shape(name, chunk_size_, preload_nchunks_, batch_size_);
    if (num_samples_) detail::check_num_samples(name, *num_samples_);
    if (sizes_.empty()) detail::throw_config("MixtureSampler: sizes is empty; it needs at least one dataset");
    std::int64_t total = 0;
    for (std::size_t d = 0; d < sizes_.size(); ++d) {
      if (sizes_[d] < chunk_size_)
        detail::throw_config("MixtureSampler: sizes[{}] ({}) must be >= chunk_size ({}): every dataset holds a chunk",
                             d, sizes_[d], chunk_size_);
      if (sizes_[d] > detail::max_size - total)
        detail::throw_config("MixtureSampler: the sizes' sum must be <= 2^62; sizes[{}] ({}) brings it above", d,
                             sizes_[d]);
      total += sizes_[d];
    }
  }

  // Checks and sets the weights and temperature, and the shares they give; `who` opens messages.
  void set_mixture(std::span<const double> weights, double temperature, std::string_view who) {
    if (!weights.empty() && weights.size() != sizes_.size())
      detail::throw_config("{}: weights has {} values; it needs one per dataset ({}) or none", who, weights.size(),
                           sizes_.size());
    bool any = weights.empty();
    for (std::size_t d = 0; d < weights.size(); ++d) {
      if (!std::isfinite(weights[d]) || weights[d] < 0.0)
        detail::throw_config("{}: weights[{}] ({}) must be finite and >= 0", who, d, weights[d]);
      any = any || weights[d] > 0.0;
    }
    if (!any) detail::throw_config("{}: weights must have one value > 0 (all {} are 0)", who, weights.size());
    if (!std::isfinite(temperature) || temperature <= 0.0)
      detail::throw_config("{}: temperature ({}) must be finite and > 0", who, temperature);

    weights_.assign(sizes_.size(), 1.0);
    // -0.0 and 0.0 mean the same mixture: one bit pattern for the fingerprint.
    for (std::size_t d = 0; d < weights.size(); ++d) weights_[d] = weights[d] == 0.0 ? 0.0 : weights[d];
    temperature_ = temperature;
    shares_ = detail::share_numerators(weights_, temperature_);
    std::uint64_t sum = 0;
    for (const std::uint64_t share : shares_) sum += share;
    probabilities_.clear();
    for (const std::uint64_t share : shares_)
      probabilities_.push_back(static_cast<double>(share) / static_cast<double>(sum));
  }

  std::int64_t chunk_size_;
  std::int64_t preload_nchunks_;
  std::int64_t batch_size_;
  bool drop_last_;
  std::optional<std::int64_t> num_samples_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::int64_t> boundaries_;
  std::vector<double> weights_;
  double temperature_ = 1.0;
  std::vector<std::uint64_t> shares_;
  std::vector<double> probabilities_;
  std::vector<Slice> parts_;            // per dataset, the range read: all of it, or a shard's part
  std::optional<Slice> shard_mask_;     // set by with_shard
  std::optional<std::int64_t> budget_;  // set by with_shard: supersedes num_samples
};

}  // namespace chunksampler
