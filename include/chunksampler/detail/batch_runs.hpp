// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/plan.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace chunksampler::detail {

/// Total batches in `runs`.
[[nodiscard]] inline std::int64_t total_batches(std::span<const BatchRun> runs) noexcept {
  std::int64_t total = 0;
  for (const BatchRun& run : runs) total += run.size();
  return total;
}

/// The runs of plan batches that positions `[from, to)` of the concatenation of `runs` cover.
inline void cut_runs(std::span<const BatchRun> runs, std::int64_t from, std::int64_t to, std::vector<BatchRun>& out) {
  std::int64_t offset = 0;
  for (const BatchRun& run : runs) {
    const std::int64_t lo = std::max(from, offset);
    const std::int64_t hi = std::min(to, offset + run.size());
    if (lo < hi) out.push_back({run.begin + (lo - offset), run.begin + (hi - offset)});
    offset += run.size();
    if (offset >= to) break;
  }
}

}  // namespace chunksampler::detail
