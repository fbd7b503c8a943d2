// SPDX-License-Identifier: MIT
#pragma once

// ClassSampler's members: its constructor and those declared below, and those of `SamplerBase`
// (<chunksampler/sampler_base.hpp>): `sample`, `n_batches`, `n_batches_left`, `epoch`,
// `set_epoch`, `state`, `restore` and `rng`.

#include <chunksampler/class_code.hpp>
#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/checks.hpp>
#include <chunksampler/detail/class_plan.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_base.hpp>
#include <chunksampler/slice.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chunksampler {

/// Options of `ClassSampler`, in annbatch's order; designated initializers read as keywords.
struct ClassOptions {
  std::int64_t chunk_size = 0;               ///< observations per chunk read (>= 1); also the least run length
  std::int64_t preload_nchunks = 0;          ///< chunks per request (>= 1)
  std::int64_t batch_size = 0;               ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;                    ///< drop the epoch's last, short batch
  std::optional<Slice> mask = std::nullopt;  ///< observations to sample; all of [0, n_obs) by default
  std::uint64_t seed = default_seed;         ///< every random choice descends from it
  /// Positions per epoch (>= 1), drawn with replacement; required, as in annbatch.
  std::optional<std::int64_t> num_samples = std::nullopt;
  /// One weight per class code `0..C-1` (finite, >= 0, one > 0; 0 excludes the class); empty:
  /// every class alike.
  std::vector<double> class_weights = {};
};

/// One epoch of `ClassSampler` as an `EpochPlan` (what `plan()` returns).
using ClassPlan = detail::ClassPlan;

/// Class-coherent sampler with replacement, as annbatch's `ClassSampler`: every batch holds
/// observations of one class, drawn with probability proportional to `class_weights` among the
/// classes the range holds; a request may hold several classes.
///
/// An epoch reads `num_samples` positions as chunks of `chunk_size` (the last cut to the
/// remainder). Chunks come in groups of `batch_size / gcd(chunk_size, batch_size)` (one
/// `lcm(chunk_size, batch_size)` block, where chunk and batch edges meet); each group draws a
/// class, and each of its chunks starts at a uniform random valid start of that class: a start
/// whose chunk lies inside one run of the class and inside the range. Unlike annbatch, which
/// draws a run first and so favours short runs, every valid start of a class is equally likely.
/// Batch `b` of a request is its buffer rows `[b * batch_size, (b + 1) * batch_size)`, shuffled.
/// A mask (or a shard) clips runs: a clipped piece shorter than `chunk_size` holds no start, and
/// the weights renormalize over the classes that keep one. With `drop_last` the dropped rows are
/// not read at all.
///
/// The codes are scanned once, at construction, into runs; the sampler keeps only the runs of
/// the classes it samples (memory grows with runs, not observations) and never the codes.
///
///     std::vector<std::int8_t> codes = cell_type_codes();    // one class code per observation
///     cs::ClassSampler sampler(codes, {.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128,
///                                      .num_samples = 100'000, .class_weights = {1.0, 2.0, 0.0}});
///     for (const cs::LoadRequest& request : sampler.sample(std::ssize(codes))) { /* read, then train */ }
class ClassSampler : public SamplerBase<ClassSampler, ClassPlan> {
 public:
  static constexpr std::string_view name = "ClassSampler";

  /// Checks `options` and scans `codes` (one class code per observation, any integral type:
  /// AnnData's categorical codes are int8 or int16) once; throws `ConfigError` naming the first
  /// bad option, a code outside `[0, 2^31)` by its position, or every class with a positive
  /// weight that has runs shorter than `chunk_size`.
  template <std::ranges::contiguous_range Codes>
    requires ClassCode<std::ranges::range_value_t<Codes>>
  ClassSampler(const Codes& codes, const ClassOptions& options) : SamplerBase(options.seed), options_(options) {
    check_options();
    scan(std::span<const std::ranges::range_value_t<Codes>>(std::ranges::data(codes), std::ranges::size(codes)));
    // The mask over the codes' n_obs (an open-ended one ends there, and is empty from it on).
    const Slice range = resolved_mask(n_obs_);
    if (range.stop > n_obs_)
      detail::throw_config("{}: mask.stop ({}) must be <= n_obs, the number of codes ({})", name, range.stop, n_obs_);
    if (range.empty())
      detail::throw_config("{}: the sampled range [{}, {}) is empty; mask.start must be < n_obs, the number of codes",
                           name, range.start, range.stop);
    (void)windows_in(range);
  }

  /// Positions per batch; the last batch of an epoch may have fewer unless `drop_last()`.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return options_.batch_size; }
  /// The length of every chunk but the epoch's last, and the least length of a sampled run.
  [[nodiscard]] std::int64_t chunk_size() const noexcept { return options_.chunk_size; }
  /// Chunks per request.
  [[nodiscard]] std::int64_t preload_nchunks() const noexcept { return options_.preload_nchunks; }
  /// Whether the last, short batch of an epoch is dropped.
  [[nodiscard]] bool drop_last() const noexcept { return options_.drop_last; }
  /// Positions per epoch, as given (a shard's budget replaces it under `DistributedSampler`).
  [[nodiscard]] std::int64_t num_samples() const noexcept { return *options_.num_samples; }
  /// The weights as given; empty means every class alike.
  [[nodiscard]] const std::vector<double>& class_weights() const noexcept { return options_.class_weights; }
  /// Class codes `0..n_classes()-1`: `class_weights().size()`, or the largest code + 1.
  [[nodiscard]] std::int64_t n_classes() const noexcept { return n_classes_; }
  /// Always true: chunks are drawn with replacement, so rows may repeat within an epoch.
  [[nodiscard]] static constexpr bool replacement() noexcept { return true; }
  /// Always true: chunk starts, classes and rows are random.
  [[nodiscard]] static constexpr bool shuffle() noexcept { return true; }
  /// The observation range sampled; `std::nullopt` is all of `[0, n_obs)`.
  [[nodiscard]] const std::optional<Slice>& mask() const noexcept { return options_.mask; }

  /// A hash of every setting that shapes an epoch (the options, the weights' bits, the budget
  /// and the runs of the codes); states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept {
    std::uint64_t h = detail::fingerprint_seed(name);
    const Slice mask = options_.mask.value_or(Slice{-1, -1});
    const std::int64_t fields[] = {options_.chunk_size,
                                   options_.preload_nchunks,
                                   options_.batch_size,
                                   options_.drop_last ? 1 : 0,
                                   options_.mask ? 1 : 0,
                                   mask.start,
                                   mask.stop,
                                   *options_.num_samples,
                                   budget_.value_or(-1),
                                   n_classes_,
                                   n_obs_,
                                   static_cast<std::int64_t>(options_.class_weights.size())};
    for (const std::int64_t f : fields) h = detail::derive(h, static_cast<std::uint64_t>(f));
    for (const double w : options_.class_weights) h = detail::derive(h, std::bit_cast<std::uint64_t>(w));
    return detail::derive(h, runs_hash_);
  }

  /// Throws `ConfigError` if an epoch over `n_obs` observations cannot be served:
  /// `n_obs` must be the number of codes, the mask inside it, and the range must hold a whole
  /// chunk of a class with a positive weight.
  void validate(std::int64_t n_obs) const { (void)checked_windows(n_obs); }

  /// Positions one epoch holds before `drop_last`: `num_samples`, or a shard's budget.
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return budget_.value_or(*options_.num_samples);
  }

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] ClassPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    std::vector<detail::ClassWindow> windows = checked_windows(n_obs);
    const std::int64_t budget = budget_.value_or(*options_.num_samples);
    return detail::ClassPlan(table_, std::move(windows),
                             {.chunk_size = options_.chunk_size,
                              .preload_nchunks = options_.preload_nchunks,
                              .batch_size = options_.batch_size,
                              .used_obs =
                                  options_.drop_last ? detail::round_down(budget, options_.batch_size) : budget},
                             {.group_class = detail::RngAccess::key(rng_, epoch, detail::Purpose::group_class),
                              .chunk_start = detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_start),
                              .batch_order = detail::RngAccess::key(rng_, epoch, detail::Purpose::batch_order)});
  }

  /// A copy that samples only `shard.mask` (runs clipped to it), on the stream
  /// `rng().spawn(shard.stream)`, whose epochs hold `shard.budget` positions.
  [[nodiscard]] ClassSampler with_shard(const Shard& shard) const {
    detail::check_shard_budget(name, shard);
    ClassSampler copy = *this;
    copy.options_.mask = detail::shard_range(name, shard.mask);
    copy.budget_ = shard.budget;
    copy.rng_ = rng_.spawn(shard.stream);
    return copy;
  }

 private:
  void check_options() const {
    const ClassOptions& o = options_;
    detail::check_request_shape(name, o.chunk_size, o.preload_nchunks, o.batch_size);
    detail::check_mask(name, o.mask);
    if (!o.num_samples)
      detail::throw_config("{}: num_samples must be set: the sampler draws with replacement, so an epoch has no "
                           "natural size",
                           name);
    detail::check_num_samples(name, *o.num_samples);
    double total = 0;
    bool positive = false;
    for (std::size_t c = 0; c < o.class_weights.size(); ++c) {
      const double w = o.class_weights[c];
      if (!std::isfinite(w) || w < 0)
        detail::throw_config("{}: class_weights[{}] ({}) must be finite and >= 0", name, c, w);
      positive = positive || w > 0;
      total = total + w;
    }
    if (!o.class_weights.empty() && !positive)
      detail::throw_config("{}: class_weights (all {} are 0) must hold at least one weight > 0", name,
                           o.class_weights.size());
    if (!std::isfinite(total)) detail::throw_config("{}: class_weights sum to {}; the sum must be finite", name, total);
  }

  // Scans the codes once into runs: checks each code, keeps the runs of sampled classes with
  // their prefix sums, collects the short runs of sampled classes, and hashes every run.
  template <class T>
  void scan(std::span<const T> codes) {
    const std::vector<double>& weights = options_.class_weights;
    const std::int64_t chunk = options_.chunk_size;
    n_obs_ = std::ssize(codes);
    struct Short {
      std::int64_t runs = 0;
      std::int64_t shortest = 0;
    };
    std::map<std::int32_t, Short> short_runs;
    std::map<std::int32_t, detail::ClassRuns> kept;
    std::int32_t max_code = -1;
    std::uint64_t hash = 0x72756e73ULL;  // "runs"
    std::int64_t start = 0;
    for (std::int64_t i = 0; i < n_obs_; ++i) {
      const T raw = codes[static_cast<std::size_t>(i)];
      if (std::cmp_less(raw, 0) || std::cmp_greater(raw, std::numeric_limits<std::int32_t>::max()))
        detail::throw_config("{}: codes[{}] ({}) must be in [0, 2^31)", name, i, raw);
      const auto code = static_cast<std::int32_t>(raw);
      if (!weights.empty() && static_cast<std::size_t>(code) >= weights.size())
        detail::throw_config("{}: codes[{}] ({}) has no weight: class_weights has {} entries, one per class code", name,
                             i, code, weights.size());
      max_code = std::max(max_code, code);
      if (i + 1 < n_obs_ && codes[static_cast<std::size_t>(i + 1)] == raw) continue;
      const Slice run{start, i + 1};
      start = i + 1;
      hash =
          detail::derive(detail::derive(hash, static_cast<std::uint64_t>(run.stop)), static_cast<std::uint64_t>(code));
      const double weight = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(code)];
      if (weight <= 0) continue;
      if (run.size() < chunk) {
        Short& s = short_runs[code];
        s.shortest = s.runs == 0 ? run.size() : std::min(s.shortest, run.size());
        ++s.runs;
        continue;
      }
      detail::ClassRuns& c = kept[code];
      if (c.runs.empty()) c = {.code = code, .weight = weight, .runs = {}, .prefix = {0}};
      c.runs.push_back(run);
      c.prefix.push_back(c.prefix.back() + run.size() - chunk + 1);
    }
    if (!short_runs.empty()) {
      std::string list;
      for (const auto& [code, s] : short_runs)
        fmt::format_to(std::back_inserter(list), "{}class {} ({} short run{}, shortest {})", list.empty() ? "" : ", ",
                       code, s.runs, s.runs == 1 ? "" : "s", s.shortest);
      detail::throw_config(
          "{}: every run of a class with a positive weight must be at least chunk_size ({}) observations long; "
          "classes with shorter runs: {}; lower chunk_size, regroup the observations, or give these classes weight 0",
          name, chunk, list);
    }
    n_classes_ = weights.empty() ? std::int64_t{max_code} + 1 : std::ssize(weights);
    runs_hash_ = hash;
    auto table = std::make_shared<detail::ClassTable>();
    table->chunk_size = chunk;
    table->classes.reserve(kept.size());
    for (auto& entry : kept) table->classes.push_back(std::move(entry.second));
    table_ = std::move(table);
  }

  [[nodiscard]] Slice resolved_mask(std::int64_t n_obs) const noexcept {
    return options_.mask ? options_.mask->resolve(n_obs) : Slice{0, n_obs};
  }

  // The classes `range` holds; throws when none holds a whole chunk there.
  [[nodiscard]] std::vector<detail::ClassWindow> windows_in(Slice range) const {
    std::vector<detail::ClassWindow> windows = detail::class_windows(*table_, range);
    if (windows.empty())
      detail::throw_config(
          "{}: the sampled range [{}, {}) holds no chunk: no run of a class with a positive weight has chunk_size ({}) "
          "observations inside it",
          name, range.start, range.stop, options_.chunk_size);
    return windows;
  }

  [[nodiscard]] std::vector<detail::ClassWindow> checked_windows(std::int64_t n_obs) const {
    if (n_obs != n_obs_)
      detail::throw_config(
          "{}: n_obs ({}) must equal the number of class codes ({}): the codes describe exactly the loader's "
          "observations",
          name, n_obs, n_obs_);
    const Slice range = resolved_mask(n_obs);
    if (range.stop > n_obs) detail::throw_config("{}: mask.stop ({}) must be <= n_obs ({})", name, range.stop, n_obs);
    if (range.start < 0 || range.empty())
      detail::throw_config(
          "{}: the sampled range [{}, {}) is empty; it needs 0 <= mask.start < mask.stop <= n_obs ({})", name,
          range.start, range.stop, n_obs);
    return windows_in(range);
  }

  ClassOptions options_;
  std::optional<std::int64_t> budget_;  // set by with_shard: replaces num_samples
  std::int64_t n_obs_ = 0;
  std::int64_t n_classes_ = 0;
  std::uint64_t runs_hash_ = 0;
  std::shared_ptr<const detail::ClassTable> table_;
};

}  // namespace chunksampler
