// SPDX-License-Identifier: MIT
// cs::Ranges, a mask of many ranges (issue 21, item 2), and its grid chunks (item 1): worked
// examples with exact numbers, every refusal with the range it names, and invariants over random
// range sets checked against models that walk the ranges (or every row) one by one.

#include <chunksampler/ranges.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_ranges {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;
using support::ConfigRng;

constexpr std::int64_t top = std::int64_t{1} << 62;

/// Every chunk of `grid`, in order.
std::vector<cs::Slice> all_chunks(const cs::Ranges::Grid& grid) {
  std::vector<cs::Slice> chunks;
  for (std::int64_t i = 0; i < grid.n_chunks(); ++i) chunks.push_back(grid.chunk(i));
  return chunks;
}

/// The model's own merge of adjacent ranges (the union's maximal runs).
std::vector<cs::Slice> merged(const std::vector<cs::Slice>& ranges) {
  std::vector<cs::Slice> runs;
  for (const cs::Slice& r : ranges) {
    if (!runs.empty() && runs.back().stop == r.start) runs.back().stop = r.stop;
    else runs.push_back(r);
  }
  return runs;
}

/// The grid chunks of the model: walk each run from its start, cutting at every multiple of
/// `chunk_size` and at the run's end.
std::vector<cs::Slice> model_chunks(const std::vector<cs::Slice>& runs, std::int64_t chunk_size) {
  std::vector<cs::Slice> chunks;
  for (const cs::Slice& r : runs) {
    std::int64_t at = r.start;
    while (at < r.stop) {
      const std::int64_t cell_end = at - at % chunk_size + chunk_size;
      const std::int64_t stop = cell_end < r.stop ? cell_end : r.stop;
      chunks.push_back({at, stop});
      at = stop;
    }
  }
  return chunks;
}

/// The k-th row of the union by walking the ranges.
std::int64_t model_locate(const std::vector<cs::Slice>& ranges, std::int64_t k) {
  for (const cs::Slice& r : ranges) {
    if (k < r.size()) return r.start + k;
    k -= r.size();
  }
  return -1;
}

/// Where `row` stands in the union by walking the ranges.
std::optional<std::int64_t> model_position(const std::vector<cs::Slice>& ranges, std::int64_t row) {
  std::int64_t before = 0;
  for (const cs::Slice& r : ranges) {
    if (r.contains(row)) return before + (row - r.start);
    before += r.size();
  }
  return std::nullopt;
}

/// A random range set: 1 to 10^4 ranges, small ones (a few chunks, gaps from 0, so adjacent
/// ranges occur) or ones spread over [0, 2^62]; sometimes touching 0 or 2^62.
struct Drawn {
  std::vector<cs::Slice> ranges;  ///< closed, as the model sees them
  std::int64_t chunk_size = 1;
  bool small = true;  ///< few enough rows and chunks to enumerate
};

Drawn draw(ConfigRng& g) {
  Drawn d;
  d.small = g.between(0, 2) != 0;
  const std::int64_t n = g.coin() ? g.between(1, 10) : g.between(1, g.coin() ? 300 : 10'000);
  if (d.small) {
    d.chunk_size = g.between(1, 40);
    std::int64_t at = g.coin() ? 0 : g.between(0, 3 * d.chunk_size);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t length = g.between(1, 4 * d.chunk_size);
      d.ranges.push_back({at, at + length});
      at += length + (g.between(0, 3) == 0 ? 0 : g.between(1, 2 * d.chunk_size));
    }
    // Rows and chunks stay in the tens of thousands; far from the model's limits.
    return d;
  }
  d.chunk_size = g.coin() ? g.between(1, 1'000) : g.between(1, top);
  const std::int64_t span = top / n;  // each range and the gap before it inside its own span
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t base = i * span;
    std::int64_t start = base + g.between(0, span - 1);
    std::int64_t stop = g.between(start + 1, base + span);
    if (i == 0 && g.coin()) start = 0;
    if (i == n - 1 && g.coin()) stop = top;
    d.ranges.push_back({start, stop});
  }
  return d;
}

/// The first chunk among `indices` of `grid` that breaks a grid rule, described, or "" when none
/// does. One message per set rather than an assertion per chunk keeps the test fast.
std::string grid_violation(const cs::Ranges& mask, const cs::Ranges::Grid& grid,
                           const std::vector<std::int64_t>& indices) {
  const std::int64_t size = grid.chunk_size();
  for (const std::int64_t i : indices) {
    const cs::Slice c = grid.chunk(i);
    const auto why = [&](const char* rule) { return fmt::format("chunk {} = [{}, {}): {}", i, c.start, c.stop, rule); };
    const std::optional<std::size_t> r = mask.range_of(c.start);
    if (!r) return why("starts outside the union");
    const cs::Slice range = mask[*r];
    if (c.empty()) return why("is empty");
    if (c.stop > range.stop) return why("crosses a range boundary");
    if (c.start / size != (c.stop - 1) / size) return why("spans two grid cells");
    if (c.size() == size && c.start % size != 0) return why("is full but off the grid");
    if (c.size() != size && c.start != range.start && c.stop != range.stop)
      return why("is short but touches no range edge");
    if (i + 1 < grid.n_chunks()) {
      // Consecutive in row order with nothing of the union between them.
      const std::int64_t next = grid.chunk(i + 1).start;
      if (next != (c.stop == range.stop ? mask[*r + 1].start : c.stop)) return why("is not followed by the next rows");
    }
  }
  return "";
}

}  // namespace

TEST_CASE("one range off the grid: chunks on the multiples of chunk_size, short head and tail", "[ranges]") {
  const cs::Ranges mask = cs::Slice{16, 1000};
  REQUIRE(mask.size() == 1);
  REQUIRE(mask.count() == 984);
  REQUIRE(mask.n_chunks(64) == 16);
  const cs::Ranges::Grid grid = mask.grid(64);
  std::vector<cs::Slice> expected{{16, 64}};
  for (std::int64_t j = 1; j < 15; ++j) expected.push_back({64 * j, 64 * j + 64});
  expected.push_back({960, 1000});
  REQUIRE(all_chunks(grid) == expected);
  REQUIRE(grid.chunk(1) == cs::Slice{64, 128});
  REQUIRE(grid.chunk_size() == 64);
}

TEST_CASE("the short chunks of one range off the grid, read as one stream", "[ranges]") {
  const cs::Ranges::Grid grid = cs::Ranges{cs::Slice{16, 1000}}.grid(64);
  REQUIRE(grid.n_short() == 2);
  REQUIRE(grid.short_rows() == 88);  // [16, 64) and [960, 1000)
  REQUIRE(grid.n_full() == 14);
  REQUIRE(grid.full_chunk(0) == cs::Slice{64, 128});
  REQUIRE(grid.full_chunk(13) == cs::Slice{896, 960});
  std::vector<cs::Slice> pieces;
  grid.short_pieces(40, 20, pieces);
  REQUIRE(pieces == std::vector<cs::Slice>{{56, 64}, {960, 972}});
  REQUIRE_THROWS_WITH(grid.short_pieces(80, 9, pieces),
                      Contains("short_pieces: [80, 80 + 9) must lie in the short rows' [0, 88)"));
  REQUIRE_THROWS_WITH(grid.full_chunk(14), Contains("full_chunk: i (14) must be in [0, 14)"));
}

TEST_CASE("two ranges with chunk 100: no chunk crosses the gap, locate jumps it", "[ranges]") {
  const cs::Ranges mask{{50, 250}, {430, 700}};
  REQUIRE(mask.count() == 470);
  REQUIRE(all_chunks(mask.grid(100)) ==
          std::vector<cs::Slice>{{50, 100}, {100, 200}, {200, 250}, {430, 500}, {500, 600}, {600, 700}});
  REQUIRE(mask.locate(0) == 50);
  REQUIRE(mask.locate(199) == 249);
  REQUIRE(mask.locate(200) == 430);
  REQUIRE(mask.locate(469) == 699);
  REQUIRE(mask.position_of(430) == 200);
  REQUIRE(mask.position_of(249) == 199);
  REQUIRE_FALSE(mask.position_of(250).has_value());
  REQUIRE_FALSE(mask.position_of(49).has_value());
  REQUIRE_FALSE(mask.position_of(700).has_value());
  REQUIRE(mask.range_of(430) == 1U);
}

TEST_CASE("adjacent ranges are merged, so a grid chunk spans the seam", "[ranges]") {
  const cs::Ranges mask{{0, 10}, {10, 20}, {30, 40}};
  REQUIRE(mask.size() == 2);
  REQUIRE(mask[0] == cs::Slice{0, 20});
  REQUIRE(mask[1] == cs::Slice{30, 40});
  REQUIRE(mask == cs::Ranges{{0, 20}, {30, 40}});
  REQUIRE_FALSE(mask == cs::Ranges{{0, 20}, {30, 41}});
  // Kept apart, [8, 16) would be read as [8, 10) and [10, 16).
  REQUIRE(all_chunks(mask.grid(8)) == std::vector<cs::Slice>{{0, 8}, {8, 16}, {16, 20}, {30, 32}, {32, 40}});
  // An open-ended range adjacent to the one before it merges too.
  const cs::Ranges open{{0, 10}, cs::Slice::from(10)};
  REQUIRE(open.size() == 1);
  REQUIRE(open[0] == cs::Slice::from(0));
}

TEST_CASE("an open-ended last range ends at n_obs once resolved", "[ranges]") {
  const cs::Ranges mask{{0, 10}, cs::Slice::from(50)};
  REQUIRE(mask.open_ended());
  const cs::Ranges closed = mask.resolve(80);
  REQUIRE_FALSE(closed.open_ended());
  REQUIRE(closed == cs::Ranges{{0, 10}, {50, 80}});
  REQUIRE(closed.count() == 40);
  REQUIRE(closed.locate(10) == 50);
  REQUIRE(all_chunks(closed.grid(32)) == std::vector<cs::Slice>{{0, 10}, {50, 64}, {64, 80}});
  REQUIRE(mask.resolve(51) == cs::Ranges{{0, 10}, {50, 51}});
  // A row lookup needs no n_obs; anything that counts does.
  REQUIRE(mask.position_of(1'000'000) == 10 + 1'000'000 - 50);
  REQUIRE_THROWS_AS(mask.count(), cs::ConfigError);
  REQUIRE_THROWS_WITH(mask.count(), Contains("count(): the last range [50, end) is open-ended; resolve(n_obs) first"));
  REQUIRE_THROWS_WITH(mask.locate(0), Contains("locate(): the last range [50, end) is open-ended"));
  REQUIRE_THROWS_WITH(mask.n_chunks(8), Contains("n_chunks(): the last range [50, end) is open-ended"));
  REQUIRE_THROWS_WITH(mask.grid(8), Contains("grid(): the last range [50, end) is open-ended"));
  // Closed ranges resolve to themselves while they fit.
  REQUIRE(closed.resolve(80) == closed);
  REQUIRE(closed.resolve(top) == closed);
}

TEST_CASE("resolve refuses ranges that do not fit n_obs, naming the range", "[ranges]") {
  const cs::Ranges open{{0, 10}, cs::Slice::from(50)};
  REQUIRE_THROWS_AS(open.resolve(50), cs::ConfigError);
  REQUIRE_THROWS_WITH(open.resolve(50), Contains("the open-ended ranges[1] = [50, end) must start before n_obs (50)"));
  const cs::Ranges closed{{0, 10}, {20, 30}, {40, 50}};
  REQUIRE_THROWS_WITH(closed.resolve(25), Contains("ranges[1] = [20, 30) must end at or before n_obs (25)"));
  REQUIRE_THROWS_WITH(closed.resolve(5), Contains("ranges[0] = [0, 10) must end at or before n_obs (5)"));
  REQUIRE_THROWS_WITH(closed.resolve(-1), Contains("n_obs (-1) must be in [0, 2^62]"));
  REQUIRE_THROWS_WITH(closed.resolve(top + 1), Contains("must be in [0, 2^62]"));
}

TEST_CASE("a bad range list is refused, naming the first offending range or pair", "[ranges]") {
  const auto refuses = [](std::vector<cs::Slice> ranges, const std::string& message) {
    CAPTURE(message);
    REQUIRE_THROWS_AS(cs::Ranges(ranges), cs::ConfigError);
    REQUIRE_THROWS_WITH(cs::Ranges(ranges), Contains(message));
  };
  refuses({}, "Ranges: no ranges given; a mask needs at least one range");
  refuses({{0, 10}, {20, 20}}, "ranges[1] = [20, 20) is empty; start must be < stop");
  refuses({{0, 10}, {30, 20}}, "ranges[1] = [30, 20) is empty");
  refuses({{-1, 10}, {20, 30}}, "ranges[0] = [-1, 10): start must be >= 0");
  refuses({{0, 10}, {20, top + 1}}, fmt::format("ranges[1] = [20, {}): stop must be <= 2^62", top + 1));
  refuses({cs::Slice::from(5), {20, 30}},
          "ranges[0] = [5, end) is open-ended but not the last of 2 ranges; only the last may be");
  refuses({{0, 10}, cs::Slice::from(top)},
          fmt::format("ranges[1] = [{}, end): an open-ended range must start before 2^62", top));
  refuses({{0, 5}, {10, 20}, {15, 30}}, "ranges[1] = [10, 20) overlaps ranges[2] = [15, 30)");
  refuses({{0, 5}, {10, 20}, {3, 4}}, "ranges[1] = [10, 20) and ranges[2] = [3, 4) are not sorted");
  refuses({{0, 5}, {10, 20}, cs::Slice::from(19)}, "ranges[1] = [10, 20) overlaps ranges[2] = [19, end)");
  // The first offence in index order wins.
  refuses({{0, 5}, {4, 8}, {9, 9}}, "ranges[0] = [0, 5) overlaps ranges[1] = [4, 8)");
  // One range is a mask written as a Slice, and named so.
  refuses({{-1, 10}}, "Ranges: mask.start must be >= 0 (got -1)");
  refuses({cs::Slice::from(top)}, fmt::format("mask.start ({}) must be < 2^62", top));
  REQUIRE_THROWS_WITH(cs::Ranges(cs::Slice{7, 3}),
                      Contains("mask.start must be < mask.stop (got mask.start 7, mask.stop 3)"));
  REQUIRE_THROWS_WITH(cs::Ranges(0, top + 1), Contains(fmt::format("mask.stop ({}) must be <= 2^62", top + 1)));
}

TEST_CASE("lookups and grids refuse out-of-range arguments", "[ranges]") {
  const cs::Ranges mask{{10, 20}};
  REQUIRE_THROWS_WITH(mask.locate(10), Contains("locate: k (10) must be in [0, 10)"));
  REQUIRE_THROWS_WITH(mask.locate(-1), Contains("k (-1)"));
  REQUIRE_THROWS_WITH(mask.grid(0), Contains("chunk_size (0) must be in [1, 2^62]"));
  REQUIRE_THROWS_WITH(mask.n_chunks(top + 1), Contains("must be in [1, 2^62]"));
  // [10, 20) on a grid of 4: [10, 12), [12, 16), [16, 20).
  REQUIRE_THROWS_WITH(mask.grid(4).chunk(3), Contains("chunk: i (3) must be in [0, 3)"));
}

TEST_CASE("a Slice converts to Ranges, so an optional<Ranges> mask takes one", "[ranges]") {
  STATIC_REQUIRE(std::is_convertible_v<cs::Slice, cs::Ranges>);
  STATIC_REQUIRE(std::is_convertible_v<cs::Slice, std::optional<cs::Ranges>>);
  STATIC_REQUIRE_FALSE(std::is_default_constructible_v<cs::Ranges>);
  const std::optional<cs::Ranges> mask = cs::Slice{3, 9};
  REQUIRE(mask->size() == 1);
  REQUIRE((*mask)[0] == cs::Slice{3, 9});
  std::vector<cs::Slice> seen(mask->begin(), mask->end());
  REQUIRE(seen == std::vector<cs::Slice>{{3, 9}});
}

TEST_CASE("hash: equal ranges hash alike however they are built, and any change of a bound changes it", "[ranges]") {
  const cs::Ranges merged{{0, 10}, {10, 20}, {50, 60}};
  const cs::Ranges direct{{0, 20}, {50, 60}};
  const std::vector<cs::Slice> list{{0, 20}, {50, 60}};
  CHECK(merged.hash() == direct.hash());
  CHECK(cs::Ranges(list).hash() == direct.hash());
  CHECK(cs::Ranges{{0, 20}, {40, 60}}.sub(0, 30).hash() == cs::Ranges{{0, 20}, {40, 50}}.hash());
  CHECK(cs::Ranges{{0, 20}, {50, 60}, {70, 80}}.sub(0, 30).hash() == direct.hash());
  for (const cs::Ranges& other :
       {cs::Ranges{{0, 20}, {50, 61}}, cs::Ranges{{0, 20}, {51, 60}}, cs::Ranges{{0, 21}, {50, 60}},
        cs::Ranges{{1, 20}, {50, 60}}, cs::Ranges{{0, 20}}, cs::Ranges{{0, 20}, cs::Slice::from(50)}})
    CHECK(other.hash() != direct.hash());
  // Computed the first time it is asked, by whichever threads ask together (ThreadSanitizer
  // checks the publication), and kept for every copy.
  const cs::Ranges fresh(list);
  const cs::Ranges copy = fresh;  // NOLINT(performance-unnecessary-copy-initialization): shares the storage
  std::vector<std::uint64_t> seen(8);
  {
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < seen.size(); ++t) threads.emplace_back([&fresh, &seen, t] { seen[t] = fresh.hash(); });
  }
  for (const std::uint64_t h : seen) CHECK(h == direct.hash());
  CHECK(copy.hash() == direct.hash());
}

TEST_CASE("grids at the top of the row space do not overflow", "[ranges]") {
  const cs::Ranges whole = cs::Slice{0, top};
  REQUIRE(whole.count() == top);
  REQUIRE(whole.locate(top - 1) == top - 1);
  REQUIRE(all_chunks(whole.grid(top)) == std::vector<cs::Slice>{{0, top}});
  REQUIRE(all_chunks(whole.grid(top / 2)) == std::vector<cs::Slice>{{0, top / 2}, {top / 2, top}});
  // 2^62 = 1 (mod 3): the last cell [2^62 - 1, 2^62 + 2) is cut to one row.
  const cs::Ranges::Grid threes = whole.grid(3);
  REQUIRE(threes.n_chunks() == top / 3 + 1);
  REQUIRE(threes.chunk(threes.n_chunks() - 1) == cs::Slice{top - 1, top});
  REQUIRE(threes.chunk(threes.n_chunks() - 2) == cs::Slice{top - 4, top - 1});
  const cs::Ranges high{{5, 6}, {top - 5, top}};
  REQUIRE(all_chunks(high.grid(top)) == std::vector<cs::Slice>{{5, 6}, {top - 5, top}});
  REQUIRE(all_chunks(high.grid(top - 1)) == std::vector<cs::Slice>{{5, 6}, {top - 5, top - 1}, {top - 1, top}});
  REQUIRE(high.position_of(top - 1) == 5);
  REQUIRE(cs::Ranges{cs::Slice::from(top - 1)}.resolve(top) == cs::Ranges{{top - 1, top}});
}

namespace {

// The grid's full chunks and its short ones read as one stream, against the model's chunks: the
// full ones one by one, the short rows at random windows and at each one's edges.
void check_full_and_short(const cs::Ranges::Grid& grid, const std::vector<cs::Slice>& chunks, ConfigRng& g) {
  const std::int64_t c = grid.chunk_size();
  std::vector<cs::Slice> fulls;
  std::vector<cs::Slice> shorts;
  std::int64_t short_rows = 0;
  for (const cs::Slice& chunk : chunks) {
    if (chunk.size() == c) {
      fulls.push_back(chunk);
    } else {
      shorts.push_back(chunk);
      short_rows += chunk.size();
    }
  }
  REQUIRE(grid.n_full() == static_cast<std::int64_t>(fulls.size()));
  REQUIRE(grid.n_short() == static_cast<std::int64_t>(shorts.size()));
  REQUIRE(grid.short_rows() == short_rows);
  std::vector<cs::Slice> looked_up;
  for (std::int64_t i = 0; i < grid.n_full(); ++i) looked_up.push_back(grid.full_chunk(i));
  REQUIRE(looked_up == fulls);
  // The model of rows [first, first + count) of the short stream: the shorts cut to it.
  const auto model = [&shorts](std::int64_t first, std::int64_t count) {
    std::vector<cs::Slice> out;
    std::int64_t at = 0;
    for (const cs::Slice& s : shorts) {
      const std::int64_t from = std::max(first, at);
      const std::int64_t to = std::min(first + count, at + s.size());
      if (from < to) out.push_back({s.start + (from - at), s.start + (to - at)});
      at += s.size();
    }
    return out;
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> windows{{0, short_rows}, {0, 0}, {short_rows, 0}};
  for (int q = 0; q < 30 && short_rows > 0; ++q) {
    const std::int64_t first = g.between(0, short_rows - 1);
    windows.emplace_back(first, g.between(0, std::min(short_rows - first, 3 * c)));
  }
  for (const auto& [first, count] : windows) {
    CAPTURE(first, count, short_rows);
    std::vector<cs::Slice> pieces;
    grid.short_pieces(first, count, pieces);
    REQUIRE(pieces == model(first, count));
  }
  if (grid.n_full() > 0) REQUIRE_THROWS_AS(grid.full_chunk(grid.n_full()), cs::ConfigError);
  std::vector<cs::Slice> none;
  REQUIRE_THROWS_AS(grid.short_pieces(short_rows, 1, none), cs::ConfigError);
}

// Cuts of the union, some asked for again (the last two are remembered), hold the rows locate
// gives, and a grid over a cut (made again for the same cut) has that cut's chunks.
void check_cuts(const cs::Ranges& mask, ConfigRng& g) {
  const std::int64_t total = mask.count();
  std::vector<std::pair<std::int64_t, std::int64_t>> cuts;
  for (int q = 0; q < 6; ++q) {
    const std::int64_t first = g.between(0, total - 1);
    cuts.emplace_back(first, g.between(1, std::min<std::int64_t>(total - first, 5'000)));
  }
  for (int q = 0; q < 12; ++q) {
    const auto [first, count] = cuts[static_cast<std::size_t>(g.between(0, 5))];
    CAPTURE(first, count);
    const cs::Ranges cut = mask.sub(first, count);
    REQUIRE(cut.count() == count);
    for (const std::int64_t k : {std::int64_t{0}, count / 2, count - 1})
      REQUIRE(cut.locate(k) == mask.locate(first + k));
    const std::int64_t c = g.between(1, 9);
    REQUIRE(cut.grid(c).n_chunks() == cut.n_chunks(c));
  }
}

}  // namespace

TEST_CASE("random range sets: lookups and grid chunks match the models", "[ranges]") {
  ConfigRng g(0x72616e676573ULL);
  int enumerated = 0;
  for (int round = 0; round < 300; ++round) {
    Drawn d = draw(g);
    const std::vector<cs::Slice> runs = merged(d.ranges);
    CAPTURE(round, d.ranges.size(), runs.size(), d.chunk_size, d.small);
    // A third of the sets are given with an open-ended last range, resolved to the same rows.
    std::vector<cs::Slice> given = d.ranges;
    std::optional<cs::Ranges> mask;
    if (g.between(0, 2) == 0) {
      given.back() = cs::Slice::from(given.back().start);
      const cs::Ranges open(given);
      REQUIRE(open.open_ended());
      mask = open.resolve(d.ranges.back().stop);
    } else {
      mask = cs::Ranges(given);
    }
    REQUIRE(std::vector<cs::Slice>(mask->begin(), mask->end()) == runs);
    REQUIRE_FALSE(mask->open_ended());

    std::int64_t total = 0;
    for (const cs::Slice& r : d.ranges) total += r.size();
    REQUIRE(mask->count() == total);

    // locate and position_of against the walking model, at range edges and random positions.
    std::vector<std::int64_t> ks{0, total - 1};
    for (int q = 0; q < 40; ++q) ks.push_back(g.between(0, total - 1));
    for (const std::int64_t k : ks) {
      const std::int64_t row = model_locate(d.ranges, k);
      REQUIRE(mask->locate(k) == row);
      REQUIRE(mask->position_of(row) == k);
    }
    for (const cs::Slice& r : runs) {
      REQUIRE(mask->position_of(r.start) == model_position(d.ranges, r.start));
      REQUIRE(mask->position_of(r.start - 1) == model_position(d.ranges, r.start - 1));
      REQUIRE(mask->position_of(r.stop) == model_position(d.ranges, r.stop));
      if (runs.size() > 50) break;  // the walking model is O(ranges): sample the edges of big sets
    }

    const cs::Ranges::Grid grid = mask->grid(d.chunk_size);
    REQUIRE(mask->n_chunks(d.chunk_size) == grid.n_chunks());
    if (d.small) {
      ++enumerated;
      // The chunks partition the union exactly, in order, as the model cuts it.
      const std::vector<cs::Slice> chunks = model_chunks(runs, d.chunk_size);
      REQUIRE(all_chunks(grid) == chunks);
      check_full_and_short(grid, chunks, g);
    }
    check_cuts(*mask, g);
    if (d.small && total <= 100'000) {
      // Every row of the model against locate and position_of, compared whole (one assertion
      // each, not one per row, which is what would cost the time).
      std::vector<std::int64_t> rows;
      for (const cs::Slice& r : d.ranges)
        for (std::int64_t row = r.start; row < r.stop; ++row) rows.push_back(row);
      std::vector<std::int64_t> located;
      std::vector<std::optional<std::int64_t>> positions;
      std::vector<std::optional<std::int64_t>> expected_positions;
      for (std::int64_t k = 0; k < total; ++k) {
        located.push_back(mask->locate(k));
        positions.push_back(mask->position_of(rows[static_cast<std::size_t>(k)]));
        expected_positions.emplace_back(k);
      }
      REQUIRE(located == rows);
      REQUIRE(positions == expected_positions);
    }
    // The grid rules, on every chunk of small sets and on sampled neighbours of big ones.
    std::vector<std::int64_t> indices;
    if (grid.n_chunks() <= 20'000) {
      for (std::int64_t i = 0; i < grid.n_chunks(); ++i) indices.push_back(i);
    } else {
      indices = {0, grid.n_chunks() - 2};
      for (int q = 0; q < 200; ++q) indices.push_back(g.between(0, grid.n_chunks() - 2));
    }
    REQUIRE(grid_violation(*mask, grid, indices).empty());
  }
  REQUIRE(enumerated > 100);
}

TEST_CASE("ten million ranges: built and looked up in O(log ranges)", "[ranges]") {
  constexpr std::int64_t n = 10'000'000;
  std::vector<cs::Slice> ranges;
  ranges.reserve(static_cast<std::size_t>(n));
  std::int64_t total = 0;
  // Range i is [10 i, 10 i + 1 + i % 7): never adjacent, lengths 1 to 7.
  for (std::int64_t i = 0; i < n; ++i) {
    ranges.push_back({10 * i, 10 * i + 1 + i % 7});
    total += 1 + i % 7;
  }
  const cs::Ranges mask(ranges);
  REQUIRE(mask.size() == static_cast<std::size_t>(n));
  REQUIRE(mask.count() == total);
  REQUIRE(mask.locate(total - 1) == ranges.back().stop - 1);
  // Lengths run 1..7 in blocks of 7 ranges holding 28 rows: row k = 28 b is range 7 b's start.
  REQUIRE(mask.locate(28 * 1'000'000) == 10 * 7'000'000);
  // Range 7'000'006 holds 7 rows, after 28 * 10^6 + (1 + ... + 6) = 28'000'021.
  REQUIRE(mask.position_of(70'000'063) == 28'000'024);
  REQUIRE_FALSE(mask.position_of(70'000'001).has_value());
  // A chunk of 4 starts at each range's start and at every multiple of 4 inside it.
  std::int64_t expected_chunks = 0;
  for (const cs::Slice& r : ranges)
    for (std::int64_t row = r.start; row < r.stop; ++row)
      if (row == r.start || row % 4 == 0) ++expected_chunks;
  const cs::Ranges::Grid grid = mask.grid(4);
  REQUIRE(grid.n_chunks() == expected_chunks);
  REQUIRE(grid.chunk(grid.n_chunks() - 1).stop == ranges.back().stop);
}

}  // namespace test_ranges
