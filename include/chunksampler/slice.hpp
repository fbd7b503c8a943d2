// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace chunksampler {

/// A half-open range of observations `[start, stop)`, as Python's `slice(start, stop)`.
///
///     cs::Slice chunk{.start = 128, .stop = 192};   // rows 128..191, size() == 64
struct Slice {
  std::int64_t start = 0;  ///< first observation
  std::int64_t stop = 0;   ///< one past the last observation

  /// Number of observations, `stop - start`.
  [[nodiscard]] constexpr std::int64_t size() const noexcept { return stop - start; }
  /// True when the slice holds no observation.
  [[nodiscard]] constexpr bool empty() const noexcept { return stop <= start; }
  /// True when `obs` lies in `[start, stop)`.
  [[nodiscard]] constexpr bool contains(std::int64_t obs) const noexcept { return start <= obs && obs < stop; }

  friend constexpr bool operator==(const Slice&, const Slice&) noexcept = default;
};

}  // namespace chunksampler
