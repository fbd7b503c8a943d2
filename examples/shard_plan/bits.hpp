// SPDX-License-Identifier: MIT
// The bitmaps a whole walk records its reads in.

#pragma once

#include "mask.hpp"

#include "common/arith.hpp"

#include <chunksampler.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shard_plan {

namespace cs = chunksampler;

// A fixed-size bitmap with the few range operations the checks need.
class Bits {
 public:
  void assign(std::int64_t size) {
    size_ = size;
    words_.assign(static_cast<std::size_t>(examples::ceil_div(size, 64)), 0);
  }
  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  // Sets bit i; returns whether it was already set.
  bool set(std::int64_t i) noexcept {
    std::uint64_t& word = words_[static_cast<std::size_t>(i / 64)];
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    const bool was = (word & bit) != 0;
    word |= bit;
    return was;
  }
  [[nodiscard]] bool test(std::int64_t i) const noexcept {
    return (words_[static_cast<std::size_t>(i / 64)] >> (i % 64) & 1U) != 0;
  }
  // Set bits in [lo, hi).
  [[nodiscard]] std::int64_t count(std::int64_t lo, std::int64_t hi) const noexcept {
    std::int64_t total = 0;
    while (lo < hi && lo % 64 != 0) total += test(lo++) ? 1 : 0;
    for (; lo + 64 <= hi; lo += 64) total += std::popcount(words_[static_cast<std::size_t>(lo / 64)]);
    while (lo < hi) total += test(lo++) ? 1 : 0;
    return total;
  }
  [[nodiscard]] std::int64_t count() const noexcept { return count(0, size_); }
  // The first clear bit at or after i (size() if none).
  [[nodiscard]] std::int64_t next_clear(std::int64_t i) const noexcept { return next(i, true); }
  // The first set bit at or after i (size() if none).
  [[nodiscard]] std::int64_t next_set(std::int64_t i) const noexcept { return next(i, false); }
  // Whether every bit of `*this | other` is set.
  [[nodiscard]] bool covers_with(const Bits& other) const noexcept {
    for (std::int64_t i = 0; i < size_; i += 64) {
      const std::int64_t n = std::min<std::int64_t>(64, size_ - i);
      const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
      const auto w = static_cast<std::size_t>(i / 64);
      if (((words_[w] | other.words_[w]) & all) != all) return false;
    }
    return true;
  }
  friend bool operator==(const Bits&, const Bits&) = default;

 private:
  [[nodiscard]] std::int64_t next(std::int64_t i, bool clear) const noexcept {
    while (i < size_) {
      const std::uint64_t word = words_[static_cast<std::size_t>(i / 64)];
      const std::uint64_t looked = (clear ? ~word : word) >> (i % 64);
      if (looked != 0) return std::min(size_, i + std::countr_zero(looked));
      i = (i / 64 + 1) * 64;
    }
    return size_;
  }

  std::int64_t size_ = 0;
  std::vector<std::uint64_t> words_;
};

// The rows of `mask` whose positions are clear in `bits`, as ranges: the first `keep` of them and
// how many in all.
struct Gaps {
  std::vector<cs::Slice> first;
  std::int64_t runs = 0;
  std::int64_t total = 0;
};
inline Gaps clear_runs(const Bits& bits, const Mask& mask, std::size_t keep) {
  Gaps gaps;
  for (std::int64_t i = bits.next_clear(0); i < bits.size(); i = bits.next_clear(i)) {
    const std::int64_t end = bits.next_set(i);
    for (const cs::Slice& rows : mask.rows(i, end - i)) {
      if (gaps.first.size() < keep) gaps.first.push_back(rows);
      ++gaps.runs;
    }
    gaps.total += end - i;
    i = end;
  }
  return gaps;
}

}  // namespace shard_plan
