// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/random.hpp>

#include <cstdint>

namespace chunksampler {

/// The seed used when options give none.
inline constexpr std::uint64_t default_seed = 0;

/// The identity of a sampler's random stream: a seed and a spawn path, not an engine.
///
/// Every random choice a sampler makes is a pure function of its `Rng`, the epoch and the
/// position of the choice, so any request of any epoch can be computed on its own, on every
/// compiler and platform alike. `spawn(child)` derives an independent stream, as numpy's
/// `SeedSequence.spawn`: `DistributedSampler` gives rank r the stream `rng().spawn(r)`.
///
///     cs::Rng rng{7};
///     cs::Rng rank_stream = rng.spawn(3);   // same seed, its own stream
class Rng {
 public:
  /// The root stream of `seed`.
  constexpr explicit Rng(std::uint64_t seed = default_seed) noexcept : seed_(seed), path_(detail::mix64(seed)) {}

  /// The seed this stream descends from.
  [[nodiscard]] constexpr std::uint64_t seed() const noexcept { return seed_; }
  /// The spawn path folded into one key; equal paths give equal streams.
  [[nodiscard]] constexpr std::uint64_t path() const noexcept { return path_; }
  /// An independent child stream; `spawn(a).spawn(b)` differs from `spawn(b).spawn(a)`.
  [[nodiscard]] constexpr Rng spawn(std::uint64_t child) const noexcept {
    Rng result = *this;
    result.path_ = detail::derive(path_, child);
    return result;
  }
  /// The key of one purpose (chunk order, positions, ...) in one epoch of this stream.
  [[nodiscard]] constexpr std::uint64_t key(std::uint64_t epoch, std::uint64_t purpose) const noexcept {
    return detail::derive(detail::derive(path_, epoch), purpose);
  }

  friend constexpr bool operator==(const Rng&, const Rng&) noexcept = default;

 private:
  std::uint64_t seed_;
  std::uint64_t path_;
};

}  // namespace chunksampler
