// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/random.hpp>

#include <cstdint>

namespace chunksampler {

/// The seed used when options give none.
inline constexpr std::uint64_t default_seed = 0;

class Rng;

namespace detail {

/// What a sampler draws for in one epoch, each purpose its own stream (`RngAccess::key`). The
/// values are part of every pinned sequence: never renumber one. Purposes of different sampler
/// kinds may share a value (a class sampler's group classes and a mixture's request order are
/// both 3), since no sampler draws for both.
enum class Purpose : std::uint64_t {
  chunk_order = 1,    ///< chunk samplers and mixtures: the order (or starts) of the chunks; weighted class
                      ///< samplers: the order of a request's chunk classes (stratified)
  positions = 2,      ///< chunk samplers, mixtures and weighted class samplers: the positions inside each request
  request_order = 3,  ///< mixtures: which dataset each request slot reads
  group_class = 3,    ///< class samplers: the class of each group of chunks (weighted: of each chunk)
  chunk_start = 4,    ///< class samplers: each chunk's start inside its class
  batch_order = 5,    ///< class samplers: the rows inside each batch
  class_mix = 6,      ///< weighted class samplers, stratified: the epoch's class counts and their spread
};

/// The samplers' access to the keys of an `Rng`, which users never need.
struct RngAccess {
  /// The key of `purpose` in epoch `epoch` of `rng`'s stream.
  [[nodiscard]] static constexpr std::uint64_t key(const Rng& rng, std::uint64_t epoch, Purpose purpose) noexcept;
  /// The spawn path folded into one key; equal paths give equal streams.
  [[nodiscard]] static constexpr std::uint64_t path(const Rng& rng) noexcept;
};

}  // namespace detail

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
  /// An independent child stream; `spawn(a).spawn(b)` differs from `spawn(b).spawn(a)`.
  [[nodiscard]] constexpr Rng spawn(std::uint64_t child) const noexcept {
    Rng result = *this;
    result.path_ = detail::derive(path_, child);
    return result;
  }
  /// Equal seeds and spawn paths: the same stream.
  friend constexpr bool operator==(const Rng&, const Rng&) noexcept = default;

 private:
  friend struct detail::RngAccess;

  std::uint64_t seed_;
  std::uint64_t path_;
};

constexpr std::uint64_t detail::RngAccess::key(const Rng& rng, std::uint64_t epoch, Purpose purpose) noexcept {
  return derive(derive(rng.path_, epoch), static_cast<std::uint64_t>(purpose));
}

constexpr std::uint64_t detail::RngAccess::path(const Rng& rng) noexcept { return rng.path_; }

}  // namespace chunksampler
