// SPDX-License-Identifier: MIT
#pragma once

// Seeded randomness that gives the same numbers on every compiler and platform: pcg32 engines,
// our own bounded draws (Lemire's multiply-shift with rejection), Fisher-Yates shuffles and keyed
// permutations.
// The standard library's distributions and shuffle are implementation-defined and never used.

#include <pcg_random.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
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

/// The smallest `s` with `s * s >= n`, for `n <= 2^62`.
[[nodiscard]] constexpr std::uint64_t ceil_sqrt(std::uint64_t n) noexcept {
  std::uint64_t lo = 0;
  std::uint64_t hi = std::uint64_t{1} << 31U;  // (2^31)^2 = 2^62
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (mid * mid >= n) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/// A keyed bijection of `[0, n)`, `n <= 2^62`, evaluated at any position in O(1) time and
/// memory: a Feistel network on the square `[0, s)^2`, `s = ceil(sqrt(n))`, whose rounds add a
/// keyed function of one half to the other modulo `s`, with cycle-walking back into `[0, n)`
/// (fewer than `2s` of the square's `s^2` values lie outside, so a position takes one network
/// pass but for a fraction `2 / s`), then composed with the transposition `(0 1)` when a bit of
/// the key is set.
///
/// Why its orders look uniform. By Luby and Rackoff, four rounds of independent random
/// functions already make the network indistinguishable from a random permutation for queries
/// far fewer than `s`; Patarin's analyses carry that towards `s^2` with more rounds, and we use
/// twelve, keyed through `derive`. Rounds that add modulo `s`, unlike rounds that XOR halves of
/// two or more bits (every such network is an even permutation of its domain), do not confine
/// the orders to a parity class; the key's extra transposition makes even and odd orders
/// exactly equally likely whatever the rounds give. Small `n` is where a network's family of
/// orders is too small to be uniform, which is why `KeyedPermutation` uses it only above
/// `KeyedPermutation::table_limit` elements, where `s >= 257`; the statistical tests in
/// `tests/test_uniform_order.cpp` check both sides of that limit.
class FeistelPermutation {
 public:
  /// A permutation of `[0, n)`, `1 <= n <= 2^62`, chosen by `key`.
  constexpr FeistelPermutation(std::uint64_t n, std::uint64_t key) noexcept
      : n_(n),
        side_(std::max<std::uint64_t>(ceil_sqrt(n), 2)),
        inverse_side_(1.0 / static_cast<double>(side_)),
        flip_((derive(key, rounds) & 1U) != 0) {
    for (std::size_t r = 0; r < keys_.size(); ++r) keys_[r] = derive(key, r);
  }

  /// The element at position `i` (`i < n`).
  [[nodiscard]] constexpr std::uint64_t operator()(std::uint64_t i) const noexcept {
    if (n_ <= 1) return 0;
    std::uint64_t x = i;
    do x = encrypt(x);
    while (x >= n_);
    return flip_ && x < 2 ? x ^ 1U : x;
  }

  /// The position of element `x` (`x < n`): `inverse(p(i)) == i`. Cycle-walking backwards
  /// through the network retraces the forward walk, so it costs what a lookup does.
  [[nodiscard]] constexpr std::uint64_t inverse(std::uint64_t x) const noexcept {
    if (n_ <= 1) return 0;
    std::uint64_t i = flip_ && x < 2 ? x ^ 1U : x;
    do i = decrypt(i);
    while (i >= n_);
    return i;
  }

  /// `out[l] = (*this)(in[l])` for every `l` (`in.size() == out.size()`), or with `Inverse`
  /// `out[l] = inverse(in[l])`. The same values as one call at a time; lookups go through the
  /// network in lanes, so that independent ones overlap instead of waiting on each other's
  /// multiplies (a request's chunks, the short chunks of a many-range mask).
  template <bool Inverse = false>
  constexpr void map(std::span<const std::uint64_t> in, std::span<std::uint64_t> out) const noexcept {
    const std::size_t whole = n_ > 1 ? in.size() / lanes * lanes : 0;
    for (std::size_t i = 0; i < whole; i += lanes) map_lanes<Inverse>(in.subspan(i, lanes), out.subspan(i, lanes));
    std::ranges::transform(in.subspan(whole), out.subspan(whole).begin(),
                           [this](std::uint64_t x) { return Inverse ? inverse(x) : (*this)(x); });
  }

  [[nodiscard]] constexpr std::uint64_t size() const noexcept { return n_; }

 private:
  static constexpr std::size_t rounds = 12;
  static constexpr std::size_t lanes = 8;

  // One network pass for `lanes` values at once, then each walks on alone while it lies outside
  // [0, n) (a fraction 2 / side of them).
  template <bool Inverse>
  constexpr void map_lanes(std::span<const std::uint64_t> in, std::span<std::uint64_t> out) const noexcept {
    std::array<std::uint64_t, lanes> left{};
    std::array<std::uint64_t, lanes> right{};
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::uint64_t x = Inverse && flip_ && in[l] < 2 ? in[l] ^ 1U : in[l];
      const Halves h = halves(x);
      left[l] = h.left;
      right[l] = h.right;
    }
    for (std::size_t r = 0; r < rounds; ++r) {
      const std::uint64_t round_key = keys_[Inverse ? rounds - 1 - r : r];
      for (std::size_t l = 0; l < lanes; ++l) {
        if constexpr (Inverse) {
          const std::uint64_t f = mul_wide(mix64(left[l] ^ round_key), side_).hi;
          const std::uint64_t previous = right[l] >= f ? right[l] - f : right[l] + side_ - f;
          right[l] = left[l];
          left[l] = previous;
        } else {
          const std::uint64_t f = mul_wide(mix64(right[l] ^ round_key), side_).hi;
          std::uint64_t next = left[l] + f;
          if (next >= side_) next -= side_;
          left[l] = right[l];
          right[l] = next;
        }
      }
    }
    for (std::size_t l = 0; l < lanes; ++l) {
      std::uint64_t x = left[l] * side_ + right[l];
      while (x >= n_) x = Inverse ? decrypt(x) : encrypt(x);
      out[l] = !Inverse && flip_ && x < 2 ? x ^ 1U : x;
    }
  }

  struct Halves {
    std::uint64_t left;
    std::uint64_t right;
  };
  // `{x / side, x % side}` for `x < side^2`, without a division: the quotient from a multiply by
  // `1 / side` in double precision is within 1 of the true one (x < 2^62, side < 2^31), and the
  // remainder's sign and size say which way to correct it.
  [[nodiscard]] constexpr Halves halves(std::uint64_t x) const noexcept {
    std::uint64_t q = static_cast<std::uint64_t>(static_cast<double>(x) * inverse_side_);
    auto r = static_cast<std::int64_t>(x - q * side_);
    if (r < 0) --q, r += static_cast<std::int64_t>(side_);
    else if (r >= static_cast<std::int64_t>(side_)) ++q, r -= static_cast<std::int64_t>(side_);
    return {q, static_cast<std::uint64_t>(r)};
  }

  // One pass of the network over [0, side^2): (left, right) -> (right, left + F(right) mod side).
  [[nodiscard]] constexpr std::uint64_t encrypt(std::uint64_t x) const noexcept {
    auto [left, right] = halves(x);
    for (const std::uint64_t round_key : keys_) {
      // A keyed hash of `right` scaled to [0, side) by a multiply-high.
      const std::uint64_t f = mul_wide(mix64(right ^ round_key), side_).hi;
      std::uint64_t next = left + f;
      if (next >= side_) next -= side_;
      left = right;
      right = next;
    }
    return left * side_ + right;
  }

  // `encrypt` undone: its rounds in reverse, (left, right) -> (right - F(left) mod side, left).
  [[nodiscard]] constexpr std::uint64_t decrypt(std::uint64_t x) const noexcept {
    auto [left, right] = halves(x);
    for (auto round_key = keys_.rbegin(); round_key != keys_.rend(); ++round_key) {
      const std::uint64_t f = mul_wide(mix64(left ^ *round_key), side_).hi;
      const std::uint64_t previous = right >= f ? right - f : right + side_ - f;
      right = left;
      left = previous;
    }
    return left * side_ + right;
  }

  std::uint64_t n_;
  std::uint64_t side_;
  double inverse_side_;
  bool flip_;
  std::array<std::uint64_t, rounds> keys_{};
};

/// A keyed permutation of `[0, n)`, `n <= 2^62`, that is uniform at every size: up to
/// `table_limit` elements an exact Fisher-Yates shuffle (unbiased bounded draws from a pcg32
/// stream of the key), built at the first lookup into a table of `2n` bytes (at most 128 KiB)
/// that copies share; above it a `FeistelPermutation`, O(1) in time and memory per lookup.
/// Construction is cheap either way (counting an epoch's batches never shuffles), and a lookup
/// is safe from several threads: the table is built once, under `std::call_once`.
class KeyedPermutation {
 public:
  /// Sizes up to this are shuffled into a table.
  static constexpr std::uint64_t table_limit = std::uint64_t{1} << 16U;
  /// A table's entries: 2 bytes, so that a whole epoch's order (up to 128 KiB) stays in the
  /// cache while it is shuffled and read, and below the size the allocator maps afresh.
  using Entry = std::uint16_t;
  static_assert(table_limit - 1 <= std::numeric_limits<Entry>::max());

  /// A permutation of `[0, n)`, `1 <= n <= 2^62`, chosen by `key`.
  KeyedPermutation(std::uint64_t n, std::uint64_t key)
      : feistel_(n, key), table_(n > 1 && n <= table_limit ? std::make_shared<Table>(n, key) : nullptr) {}

  /// The element at position `i` (`i < n`).
  [[nodiscard]] std::uint64_t operator()(std::uint64_t i) const { return table_ ? table_->at(i) : feistel_(i); }
  /// The position of element `x` (`x < n`); a table's inverse is built at the first call.
  [[nodiscard]] std::uint64_t inverse(std::uint64_t x) const {
    return table_ ? table_->position_of(x) : feistel_.inverse(x);
  }

  /// `out[l] = (*this)(in[l])`, or with `Inverse` `out[l] = inverse(in[l])`, for every `l`
  /// (`in.size() == out.size()`): many lookups at once, which overlap in the network.
  template <bool Inverse = false>
  void map(std::span<const std::uint64_t> in, std::span<std::uint64_t> out) const {
    if (!table_) return feistel_.map<Inverse>(in, out);
    if (Inverse && in.size() <= Table::scanned_at_most) return table_->find(in, out);
    const std::span<const Entry> table = Inverse ? table_->positions() : table_->values();
    std::ranges::transform(in, out.begin(), [table](std::uint64_t x) { return table[static_cast<std::size_t>(x)]; });
  }

  [[nodiscard]] std::uint64_t size() const noexcept { return feistel_.size(); }

 private:
  // Stream index of the Fisher-Yates draws, apart from the Feistel round keys (0..12).
  static constexpr std::uint64_t table_stream = 0x7461626cU;

  class Table {
   public:
    /// Inverse lookups of at most this many elements at once search the table instead of
    /// building its inverse: an epoch's plan asks for its one or two short chunks' places, and a
    /// scan of the values for them costs a fraction of building (and allocating) the inverse.
    static constexpr std::size_t scanned_at_most = 8;

    Table(std::uint64_t n, std::uint64_t key) noexcept : n_(static_cast<std::size_t>(n)), key_(key) {}

    [[nodiscard]] std::uint64_t at(std::uint64_t i) { return values()[static_cast<std::size_t>(i)]; }
    [[nodiscard]] std::uint64_t position_of(std::uint64_t x) { return positions()[static_cast<std::size_t>(x)]; }

    /// The permutation, position by position, shuffled at the first call.
    [[nodiscard]] std::span<const Entry> values() {
      std::call_once(built_, [this] {
        values_ = std::make_unique_for_overwrite<Entry[]>(n_);
        const std::span<Entry> values(values_.get(), n_);
        std::iota(values.begin(), values.end(), Entry{0});
        Engine engine = make_engine(key_, table_stream);
        partial_shuffle(engine, values, n_);
      });
      return {values_.get(), n_};
    }

    /// Its inverse, element by element, built at the first call.
    [[nodiscard]] std::span<const Entry> positions() {
      const std::span<const Entry> values = this->values();
      std::call_once(inverted_, [this, values] {
        positions_ = std::make_unique_for_overwrite<Entry[]>(n_);
        for (std::size_t i = 0; i < n_; ++i) positions_[values[i]] = static_cast<Entry>(i);
      });
      return {positions_.get(), n_};
    }

    /// `out[l]` = the position of `in[l]`, for a few elements: a pass over the values for each,
    /// summing the one index that holds it, without a branch (the compiler vectorizes the sum).
    void find(std::span<const std::uint64_t> in, std::span<std::uint64_t> out) {
      const std::span<const Entry> values = this->values();
      for (std::size_t l = 0; l < in.size(); ++l) {
        const auto wanted = static_cast<Entry>(in[l]);
        std::uint32_t found = 0;
        const auto size = static_cast<std::uint32_t>(values.size());  // at most table_limit
        for (std::uint32_t i = 0; i < size; ++i) found += values[i] == wanted ? i : 0;
        out[l] = found;
      }
    }

   private:
    std::size_t n_;
    std::uint64_t key_;
    std::once_flag built_;
    std::once_flag inverted_;
    std::unique_ptr<Entry[]> values_;
    std::unique_ptr<Entry[]> positions_;
  };

  FeistelPermutation feistel_;
  std::shared_ptr<Table> table_;
};

}  // namespace chunksampler::detail
