// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/load_request.hpp>
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

/// What `DistributedSampler` asks of the sampler it wraps for one rank.
struct Shard {
  Slice mask;                   ///< the rank's observation range, inside the wrapped sampler's mask
  std::int64_t rank = 0;        ///< the rank, which picks its random stream
  std::int64_t world_size = 1;  ///< ranks in the job; a fixed sample budget is split by it
  bool equal_batches = true;    ///< round a split budget down to whole batches
};

/// Can be restricted to one rank's share of the data.
template <class S>
concept Shardable = requires(const S& s, const Shard& shard) {
  { s.mask() } -> std::convertible_to<std::optional<Slice>>;
  { s.with_shard(shard) } -> std::same_as<S>;
};

/// A sampler `DistributedSampler` can wrap.
///
/// Semantic requirements, beyond those of `Sampler`:
///  1. `mask()` is the observation range the sampler covers; `std::nullopt` means `[0, n_obs)`.
///  2. `with_shard(shard)` returns a copy that covers only `shard.mask`, draws from a random
///     stream of its own for `shard.rank` (the same for the same seed and rank, different for
///     different ranks), keeps the epoch, and takes a `1 / world_size` share of any fixed
///     sample budget, rounded down to whole batches when `shard.equal_batches`. It leaves
///     `*this` unchanged, and may throw `std::invalid_argument` when the share is empty.
///  3. `epoch()` is the epoch the next `sample()` plays; `sample()` then moves to `epoch() + 1`.
template <class S>
concept DistributableSampler = Sampler<S> && std::copy_constructible<S> && HasEpochs<S> && Shardable<S>;

}  // namespace chunksampler
