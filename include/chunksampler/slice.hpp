// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <limits>

namespace chunksampler {

/// A half-open range of observations `[start, stop)`, as Python's `slice(start, stop)`.
///
///     cs::Slice chunk{.start = 128, .stop = 192};   // rows 128..191, size() == 64
///     cs::Slice::from(1000)                          // as a mask: [1000, n_obs), slice(1000, None)
struct Slice {
  /// The `stop` of an open-ended mask: the range ends at `n_obs`, whatever it is.
  static constexpr std::int64_t to_end = std::numeric_limits<std::int64_t>::max();

  std::int64_t start = 0;  ///< first observation
  std::int64_t stop = 0;   ///< one past the last observation

  /// The open-ended range `[start, n_obs)`, annbatch's `slice(start, None)`; as a sampler's mask
  /// it ends at each epoch's `n_obs`.
  [[nodiscard]] static constexpr Slice from(std::int64_t start) noexcept { return {start, to_end}; }
  /// True when the range ends at `n_obs` (`stop == to_end`).
  [[nodiscard]] constexpr bool open_ended() const noexcept { return stop == to_end; }
  /// The range over `n_obs` observations: `[start, n_obs)` when open-ended, else itself.
  [[nodiscard]] constexpr Slice resolve(std::int64_t n_obs) const noexcept {
    return open_ended() ? Slice{start, n_obs} : *this;
  }

  /// Number of observations, `stop - start`.
  [[nodiscard]] constexpr std::int64_t size() const noexcept { return stop - start; }
  /// True when the slice holds no observation.
  [[nodiscard]] constexpr bool empty() const noexcept { return stop <= start; }
  /// True when `obs` lies in `[start, stop)`.
  [[nodiscard]] constexpr bool contains(std::int64_t obs) const noexcept { return start <= obs && obs < stop; }

  friend constexpr bool operator==(const Slice&, const Slice&) noexcept = default;
};

}  // namespace chunksampler
