// SPDX-License-Identifier: MIT
#pragma once

// The scan behind `split_mask` (<chunksampler/split.hpp>): which rows' keys are selected, found in
// one pass over the codes, as the maximal runs of selected rows.

#include <chunksampler/slice.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace chunksampler::detail {

/// A column's codes as a span of their own type: every standard integer type a `ClassCode` can
/// be, so codes are read as the type they were written as (`long` and `long long` are distinct).
using CodeSpan = std::variant<std::span<const signed char>, std::span<const unsigned char>, std::span<const short>,
                              std::span<const unsigned short>, std::span<const int>, std::span<const unsigned int>,
                              std::span<const long>, std::span<const unsigned long>, std::span<const long long>,
                              std::span<const unsigned long long>>;

/// A code as a table index: a negative code wraps to an index above every table, so it is never
/// found (pandas' NA, -1, matches nothing).
template <class T>
[[nodiscard]] constexpr std::uint64_t code_index(T code) noexcept {
  if constexpr (std::is_signed_v<T>) return static_cast<std::uint64_t>(static_cast<std::int64_t>(code));
  else return static_cast<std::uint64_t>(code);
}

/// Ids `0, 1, ...` for a set of non-negative integers (codes, or pairs packed into one), in the
/// order they were added; anything else has id -1. A table when the largest is below
/// `table_size` (at most a column's categories, or 2^16), else a hash map: memory stays
/// O(categories + selection) whatever the codes' values.
class IdMap {
 public:
  static constexpr std::int32_t none = -1;

  /// The id of `value` (>= 0), added if new. Call `seal(table_size)` after the last.
  std::int32_t add(std::int64_t value) {
    const auto [at, inserted] = building_.try_emplace(value, static_cast<std::int32_t>(building_.size()));
    if (inserted) {
      max_ = std::max(max_, value);
      ++count_;
    }
    return at->second;
  }

  /// Chooses the lookup: a table of `max + 1` entries when that is at most `table_size`.
  void seal(std::int64_t table_size) {
    if (max_ < table_size) {
      table_.assign(static_cast<std::size_t>(max_ + 1), none);
      for (const auto& [value, id] : building_) table_[static_cast<std::size_t>(value)] = id;
      building_.clear();
    }
  }

  /// Number of distinct values added.
  [[nodiscard]] std::int64_t size() const noexcept { return count_; }

  /// True when lookups go through a table (`find` then reads one entry, no hashing).
  [[nodiscard]] bool dense() const noexcept { return !table_.empty(); }
  /// The table (only when `dense()`).
  [[nodiscard]] std::span<const std::int32_t> table() const noexcept { return table_; }

  /// The id of `index` (a `code_index`), or `none`.
  [[nodiscard]] std::int32_t find(std::uint64_t index) const {
    if (dense()) return index < table_.size() ? table_[static_cast<std::size_t>(index)] : none;
    if (index > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return none;
    const auto at = building_.find(static_cast<std::int64_t>(index));
    return at == building_.end() ? none : at->second;
  }

 private:
  std::unordered_map<std::int64_t, std::int32_t> building_;  ///< every value, until a table replaces it
  std::vector<std::int32_t> table_;
  std::int64_t max_ = -1;
  std::int64_t count_ = 0;
};

/// Which rows a selection of keys (one code per column each) matches, narrowed column by column:
/// column 0's code gives the id of a key prefix of length 1 (or none), and each next column's
/// code takes a prefix of length c to one of length c + 1 through a transition map (or to none).
/// A row is selected when a prefix of full length survives. Every step is one lookup, so
/// matching costs O(columns) per row whatever the selection's size, in O(categories + keys)
/// memory.
class KeyMatcher {
 public:
  /// `keys` holds `n_keys * n_columns` codes (>= 0), key after key; `table_sizes[c]` is the
  /// largest table column `c` may use.
  KeyMatcher(std::span<const std::int64_t> keys, std::size_t n_columns, std::span<const std::int64_t> table_sizes)
      : codes_(n_columns), steps_(n_columns) {
    const std::size_t n_keys = keys.size() / n_columns;
    // Codes of every column first, so each column's ids (and their count) are final before
    // the transitions are packed as prefix * count + code id.
    for (std::size_t k = 0; k < n_keys; ++k)
      for (std::size_t c = 0; c < n_columns; ++c) (void)codes_[c].add(keys[k * n_columns + c]);
    for (std::size_t c = 0; c < n_columns; ++c) codes_[c].seal(table_sizes[c]);
    for (std::size_t k = 0; k < n_keys; ++k) {
      std::int64_t prefix = codes_[0].find(static_cast<std::uint64_t>(keys[k * n_columns]));
      for (std::size_t c = 1; c < n_columns; ++c) {
        const std::int64_t id = codes_[c].find(static_cast<std::uint64_t>(keys[k * n_columns + c]));
        prefix = steps_[c].add(prefix * codes_[c].size() + id);
      }
    }
    // A transition table indexed by the packed pair when that stays below 2^20 entries (4 MiB),
    // else the hash map.
    for (std::size_t c = 1; c < n_columns; ++c) steps_[c].seal(std::int64_t{1} << 20);
  }

  /// Number of columns.
  [[nodiscard]] std::size_t n_columns() const noexcept { return codes_.size(); }
  /// The ids of column `c`'s selected codes.
  [[nodiscard]] const IdMap& codes(std::size_t c) const noexcept { return codes_[c]; }
  /// The prefix of length `c + 1` after prefix `prefix` (of length `c`, >= 0) and code id `id`.
  [[nodiscard]] std::int32_t step(std::size_t c, std::int32_t prefix, std::int32_t id) const {
    if (id == IdMap::none) return IdMap::none;
    return steps_[c].find(static_cast<std::uint64_t>(prefix) * static_cast<std::uint64_t>(codes_[c].size()) +
                          static_cast<std::uint64_t>(id));
  }

 private:
  std::vector<IdMap> codes_;  ///< per column: selected code -> id
  std::vector<IdMap> steps_;  ///< per column c >= 1: packed (prefix, code id) -> prefix of length c + 1
};

/// The maximal runs of rows for which `selected(codes[i])` holds, appended to `runs`: two tight
/// loops, one over unselected rows and one over selected ones, so a selection that follows the
/// order on disk costs one well-predicted branch per row. (Cutting 64-row bit words at their
/// edges instead was slower on ordered data and no faster on scattered data, whose cost is
/// writing its many runs.)
template <class T, class Selected>
void append_runs(std::span<const T> codes, Selected selected, std::vector<Slice>& runs) {
  const std::size_t n = codes.size();
  std::size_t i = 0;
  while (true) {
    while (i < n && !selected(codes[i])) ++i;
    if (i == n) return;
    const std::size_t start = i;
    while (i < n && selected(codes[i])) ++i;
    runs.push_back({static_cast<std::int64_t>(start), static_cast<std::int64_t>(i)});
  }
}

/// The runs of rows of one column whose code `ids` holds.
template <class T>
void scan_one(std::span<const T> codes, const IdMap& ids, std::vector<Slice>& runs) {
  if (ids.dense()) {
    const std::span<const std::int32_t> table = ids.table();
    const std::int32_t* entries = table.data();
    const std::uint64_t size = table.size();
    append_runs(
        codes,
        [entries, size](T code) {
          const std::uint64_t index = code_index(code);
          return index < size && entries[index] != IdMap::none;
        },
        runs);
  } else {
    append_runs(codes, [&ids](T code) { return ids.find(code_index(code)) != IdMap::none; }, runs);
  }
}

/// The runs of rows, over columns of `n_rows` codes each, whose key `matcher` matches: rows in
/// blocks, each block's prefix ids narrowed column by column (one type dispatch per column and
/// block), then cut into runs that continue across blocks.
inline void scan_many(std::span<const CodeSpan> columns, std::int64_t n_rows, const KeyMatcher& matcher,
                      std::vector<Slice>& runs) {
  constexpr std::int64_t block = 2048;
  std::array<std::int32_t, block> prefix{};
  std::int64_t open = -1;  // the start of the run under way, or -1
  for (std::int64_t base = 0; base < n_rows; base += block) {
    const auto len = static_cast<std::size_t>(std::min(block, n_rows - base));
    const auto first = static_cast<std::size_t>(base);
    std::visit(
        [&](auto codes) {
          const IdMap& ids = matcher.codes(0);
          for (std::size_t i = 0; i < len; ++i) prefix[i] = ids.find(code_index(codes[first + i]));
        },
        columns[0]);
    for (std::size_t c = 1; c < columns.size(); ++c)
      std::visit(
          [&](auto codes) {
            const IdMap& ids = matcher.codes(c);
            for (std::size_t i = 0; i < len; ++i)
              if (prefix[i] != IdMap::none)
                prefix[i] = matcher.step(c, prefix[i], ids.find(code_index(codes[first + i])));
          },
          columns[c]);
    for (std::size_t i = 0; i < len; ++i) {
      const bool selected = prefix[i] != IdMap::none;
      const std::int64_t row = base + static_cast<std::int64_t>(i);
      if (selected && open < 0) {
        open = row;
      } else if (!selected && open >= 0) {
        runs.push_back({open, row});
        open = -1;
      }
    }
  }
  if (open >= 0) runs.push_back({open, n_rows});
}

}  // namespace chunksampler::detail
