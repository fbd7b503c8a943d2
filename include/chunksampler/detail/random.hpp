// SPDX-License-Identifier: MIT
#pragma once

// Seeded randomness that gives the same numbers on every compiler and platform: pcg32 engines,
// our own bounded draws (Lemire's multiply-shift with rejection) and Fisher-Yates shuffles.
// The standard library's distributions and shuffle are implementation-defined and never used.

#include <pcg_random.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <utility>

namespace chunksampler::detail {

/// The engine behind every seeded draw: small (16 bytes), fast, and identical everywhere.
using Engine = pcg32;

/// A bijective 64-bit mixer (the splitmix64 finalizer): every input bit affects every output bit.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

/// Derives a key from a parent key and one more value; order matters, so paths such as
/// (seed, rank, epoch) and (seed, epoch, rank) give unrelated keys.
[[nodiscard]] constexpr std::uint64_t derive(std::uint64_t parent, std::uint64_t value) noexcept {
  return mix64(parent ^ mix64(value + 0x9e3779b97f4a7c15ULL));
}

/// An engine for one independent stream, e.g. one request of one epoch.
[[nodiscard]] inline Engine make_engine(std::uint64_t key, std::uint64_t index) noexcept {
  return Engine(derive(key, index), key);
}

/// `(a * b) >> 64` and `(a * b) mod 2^64`, portably.
struct Wide {
  std::uint64_t hi;
  std::uint64_t lo;
};
[[nodiscard]] constexpr Wide mul_wide(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ using uint128 = unsigned __int128;
  const uint128 p = static_cast<uint128>(a) * b;
  return {static_cast<std::uint64_t>(p >> 64U), static_cast<std::uint64_t>(p)};
#else
  const std::uint64_t a_lo = a & 0xffffffffU, a_hi = a >> 32U, b_lo = b & 0xffffffffU, b_hi = b >> 32U;
  const std::uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
  const std::uint64_t mid = (ll >> 32U) + (lh & 0xffffffffU) + (hl & 0xffffffffU);
  return {hh + (lh >> 32U) + (hl >> 32U) + (mid >> 32U), (mid << 32U) | (ll & 0xffffffffU)};
#endif
}

/// A uniform draw from `[0, bound)`, `bound >= 1`, without bias (Lemire 2019), for bounds of
/// 32 bits: one engine output, and a division only when that output lands in the biased zone.
[[nodiscard]] inline std::uint32_t bounded32(Engine& engine, std::uint32_t bound) noexcept {
  std::uint64_t m = std::uint64_t{engine()} * bound;
  if (static_cast<std::uint32_t>(m) < bound) {
    const std::uint32_t threshold = static_cast<std::uint32_t>(-bound) % bound;
    while (static_cast<std::uint32_t>(m) < threshold) m = std::uint64_t{engine()} * bound;
  }
  return static_cast<std::uint32_t>(m >> 32U);
}

/// A uniform draw from `[0, bound)`, `bound >= 1`, without bias (Lemire 2019).
[[nodiscard]] inline std::uint64_t bounded(Engine& engine, std::uint64_t bound) noexcept {
  if (bound <= 0xffffffffULL) return bounded32(engine, static_cast<std::uint32_t>(bound));
  // Two statements: the order of two calls within one expression is unspecified.
  const auto next64 = [&engine] {
    const std::uint64_t high = engine();
    const std::uint64_t low = engine();
    return (high << 32U) | low;
  };
  Wide m = mul_wide(next64(), bound);
  if (m.lo < bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    while (m.lo < threshold) m = mul_wide(next64(), bound);
  }
  return m.hi;
}

/// Moves a uniform random selection of `count` elements of `values`, in uniform random order,
/// to its front (a partial Fisher-Yates shuffle); `count == values.size()` shuffles it all.
template <class T>
void partial_shuffle(Engine& engine, std::span<T> values, std::size_t count) noexcept {
  // A local engine: a store into `values` (64-bit integers) may alias the engine's state as far
  // as the compiler knows, which would reload that state from memory on every draw.
  Engine local = engine;
  const std::size_t n = values.size();
  const std::size_t draws = n == 0 ? 0 : std::min(count, n - 1);
  if (n <= 0xffffffffULL) {  // every request's buffer: the draws need no check of their bound's width
    for (std::size_t i = 0; i < draws; ++i) {
      const std::size_t j = i + bounded32(local, static_cast<std::uint32_t>(n - i));
      std::swap(values[i], values[j]);
    }
  } else {
    for (std::size_t i = 0; i < draws; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(bounded(local, n - i));
      std::swap(values[i], values[j]);
    }
  }
  engine = local;
}

/// A keyed bijection of `[0, n)` evaluated at any position in O(1) time and memory: a balanced
/// Feistel network on the smallest even number of bits covering `n`, with cycle-walking back
/// into range (the construction behind Grain's index_shuffle). The domain is under four times
/// `n`, so a position takes under four network passes on average.
class FeistelPermutation {
 public:
  /// A permutation of `[0, n)`, `n >= 1`, chosen by `key`.
  constexpr FeistelPermutation(std::uint64_t n, std::uint64_t key) noexcept : n_(n) {
    unsigned bits = 0;
    while (bits < 64 && (std::uint64_t{1} << bits) < n) ++bits;
    half_bits_ = bits <= 2 ? 1U : (bits + 1) / 2;
    half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
    for (std::size_t r = 0; r < keys_.size(); ++r) keys_[r] = derive(key, r);
  }

  /// The element at position `i` (`i < n`).
  [[nodiscard]] constexpr std::uint64_t operator()(std::uint64_t i) const noexcept {
    if (n_ <= 1) return 0;
    std::uint64_t x = i;
    do x = encrypt(x);
    while (x >= n_);
    return x;
  }

  [[nodiscard]] constexpr std::uint64_t size() const noexcept { return n_; }

 private:
  static constexpr std::size_t rounds = 8;

  [[nodiscard]] constexpr std::uint64_t encrypt(std::uint64_t x) const noexcept {
    std::uint64_t left = x >> half_bits_;
    std::uint64_t right = x & half_mask_;
    for (const std::uint64_t round_key : keys_) {
      const std::uint64_t next = left ^ (mix64(right ^ round_key) & half_mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t n_;
  unsigned half_bits_ = 1;
  std::uint64_t half_mask_ = 1;
  std::array<std::uint64_t, rounds> keys_{};
};

}  // namespace chunksampler::detail
