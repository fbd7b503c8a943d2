// SPDX-License-Identifier: MIT
#pragma once

// WeightedClassSampler's members: its constructor, `composition`, `fingerprint` and `plan`,
// declared below (its options, `WeightedClassOptions` and `Composition`, are in
// <chunksampler/class_options.hpp>); those it shares with ClassSampler, declared in `detail::ClassSamplerBase`
// (<chunksampler/detail/class_sampler_base.hpp>): `batch_size`, `chunk_size`, `preload_nchunks`,
// `drop_last`, `num_samples`, `class_weights`, `n_classes`, `replacement`, `shuffle`, `mask`, `runs`,
// `validate`, `epoch_size` and `with_shard`; `rng` of `SamplerBase`
// (<chunksampler/sampler_base.hpp>); and `sample`, `n_batches`, `n_batches_left`, `epoch`,
// `set_epoch`, `state` and `restore` of `EpochDriver` (<chunksampler/epoch_driver.hpp>).

#include <chunksampler/class_code.hpp>
#include <chunksampler/class_options.hpp>
#include <chunksampler/detail/class_sampler_base.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/weighted_class_plan.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_base.hpp>

#include <cstdint>
#include <optional>
#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace chunksampler {

/// One epoch of `WeightedClassSampler` as an `EpochPlan` (what `plan()` returns).
using WeightedClassPlan = detail::WeightedClassPlan;

/// Class-weighted sampler with replacement, as annbatch's `WeightedClassSampler`: chunks are
/// chosen as `ClassSampler` chooses them, but each chunk has its own class and a request's rows
/// are shuffled together before they are cut into batches, so every batch mixes the classes in
/// proportion to `class_weights` instead of holding one.
///
/// An epoch reads `num_samples` positions as chunks of `chunk_size` (the last cut to the
/// remainder), `preload_nchunks` per request. Each chunk's class is drawn with probability
/// proportional to its weight among the classes the mask holds (`Composition::independent`), or
/// (`Composition::stratified`) each request of `n` chunks holds `floor(n s_c)` or `ceil(n s_c)`
/// chunks of class `c`, `s_c` its share of the weights, and the epoch `floor(T s_c)` or
/// `ceil(T s_c)` of its `T` chunks, in a uniformly random order. Each chunk starts at a uniform
/// random valid start of its class: a start whose chunk lies inside one run of the class and one
/// range of the mask (a shard's under `DistributedSampler`). A request's rows are shuffled
/// together and cut into batches of `batch_size`: a batch is a uniform sample without
/// replacement of its request's rows. With `drop_last` the dropped rows are not read at all.
///
/// The stratified shares are the weights as exact integers (scaled by a power of two, as
/// `MixtureSampler`'s): weights of 53 bits or fewer keep their ratios exactly.
///
///     std::vector<std::int8_t> codes = cell_type_codes();    // one class code per observation
///     cs::WeightedClassSampler sampler(codes, {.chunk_size = 64, .preload_nchunks = 16, .batch_size = 256,
///                                              .num_samples = 100'000, .class_weights = {5, 3, 2},
///                                              .composition = cs::Composition::stratified});
///     for (const cs::LoadRequest& request : sampler.sample(std::ssize(codes))) { /* read, then train */ }
class WeightedClassSampler : public detail::ClassSamplerBase<WeightedClassSampler, WeightedClassPlan> {
 public:
  static constexpr std::string_view name = "WeightedClassSampler";
  static constexpr std::uint32_t order_generation = 1;  ///< of its order: bumped when it changes; states record it

  /// Checks `options` and scans `codes` (one class code per observation, any integral type:
  /// AnnData's categorical codes are int8 or int16) once; throws `ConfigError` naming the first
  /// bad option, a code outside `[0, 2^31)` by its position, or every class with a positive
  /// weight that has runs shorter than `chunk_size`.
  template <std::ranges::contiguous_range Codes>
    requires ClassCode<std::ranges::range_value_t<Codes>>
  WeightedClassSampler(const Codes& codes, const WeightedClassOptions& options)
      : ClassSamplerBase(std::span<const std::ranges::range_value_t<Codes>>(std::ranges::data(codes),
                                                                            std::ranges::size(codes)),
                         checked(options)),
        composition_(options.composition) {}

  /// Makes again, without its codes, the sampler `runs` came from (`runs()` of a sampler of the
  /// same `chunk_size` and `class_weights`; the mask and seed may differ): the same epochs and
  /// fingerprint. Checks `options`, then the runs against them; throws `ConfigError`.
  WeightedClassSampler(const ClassRunTable& runs, const WeightedClassOptions& options)
      : ClassSamplerBase(runs, checked(options)), composition_(options.composition) {}

  /// How a request's chunks get their classes.
  [[nodiscard]] Composition composition() const noexcept { return composition_; }

  /// A hash of every setting that shapes an epoch (the options, the composition, the weights'
  /// bits, the budget and the runs of the codes); states carry it.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept {
    return detail::derive(ClassSamplerBase::fingerprint(), static_cast<std::uint64_t>(composition_));
  }

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] WeightedClassPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    return detail::WeightedClassPlan(checked_scope(n_obs), layout(),
                                     {.chunk_class = detail::RngAccess::key(rng_, epoch, detail::Purpose::group_class),
                                      .chunk_start = detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_start),
                                      .chunk_order = detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_order),
                                      .positions = detail::RngAccess::key(rng_, epoch, detail::Purpose::positions),
                                      .class_mix = detail::RngAccess::key(rng_, epoch, detail::Purpose::class_mix)},
                                     composition_ == Composition::stratified);
  }

 private:
  // The options ClassSampler would take, after the composition is checked (first: the scan may be
  // long).
  static ClassOptions checked(const WeightedClassOptions& o) {
    if (o.composition != Composition::independent && o.composition != Composition::stratified)
      detail::throw_config("{}: composition ({}) must be Composition::independent (0) or Composition::stratified (1)",
                           name, static_cast<std::underlying_type_t<Composition>>(o.composition));
    return class_options_of(o);
  }

  Composition composition_;
};

}  // namespace chunksampler
