// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/load_request.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/slice.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>

namespace chunksampler {

/// An input range whose elements can be read as `const LoadRequest&`.
template <class R>
concept LoadRequestRange =
    std::ranges::input_range<R> && std::convertible_to<std::ranges::range_reference_t<R>, const LoadRequest&>;

/// Has `batch_size()`: the length of every batch but possibly the last of an epoch.
template <class S>
concept HasBatchSize = requires(const S& s) {
  { s.batch_size() } -> std::convertible_to<std::int64_t>;
};

/// Has `shuffle()`: whether the order of observations is random.
template <class S>
concept HasShuffle = requires(const S& s) {
  { s.shuffle() } -> std::convertible_to<bool>;
};

/// Counts and checks an epoch before it starts, for a dataset of `n_obs` observations.
template <class S>
concept CountsBatches = requires(const S& s, std::int64_t n_obs) {
  { s.n_batches(n_obs) } -> std::convertible_to<std::int64_t>;
  s.validate(n_obs);
};

/// Yields the load requests of one epoch.
template <class S>
concept ProducesRequests = requires(S& s, std::int64_t n_obs) {
  { s.sample(n_obs) } -> LoadRequestRange;
};

/// A chunk sampler: plans the reads of one epoch over `n_obs` observations.
///
/// Semantic requirements, beyond the syntax checked here:
///  1. `validate(n_obs)` throws `std::invalid_argument` for any `n_obs` the sampler cannot serve,
///     and `sample(n_obs)` and `n_batches(n_obs)` throw the same before yielding anything.
///  2. The batches `sample(n_obs)` yields number exactly `n_batches(n_obs)`; every batch has
///     `batch_size()` positions, but the last of the epoch may have fewer.
///  3. Every chunk of a request is a non-empty `[start, stop)` inside `[0, n_obs)`, and every
///     position of its splits indexes the buffer the chunks make (`< buffer_size()`).
///  4. The range `sample()` returns owns what it needs: it stays valid when the sampler is
///     changed, moved or destroyed. A yielded `const LoadRequest&` stays valid until its
///     iterator advances.
///  5. `sample()` moves the sampler to its next epoch, so consecutive calls give new orders.
template <class S>
concept Sampler = HasBatchSize<S> && HasShuffle<S> && CountsBatches<S> && ProducesRequests<S>;

/// Has numbered epochs: `set_epoch(e)` pins the next `sample()` to epoch `e`.
template <class S>
concept HasEpochs = requires(S& s, const S& cs, std::uint64_t epoch) {
  { cs.epoch() } -> std::same_as<std::uint64_t>;
  s.set_epoch(epoch);
};

/// What `DistributedSampler` asks of the sampler it wraps: one part of the job's data.
struct Shard {
  Ranges mask;               ///< the part of the wrapped sampler's data this shard reads (see requirement 4)
  std::uint64_t stream = 0;  ///< the random stream it draws from: `rng().spawn(stream)`
  std::int64_t budget = 1;   ///< positions per epoch; above the rows of `mask` (no replacement), rows repeat
};

/// Can lay out an epoch as an `EpochPlan` and be restricted to a part of its data.
template <class S>
concept Plannable = requires(const S& s, const Shard& shard, std::int64_t n_obs, std::uint64_t epoch) {
  { s.mask() } -> std::convertible_to<std::optional<Ranges>>;
  { s.epoch_size(n_obs) } -> std::convertible_to<std::int64_t>;
  { s.plan(n_obs, epoch) } -> EpochPlan;
  { s.with_shard(shard) } -> std::same_as<S>;
  { s.fingerprint() } -> std::convertible_to<std::uint64_t>;
};

/// What `DistributedSampler` can wrap: a source of plans. It need not drive epochs itself
/// (`sample`, `set_epoch`, states): the `DistributedSampler` does, with the plans it asks for. The
/// library's samplers are such sources and samplers at once; a wrapped sampler that has epochs
/// starts the `DistributedSampler` at its own.
///
/// Semantic requirements:
///  1. `mask()` is the observations the sampler covers; `std::nullopt` means `[0, n_obs)`.
///  2. `epoch_size(n_obs)` is the positions an epoch holds before `drop_last` (a fixed sample
///     budget, or the mask's size).
///  3. `plan(n_obs, e)` is epoch `e` as an `EpochPlan`; it and `epoch_size(n_obs)` throw
///     `std::invalid_argument` for an `n_obs` the sampler cannot serve. Where the type is also a
///     `Sampler` with epochs, `sample(n_obs)` yields the batches of
///     `plan(n_obs, epoch())` in order, then moves to `epoch() + 1`.
///  4. `with_shard(shard)` returns a copy that reads only the part of its data `shard.mask`
///     designates (the observations of `shard.mask` itself for a sampler over rows; a
///     mixture reads the same fraction of each of its datasets), such that disjoint masks
///     designate disjoint parts; it draws from the random stream `shard.stream` of its own (the
///     same for the same seed and stream, different for different ones), holds `shard.budget`
///     positions per epoch, and keeps the epoch. It leaves `*this` unchanged.
///  5. `fingerprint()` hashes every setting that shapes an epoch.
template <class S>
concept DistributableSampler = HasBatchSize<S> && HasShuffle<S> && std::copy_constructible<S> && Plannable<S>;

}  // namespace chunksampler
