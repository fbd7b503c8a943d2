// SPDX-License-Identifier: MIT
// How the planner writes numbers, ranges and tables.

#pragma once

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shard_plan {

namespace cs = chunksampler;

std::string slice_text(cs::Slice s);
std::string run_text(cs::BatchRun r);

// "1 batch", "2 batches".
std::string counted(std::int64_t n, std::string_view one, std::string_view many);
std::string observations(std::int64_t n);
std::string batches(std::int64_t n);

// "[0, 10), [20, 30)", and ", ... (N ranges)" when `runs` is more than the slices listed.
std::string slices_text(std::span<const cs::Slice> slices, std::int64_t runs);

// The first `shown` of `slices` and, when there are more, how many: "[0, 10), [20, 30), ... (7 ranges)".
std::string slices_summary(std::span<const cs::Slice> slices, std::size_t shown = 3);

// One range as itself, several as their count and the first `shown`: "3 ranges: [0, 10), [20, 30), ...".
std::string ranges_text(std::span<const cs::Slice> ranges, std::size_t shown = 2);
// Observations in `ranges`.
std::int64_t rows_in(std::span<const cs::Slice> ranges);

// The keys of --select: "train, test" (one column), "(train, K562), (train, HepG2)" (two).
std::string keys_text(const std::vector<std::string>& keys);

// A number short enough for a tick or a note: 950, 20000, 12.5k, 3.5M, 4.61e+18.
std::string short_number(std::int64_t v);
// "8 MiB": a size in bytes, in the largest binary unit that leaves at least 1.
std::string byte_size(std::int64_t bytes);
std::string short_slice(cs::Slice s);
// One range as short_slice, several as their count and hull: "3 ranges within [0, 24.9k)".
std::string short_ranges(std::span<const cs::Slice> ranges);

// The epochs of one parity below `epochs`, as "0, 2, 4, ...".
std::string parity_list(std::uint64_t first, std::uint64_t epochs);

// Long lists of ranks show `at_each_end` ranks at each end when there are more than `max`.
[[nodiscard]] inline bool listed_rank(std::int64_t rank, std::int64_t world, std::int64_t max,
                                      std::int64_t at_each_end) {
  return world <= max || rank < at_each_end || rank >= world - at_each_end;
}

// Left-aligns the second column (the shard ranges) and right-aligns the others, numbers all.
template <std::size_t N>
void print_table(const std::vector<std::array<std::string, N>>& rows) {
  std::array<std::size_t, N> width{};
  for (const auto& row : rows)
    for (std::size_t c = 0; c < N; ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < N; ++c) {
      if (c > 0) line += "  ";
      line += c == 1 ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  }
}

}  // namespace shard_plan
