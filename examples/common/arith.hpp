// SPDX-License-Identifier: MIT
// The integer arithmetic of the shard contract, which the examples compute independently of the
// library so that their checks compare two computations.

#pragma once

#include <cstdint>

namespace examples {

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b near INT64_MAX.
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

/// The largest multiple of b that is <= a, for a >= 0, b > 0.
[[nodiscard]] constexpr std::int64_t round_down(std::int64_t a, std::int64_t b) noexcept { return a / b * b; }

}  // namespace examples
