// SPDX-License-Identifier: MIT
// Splits by category (split_mask, check_disjoint): worked examples with exact ranges and reports,
// every code type alike, hundreds of random columns and selections against a row-by-row model,
// the fragmented refusal at its threshold, every bad input with its message, and the samplers
// reading a split's rows exactly once.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/split.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace test_split {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;
using support::ConfigRng;

// Checks the exception's type and its message; `expr` is evaluated once per check.
#define REQUIRE_CONFIG_ERROR(expr, matcher)   \
  do {                                        \
    REQUIRE_THROWS_AS(expr, cs::ConfigError); \
    REQUIRE_THROWS_WITH(expr, matcher);       \
  } while (false)

constexpr std::int8_t train = 0;
constexpr std::int8_t validation = 1;
constexpr std::int8_t test = 2;

/// Ten donors laid end to end, each as its train rows (50 + 5d), validation rows (10 + 4d) and
/// test rows (20): 1,205 rows.
std::vector<std::int8_t> donor_split_codes() {
  std::vector<std::int8_t> codes;
  for (std::size_t d = 0; d < 10; ++d) {
    codes.insert(codes.end(), 50 + 5 * d, train);
    codes.insert(codes.end(), 10 + 4 * d, validation);
    codes.insert(codes.end(), 20, test);
  }
  return codes;
}

const std::vector<std::string> split_names{"train", "validation", "test"};

std::vector<cs::Slice> slices(const cs::Ranges& ranges) { return {ranges.begin(), ranges.end()}; }

/// Every row of `ranges`, in order.
std::vector<std::int64_t> rows_of(const cs::Ranges& ranges) {
  std::vector<std::int64_t> rows;
  for (const cs::Slice& r : ranges)
    for (std::int64_t row = r.start; row < r.stop; ++row) rows.push_back(row);
  return rows;
}

void check_report(const cs::SplitReport& report, std::int64_t runs, std::int64_t rows, std::int64_t short_runs,
                  std::int64_t short_rows) {
  CHECK(report.runs == runs);
  CHECK(report.rows == rows);
  CHECK(report.short_runs == short_runs);
  CHECK(report.short_rows == short_rows);
  CHECK(report.short_share == static_cast<double>(short_rows) / static_cast<double>(rows));
}

}  // namespace

TEST_CASE("split: one split column of 10 donors, worked", "[split]") {
  const std::vector<std::int8_t> codes = donor_split_codes();
  REQUIRE(codes.size() == 1'205);
  const cs::CategoryColumn split("split", codes, split_names);
  CHECK(split.name() == "split");
  CHECK(split.size() == 1'205);
  CHECK(split.categories() == split_names);

  // chunk 32: every donor's train run is at least 50 rows, no short run.
  const cs::Split tr = cs::split_mask(split, {"train"}, {.chunk_size = 32});
  CHECK(slices(tr.mask) == std::vector<cs::Slice>{{0, 50},
                                                  {80, 135},
                                                  {169, 229},
                                                  {267, 332},
                                                  {374, 444},
                                                  {490, 565},
                                                  {615, 695},
                                                  {749, 834},
                                                  {892, 982},
                                                  {1044, 1139}});
  check_report(tr.report, 10, 725, 0, 0);

  // Validation runs of 10, 14, ..., 46 rows: the six below 32 hold 120 of its 280 rows.
  const cs::Split va = cs::split_mask(split, {"validation"}, {.chunk_size = 32});
  CHECK(slices(va.mask) == std::vector<cs::Slice>{{50, 60},
                                                  {135, 149},
                                                  {229, 247},
                                                  {332, 354},
                                                  {444, 470},
                                                  {565, 595},
                                                  {695, 729},
                                                  {834, 872},
                                                  {982, 1024},
                                                  {1139, 1185}});
  check_report(va.report, 10, 280, 6, 120);
  CHECK(va.report.short_share == 120.0 / 280.0);

  // Test runs of 20 rows: all short.
  const cs::Split te = cs::split_mask(split, {"test"}, {.chunk_size = 32});
  CHECK(te.mask[0] == cs::Slice{60, 80});
  CHECK(te.mask[9] == cs::Slice{1185, 1205});
  check_report(te.report, 10, 200, 10, 200);
  CHECK(te.report.short_share == 1.0);

  // Validation and test lie next to each other in every donor: their runs merge, so the
  // selection is 10 runs of 30 + 4d rows, one of them (30) short. runs counts merged runs.
  const cs::Split vt = cs::split_mask(split, {"validation", "test"}, {.chunk_size = 32});
  CHECK(slices(vt.mask) == std::vector<cs::Slice>{{50, 80},
                                                  {135, 169},
                                                  {229, 267},
                                                  {332, 374},
                                                  {444, 490},
                                                  {565, 615},
                                                  {695, 749},
                                                  {834, 892},
                                                  {982, 1044},
                                                  {1139, 1205}});
  check_report(vt.report, 10, 480, 1, 30);
  CHECK(vt.report.short_share == 0.0625);

  // By code, duplicated values, and the general form with one-value keys: the same masks.
  CHECK(cs::split_mask(split, {1, 2}, {.chunk_size = 32}).mask == vt.mask);
  CHECK(cs::split_mask(split, {"test", 1, "validation", 2}, {.chunk_size = 32}).mask == vt.mask);
  CHECK(cs::split_mask({split}, {{"validation"}, {"test"}}, {.chunk_size = 32}).mask == vt.mask);
  const std::vector<cs::CategoryValue> values{"train"};
  CHECK(cs::split_mask(split, values, {.chunk_size = 32}).mask == tr.mask);

  // A proper 3-way split: disjoint, and together every row.
  cs::check_disjoint({{"train", tr.mask}, {"validation", va.mask}, {"test", te.mask}});
  CHECK(tr.report.rows + va.report.rows + te.report.rows == 1'205);
}

TEST_CASE("split: two columns, split and cell_line, worked", "[split]") {
  // Three cell lines of 30 rows, each 20 train, 5 validation, 5 test.
  std::vector<std::int8_t> split_codes;
  std::vector<std::int16_t> line_codes;
  for (std::int16_t line = 0; line < 3; ++line) {
    split_codes.insert(split_codes.end(), 20, train);
    split_codes.insert(split_codes.end(), 5, validation);
    split_codes.insert(split_codes.end(), 5, test);
    line_codes.insert(line_codes.end(), 30, line);
  }
  const cs::CategoryColumn split("split", split_codes, split_names);
  const cs::CategoryColumn line("cell_line", line_codes, {"K562", "HepG2", "A549"});

  const cs::Split s = cs::split_mask({split, line}, {{"train", "K562"}, {"train", "HepG2"}}, {.chunk_size = 16});
  CHECK(slices(s.mask) == std::vector<cs::Slice>{{0, 20}, {30, 50}});
  check_report(s.report, 2, 40, 0, 0);

  // K562's test rows end where HepG2's train rows start: one merged run of 25 rows.
  const cs::Split merged = cs::split_mask({split, line}, {{"test", "K562"}, {"train", "HepG2"}}, {.chunk_size = 16});
  CHECK(slices(merged.mask) == std::vector<cs::Slice>{{25, 50}});
  check_report(merged.report, 1, 25, 0, 0);

  // Codes and names mixed, spans of columns and keys, the key order and duplicates irrelevant.
  const cs::CategoryColumn columns[] = {split, line};
  const cs::CategoryKey keys[] = {{0, "HepG2"}, {"train", 0}, {0, 1}};
  CHECK(cs::split_mask(columns, keys, {.chunk_size = 16}).mask == s.mask);

  // Every split of one cell line, and held-out cell lines.
  CHECK(slices(cs::split_mask({line, split}, {{"A549", "validation"}, {"A549", "test"}}, {.chunk_size = 4}).mask) ==
        std::vector<cs::Slice>{{80, 90}});
  const cs::Split held_out = cs::split_mask(line, {"A549"}, {.chunk_size = 16});
  CHECK(slices(held_out.mask) == std::vector<cs::Slice>{{60, 90}});
  cs::check_disjoint({{"train", s.mask}, {"held out", held_out.mask}});
}

TEST_CASE("split: NA and codes outside the categories match nothing", "[split]") {
  // pandas writes NA as -1; a code past the categories (7) is in no selection either.
  const std::vector<std::int8_t> codes{0, 0, -1, 0, 1, -1, 7, 0, 2, -1};
  const cs::CategoryColumn split("split", codes, split_names);
  const cs::Split s = cs::split_mask(split, {"train"}, {.chunk_size = 2});
  CHECK(slices(s.mask) == std::vector<cs::Slice>{{0, 2}, {3, 4}, {7, 8}});
  check_report(s.report, 3, 4, 2, 2);
  const cs::Split rest = cs::split_mask(split, {"validation", "test"}, {.chunk_size = 2});
  CHECK(slices(rest.mask) == std::vector<cs::Slice>{{4, 5}, {8, 9}});
  // Without names, codes select: 7 is then a code like any other.
  const cs::CategoryColumn bare("split", codes);
  CHECK(slices(cs::split_mask(bare, {7}, {.chunk_size = 1}).mask) == std::vector<cs::Slice>{{6, 7}});
}

TEMPLATE_TEST_CASE("split: every code type gives the same result", "[split]", std::int8_t, std::int16_t, std::int32_t,
                   std::int64_t, long long, std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t) {
  const std::vector<std::int8_t> narrow = donor_split_codes();
  const std::vector<TestType> codes(narrow.begin(), narrow.end());
  const std::vector<std::int16_t> line_narrow = [&] {
    std::vector<std::int16_t> lines;
    for (std::size_t i = 0; i < narrow.size(); ++i) lines.push_back(static_cast<std::int16_t>(i / 100 % 4));
    return lines;
  }();
  const std::vector<TestType> lines(line_narrow.begin(), line_narrow.end());
  const cs::CategoryColumn reference("split", narrow, split_names);
  const cs::CategoryColumn reference_lines("line", line_narrow);
  const cs::CategoryColumn split("split", codes, split_names);
  const cs::CategoryColumn line("line", lines);
  CHECK(std::holds_alternative<std::span<const TestType>>(split.codes()));
  for (const std::vector<cs::CategoryValue>& select :
       {std::vector<cs::CategoryValue>{"train"}, {"validation", "test"}, {2}}) {
    const cs::Split expected = cs::split_mask(reference, select, {.chunk_size = 32});
    const cs::Split got = cs::split_mask(split, select, {.chunk_size = 32});
    CHECK(got.mask == expected.mask);
    CHECK(got.report.short_rows == expected.report.short_rows);
  }
  const cs::CategoryKey keys[] = {{"train", 1}, {"test", 3}};
  const cs::CategoryColumn ref_columns[] = {reference, reference_lines};
  const cs::CategoryColumn columns[] = {split, line};
  CHECK(cs::split_mask(columns, keys, {.chunk_size = 8}).mask ==
        cs::split_mask(ref_columns, keys, {.chunk_size = 8}).mask);
}

namespace {

/// A contiguous range that claims more codes than a column may hold (only `data()` and `size()`
/// are read, and the column refuses it before viewing them).
struct ClaimsTooMany {
  std::int8_t first = 0;
  [[nodiscard]] const std::int8_t* begin() const { return &first; }
  [[nodiscard]] const std::int8_t* end() const { return &first + 1; }
  [[nodiscard]] const std::int8_t* data() const { return &first; }
  [[nodiscard]] static std::size_t size() { return (std::size_t{1} << 62U) + 1; }
};

}  // namespace

TEST_CASE("split: a column of more than 2^62 codes is refused", "[split]") {
  const ClaimsTooMany huge;
  STATIC_REQUIRE(std::ranges::contiguous_range<ClaimsTooMany>);
  REQUIRE_CONFIG_ERROR(cs::CategoryColumn("huge", huge),
                       Contains("CategoryColumn 'huge': 4611686018427387905 codes; a column holds at most 2^62 rows"));
}

TEST_CASE("split: CategoryColumn takes integer codes it can view, never a temporary", "[split]") {
  STATIC_REQUIRE(std::is_constructible_v<cs::CategoryColumn, std::string, const std::vector<std::int8_t>&>);
  STATIC_REQUIRE(std::is_constructible_v<cs::CategoryColumn, std::string, std::vector<std::uint64_t>&>);
  STATIC_REQUIRE(std::is_constructible_v<cs::CategoryColumn, std::string, std::span<const std::int16_t>>);
  // A temporary vector would die before the view.
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::CategoryColumn, std::string, std::vector<std::int8_t>>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::CategoryColumn, std::string, const std::vector<char>&>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::CategoryColumn, std::string, const std::vector<bool>&>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::CategoryColumn, std::string, const std::vector<double>&>);
  STATIC_REQUIRE(cs::ClassCode<std::int8_t>);
  STATIC_REQUIRE_FALSE(cs::ClassCode<char>);
}

namespace {

/// A column of the random tests: its codes as int64 for the model, and in the type given to
/// split_mask.
struct RandomColumn {
  std::vector<std::int64_t> codes;
  std::vector<std::string> categories;
  std::variant<std::vector<std::int8_t>, std::vector<std::int16_t>, std::vector<std::int32_t>,
               std::vector<std::int64_t>, std::vector<std::uint8_t>, std::vector<std::uint16_t>,
               std::vector<std::uint32_t>, std::vector<std::uint64_t>>
      typed;
  std::int64_t first_code = 0;  ///< codes are first_code + [0, n_codes); big ones take the hash path
  std::int64_t n_codes = 0;
  std::string describe;

  [[nodiscard]] cs::CategoryColumn column(std::string name) const {
    return std::visit([&](const auto& v) { return cs::CategoryColumn(std::move(name), v, categories); }, typed);
  }
};

RandomColumn random_column(ConfigRng& g, std::int64_t n_rows) {
  RandomColumn col;
  const std::int64_t type = g.between(0, 7);
  const bool is_signed = type < 4;
  // int64 codes near the top of their range, or above 2^16: a hash map, not a table.
  const bool big = type == 3 && g.between(0, 3) == 0;
  col.n_codes = g.between(0, 9) == 0 ? g.between(1, 120) : g.between(1, 6);
  if (big) col.first_code = g.coin() ? std::numeric_limits<std::int64_t>::max() - 200 : 70'000;
  const bool named = !big && g.coin();
  if (named)
    for (std::int64_t c = 0; c < col.n_codes; ++c)
      col.categories.push_back(fmt::format("cat{}-{}", c, g.between(0, 9)));
  // Runs of one code, from 1 row (scattered) to 60 (blocks); NA (-1) in signed columns, and a
  // code past the categories.
  const std::int64_t longest = g.coin() ? 3 : 60;
  while (std::ssize(col.codes) < n_rows) {
    const std::int64_t length = std::min(g.between(1, longest), n_rows - std::ssize(col.codes));
    std::int64_t code = col.first_code + g.between(0, col.n_codes);  // n_codes: past the categories
    if (is_signed && g.between(0, 9) == 0) code = -1;
    col.codes.insert(col.codes.end(), static_cast<std::size_t>(length), code);
  }
  const auto fill = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> typed;
    for (const std::int64_t c : col.codes) typed.push_back(static_cast<T>(c));
    col.typed = std::move(typed);
  };
  switch (type) {
    case 0: fill(std::int8_t{}); break;
    case 1: fill(std::int16_t{}); break;
    case 2: fill(std::int32_t{}); break;
    case 3: fill(std::int64_t{}); break;
    case 4: fill(std::uint8_t{}); break;
    case 5: fill(std::uint16_t{}); break;
    case 6: fill(std::uint32_t{}); break;
    default: fill(std::uint64_t{}); break;
  }
  col.describe = fmt::format("type {} codes {} + [0, {}){}", type, col.first_code, col.n_codes, named ? " named" : "");
  return col;
}

/// The maximal runs of `rows` (sorted, distinct).
std::vector<cs::Slice> runs_of(const std::vector<std::int64_t>& rows) {
  std::vector<cs::Slice> runs;
  for (const std::int64_t row : rows) {
    if (!runs.empty() && runs.back().stop == row) ++runs.back().stop;
    else runs.push_back({row, row + 1});
  }
  return runs;
}

}  // namespace

TEST_CASE("split: split_mask equals a row-by-row model over random columns and selections", "[split]") {
  ConfigRng g(4242);
  int selected = 0;
  int empty = 0;
  for (int trial = 0; trial < 400; ++trial) {
    // Now and then no row, or several of the scan's blocks of 2,048 rows.
    const std::int64_t size_kind = g.between(0, 9);
    const std::int64_t n_rows = size_kind == 0   ? g.between(0, 3)
                                : size_kind == 1 ? g.between(2'000, 7'000)
                                                 : g.between(1, 1'500);
    const auto n_columns = static_cast<std::size_t>(g.between(1, 3));
    std::vector<RandomColumn> random;
    for (std::size_t c = 0; c < n_columns; ++c) random.push_back(random_column(g, n_rows));
    std::vector<cs::CategoryColumn> columns;
    for (std::size_t c = 0; c < n_columns; ++c) columns.push_back(random[c].column(fmt::format("col{}", c)));
    // Keys of codes that occur, and some that do not; names where the column has them.
    std::vector<cs::CategoryKey> keys;
    std::vector<std::vector<std::int64_t>> key_codes;
    const std::int64_t n_keys = g.between(1, 6);
    for (std::int64_t k = 0; k < n_keys; ++k) {
      cs::CategoryKey key;
      std::vector<std::int64_t> codes;
      for (const RandomColumn& col : random) {
        const std::int64_t last = col.categories.empty() ? col.n_codes + 1 : col.n_codes - 1;
        const std::int64_t code = col.first_code + g.between(0, last);
        codes.push_back(code);
        if (!col.categories.empty() && g.coin()) key.emplace_back(col.categories[static_cast<std::size_t>(code)]);
        else key.emplace_back(code);
      }
      keys.push_back(key);
      key_codes.push_back(codes);
      if (g.between(0, 4) == 0) {  // a duplicate
        keys.push_back(key);
        key_codes.push_back(codes);
      }
    }
    const std::int64_t chunk = g.between(1, 50);
    std::string text = fmt::format("trial {} rows {} chunk {} keys {} |", trial, n_rows, chunk, keys.size());
    for (const RandomColumn& col : random) text += " " + col.describe;
    INFO(text);

    std::vector<std::int64_t> model;
    for (std::int64_t row = 0; row < n_rows; ++row) {
      bool match = false;
      for (const std::vector<std::int64_t>& key : key_codes) {
        bool all = true;
        for (std::size_t c = 0; c < n_columns; ++c)
          all = all && random[c].codes[static_cast<std::size_t>(row)] == key[c];
        match = match || all;
      }
      if (match) model.push_back(row);
    }
    if (model.empty()) {
      REQUIRE_CONFIG_ERROR(cs::split_mask(columns, keys, {.chunk_size = chunk}), Contains("selects no row"));
      ++empty;
      continue;
    }
    const cs::Split split = cs::split_mask(columns, keys, {.chunk_size = chunk});
    REQUIRE(rows_of(split.mask) == model);
    const std::vector<cs::Slice> runs = runs_of(model);
    CHECK(slices(split.mask) == runs);
    std::int64_t short_runs = 0;
    std::int64_t short_rows = 0;
    for (const cs::Slice& run : runs)
      if (run.size() < chunk) {
        ++short_runs;
        short_rows += run.size();
      }
    check_report(split.report, std::ssize(runs), std::ssize(model), short_runs, short_rows);
    if (n_columns == 1) {
      std::vector<cs::CategoryValue> values;
      for (const cs::CategoryKey& key : keys) values.push_back(key[0]);
      CHECK(cs::split_mask(columns[0], values, {.chunk_size = chunk}).mask == split.mask);
    }
    ++selected;
  }
  CHECK(selected > 250);
  CHECK(empty > 20);
}

TEST_CASE("split: a thousand two-column keys take the hashed transitions, as the model says", "[split]") {
  // 1,100 codes per column and the keys (i, i) and (i, i + 1): 1,100 x 1,100 transitions are
  // too many for a table, so they are hashed.
  ConfigRng g(4243);
  const std::int64_t n_rows = 30'000;
  std::vector<std::int32_t> a;
  std::vector<std::uint16_t> b;
  while (std::ssize(a) < n_rows) {
    const std::int64_t length = g.between(1, 20);
    const auto x = static_cast<std::int32_t>(g.between(0, 1'099));
    const auto y = static_cast<std::uint16_t>(g.coin() ? x : g.between(0, 1'099));
    for (std::int64_t i = 0; i < length && std::ssize(a) < n_rows; ++i) {
      a.push_back(x);
      b.push_back(g.between(0, 3) == 0 ? static_cast<std::uint16_t>(y + 1) : y);
    }
  }
  std::vector<cs::CategoryKey> keys;
  for (std::int64_t i = 0; i < 1'100; i += 1) {
    keys.push_back({i, i});
    if (i % 3 == 0) keys.push_back({i, i + 1});
  }
  const cs::CategoryColumn columns[] = {cs::CategoryColumn("a", a), cs::CategoryColumn("b", b)};
  const cs::Split split = cs::split_mask(columns, keys, {.chunk_size = 8});
  std::vector<std::int64_t> model;
  for (std::size_t row = 0; row < a.size(); ++row)
    if (b[row] == a[row] || (a[row] % 3 == 0 && b[row] == a[row] + 1)) model.push_back(static_cast<std::int64_t>(row));
  CHECK(rows_of(split.mask) == model);
  CHECK(split.report.rows == std::ssize(model));
  CHECK(split.report.runs == std::ssize(runs_of(model)));
  CHECK(split.report.runs > 1'000);
}

TEST_CASE("split: a fragmented selection is refused above max_short_share, with its report", "[split]") {
  const std::vector<std::int8_t> codes = donor_split_codes();
  const cs::CategoryColumn split("split", codes, split_names);
  // Validation: 120 of 280 rows in runs shorter than 32.
  const double share = 120.0 / 280.0;
  const cs::Split at = cs::split_mask(split, {"validation"}, {.chunk_size = 32, .max_short_share = share});
  CHECK(at.report.short_share == share);
  CHECK(cs::split_mask(split, {"validation"}, {.chunk_size = 32, .max_short_share = 1.0}).report.runs == 10);
  CHECK(cs::split_mask(split, {"train"}, {.chunk_size = 32, .max_short_share = 0.0}).report.short_rows == 0);
  // Just below the share: refused.
  const double below = std::nextafter(share, 0.0);
  REQUIRE_THROWS_AS(cs::split_mask(split, {"validation"}, {.chunk_size = 32, .max_short_share = below}),
                    cs::FragmentedSplitError);
  REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"validation"}, {.chunk_size = 32, .max_short_share = below}),
                       Contains(
                           "split_mask: the selection \"validation\" is fragmented on disk: 120 of its 280 rows") &&
                           Contains("lie in 6 of its 10 runs that are shorter than chunk_size (32)") &&
                           Contains("above max_short_share") && Contains("Reorder the data on disk by 'split'"));
  try {
    (void)cs::split_mask(split, {"validation"}, {.chunk_size = 32, .max_short_share = below});
    FAIL("not refused");
  } catch (const cs::FragmentedSplitError& e) {
    check_report(e.report(), 10, 280, 6, 120);
    CHECK(e.columns() == std::vector<std::string>{"split"});
  }
  // Two columns: the message names both.
  std::vector<std::int8_t> lines(codes.size());
  for (std::size_t i = 0; i < lines.size(); ++i) lines[i] = static_cast<std::int8_t>(i % 2);
  const cs::CategoryColumn line("cell_line", lines, {"K562", "HepG2"});
  try {
    (void)cs::split_mask({split, line}, {{"train", "K562"}}, {.chunk_size = 4, .max_short_share = 0.5});
    FAIL("not refused");
  } catch (const cs::FragmentedSplitError& e) {
    CHECK_THAT(e.what(), Contains("Reorder the data on disk by 'split', 'cell_line' (sort the rows by those columns)"));
    CHECK(e.report().runs == 363);  // every other train row: ceil(50 + 5d) / 2 each
    CHECK(e.report().short_share == 1.0);
    CHECK(e.columns() == std::vector<std::string>{"split", "cell_line"});
  }
}

TEST_CASE("split: check_disjoint names both splits and the first shared row", "[split]") {
  const std::vector<std::int8_t> codes = donor_split_codes();
  const cs::CategoryColumn split("split", codes, split_names);
  const cs::Ranges tr = cs::split_mask(split, {"train"}, {.chunk_size = 32}).mask;
  const cs::Ranges va = cs::split_mask(split, {"validation"}, {.chunk_size = 32}).mask;
  const cs::Ranges te = cs::split_mask(split, {"test"}, {.chunk_size = 32}).mask;
  cs::check_disjoint({{"train", tr}, {"validation", va}, {"test", te}});
  // A train split that also took validation rows: the first shared row is validation's first.
  const cs::Ranges leaky = cs::split_mask(split, {"train", "validation"}, {.chunk_size = 32}).mask;
  REQUIRE_CONFIG_ERROR(cs::check_disjoint({{"train", leaky}, {"validation", va}, {"test", te}}),
                       Contains("check_disjoint: splits[0] \"train\" and splits[1] \"validation\" share row 50 "
                                "([0, 60) and [50, 60)); splits must be disjoint"));
  // The splits are named in the order given, and the lowest shared row is found whichever
  // split's range starts first.
  REQUIRE_CONFIG_ERROR(cs::check_disjoint({{"test", te}, {"validation", va}, {"train", leaky}}),
                       Contains(
                           "splits[1] \"validation\" and splits[2] \"train\" share row 50 ([50, 60) and [0, 60))"));
  REQUIRE_CONFIG_ERROR(cs::check_disjoint(
                           {{"a", cs::Ranges{{0, 10}, {20, 30}}}, {"b", cs::Ranges{{10, 20}, cs::Slice::from(29)}}}),
                       Contains("splits[0] \"a\" and splits[1] \"b\" share row 29 ([20, 30) and [29, end))"));
  // Touching is not sharing; one split, or none, is trivially disjoint.
  cs::check_disjoint({{"a", cs::Ranges{{0, 10}, {20, 30}}}, {"b", cs::Ranges{{10, 20}, cs::Slice::from(30)}}});
  cs::check_disjoint({{"a", tr}});
  cs::check_disjoint(std::span<const std::pair<std::string, cs::Ranges>>{});
}

TEST_CASE("split: check_disjoint finds the lowest shared row of random splits, as a row-by-row model", "[split]") {
  ConfigRng g(4244);
  int overlapping = 0;
  int disjoint = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t n_splits = g.between(1, 4);
    const std::int64_t gap = g.between(5, 80);  // wide gaps: often disjoint
    std::vector<std::pair<std::string, cs::Ranges>> splits;
    std::vector<std::vector<std::int64_t>> owners(200);  // the splits that hold each row
    for (std::int64_t s = 0; s < n_splits; ++s) {
      std::vector<cs::Slice> ranges;
      for (std::int64_t at = g.between(0, 30); at < 190; at += g.between(1, gap)) {
        const std::int64_t stop = std::min<std::int64_t>(200, at + g.between(1, 6));
        ranges.push_back({at, stop});
        for (std::int64_t row = at; row < stop; ++row) owners[static_cast<std::size_t>(row)].push_back(s);
        at = stop;
      }
      splits.emplace_back(fmt::format("s{}", s), cs::Ranges(ranges));
    }
    std::optional<std::int64_t> first;
    for (std::int64_t row = 0; row < 200 && !first; ++row)
      if (owners[static_cast<std::size_t>(row)].size() > 1) first = row;
    INFO(fmt::format("trial {} splits {} gap {}", trial, n_splits, gap));
    if (!first) {
      CHECK_NOTHROW(cs::check_disjoint(splits));
      ++disjoint;
      continue;
    }
    ++overlapping;
    try {
      cs::check_disjoint(splits);
      FAIL("overlap at row " << *first << " not found");
    } catch (const cs::ConfigError& e) {
      // Two of the splits that hold the lowest shared row, in the order given.
      const std::vector<std::int64_t>& held = owners[static_cast<std::size_t>(*first)];
      bool named = false;
      for (std::size_t i = 0; i < held.size(); ++i)
        for (std::size_t j = i + 1; j < held.size(); ++j)
          named = named || std::string(e.what()).find(
                               fmt::format("splits[{}] \"s{}\" and splits[{}] \"s{}\" share row {} ", held[i], held[i],
                                           held[j], held[j], *first)) != std::string::npos;
      INFO(e.what());
      CHECK(named);
    }
  }
  CHECK(overlapping > 50);
  CHECK(disjoint > 50);
}

TEST_CASE("split: bad input is refused, naming the parameter, the value and the rule", "[split]") {
  const std::vector<std::int8_t> codes{0, 0, 1, 2, -1, 0};
  const std::vector<std::int16_t> lines{0, 1, 0, 1, 0, 1};
  const std::vector<std::int16_t> short_lines{0, 1, 0};
  const cs::CategoryColumn split("split", codes, split_names);
  const cs::CategoryColumn line("cell_line", lines, {"K562", "HepG2"});
  const cs::CategoryColumn bare("donor", lines);
  const cs::SplitOptions ok{.chunk_size = 2};

  SECTION("options") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train"}, {}),
                         Contains("split_mask: chunk_size (0) must be in [1, 2^62]"));
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train"}, {.chunk_size = -3}), Contains("chunk_size (-3)"));
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train"}, {.chunk_size = 2, .max_short_share = 1.5}),
                         Contains("split_mask: max_short_share (1.5) must be in [0, 1]"));
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train"}, {.chunk_size = 2, .max_short_share = -0.25}),
                         Contains("max_short_share (-0.25) must be in [0, 1]"));
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train"},
                                        {.chunk_size = 2, .max_short_share = std::numeric_limits<double>::quiet_NaN()}),
                         Contains("max_short_share (nan) must be in [0, 1]"));
  }
  SECTION("columns") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(std::span<const cs::CategoryColumn>{}, std::vector<cs::CategoryKey>{{"train"}},
                                        ok),
                         Contains("split_mask: columns is empty; a selection needs at least one CategoryColumn"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, cs::CategoryColumn("cell_line", short_lines)}, {{"train", 0}}, ok),
                         Contains("split_mask: columns[1] 'cell_line' has 3 rows, but columns[0] 'split' has 6; every "
                                  "column holds one code per row"));
  }
  SECTION("keys") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, std::span<const cs::CategoryValue>{}, ok),
                         Contains("split_mask: select is empty; give at least one key"));
    const cs::CategoryColumn both[] = {split, line};
    REQUIRE_CONFIG_ERROR(cs::split_mask(both, std::span<const cs::CategoryKey>{}, ok), Contains("select is empty"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, line}, {{"train", "K562"}, {"test"}}, ok),
                         Contains("split_mask: select[1] = (\"test\") has 1 value, but there are 2 columns ('split', "
                                  "'cell_line'); a key holds one value per column"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split}, {{"train", "K562"}}, ok),
                         Contains("select[0] = (\"train\", \"K562\") has 2 values, but there is 1 column ('split')"));
  }
  SECTION("names") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {"train", "tarin"}, ok),
                         Contains("split_mask: select[1] = \"tarin\" is not a category of column 'split' (its "
                                  "categories: \"train\", \"validation\", \"test\")"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, line}, {{"train", "K652"}}, ok),
                         Contains("select[0][1] = \"K652\" is not a category of column 'cell_line' (its categories: "
                                  "\"K562\", \"HepG2\")"));
    std::vector<std::string> many;
    for (int i = 0; i < 20; ++i) many.push_back(fmt::format("donor{}", i));
    REQUIRE_CONFIG_ERROR(cs::split_mask(cs::CategoryColumn("donor", codes, many), {"donor20"}, ok),
                         Contains("(its categories: \"donor0\", \"donor1\", \"donor2\", \"donor3\", \"donor4\", "
                                  "\"donor5\", \"donor6\", \"donor7\", ... (20 in all))"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, bare}, {{"train", "D1"}}, ok),
                         Contains("split_mask: select[0][1] = \"D1\" is a category name, but column 'donor' has no "
                                  "category names; select its rows by code, or give the column its categories"));
    REQUIRE_CONFIG_ERROR(
        cs::split_mask(cs::CategoryColumn("split", codes, {"train", "test", "train"}), {"train"}, ok),
        Contains("split_mask: column 'split' has categories[0] = \"train\" and categories[2] = \"train\"; names "
                 "must be unique to select by name"));
    // By code, repeated names do not matter.
    CHECK(cs::split_mask(cs::CategoryColumn("split", codes, {"train", "test", "train"}), {2}, ok).report.rows == 1);
  }
  SECTION("codes") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {3}, ok),
                         Contains("split_mask: select[0] = 3 is not a code of column 'split', whose 3 categories have "
                                  "codes in [0, 3)"));
    REQUIRE_CONFIG_ERROR(cs::split_mask(split, {0, -1}, ok),
                         Contains("split_mask: select[1] = -1 must be >= 0: a negative code (pandas' NA is -1) marks a "
                                  "row of column 'split' that no selection matches"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, bare}, {{0, -2}}, ok), Contains("select[0][1] = -2 must be >= 0"));
    // Without names any code >= 0 may be selected: one that no row has selects nothing.
    CHECK(cs::split_mask(bare, {1, 1'000'000}, ok).report.rows == 3);
  }
  SECTION("a selection of no row") {
    REQUIRE_CONFIG_ERROR(cs::split_mask(bare, {7}, ok),
                         Contains("split_mask: the selection 7 selects no row of the 6 rows of column 'donor'; a mask "
                                  "needs at least one row"));
    REQUIRE_CONFIG_ERROR(cs::split_mask({split, line}, {{"test", "K562"}, {"validation", "HepG2"}}, ok),
                         Contains("the selection (\"test\", \"K562\"), (\"validation\", \"HepG2\") selects no row "
                                  "of the 6 rows of columns 'split', 'cell_line'"));
    std::vector<cs::CategoryValue> seven(7, std::int64_t{9});
    REQUIRE_CONFIG_ERROR(cs::split_mask(bare, seven, ok), Contains("the selection 9, 9, 9, 9, 9, ... (7 keys in all) "
                                                                   "selects no row"));
    const std::vector<std::int8_t> none;
    REQUIRE_CONFIG_ERROR(cs::split_mask(cs::CategoryColumn("split", none, split_names), {"train"}, ok),
                         Contains("selects no row of the 0 rows of column 'split'"));
  }
}

TEST_CASE("split: RandomSampler and DistributedSampler read a split's rows exactly once", "[split]") {
  // Ten donors of 120 rows: 90 train, 18 validation, 12 test; chunks of 16 against runs of 90.
  std::vector<std::uint8_t> codes;
  for (int d = 0; d < 10; ++d) {
    codes.insert(codes.end(), 90, 0);
    codes.insert(codes.end(), 18, 1);
    codes.insert(codes.end(), 12, 2);
  }
  const std::int64_t n_obs = std::ssize(codes);
  const cs::CategoryColumn split("split", codes, split_names);
  for (const auto& [name, rows] : {std::pair<std::string, std::int64_t>{"train", 900}, {"validation", 180}}) {
    INFO(name);
    const cs::Split s = cs::split_mask(split, {name}, {.chunk_size = 16});
    REQUIRE(s.report.rows == rows);
    std::set<std::int64_t> expected;
    for (const std::int64_t row : rows_of(s.mask)) expected.insert(row);

    cs::RandomSampler sampler({.chunk_size = 16, .preload_nchunks = 3, .batch_size = 12, .mask = s.mask, .seed = 5});
    for (int epoch = 0; epoch < 2; ++epoch) {
      const support::EpochRecord rec = support::walk(sampler, n_obs);
      CHECK(rec.no_repeats());
      CHECK(std::ssize(rec.draws) == rows);
      std::set<std::int64_t> seen;
      for (const support::Draw& d : rec.draws) seen.insert(d.obs);
      CHECK(seen == expected);
      CHECK(rec.chunks_on_grid(s.mask, 16));
    }

    // 3 ranks, contiguous: rows / 3 is a whole number of batches, so together they read it all.
    std::set<std::int64_t> seen;
    std::int64_t draws = 0;
    for (std::int64_t r = 0; r < 3; ++r) {
      cs::DistributedSampler dist(sampler, cs::DistInfo{.rank = r, .world_size = 3});
      const support::EpochRecord rec = support::walk(dist, n_obs);
      CHECK(std::ssize(rec.draws) == rows / 3);
      CHECK(rec.chunks_on_grid(s.mask, 16));
      for (const support::Draw& d : rec.draws) seen.insert(d.obs);
      draws += std::ssize(rec.draws);
    }
    CHECK(draws == rows);
    CHECK(seen == expected);
  }
}

#undef REQUIRE_CONFIG_ERROR

}  // namespace test_split
