// SPDX-License-Identifier: MIT
#pragma once

// Train / validation / test splits chosen by categorical columns (an AnnData `obs` column such as
// `split`, or `split` and `cell_line`), as masks a sampler reads, without rewriting the data.

#include <chunksampler/class_code.hpp>
#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/split_scan.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/slice.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace chunksampler {

/// One categorical column: one code per row, the column's name (for messages) and, optionally,
/// the categories' names (`categories[code]`, as a `pandas.Categorical`'s `categories`). A
/// non-owning view, cheap to copy: the codes must outlive it (and every copy of it).
///
///     std::vector<std::int8_t> split_codes = obs_codes("split");          // 0 train, 1 validation, 2 test
///     cs::CategoryColumn split("split", split_codes, {"train", "validation", "test"});
///     cs::CategoryColumn donor("donor", donor_codes);                      // codes only: select by code
class CategoryColumn {
 public:
  /// The codes as a span of their own integer type.
  using CodeSpan = detail::CodeSpan;

  /// A view of `codes` (any contiguous range of integers but `bool` and the character types:
  /// pandas' codes are int8 or int16) named `name`, with the categories' names if given. Throws
  /// `ConfigError` for more than 2^62 codes. Codes are not checked against the categories: a
  /// code no selection names (pandas' NA, -1, or one past the categories) matches no selection.
  template <std::ranges::contiguous_range Codes>
    requires ClassCode<std::ranges::range_value_t<Codes>>
  CategoryColumn(std::string name, const Codes& codes, std::vector<std::string> categories = {})
      : name_(std::move(name)),
        size_(checked_size(name_, std::ranges::size(codes))),
        codes_(view(std::ranges::data(codes), std::ranges::size(codes))),
        categories_(std::move(categories)) {}
  /// Refused: a temporary container would die before the view (name the codes, then view them).
  template <std::ranges::contiguous_range Codes>
    requires(!std::ranges::borrowed_range<Codes>)
  CategoryColumn(std::string name, Codes&& codes, std::vector<std::string> categories = {}) = delete;

  /// The column's name, as messages show it.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Number of rows (codes).
  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  /// The categories' names, `categories()[code]`; empty when the column has none (select by code).
  [[nodiscard]] const std::vector<std::string>& categories() const noexcept { return categories_; }
  /// The codes, as a span of the type they were given in.
  [[nodiscard]] const CodeSpan& codes() const noexcept { return codes_; }

 private:
  template <class T>
  [[nodiscard]] static CodeSpan view(const T* data, std::size_t size) {
    static_assert(std::is_constructible_v<CodeSpan, std::in_place_type_t<std::span<const T>>, const T*, std::size_t>,
                  "CategoryColumn takes codes of the standard integer types");
    return CodeSpan(std::in_place_type<std::span<const T>>, data, size);
  }

  [[nodiscard]] static std::int64_t checked_size(const std::string& name, std::size_t size) {
    if (size > static_cast<std::size_t>(detail::max_size))
      detail::throw_config("CategoryColumn '{}': {} codes; a column holds at most 2^62 rows", name, size);
    return static_cast<std::int64_t>(size);
  }

  std::string name_;
  std::int64_t size_ = 0;  // checked before the codes are viewed
  CodeSpan codes_;
  std::vector<std::string> categories_;
};

/// One value of a selected key: a category's name, or a code.
using CategoryValue = std::variant<std::int64_t, std::string>;
/// A selected key: one value per column, in the columns' order.
using CategoryKey = std::vector<CategoryValue>;

/// Options of `split_mask`; designated initializers read as keywords.
struct SplitOptions {
  std::int64_t chunk_size = 0;  ///< the sampler's chunk_size (>= 1): runs shorter are short reads
  /// Refuse (`FragmentedSplitError`) when a larger share of the rows lies in short runs; in
  /// `[0, 1]`, none by default.
  std::optional<double> max_short_share = std::nullopt;
};

/// A selection: its rows as a mask for a sampler, and how fragmented it is on disk.
struct Split {
  Ranges mask;         ///< the selected rows: the maximal runs, in row order
  SplitReport report;  ///< runs, rows, short runs (`SplitReport`, in <chunksampler/errors.hpp>)
};

namespace detail {

/// A value as messages show it: a name quoted, a code bare.
[[nodiscard]] inline std::string value_text(const CategoryValue& value) {
  if (const auto* code = std::get_if<std::int64_t>(&value)) return fmt::format("{}", *code);
  return fmt::format("\"{}\"", std::get<std::string>(value));
}

/// Up to `most` items of `items`, each as `text(item)`, comma-separated, then how many in all.
template <class Range, class Text>
[[nodiscard]] std::string some_of(const Range& items, std::size_t most, Text text) {
  std::string out;
  std::size_t shown = 0;
  for (const auto& item : items) {
    if (shown == most) return out + fmt::format(", ... ({} in all)", std::ranges::size(items));
    if (shown++ != 0) out += ", ";
    out += text(item);
  }
  return out;
}

/// The columns' names, as a message lists them: `'split', 'cell_line'`.
[[nodiscard]] inline std::string column_names(std::span<const CategoryColumn> columns) {
  return some_of(columns, columns.size(), [](const CategoryColumn& c) { return fmt::format("'{}'", c.name()); });
}

/// A selection as `split_mask` reads it: keys of one value per column. The one-column form has
/// bare values (named `select[k]`), the general form keys (named `select[k][c]`).
struct SelectionView {
  std::span<const CategoryKey> keys;
  std::span<const CategoryValue> values;  ///< the one-column form's, when `keys` is empty

  [[nodiscard]] bool one_column() const noexcept { return keys.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return one_column() ? values.size() : keys.size(); }
  [[nodiscard]] std::size_t arity(std::size_t k) const noexcept { return one_column() ? 1 : keys[k].size(); }
  [[nodiscard]] const CategoryValue& at(std::size_t k, std::size_t c) const noexcept {
    return one_column() ? values[k] : keys[k][c];
  }
  [[nodiscard]] std::string where(std::size_t k, std::size_t c) const {
    return one_column() ? fmt::format("select[{}]", k) : fmt::format("select[{}][{}]", k, c);
  }
  [[nodiscard]] std::string key_text(std::size_t k) const {
    if (one_column()) return value_text(values[k]);
    return fmt::format("({})", some_of(keys[k], keys[k].size(), value_text));
  }
  /// The first keys, as the message of a selection that matches nothing shows them.
  [[nodiscard]] std::string text() const {
    std::string out;
    const std::size_t shown = std::min<std::size_t>(size(), 5);
    for (std::size_t k = 0; k < shown; ++k) {
      if (k != 0) out += ", ";
      out += key_text(k);
    }
    if (shown < size()) out += fmt::format(", ... ({} keys in all)", size());
    return out;
  }
};

/// The code `value` stands for in `column` (`where` names it in messages); `names` is the
/// column's name-to-code index, built on the first name looked up.
[[nodiscard]] inline std::int64_t resolve_value(
    const CategoryColumn& column, const CategoryValue& value, const std::string& where,
    std::optional<std::unordered_map<std::string_view, std::int64_t>>& names) {
  const std::vector<std::string>& categories = column.categories();
  if (const auto* code = std::get_if<std::int64_t>(&value)) {
    if (*code < 0)
      throw_config("split_mask: {} = {} must be >= 0: a negative code (pandas' NA is -1) marks a row of column '{}' "
                   "that no selection matches",
                   where, *code, column.name());
    if (!categories.empty() && *code >= std::ssize(categories))
      throw_config("split_mask: {} = {} is not a code of column '{}', whose {} categories have codes in [0, {})", where,
                   *code, column.name(), categories.size(), categories.size());
    return *code;
  }
  const std::string& name = std::get<std::string>(value);
  if (categories.empty())
    throw_config("split_mask: {} = \"{}\" is a category name, but column '{}' has no category names; select its rows "
                 "by code, or give the column its categories",
                 where, name, column.name());
  if (!names) {
    names.emplace();
    for (std::size_t i = 0; i < categories.size(); ++i) {
      const auto [at, inserted] = names->try_emplace(categories[i], static_cast<std::int64_t>(i));
      if (!inserted)
        throw_config("split_mask: column '{}' has categories[{}] = \"{}\" and categories[{}] = \"{}\"; names must be "
                     "unique to select by name",
                     column.name(), at->second, categories[i], i, categories[i]);
    }
  }
  const auto at = names->find(name);
  if (at == names->end())
    throw_config("split_mask: {} = \"{}\" is not a category of column '{}' (its categories: {})", where, name,
                 column.name(), some_of(categories, 8, [](const std::string& c) { return fmt::format("\"{}\"", c); }));
  return at->second;
}

/// `split_mask`, for either form of the selection.
[[nodiscard]] inline Split split_mask(std::span<const CategoryColumn> columns, const SelectionView& select,
                                      const SplitOptions& options) {
  if (options.chunk_size < 1 || options.chunk_size > max_size)
    throw_config("split_mask: chunk_size ({}) must be in [1, 2^62]", options.chunk_size);
  if (options.max_short_share) {
    const double max = *options.max_short_share;
    if (std::isnan(max) || max < 0 || max > 1) throw_config("split_mask: max_short_share ({}) must be in [0, 1]", max);
  }
  if (columns.empty()) throw_config("split_mask: columns is empty; a selection needs at least one CategoryColumn");
  const std::int64_t n_rows = columns[0].size();
  for (std::size_t c = 1; c < columns.size(); ++c)
    if (columns[c].size() != n_rows)
      throw_config("split_mask: columns[{}] '{}' has {} rows, but columns[0] '{}' has {}; every column holds one code "
                   "per row",
                   c, columns[c].name(), columns[c].size(), columns[0].name(), n_rows);
  if (select.size() == 0) throw_config("split_mask: select is empty; give at least one key (one value per column)");
  // Ids of codes and key prefixes are int32: fewer distinct ones than keys.
  if (select.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw_config("split_mask: select has {} keys; at most 2^31 - 1", select.size());

  std::vector<std::int64_t> keys;
  keys.reserve(select.size() * columns.size());
  std::vector<std::optional<std::unordered_map<std::string_view, std::int64_t>>> names(columns.size());
  for (std::size_t k = 0; k < select.size(); ++k) {
    if (select.arity(k) != columns.size())
      throw_config("split_mask: select[{}] = {} has {} value{}, but there {} {} column{} ({}); a key holds one value "
                   "per column",
                   k, select.key_text(k), select.arity(k), select.arity(k) == 1 ? "" : "s",
                   columns.size() == 1 ? "is" : "are", columns.size(), columns.size() == 1 ? "" : "s",
                   column_names(columns));
    for (std::size_t c = 0; c < columns.size(); ++c)
      keys.push_back(resolve_value(columns[c], select.at(k, c), select.where(k, c), names[c]));
  }

  // A table of selected codes per column when they are below its categories' count (or 2^16).
  std::vector<std::int64_t> table_sizes;
  for (const CategoryColumn& column : columns)
    table_sizes.push_back(std::max<std::int64_t>(std::ssize(column.categories()), std::int64_t{1} << 16));
  const KeyMatcher matcher(keys, columns.size(), table_sizes);
  std::vector<Slice> runs;
  if (columns.size() == 1) {
    std::visit([&](auto codes) { scan_one(codes, matcher.codes(0), runs); }, columns[0].codes());
  } else {
    std::vector<CodeSpan> spans;
    for (const CategoryColumn& column : columns) spans.push_back(column.codes());
    scan_many(spans, n_rows, matcher, runs);
  }
  if (runs.empty())
    throw_config("split_mask: the selection {} selects no row of the {} rows of column{} {}; a mask needs at least "
                 "one row",
                 select.text(), n_rows, columns.size() == 1 ? "" : "s", column_names(columns));

  SplitReport report{.runs = std::ssize(runs)};
  for (const Slice& run : runs) {
    report.rows += run.size();
    if (run.size() < options.chunk_size) {
      ++report.short_runs;
      report.short_rows += run.size();
    }
  }
  report.short_share = static_cast<double>(report.short_rows) / static_cast<double>(report.rows);
  if (options.max_short_share && report.short_share > *options.max_short_share) {
    std::vector<std::string> column_list;
    for (const CategoryColumn& column : columns) column_list.push_back(column.name());
    throw FragmentedSplitError(
        report, std::move(column_list),
        fmt::format("split_mask: the selection {} is fragmented on disk: {} of its {} rows (short_share {}) lie in {} "
                    "of its {} runs that are shorter than chunk_size ({}), above max_short_share ({}); each such run "
                    "is read as short chunks. Reorder the data on disk by {} (sort the rows by {}) so that each "
                    "split is a few long runs",
                    select.text(), report.short_rows, report.rows, report.short_share, report.short_runs, report.runs,
                    options.chunk_size, *options.max_short_share, column_names(columns),
                    columns.size() == 1 ? "that column" : "those columns"));
  }
  return {.mask = Ranges(runs), .report = report};
}

}  // namespace detail

/// The rows whose key (one value per column: a category's name or a code) is one of `select`,
/// as a mask, with a report of how fragmented they lie on disk. One scan of the codes, every row
/// matched in O(columns) time, in O(runs + categories + keys) memory: never O(rows).
///
///     cs::CategoryColumn split("split", split_codes, {"train", "validation", "test"});
///     cs::CategoryColumn line("cell_line", line_codes, {"K562", "HepG2", "A549"});
///     const cs::CategoryColumn columns[] = {split, line};
///     const cs::CategoryKey keys[] = {{"train", "K562"}, {"train", "HepG2"}};
///     cs::Split train = cs::split_mask(columns, keys, {.chunk_size = 64, .max_short_share = 0.1});
///     cs::RandomSampler sampler({.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128, .mask = train.mask});
///
/// The mask's ranges are the maximal runs of selected rows: rows of different selected keys that
/// lie next to each other form one run (so `report.runs` counts merged runs). A row whose code is
/// selected by no key, including a negative code (pandas' NA, -1) and a code past the
/// categories, is never selected: NA rows belong to no split. Duplicate keys select nothing more.
///
/// Throws `ConfigError` naming the parameter, the value and the rule: `chunk_size` outside
/// `[1, 2^62]`, `max_short_share` outside `[0, 1]` or NaN; no columns, columns of different
/// lengths; no keys, a key with another number of values than columns (by its index); a name not
/// among the column's categories (listing them), a name for a column without category names, a
/// negative code, a code outside `[0, categories)` for a column with names; a selection that
/// matches no row (a mask cannot be empty). Throws `FragmentedSplitError` (a `ConfigError`) when
/// `report.short_share > max_short_share`.
[[nodiscard]] inline Split split_mask(std::span<const CategoryColumn> columns, std::span<const CategoryKey> select,
                                      const SplitOptions& options) {
  return detail::split_mask(columns, {.keys = select, .values = {}}, options);
}

/// `split_mask` over braced lists: `cs::split_mask({split, line}, {{"train", "K562"}}, options)`.
[[nodiscard]] inline Split split_mask(std::initializer_list<CategoryColumn> columns,
                                      std::initializer_list<CategoryKey> select, const SplitOptions& options) {
  return split_mask(std::span<const CategoryColumn>(columns.begin(), columns.size()),
                    std::span<const CategoryKey>(select.begin(), select.size()), options);
}

/// The rows of one column whose value is one of `select` (names or codes), as `split_mask` with
/// keys of one value; messages name the values `select[k]`.
///
///     cs::Split train = cs::split_mask(split, {"train"}, {.chunk_size = 64});
[[nodiscard]] inline Split split_mask(const CategoryColumn& column, std::span<const CategoryValue> select,
                                      const SplitOptions& options) {
  return detail::split_mask(std::span<const CategoryColumn>(&column, 1), {.keys = {}, .values = select}, options);
}

/// The one-column form over a braced list: `cs::split_mask(split, {"validation", "test"}, options)`.
[[nodiscard]] inline Split split_mask(const CategoryColumn& column, std::initializer_list<CategoryValue> select,
                                      const SplitOptions& options) {
  return split_mask(column, std::span<const CategoryValue>(select.begin(), select.size()), options);
}

/// Throws `ConfigError` when two of the named masks share a row, naming both splits (by index
/// and name), the first (lowest) shared row and the two ranges that hold it; passes otherwise.
/// An open-ended range reaches every row from its start. O(R log R) for R ranges in all.
///
///     cs::check_disjoint({{"train", train.mask}, {"validation", validation.mask}, {"test", test.mask}});
inline void check_disjoint(std::span<const std::pair<std::string, Ranges>> splits) {
  struct Piece {
    Slice range;
    std::size_t split;
  };
  std::vector<Piece> pieces;
  for (std::size_t s = 0; s < splits.size(); ++s)
    for (const Slice& range : splits[s].second) pieces.push_back({range, s});
  std::ranges::sort(pieces, {}, [](const Piece& p) { return std::pair(p.range.start, p.split); });
  // Sorted by start, the first piece that starts before the furthest stop so far starts on the
  // lowest shared row, and the piece that reached furthest is another split's: a split's own
  // ranges are disjoint.
  std::optional<Piece> reach;
  for (const Piece& piece : pieces) {
    if (reach && piece.range.start < reach->range.stop) {
      const auto [a, b] = std::minmax(*reach, piece, [](const Piece& x, const Piece& y) { return x.split < y.split; });
      detail::throw_config("check_disjoint: splits[{}] \"{}\" and splits[{}] \"{}\" share row {} ({} and {}); splits "
                           "must be disjoint",
                           a.split, splits[a.split].first, b.split, splits[b.split].first, piece.range.start,
                           detail::range_text(a.range), detail::range_text(b.range));
    }
    if (!reach || piece.range.stop > reach->range.stop) reach = piece;
  }
}

/// `check_disjoint` over a braced list: `cs::check_disjoint({{"train", train.mask}, {"test", test.mask}})`.
inline void check_disjoint(std::initializer_list<std::pair<std::string, Ranges>> splits) {
  check_disjoint(std::span<const std::pair<std::string, Ranges>>(splits.begin(), splits.size()));
}

}  // namespace chunksampler
