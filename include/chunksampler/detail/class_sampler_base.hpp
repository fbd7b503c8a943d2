// SPDX-License-Identifier: MIT
#pragma once

// What ClassSampler and WeightedClassSampler share: their settings, the checks of their options,
// the one scan of the codes into runs, the clipping of those runs to a mask or shard, and the
// members DistributedSampler needs (their options are in <chunksampler/class_options.hpp>). They
// differ only in how an epoch's chunks are grouped into classes and batches, which is their plan.

#include <chunksampler/class_options.hpp>
#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/checks.hpp>
#include <chunksampler/detail/class_plan.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/ranges.hpp>
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
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The members `ClassSampler` and `WeightedClassSampler` share (CRTP), beyond those of
/// `SamplerBase`: their settings, `validate`, `epoch_size`, `with_shard` and `fingerprint`.
/// `Derived` provides `name` and `plan(n_obs, epoch)`, built from `checked_scope` and `layout`;
/// one with settings of its own hashes them into its own `fingerprint()`, which hides this one.
///
/// The codes are scanned once, at construction, into runs; only the runs of the classes with a
/// positive weight are kept (memory grows with runs, not observations), shared by every copy,
/// and never the codes. A mask (or a shard) is clipped to those runs once, when it is set.
template <class Derived, EpochPlan Plan>
class ClassSamplerBase : public SamplerBase<Derived, Plan> {
 public:
  /// Positions per batch; the last batch of an epoch may have fewer unless `drop_last()`.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return config_.batch_size; }
  /// The length of every chunk but the epoch's last, and the least length of a sampled run.
  [[nodiscard]] std::int64_t chunk_size() const noexcept { return config_.chunk_size; }
  /// Chunks per request.
  [[nodiscard]] std::int64_t preload_nchunks() const noexcept { return config_.preload_nchunks; }
  /// Whether the last, short batch of an epoch is dropped.
  [[nodiscard]] bool drop_last() const noexcept { return config_.drop_last; }
  /// Positions per epoch, as given (a shard's budget replaces it under `DistributedSampler`).
  [[nodiscard]] std::int64_t num_samples() const noexcept { return *config_.num_samples; }
  /// The weights as given; empty means every class alike.
  [[nodiscard]] const std::vector<double>& class_weights() const noexcept { return config_.class_weights; }
  /// Class codes `0..n_classes()-1`: `class_weights().size()`, or the largest code + 1.
  [[nodiscard]] std::int64_t n_classes() const noexcept { return n_classes_; }
  /// Always true: chunks are drawn with replacement, so rows may repeat within an epoch.
  [[nodiscard]] static constexpr bool replacement() noexcept { return true; }
  /// Always true: chunk starts, classes and rows are random.
  [[nodiscard]] static constexpr bool shuffle() noexcept { return true; }
  /// The observations sampled, one range or many; `std::nullopt` is all of `[0, n_obs)`.
  [[nodiscard]] const std::optional<Ranges>& mask() const noexcept { return config_.mask; }

  /// A hash of every setting that shapes an epoch (the options, the weights' bits, the budget
  /// and the runs of the codes); states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept {
    return fingerprinted_ ? fingerprint_ : computed_fingerprint();
  }

  /// Throws `ConfigError` if an epoch over `n_obs` observations cannot be served:
  /// `n_obs` must be the number of codes, the mask inside it, and one of its ranges must hold a
  /// whole chunk of a class with a positive weight.
  void validate(std::int64_t n_obs) const { (void)checked_scope(n_obs); }

  /// Positions one epoch holds before `drop_last`: `num_samples`, or a shard's budget.
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return budget_.value_or(*config_.num_samples);
  }

  /// The runs this sampler keeps and its codes' count and hash: what the constructor from runs
  /// takes to make it again without the codes. O(runs).
  [[nodiscard]] ClassRunTable runs() const {
    ClassRunTable out{.n_obs = n_obs_, .n_classes = n_classes_, .runs_hash = runs_hash_};
    for (const ClassRuns& c : table_->classes) {
      out.codes.insert(out.codes.end(), c.runs.size(), c.code);
      out.runs.insert(out.runs.end(), c.runs.begin(), c.runs.end());
    }
    return out;
  }

  /// A copy that samples only `shard.mask` (runs clipped to each of its ranges), on the stream
  /// `rng().spawn(shard.stream)`, whose epochs hold `shard.budget` positions; a mask past the
  /// codes or without a chunk of a sampled class is refused when the copy is planned.
  [[nodiscard]] Derived with_shard(const Shard& shard) const {
    check_shard_budget(Derived::name, shard);
    Derived copy = self();
    copy.config_.mask = shard.mask;
    copy.budget_ = shard.budget;
    copy.rng_ = rng_.spawn(shard.stream);
    copy.scope_ = shard_scopes_->find_or_make(shard.mask, [&copy] { return copy.scope_of_mask(); });
    copy.fingerprinted_ = false;  // its mask and budget differ: computed when asked for
    return copy;
  }

 protected:
  /// Checks `config` and scans `codes` once; throws `ConfigError` naming the first bad option, a
  /// code outside `[0, 2^31)` by its position, or every class with a positive weight that has
  /// runs shorter than `chunk_size`, or a mask that holds no chunk.
  template <class T>
  ClassSamplerBase(std::span<const T> codes, const ClassOptions& config)
      : SamplerBase<Derived, Plan>(config.seed), config_(config) {
    check_config();
    scan(codes);
    // The mask over the codes, refused now if it does not fit them or holds no chunk.
    scope_ = scope_of_mask();
    (void)checked_scope(n_obs_);
    fingerprint_ = computed_fingerprint();
    fingerprinted_ = true;
  }

  /// Checks `config`, then `runs` (from `runs()` of a sampler of the same `chunk_size` and
  /// `class_weights`) against it; throws `ConfigError` for runs that overlap, leave the codes, are
  /// shorter than `chunk_size` or belong to a class without a positive weight, or a mask that
  /// holds no chunk.
  ClassSamplerBase(const ClassRunTable& runs, const ClassOptions& config)
      : SamplerBase<Derived, Plan>(config.seed), config_(config) {
    check_config();
    adopt(runs);
    scope_ = scope_of_mask();
    (void)checked_scope(n_obs_);
    fingerprint_ = computed_fingerprint();
    fingerprinted_ = true;
  }

  using SamplerBase<Derived, Plan>::rng_;

  /// The scope, for an epoch over `n_obs` observations: the number of codes, where the mask
  /// must hold a chunk of a sampled class.
  [[nodiscard]] const ClassScope& checked_scope(std::int64_t n_obs) const {
    if (n_obs != n_obs_)
      throw_config("{}: the class codes' length ({}) does not match loader n_obs ({}): the codes describe exactly the "
                   "loader's observations",
                   Derived::name, n_obs_, n_obs);
    if (scope_.empty()) refuse_mask();
    return scope_;
  }

  /// The shape of an epoch's requests and its positions (after `drop_last`).
  [[nodiscard]] ClassLayout layout() const noexcept {
    const std::int64_t budget = budget_.value_or(*config_.num_samples);
    return {.chunk_size = config_.chunk_size,
            .preload_nchunks = config_.preload_nchunks,
            .batch_size = config_.batch_size,
            .used_obs = config_.drop_last ? round_down(budget, config_.batch_size) : budget};
  }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  // O(classes): one hash step a class weight.
  [[nodiscard]] std::uint64_t computed_fingerprint() const noexcept {
    std::uint64_t h = fingerprint_seed(Derived::name);
    const std::int64_t fields[] = {config_.chunk_size,
                                   config_.preload_nchunks,
                                   config_.batch_size,
                                   config_.drop_last ? 1 : 0,
                                   config_.mask ? 1 : 0,
                                   config_.mask ? static_cast<std::int64_t>(config_.mask->hash()) : 0,
                                   *config_.num_samples,
                                   budget_.value_or(-1),
                                   n_classes_,
                                   n_obs_,
                                   static_cast<std::int64_t>(config_.class_weights.size())};
    for (const std::int64_t f : fields) h = derive(h, static_cast<std::uint64_t>(f));
    for (const double w : config_.class_weights) h = derive(h, std::bit_cast<std::uint64_t>(w));
    return derive(h, runs_hash_);
  }

  void check_config() const {
    const ClassOptions& o = config_;
    check_request_shape(Derived::name, o.chunk_size, o.preload_nchunks, o.batch_size);
    if (!o.num_samples)
      throw_config("{}: num_samples must be set: the sampler draws with replacement, so an epoch has no "
                   "natural size",
                   Derived::name);
    check_num_samples(Derived::name, *o.num_samples);
    double total = 0;
    bool positive = false;
    for (std::size_t c = 0; c < o.class_weights.size(); ++c) {
      const double w = o.class_weights[c];
      if (!std::isfinite(w) || w < 0)
        throw_config("{}: class_weights[{}] ({}) must be finite and >= 0", Derived::name, c, w);
      positive = positive || w > 0;
      total = total + w;
    }
    if (!o.class_weights.empty() && !positive)
      throw_config("{}: class_weights must have at least one positive weight (all {} are 0)", Derived::name,
                   o.class_weights.size());
    if (!std::isfinite(total))
      throw_config("{}: class_weights sum to {}; the sum must be finite", Derived::name, total);
  }

  // Scans the codes into runs: checks the codes, keeps the runs of sampled classes with their
  // prefix sums, collects the short runs of sampled classes, and hashes every run. Two passes
  // over the codes, each without a map or an allocation per code: their range (which the
  // compiler vectorizes), then the runs; the runs are then grouped by class.
  template <class T>
  void scan(std::span<const T> codes) {
    const std::vector<double>& weights = config_.class_weights;
    const std::int64_t chunk = config_.chunk_size;
    n_obs_ = std::ssize(codes);
    std::int32_t max_code = -1;
    if (!codes.empty()) {
      T lo = codes.front();
      T hi = codes.front();
      for (const T x : codes) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      if (std::cmp_less(lo, 0) || std::cmp_greater(hi, std::numeric_limits<std::int32_t>::max()) ||
          (!weights.empty() && std::cmp_greater_equal(hi, weights.size())))
        refuse_codes(codes);
      max_code = static_cast<std::int32_t>(hi);
    }
    struct Run {
      std::int32_t code;
      Slice rows;
    };
    std::vector<Run> runs;
    std::uint64_t hash = 0x72756e73ULL;  // "runs"
    for (std::int64_t start = 0; start < n_obs_;) {
      const T raw = codes[static_cast<std::size_t>(start)];
      std::int64_t stop = start + 1;
      while (stop < n_obs_ && codes[static_cast<std::size_t>(stop)] == raw) ++stop;
      const auto code = static_cast<std::int32_t>(raw);
      hash = derive(derive(hash, static_cast<std::uint64_t>(stop)), static_cast<std::uint64_t>(code));
      runs.push_back({code, {start, stop}});
      start = stop;
    }
    // By class code, each class's runs in row order: a counting sort where the codes are dense,
    // else a stable sort.
    const auto by_code = [](const Run& x, const Run& y) { return x.code < y.code; };
    if (std::cmp_less(max_code, 2 * runs.size() + 65'536)) {
      std::vector<std::size_t> next(static_cast<std::size_t>(max_code) + 2, 0);
      for (const Run& r : runs) ++next[static_cast<std::size_t>(r.code) + 1];
      std::partial_sum(next.begin(), next.end(), next.begin());
      std::vector<Run> sorted(runs.size());
      for (const Run& r : runs) sorted[next[static_cast<std::size_t>(r.code)]++] = r;
      runs.swap(sorted);
    } else {
      std::ranges::stable_sort(runs, by_code);
    }
    struct Short {
      std::int32_t code;
      std::int64_t runs;
      std::int64_t shortest;
    };
    std::vector<Short> short_runs;
    std::vector<ClassRuns> kept;
    for (std::size_t i = 0; i < runs.size();) {
      const std::int32_t code = runs[i].code;
      std::size_t end = i;
      while (end < runs.size() && runs[end].code == code) ++end;
      const double weight = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(code)];
      for (; weight > 0 && i < end; ++i) {
        const Slice run = runs[i].rows;
        if (run.size() < chunk) {
          if (short_runs.empty() || short_runs.back().code != code) short_runs.push_back({code, 0, run.size()});
          Short& s = short_runs.back();
          s.shortest = std::min(s.shortest, run.size());
          ++s.runs;
          continue;
        }
        if (kept.empty() || kept.back().code != code)
          kept.push_back({.code = code, .weight = weight, .runs = {}, .prefix = {0}});
        ClassRuns& c = kept.back();
        c.runs.push_back(run);
        c.prefix.push_back(c.prefix.back() + run.size() - chunk + 1);
      }
      i = end;
    }
    if (!short_runs.empty()) {
      // The first classes by code, so that 10^5 classes of short runs give a message, not a page.
      constexpr std::size_t listed = 20;
      std::string list;
      for (std::size_t i = 0; i < std::min(listed, short_runs.size()); ++i) {
        const Short& s = short_runs[i];
        fmt::format_to(std::back_inserter(list), "{}class {} ({} short run{}, shortest {})", list.empty() ? "" : ", ",
                       s.code, s.runs, s.runs == 1 ? "" : "s", s.shortest);
      }
      if (short_runs.size() > listed)
        fmt::format_to(std::back_inserter(list), " and {} more", short_runs.size() - listed);
      std::vector<std::int32_t> short_codes;
      short_codes.reserve(short_runs.size());
      for (const Short& entry : short_runs) short_codes.push_back(entry.code);
      throw ShortRunsError(
          std::move(short_codes),
          fmt::format("{}: every run of a class with a positive weight must be at least chunk_size ({}) observations "
                      "long; classes with shorter runs: {}; lower chunk_size, regroup the observations, or give these "
                      "classes weight 0",
                      Derived::name, chunk, list));
    }
    n_classes_ = weights.empty() ? std::int64_t{max_code} + 1 : std::ssize(weights);
    runs_hash_ = hash;
    auto table = std::make_shared<ClassTable>();
    table->chunk_size = chunk;
    table->classes = std::move(kept);
    table_ = std::move(table);
  }

  // Throws for the first code out of range, as the scan found one: NA (-1), outside
  // [0, 2^31), or without a weight.
  template <class T>
  [[noreturn]] void refuse_codes(std::span<const T> codes) const {
    const std::vector<double>& weights = config_.class_weights;
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const T raw = codes[i];
      if (std::cmp_equal(raw, -1))
        throw_config("{}: the classes contain NA values: codes[{}] is -1, pandas' code for NA; codes must be in "
                     "[0, 2^31)",
                     Derived::name, i);
      if (std::cmp_less(raw, 0) || std::cmp_greater(raw, std::numeric_limits<std::int32_t>::max()))
        throw_config("{}: codes[{}] ({}) must be in [0, 2^31)", Derived::name, i, raw);
      if (!weights.empty() && std::cmp_greater_equal(raw, weights.size()))
        throw_config("{}: codes[{}] ({}) has no weight: class_weights has {} entries, one per class code",
                     Derived::name, i, raw, weights.size());
    }
    throw std::logic_error("refuse_codes: every code is in range");
  }

  // Takes the runs of another sampler's scan, checked as the scan would have kept them.
  void adopt(const ClassRunTable& t) {
    const std::vector<double>& weights = config_.class_weights;
    if (t.n_obs < 0 || t.n_obs > max_size)
      throw_config("{}: runs: n_obs ({}) must be in [0, 2^62]", Derived::name, t.n_obs);
    if (t.n_classes < 0 || t.n_classes > std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1 ||
        (!weights.empty() && t.n_classes != std::ssize(weights)))
      throw_config("{}: runs: n_classes ({}) must be in [0, 2^31] and match class_weights ({} entries)", Derived::name,
                   t.n_classes, weights.size());
    if (t.codes.size() != t.runs.size())
      throw_config("{}: runs: {} codes for {} runs; each run needs one", Derived::name, t.codes.size(), t.runs.size());
    std::map<std::int32_t, ClassRuns> kept;
    std::vector<Slice> sorted;
    sorted.reserve(t.runs.size());
    for (std::size_t i = 0; i < t.runs.size(); ++i) {
      const std::int32_t code = t.codes[i];
      const Slice run = t.runs[i];
      if (code < 0 || code >= t.n_classes)
        throw_config("{}: runs: codes[{}] ({}) must be in [0, n_classes = {})", Derived::name, i, code, t.n_classes);
      if (run.start < 0 || run.stop > t.n_obs || run.size() < config_.chunk_size)
        throw_config("{}: runs: runs[{}] {} must lie in [0, n_obs = {}) and hold chunk_size ({}) observations",
                     Derived::name, i, range_text(run), t.n_obs, config_.chunk_size);
      const double weight = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(code)];
      if (weight <= 0)
        throw_config("{}: runs: runs[{}] is of class {}, whose weight is 0: such runs are not kept", Derived::name, i,
                     code);
      ClassRuns& c = kept[code];
      if (c.runs.empty()) c = {.code = code, .weight = weight, .runs = {}, .prefix = {0}};
      else if (run.start < c.runs.back().stop)
        throw_config("{}: runs: runs[{}] {} must follow its class's previous run {}", Derived::name, i, range_text(run),
                     range_text(c.runs.back()));
      c.runs.push_back(run);
      c.prefix.push_back(c.prefix.back() + run.size() - config_.chunk_size + 1);
      sorted.push_back(run);
    }
    std::ranges::sort(sorted, {}, &Slice::start);
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].start < sorted[i - 1].stop)
        throw_config("{}: runs: the runs {} and {} overlap", Derived::name, range_text(sorted[i - 1]),
                     range_text(sorted[i]));
    n_obs_ = t.n_obs;
    n_classes_ = t.n_classes;
    runs_hash_ = t.runs_hash;
    auto table = std::make_shared<ClassTable>();
    table->chunk_size = config_.chunk_size;
    table->classes.reserve(kept.size());
    for (auto& entry : kept) table->classes.push_back(std::move(entry.second));
    table_ = std::move(table);
  }

  // The classes the mask's ranges over the codes hold (an open-ended last range ends at the
  // last code); no class when the mask does not fit the codes. Computed once per mask, at
  // construction and in with_shard, and kept: clipping many ranges costs O((runs + ranges) log
  // ranges), which validate and plan then never repeat.
  [[nodiscard]] ClassScope scope_of_mask() const {
    const std::optional<Ranges>& mask = config_.mask;
    const Slice back = mask ? (*mask)[mask->size() - 1] : Slice{0, n_obs_};
    if (back.open_ended() ? back.start >= n_obs_ : (back.stop > n_obs_ || back.empty())) return {};
    if (!mask) return class_scope(table_, std::span<const Slice>(&back, 1));
    const Ranges ranges = mask->resolve(n_obs_);
    return class_scope(table_, ranges.slices());
  }

  // Why the scope is empty: the mask does not fit the codes, or holds no chunk.
  [[noreturn]] void refuse_mask() const {
    (void)check_mask_within(Derived::name, config_.mask, n_obs_);
    const Ranges ranges = config_.mask ? config_.mask->resolve(n_obs_) : Ranges(0, n_obs_);
    if (ranges.size() == 1)
      throw_config(
          "{}: the sampled range {} holds no chunk: no class with a positive weight is present in it in a run of "
          "chunk_size ({}) observations",
          Derived::name, range_text(ranges[0]), config_.chunk_size);
    throw_config(
        "{}: the sampled ranges ({} ranges, the first {}) hold no chunk: no class with a positive weight is present "
        "in one of them in a run of chunk_size ({}) observations",
        Derived::name, ranges.size(), range_text(ranges[0]), config_.chunk_size);
  }

  // The scopes of the last few shards' masks, shared by this sampler's copies: a
  // DistributedSampler asks for its rank's shard at every epoch, and the scope takes
  // O(classes * log(runs)) to make, more than the epoch's draws at 10^5 classes.
  class ShardScopes {
   public:
    template <class Make>
    [[nodiscard]] ClassScope find_or_make(const Ranges& mask, const Make& make) {
      {
        const std::scoped_lock lock(mutex_);
        for (const auto& [kept, scope] : kept_)
          if (kept == mask) return scope;
      }
      ClassScope scope = make();  // outside the lock: another thread may make the same, which is harmless
      const std::scoped_lock lock(mutex_);
      if (kept_.size() == capacity) kept_.erase(kept_.begin());
      kept_.emplace_back(mask, scope);
      return scope;
    }

   private:
    static constexpr std::size_t capacity = 8;  // a process's ranks or workers over one sampler
    std::mutex mutex_;
    std::vector<std::pair<Ranges, ClassScope>> kept_;
  };

  ClassOptions config_;
  std::optional<std::int64_t> budget_;  // set by with_shard: replaces num_samples
  std::int64_t n_obs_ = 0;
  std::int64_t n_classes_ = 0;
  std::uint64_t runs_hash_ = 0;
  std::shared_ptr<const ClassTable> table_;
  ClassScope scope_;  // what the mask's ranges hold of table_
  std::shared_ptr<ShardScopes> shard_scopes_ = std::make_shared<ShardScopes>();
  // The fingerprint, hashed once: every epoch's state carries it, and at 10^5 class weights it
  // costs more than the epoch's draws. Empty in a shard's copy, which computes it when asked.
  std::uint64_t fingerprint_ = 0;
  bool fingerprinted_ = false;
};

}  // namespace chunksampler::detail
