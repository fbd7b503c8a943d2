// SPDX-License-Identifier: MIT
// The sampled rows: the mask's ranges (or all of [0, n_obs)) and the positions along their
// union, computed here independently of cs::Ranges so that the checks compare two computations.

#pragma once

#include <chunksampler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <vector>

namespace shard_plan {

namespace cs = chunksampler;

// Closed, sorted, disjoint ranges; position k is the union's k-th row in row order.
class Mask {
 public:
  Mask() = default;
  // `ranges` sorted and disjoint (as cs::Ranges checks them); adjacent ones are merged.
  explicit Mask(std::span<const cs::Slice> ranges) {
    for (const cs::Slice& r : ranges) {
      if (!ranges_.empty() && ranges_.back().stop == r.start) {
        ranges_.back().stop = r.stop;
      } else {
        before_.push_back(count_);
        ranges_.push_back(r);
      }
      count_ += r.size();
    }
  }

  [[nodiscard]] std::span<const cs::Slice> ranges() const noexcept { return ranges_; }
  [[nodiscard]] std::int64_t count() const noexcept { return count_; }
  // From the first range's start to the last's stop.
  [[nodiscard]] cs::Slice hull() const noexcept { return {ranges_.front().start, ranges_.back().stop}; }

  // The rows at positions [first, first + count) of the union, as ranges.
  [[nodiscard]] std::vector<cs::Slice> rows(std::int64_t first, std::int64_t count) const {
    std::vector<cs::Slice> out;
    if (count <= 0) return out;
    std::size_t i = range_at(first);
    std::int64_t at = first;
    const std::int64_t end = first + count;
    for (; at < end; ++i) {
      const std::int64_t lo = ranges_[i].start + (at - before_[i]);
      const std::int64_t hi = ranges_[i].start + (std::min(end, before_[i] + ranges_[i].size()) - before_[i]);
      out.push_back({lo, hi});
      at += hi - lo;
    }
    return out;
  }
  [[nodiscard]] std::vector<cs::Slice> rows(cs::Slice positions) const {
    return rows(positions.start, positions.size());
  }

  // The index of the range holding `row`, if any.
  [[nodiscard]] std::optional<std::size_t> range_of(std::int64_t row) const noexcept {
    const auto after = std::upper_bound(ranges_.begin(), ranges_.end(), row,
                                        [](std::int64_t r, const cs::Slice& s) { return r < s.start; });
    if (after == ranges_.begin()) return std::nullopt;
    const auto i = static_cast<std::size_t>(std::prev(after) - ranges_.begin());
    if (!ranges_[i].contains(row)) return std::nullopt;
    return i;
  }
  // Where `row` stands in the union, if it is in it.
  [[nodiscard]] std::optional<std::int64_t> position_of(std::int64_t row) const noexcept {
    const std::optional<std::size_t> i = range_of(row);
    if (!i) return std::nullopt;
    return before_[*i] + (row - ranges_[*i].start);
  }
  // Whether `s` (non-empty) lies inside one range.
  [[nodiscard]] bool holds(cs::Slice s) const noexcept {
    const std::optional<std::size_t> i = range_of(s.start);
    return i && s.stop <= ranges_[*i].stop;
  }

 private:
  // The range holding position k (0 <= k < count).
  [[nodiscard]] std::size_t range_at(std::int64_t k) const noexcept {
    return static_cast<std::size_t>(std::upper_bound(before_.begin(), before_.end(), k) - before_.begin()) - 1;
  }

  std::vector<cs::Slice> ranges_;
  std::vector<std::int64_t> before_;  // positions before range i
  std::int64_t count_ = 0;
};

// Whether `s` (non-empty) lies inside one of `pieces` (sorted, disjoint).
[[nodiscard]] inline bool inside_one(std::span<const cs::Slice> pieces, cs::Slice s) noexcept {
  const auto after = std::upper_bound(pieces.begin(), pieces.end(), s.start,
                                      [](std::int64_t r, const cs::Slice& p) { return r < p.start; });
  if (after == pieces.begin()) return false;
  const cs::Slice& p = *std::prev(after);
  return p.start <= s.start && s.stop <= p.stop;
}

// Whether `row` is where one of `pieces` (sorted, disjoint) starts.
[[nodiscard]] inline bool starts_piece(std::span<const cs::Slice> pieces, std::int64_t row) noexcept {
  const auto at = std::lower_bound(pieces.begin(), pieces.end(), row,
                                   [](const cs::Slice& p, std::int64_t r) { return p.start < r; });
  return at != pieces.end() && at->start == row;
}

}  // namespace shard_plan
