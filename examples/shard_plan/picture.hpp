// SPDX-License-Identifier: MIT
// The picture's data: per (epoch, rank) row and per epoch, counts of observations in pixel bins.
// The walk fills it; drawing.cpp writes its text and svg.cpp draws it.

#pragma once

#include "common/arith.hpp"

#include <chunksampler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

namespace shard_plan {

namespace cs = chunksampler;

// The picture: this many epochs and ranks at most, over an axis this many pixels wide.
inline constexpr std::int64_t max_drawn_epochs = 4;
inline constexpr std::int64_t max_drawn_ranks = 16;
inline constexpr std::int64_t axis_pixels = 800;
inline constexpr std::size_t max_svg_bytes = 190'000;

struct Bins {
  cs::Slice axis;
  std::int64_t width = 1;  // observations per bin
  std::int64_t count = 0;

  static Bins over(cs::Slice axis, std::int64_t max_bins) {
    Bins bins{.axis = axis, .width = examples::ceil_div(axis.size(), std::min(axis.size(), max_bins))};
    bins.count = examples::ceil_div(axis.size(), bins.width);
    return bins;
  }
  [[nodiscard]] std::size_t of(std::int64_t obs) const noexcept {
    return static_cast<std::size_t>((obs - axis.start) / width);
  }
  [[nodiscard]] cs::Slice span(std::size_t bin) const noexcept {
    const std::int64_t lo = axis.start + static_cast<std::int64_t>(bin) * width;
    return {lo, std::min(axis.stop, lo + width)};
  }
  // Adds the overlap of [s.start, s.stop) with each bin to `counts`.
  void add(std::vector<std::int64_t>& counts, cs::Slice s) const {
    const cs::Slice clipped{std::max(s.start, axis.start), std::min(s.stop, axis.stop)};
    if (clipped.empty()) return;
    for (std::size_t bin = of(clipped.start); bin <= of(clipped.stop - 1); ++bin) {
      const cs::Slice b = span(bin);
      counts[bin] += std::min(b.stop, clipped.stop) - std::max(b.start, clipped.start);
    }
  }
};

struct Row {
  std::vector<std::int64_t> loaded;    // rows of the chunks its requests list
  std::vector<std::int64_t> read;      // positions it reads
  std::vector<std::int64_t> repeated;  // reads of observations already read this epoch
  std::string note;                    // drawn to the row's right
};

struct Picture {
  Bins bins;                                        // over the mask's hull
  std::vector<std::int64_t> masked;                 // per bin: rows inside the mask's ranges
  std::vector<std::uint64_t> epochs;                // drawn epochs
  std::vector<std::int64_t> ranks;                  // drawn ranks
  std::vector<Row> rows;                            // epoch-major
  std::vector<std::vector<std::int64_t>> left_out;  // per drawn epoch: observations no rank reads
  std::vector<std::string> headers;                 // per drawn epoch

  [[nodiscard]] Row* row(std::uint64_t epoch, std::int64_t rank) {
    const auto e = std::find(epochs.begin(), epochs.end(), epoch);
    const auto r = std::find(ranks.begin(), ranks.end(), rank);
    if (e == epochs.end() || r == ranks.end()) return nullptr;
    return &rows[static_cast<std::size_t>((e - epochs.begin()) * std::ssize(ranks) + (r - ranks.begin()))];
  }
};

}  // namespace shard_plan
