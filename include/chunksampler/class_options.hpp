// SPDX-License-Identifier: MIT
#pragma once

// The options of the class samplers: `ClassOptions` (ClassSampler's), `WeightedClassOptions`
// (WeightedClassSampler's: the same fields and `composition`), the conversions between them, and
// `ClassRunTable`, the runs a class sampler keeps of its codes, from which it can be made again.

#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/slice.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace chunksampler {

/// Options of `ClassSampler`, in annbatch's order; designated initializers read as keywords.
/// `WeightedClassOptions` holds the same fields and its `composition`.
struct ClassOptions {
  std::int64_t chunk_size = 0;       ///< observations per chunk read (>= 1); also the least run length
  std::int64_t preload_nchunks = 0;  ///< chunks per request (>= 1)
  std::int64_t batch_size = 0;       ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;            ///< drop the epoch's last, short batch
  std::optional<Ranges> mask =
      std::nullopt;                   ///< observations to sample (one range or many); all of [0, n_obs) by default
  std::uint64_t seed = default_seed;  ///< every random choice descends from it
  /// Positions per epoch (>= 1), drawn with replacement; required, as in annbatch.
  std::optional<std::int64_t> num_samples = std::nullopt;
  /// One weight per class code `0..C-1` (finite, >= 0, one > 0; 0 excludes the class); empty:
  /// every class alike.
  std::vector<double> class_weights = {};
};

/// How `WeightedClassSampler` chooses the classes of a request's chunks.
enum class Composition {
  /// Each chunk draws its class by weight, independently (annbatch): a request matches the
  /// weights in expectation, its counts spread binomially.
  independent,
  /// Each request's class counts are the weights times its chunks, rounded up or down, and the
  /// epoch's counts too: every count within one chunk of the weights.
  stratified,
};

/// Options of `WeightedClassSampler`: `ClassOptions`' fields, in annbatch's order, then
/// `composition`; designated initializers read as keywords.
struct WeightedClassOptions {
  std::int64_t chunk_size = 0;       ///< observations per chunk read (>= 1); also the least run length
  std::int64_t preload_nchunks = 0;  ///< chunks per request (>= 1): a request's rows are shuffled together
  std::int64_t batch_size = 0;       ///< positions per batch; divides chunk_size * preload_nchunks
  bool drop_last = false;            ///< drop the epoch's last, short batch
  std::optional<Ranges> mask =
      std::nullopt;                   ///< observations to sample (one range or many); all of [0, n_obs) by default
  std::uint64_t seed = default_seed;  ///< every random choice descends from it
  /// Positions per epoch (>= 1), drawn with replacement; required, as in annbatch.
  std::optional<std::int64_t> num_samples = std::nullopt;
  /// One weight per class code `0..C-1` (finite, >= 0, one > 0; 0 excludes the class); empty:
  /// every class alike.
  std::vector<double> class_weights = {};
  /// How a request's chunks get their classes; `independent` is annbatch's.
  Composition composition = Composition::independent;
};

/// The `ClassOptions` fields of `options`: all but `composition`.
///
///     cs::ClassSampler plain(codes, cs::class_options_of(weighted_options));
[[nodiscard]] inline ClassOptions class_options_of(const WeightedClassOptions& options) {
  return {.chunk_size = options.chunk_size,
          .preload_nchunks = options.preload_nchunks,
          .batch_size = options.batch_size,
          .drop_last = options.drop_last,
          .mask = options.mask,
          .seed = options.seed,
          .num_samples = options.num_samples,
          .class_weights = options.class_weights};
}

/// `options` with a `composition`: what `WeightedClassSampler` takes for a `ClassSampler`'s options.
///
///     cs::WeightedClassSampler mixed(codes, cs::weighted_options_of(options, cs::Composition::stratified));
[[nodiscard]] inline WeightedClassOptions weighted_options_of(const ClassOptions& options,
                                                              Composition composition = Composition::independent) {
  return {.chunk_size = options.chunk_size,
          .preload_nchunks = options.preload_nchunks,
          .batch_size = options.batch_size,
          .drop_last = options.drop_last,
          .mask = options.mask,
          .seed = options.seed,
          .num_samples = options.num_samples,
          .class_weights = options.class_weights,
          .composition = composition};
}

/// The runs a class sampler keeps of its codes (those of the classes with a positive weight, at
/// least `chunk_size` long) and what its fingerprint needs of the rest: what `runs()` returns and
/// the constructor from runs takes, to make a sampler again without its codes (a pickled one's,
/// or one with another mask or seed). A table is tied to the `chunk_size` and `class_weights` of
/// the sampler it came from; the constructor checks it against its options.
///
///     const cs::ClassRunTable runs = sampler.runs();   // O(runs), not O(codes)
///     cs::ClassSampler again(runs, options);             // the same epochs and fingerprint
struct ClassRunTable {
  std::int64_t n_obs = 0;                ///< the number of codes scanned
  std::int64_t n_classes = 0;            ///< class codes `0..n_classes-1`
  std::uint64_t runs_hash = 0;           ///< a hash of every run of the codes, kept or not
  std::vector<std::int32_t> codes = {};  ///< each kept run's class code
  std::vector<Slice> runs = {};          ///< the kept runs, disjoint, each class's in row order
};

}  // namespace chunksampler
