// SPDX-License-Identifier: MIT
#pragma once

// Exact integer arithmetic on weights: the shares of weights as integers, and the 128-bit
// products and quotients that apportioning sizes near 2^62 by them needs. Integers, not floating
// point, so that every platform rounds alike. Used by MixtureSampler and WeightedClassSampler.

#include <chunksampler/detail/random.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace chunksampler::detail {

/// A quotient and its remainder.
struct QuotientRemainder {
  std::uint64_t quotient;
  std::uint64_t remainder;
};

/// `a + b` for 128-bit values (the sum below 2^128).
[[nodiscard]] constexpr Wide add_wide(Wide a, Wide b) noexcept {
  const std::uint64_t lo = a.lo + b.lo;
  return {a.hi + b.hi + (lo < a.lo ? 1U : 0U), lo};
}

/// `floor(n / c)` and `n mod c`, exactly, for a quotient that fits 64 bits and `1 <= c < 2^63`.
[[nodiscard]] constexpr QuotientRemainder div_wide(Wide n, std::uint64_t c) noexcept {
  if (n.hi == 0) return {n.lo / c, n.lo % c};
  // Long division, one bit at a time: portable where no 128-bit integer exists, and it runs a
  // few times per plan. `remainder < c < 2^63`, so doubling it cannot overflow.
  std::uint64_t quotient = 0;
  std::uint64_t remainder = 0;
  for (int bit = 127; bit >= 0; --bit) {
    const std::uint64_t word = bit >= 64 ? n.hi : n.lo;
    remainder = (remainder << 1U) | ((word >> (static_cast<unsigned>(bit) % 64U)) & 1U);
    quotient <<= 1U;
    if (remainder >= c) {
      remainder -= c;
      quotient |= 1U;
    }
  }
  return {quotient, remainder};
}

/// `floor(a * b / c)` and `a * b mod c`, exactly, for a quotient that fits 64 bits and
/// `1 <= c < 2^63`: the products of sizes near 2^62 need 124 bits.
[[nodiscard]] constexpr QuotientRemainder mul_div(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  return div_wide(mul_wide(a, b), c);
}

/// The weights' shares as integers `n_d` (their sum below 2^63), proportional to
/// `w_d^(1 / temperature)`: the quotas are then exact integer arithmetic, the same on every
/// platform. The shares are scaled so the largest lies in `[2^(k-1), 2^k]`, `k` as large as the
/// count allows (53 for up to 512 weights). At temperature 1 the weights are scaled by a power
/// of two, exactly: weights of 53 bits (integers, say) keep their exact ratios, so equal
/// remainders tie as they should. Otherwise they are divided by the largest (which becomes
/// exactly 1, so no power underflows them all) and raised to `1 / temperature` with `std::pow`.
/// A share below half a unit of the scale counts as 0. `weights` are finite, >= 0, one > 0.
[[nodiscard]] inline std::vector<std::uint64_t> share_numerators(std::span<const double> weights, double temperature) {
  const double largest = *std::ranges::max_element(weights);
  int largest_exponent = 0;
  (void)std::frexp(largest, &largest_exponent);
  unsigned count_bits = 0;
  while ((std::uint64_t{1} << count_bits) < weights.size()) ++count_bits;
  const int scale_bits = static_cast<int>(std::min(53U, 62U - count_bits));
  const double exponent = 1.0 / temperature;
  std::vector<std::uint64_t> numerators;
  numerators.reserve(weights.size());
  for (const double w : weights) {
    double share = 0.0;
    if (temperature == 1.0) {
      share = std::ldexp(w, scale_bits - largest_exponent);
    } else {
      const double ratio = w / largest;
      share = std::ldexp(std::pow(ratio, exponent), scale_bits);
    }
    numerators.push_back(static_cast<std::uint64_t>(std::llround(share)));
  }
  return numerators;
}

}  // namespace chunksampler::detail
