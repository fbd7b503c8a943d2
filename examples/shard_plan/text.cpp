// SPDX-License-Identifier: MIT

#include "text.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <string_view>

namespace shard_plan {

std::string slice_text(cs::Slice s) { return fmt::format("[{}, {})", s.start, s.stop); }
std::string run_text(cs::BatchRun r) { return fmt::format("[{}, {})", r.begin, r.end); }

std::string counted(std::int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}
std::string observations(std::int64_t n) { return counted(n, "observation", "observations"); }
std::string batches(std::int64_t n) { return counted(n, "batch", "batches"); }

std::string slices_text(std::span<const cs::Slice> slices, std::int64_t runs) {
  std::string text;
  for (const cs::Slice& s : slices) text += fmt::format("{}{}", text.empty() ? "" : ", ", slice_text(s));
  if (runs > std::ssize(slices)) text += fmt::format(", ... ({} ranges)", runs);
  return text;
}

std::string slices_summary(std::span<const cs::Slice> slices, std::size_t shown) {
  return slices_text(slices.first(std::min(shown, slices.size())), std::ssize(slices));
}

std::string ranges_text(std::span<const cs::Slice> ranges, std::size_t shown) {
  if (ranges.size() == 1) return slice_text(ranges[0]);
  std::string text = fmt::format("{} ranges:", ranges.size());
  for (std::size_t i = 0; i < std::min(shown, ranges.size()); ++i)
    text += fmt::format("{} {}", i == 0 ? "" : ",", slice_text(ranges[i]));
  return ranges.size() > shown ? text + ", ..." : text;
}

std::int64_t rows_in(std::span<const cs::Slice> ranges) {
  std::int64_t total = 0;
  for (const cs::Slice& s : ranges) total += s.size();
  return total;
}

std::string keys_text(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) {
    std::string values;
    for (const char c : key) values += c == ',' ? std::string(", ") : std::string(1, c);
    text +=
        fmt::format("{}{}", text.empty() ? "" : ", ", key.find(',') == std::string::npos ? values : "(" + values + ")");
  }
  return text;
}

std::string short_number(std::int64_t v) {
  if (v < 100'000) return fmt::format("{}", v);
  const auto x = static_cast<double>(v);
  if (x < 999.5e3) return fmt::format("{:.3g}k", x / 1e3);
  if (x < 999.5e6) return fmt::format("{:.3g}M", x / 1e6);
  if (x < 999.5e9) return fmt::format("{:.3g}G", x / 1e9);
  return fmt::format("{:.3g}", x);
}
std::string byte_size(std::int64_t bytes) {
  constexpr std::array<std::string_view, 5> units{"bytes", "KiB", "MiB", "GiB", "TiB"};
  auto size = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (size >= 1024 && unit + 1 < units.size()) {
    size /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.3g} {}", size, units[unit]);
}
std::string short_slice(cs::Slice s) { return fmt::format("[{}, {})", short_number(s.start), short_number(s.stop)); }

std::string short_ranges(std::span<const cs::Slice> ranges) {
  const cs::Slice hull{ranges.front().start, ranges.back().stop};
  if (ranges.size() == 1) return short_slice(hull);
  return fmt::format("{} ranges within {}", ranges.size(), short_slice(hull));
}

std::string parity_list(std::uint64_t first, std::uint64_t epochs) {
  std::string text;
  std::uint64_t shown = 0;
  for (std::uint64_t e = first; e < epochs; e += 2) {
    if (shown == 3) return text + ", ...";
    text += fmt::format("{}{}", text.empty() ? "" : ", ", e);
    ++shown;
  }
  return text;
}

}  // namespace shard_plan
