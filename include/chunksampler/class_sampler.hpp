// SPDX-License-Identifier: MIT
#pragma once

// ClassSampler's members: its constructor and `plan`, declared below; its options, `ClassOptions`,
// in <chunksampler/class_options.hpp>; the members it shares with WeightedClassSampler, declared in
// `detail::ClassSamplerBase`, in <chunksampler/detail/class_sampler_base.hpp>: `batch_size`, `chunk_size`,
// `preload_nchunks`, `drop_last`, `num_samples`, `class_weights`, `n_classes`, `replacement`, `shuffle`, `mask`,
// `runs`, `fingerprint`, `validate`, `epoch_size` and `with_shard`; `rng` of `SamplerBase`
// (<chunksampler/sampler_base.hpp>); and `sample`, `n_batches`, `n_batches_left`, `epoch`,
// `set_epoch`, `state` and `restore` of `EpochDriver` (<chunksampler/epoch_driver.hpp>).

#include <chunksampler/class_code.hpp>
#include <chunksampler/class_options.hpp>
#include <chunksampler/detail/class_plan.hpp>
#include <chunksampler/detail/class_sampler_base.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_base.hpp>

#include <cstdint>
#include <optional>
#include <ranges>
#include <span>
#include <string_view>
#include <vector>

namespace chunksampler {

/// One epoch of `ClassSampler` as an `EpochPlan` (what `plan()` returns).
using ClassPlan = detail::ClassPlan;

/// Class-coherent sampler with replacement, as annbatch's `ClassSampler`: every batch holds
/// observations of one class, drawn with probability proportional to `class_weights` among the
/// classes the mask holds; a request may hold several classes.
///
/// An epoch reads `num_samples` positions as chunks of `chunk_size` (the last cut to the
/// remainder). Chunks come in groups of `batch_size / gcd(chunk_size, batch_size)` (one
/// `lcm(chunk_size, batch_size)` block, where chunk and batch edges meet); each group draws a
/// class, and each of its chunks starts at a uniform random valid start of that class: a start
/// whose chunk lies inside one run of the class and one range of the mask. Unlike annbatch, which
/// draws a run first and so favours short runs, every valid start of a class is equally likely.
/// Batch `b` of a request is its buffer rows `[b * batch_size, (b + 1) * batch_size)`, shuffled.
/// A mask (or a shard) of one range or many clips runs to each of its ranges: a clipped piece
/// shorter than `chunk_size` holds no start, so no chunk crosses a range edge or leaves the
/// union, and the weights renormalize over the classes that keep one. With `drop_last` the
/// dropped rows are not read at all.
///
/// The codes are scanned once, at construction, into runs; the sampler keeps only the runs of
/// the classes it samples (memory grows with runs, not observations) and never the codes.
///
///     std::vector<std::int8_t> codes = cell_type_codes();    // one class code per observation
///     cs::ClassSampler sampler(codes, {.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128,
///                                      .num_samples = 100'000, .class_weights = {1.0, 2.0, 0.0}});
///     for (const cs::LoadRequest& request : sampler.sample(std::ssize(codes))) { /* read, then train */ }
class ClassSampler : public detail::ClassSamplerBase<ClassSampler, ClassPlan> {
 public:
  static constexpr std::string_view name = "ClassSampler";
  static constexpr std::uint32_t order_generation = 1;  ///< of its order: bumped when it changes; states record it

  /// Checks `options` and scans `codes` (one class code per observation, any integral type:
  /// AnnData's categorical codes are int8 or int16) once; throws `ConfigError` naming the first
  /// bad option, a code outside `[0, 2^31)` by its position, or every class with a positive
  /// weight that has runs shorter than `chunk_size`.
  template <std::ranges::contiguous_range Codes>
    requires ClassCode<std::ranges::range_value_t<Codes>>
  ClassSampler(const Codes& codes, const ClassOptions& options)
      : ClassSamplerBase(std::span<const std::ranges::range_value_t<Codes>>(std::ranges::data(codes),
                                                                            std::ranges::size(codes)),
                         options) {}

  /// Makes again, without its codes, the sampler `runs` came from (`runs()` of a sampler of the
  /// same `chunk_size` and `class_weights`; the mask and seed may differ): the same epochs and
  /// fingerprint. Checks `options`, then the runs against them; throws `ConfigError`.
  ClassSampler(const ClassRunTable& runs, const ClassOptions& options) : ClassSamplerBase(runs, options) {}

  /// The plan of epoch `epoch` over `n_obs` observations: any request computable alone.
  [[nodiscard]] ClassPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    return detail::ClassPlan(checked_scope(n_obs), layout(),
                             {.group_class = detail::RngAccess::key(rng_, epoch, detail::Purpose::group_class),
                              .chunk_start = detail::RngAccess::key(rng_, epoch, detail::Purpose::chunk_start),
                              .batch_order = detail::RngAccess::key(rng_, epoch, detail::Purpose::batch_order)});
  }
};

}  // namespace chunksampler
