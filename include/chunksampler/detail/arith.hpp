// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/errors.hpp>

#include <cstdint>
#include <string_view>

namespace chunksampler::detail {

/// The largest size the library accepts for `n_obs`, `num_samples` and every product of sizes.
/// The headroom is one bit, not two sizes: two admissible sizes sum to at most 2^63, one more
/// than `INT64_MAX`. A sum fits when one term is strictly below 2^62 (an index or a start, say,
/// plus a size), or when both are parts of one admissible whole; a sum of two counts that may
/// each reach 2^62 goes through `checked_add`.
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

/// `a + b` for `a` and `b` in `[0, 2^62]`, when it stays at or below `max_size`; else throws `E`
/// (`ConfigError` unless named), naming both terms after `what`, the sum's meaning.
template <class E = ConfigError>
[[nodiscard]] std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  if (a > max_size - b) throw_error<E>("{} ({} + {}) must be <= 2^62", what, a, b);
  return a + b;
}

}  // namespace chunksampler::detail
