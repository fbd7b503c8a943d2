// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace chunksampler::detail {

/// The largest size the library accepts for `n_obs`, `num_samples` and every product of sizes;
/// it leaves headroom so that a sum of two admissible sizes never overflows `std::int64_t`.
inline constexpr std::int64_t max_size = std::int64_t{1} << 62;

/// `ceil(a / b)` for `a >= 0`, `b >= 1`, without the overflow of `(a + b - 1) / b`.
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

/// `a` rounded down to a multiple of `b` (`a >= 0`, `b >= 1`).
[[nodiscard]] constexpr std::int64_t round_down(std::int64_t a, std::int64_t b) noexcept { return a / b * b; }

/// True when `a * b` (both >= 0) stays at or below `max_size`.
[[nodiscard]] constexpr bool product_fits(std::int64_t a, std::int64_t b) noexcept {
  return b == 0 || a <= max_size / b;
}

}  // namespace chunksampler::detail
