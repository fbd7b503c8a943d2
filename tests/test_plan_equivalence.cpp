// SPDX-License-Identifier: MIT
// The hot path's shortcuts give the plan they replace: a request filled for a reader of its first
// positions only (`fill(k, out, needed)` of ChunkPlan and WeightedClassPlan, which stop the
// shuffle there) holds the same chunks and the same first positions as the whole request; an
// `Epoch` that uses it yields exactly what one that fills every request whole yields, for any
// runs, workers and skip; and a class chunk's start found from its window alone (a window of one
// run) is the one the class's prefix sums give.

#include "class_support.hpp"
#include "support.hpp"

#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace test_plan_equivalence {

namespace cs = chunksampler;
using cs::detail::ChunkPlan;
using support::Config;
using support::ConfigRng;

// A `ChunkPlan` that fills every request whole: `Epoch` finds no `fill(k, out, needed)` in it.
class WholeRequests {
 public:
  explicit WholeRequests(ChunkPlan plan) : plan_(std::move(plan)) {}
  [[nodiscard]] std::int64_t n_batches() const noexcept { return plan_.n_batches(); }
  [[nodiscard]] std::int64_t n_requests() const noexcept { return plan_.n_requests(); }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return plan_.batch_size(); }
  [[nodiscard]] std::int64_t request_of(std::int64_t i) const noexcept { return plan_.request_of(i); }
  [[nodiscard]] std::int64_t request_begin(std::int64_t k) const noexcept { return plan_.request_begin(k); }
  [[nodiscard]] std::int64_t max_chunks() const noexcept { return plan_.max_chunks(); }
  [[nodiscard]] std::int64_t max_positions() const noexcept { return plan_.max_positions(); }
  void fill(std::int64_t k, cs::RequestBuffers& out) const { plan_.fill(k, out); }

 private:
  ChunkPlan plan_;
};
static_assert(cs::EpochPlan<WholeRequests>);

// A configuration of RandomSampler (with or without replacement, num_samples, drop_last) or
// SequentialSampler, over a dataset or a mask.
Config draw(ConfigRng& g) {
  return support::servable_config(g, {.max_chunk = 9, .max_preload = 5, .max_extra_obs = 300});
}

ChunkPlan plan_of(const Config& c, std::uint64_t epoch) {
  return c.with_base([&](const auto& sampler) { return sampler.plan(c.n_obs, epoch); });
}

// Every request of `plan` filled for its first `needed` positions, for a few `needed` (none, one,
// a random count, all but one, all and more), holds the whole request's chunks and its first
// positions.
template <class Plan>
void check_first_positions(const Plan& plan, ConfigRng& g) {
  cs::RequestBuffers whole;
  cs::RequestBuffers part;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
    plan.fill(k, whole);
    const auto size = static_cast<std::int64_t>(whole.positions.size());
    for (const std::int64_t needed : {std::int64_t{0}, std::int64_t{1}, g.between(0, size), size - 1, size, size + 7}) {
      CAPTURE(k, needed, size);
      plan.fill(k, part, needed);
      REQUIRE(part.chunks == whole.chunks);
      REQUIRE(part.positions.size() == whole.positions.size());
      const auto prefix = static_cast<std::ptrdiff_t>(std::clamp<std::int64_t>(needed, 0, size));
      REQUIRE(std::equal(part.positions.begin(), part.positions.begin() + prefix, whole.positions.begin()));
    }
  }
}

TEST_CASE("ChunkPlan: a request filled for its first positions holds the whole request's chunks and those positions",
          "[plan_equivalence]") {
  ConfigRng g(20261129U);
  for (int trial = 0; trial < 400; ++trial) {
    const Config c = draw(g);
    const ChunkPlan plan = plan_of(c, static_cast<std::uint64_t>(g.between(0, 2)));
    CAPTURE(trial, c.describe());
    check_first_positions(plan, g);
  }
}

TEST_CASE("Epoch: stopping each request's shuffle after its share yields what whole requests yield",
          "[plan_equivalence]") {
  ConfigRng g(20261130U);
  for (int trial = 0; trial < 300; ++trial) {
    const Config c = draw(g);
    const ChunkPlan plan = plan_of(c, 0);
    const std::int64_t n = plan.n_batches();
    // Runs as a rank's share in global mode is dealt: a few stretches of the epoch's batches.
    std::vector<cs::BatchRun> runs;
    for (std::int64_t begin = g.between(0, n); begin < n;) {
      const std::int64_t end = g.between(begin, n);
      runs.push_back({begin, end});
      begin = end + g.between(0, 3);
    }
    const std::int64_t workers = g.between(1, 3);
    const cs::WorkerInfo worker{.id = g.between(0, workers - 1), .num_workers = workers};
    CAPTURE(trial, c.describe(), runs.size(), worker.id, worker.num_workers);
    cs::Epoch<ChunkPlan> shortcut(plan, runs, worker, 0, {});
    const std::int64_t skip = g.between(0, shortcut.n_batches());
    CAPTURE(skip);
    REQUIRE(support::collect(cs::Epoch<ChunkPlan>(plan, runs, worker, skip, {})) ==
            support::collect(cs::Epoch<WholeRequests>(WholeRequests(plan), runs, worker, skip, {})));
  }
}

// A mask of `count` ranges, lengths 1 to 3 chunks and gaps 1 to 2 chunks from a random start,
// so that nearly every range has a short head or tail.
cs::Ranges ragged_mask(ConfigRng& g, std::int64_t chunk, std::int64_t count) {
  std::vector<cs::Slice> slices;
  std::int64_t at = g.between(0, 2 * chunk);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t length = g.between(1, 3 * chunk);
    slices.push_back({at, at + length});
    at += length + g.between(1, 2 * chunk);
  }
  return cs::Ranges(slices);
}

// The grid chunks of `mask` in row order, cut as the model cuts them: the cells of `chunk` rows.
std::vector<cs::Slice> model_grid(const cs::Ranges& mask, std::int64_t chunk) {
  std::vector<cs::Slice> out;
  for (const cs::Slice& r : mask)
    for (std::int64_t s = r.start; s < r.stop; s = (s / chunk + 1) * chunk)
      out.push_back({s, std::min((s / chunk + 1) * chunk, r.stop)});
  return out;
}

// The rows [begin, end) of a stream given as pieces, cut to that window.
std::vector<cs::Slice> window_of(const std::vector<cs::Slice>& stream, std::int64_t begin, std::int64_t end) {
  std::vector<cs::Slice> out;
  std::int64_t at = 0;
  for (const cs::Slice& p : stream) {
    const std::int64_t from = std::max(begin, at);
    const std::int64_t to = std::min(end, at + p.size());
    if (from < to) out.push_back({p.start + (from - at), p.start + (to - at)});
    at += p.size();
  }
  return out;
}

// Every request of `plan` on its own holds the pieces of its window of `stream` (the epoch's
// rows in order, as pieces): `request_obs` rows a request, `read` of them (the whole share when
// shuffled, the used rows in order).
void check_requests_read(const ChunkPlan& plan, const std::vector<cs::Slice>& stream, std::int64_t request_obs,
                         std::int64_t total) {
  cs::RequestBuffers out;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
    CAPTURE(k);
    plan.fill(k, out);
    REQUIRE(static_cast<std::int64_t>(out.chunks.size()) <= plan.max_chunks());
    REQUIRE(out.chunks == window_of(stream, k * request_obs, std::min(total, (k + 1) * request_obs)));
  }
}

TEST_CASE("ChunkPlan in row order: a request found from its first row reads the union's rows from there",
          "[plan_equivalence]") {
  // In order, where a request starts is looked up in the mask (the union's row) instead of
  // through the short chunks' places: the same pieces as the model's grid chunks in row order.
  ConfigRng g(20261134U);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t chunk = g.between(1, 9);
    const std::int64_t preload = g.between(1, 4);
    const cs::Ranges mask = ragged_mask(g, chunk, g.between(1, 60));
    const std::int64_t n_obs = mask[mask.size() - 1].stop + g.between(0, 5);
    CAPTURE(trial, chunk, preload, mask.size());
    const cs::SequentialSampler sampler(
        {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = chunk, .mask = mask});
    const ChunkPlan plan = sampler.plan(n_obs, 0);
    check_requests_read(plan, model_grid(mask, chunk), chunk * preload, mask.count());
  }
}

TEST_CASE("ChunkPlan over more than placed_shorts short chunks: full chunks and slots, each once, in a stream",
          "[plan_equivalence]") {
  // The model: the full grid chunks, and the short ones in row order cut every chunk_size rows
  // (a slot; the last may be short). Every place of the order holds one of them, each once, and
  // every request on its own reads its window of the places' rows one after the other.
  ConfigRng g(20261135U);
  int slotted = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const std::int64_t chunk = g.between(2, 9);
    const std::int64_t preload = g.between(1, 4);
    const cs::Ranges mask = ragged_mask(g, chunk, g.between(ChunkPlan::placed_shorts / 2 + 10, 600));
    const std::int64_t n_obs = mask[mask.size() - 1].stop;
    const std::uint64_t seed = g.next();
    CAPTURE(trial, chunk, preload, mask.size(), seed);
    std::vector<std::vector<cs::Slice>> slots;
    std::vector<cs::Slice> shorts;
    for (const cs::Slice& c : model_grid(mask, chunk)) {
      if (c.size() == chunk) slots.push_back({c});
      else shorts.push_back(c);
    }
    std::int64_t short_rows = 0;
    for (const cs::Slice& c : shorts) short_rows += c.size();
    if (static_cast<std::int64_t>(shorts.size()) <= ChunkPlan::placed_shorts) continue;
    for (std::int64_t first = 0; first < short_rows; first += chunk)
      slots.push_back(window_of(shorts, first, std::min(short_rows, first + chunk)));

    const cs::RandomSampler sampler(
        {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = chunk, .mask = mask, .seed = seed});
    const ChunkPlan plan = sampler.plan(n_obs, static_cast<std::uint64_t>(g.between(0, 3)));
    REQUIRE(plan.stream_chunks() == static_cast<std::int64_t>(slots.size()));
    std::vector<std::vector<cs::Slice>> placed;
    std::vector<cs::Slice> stream;
    for (std::int64_t i = 0; i < plan.stream_chunks(); ++i) {
      std::vector<cs::Slice> pieces;
      plan.pieces(i, pieces);
      stream.insert(stream.end(), pieces.begin(), pieces.end());
      placed.push_back(std::move(pieces));
    }
    // Slots are told apart by their first row.
    const auto first_row = [](const std::vector<cs::Slice>& pieces) { return pieces.front().start; };
    std::ranges::sort(placed, {}, first_row);
    std::ranges::sort(slots, {}, first_row);
    REQUIRE(placed == slots);
    check_requests_read(plan, stream, chunk * preload, mask.count());
    ++slotted;
  }
  CHECK(slotted > 100);
}

TEST_CASE(
    "WeightedClassPlan: a request filled for its first positions holds the whole request's chunks and those positions",
    "[plan_equivalence]") {
  ConfigRng g(20261132U);
  for (int trial = 0; trial < 300; ++trial) {
    const support::classes::ClassConfig c = support::classes::random_config(g);
    const cs::Composition composition = g.coin() ? cs::Composition::stratified : cs::Composition::independent;
    const cs::WeightedClassSampler sampler(c.codes, cs::weighted_options_of(c.options, composition));
    const auto plan = sampler.plan(c.n_obs(), static_cast<std::uint64_t>(g.between(0, 2)));
    CAPTURE(trial, c.describe(), composition == cs::Composition::stratified);
    check_first_positions(plan, g);
  }
}

// A chunk's start as the class's prefix sums give it: start number `prefix[lo] + skipped + draw`
// of the class, in the run that holds it (what ClassDraws::chunk_of computed for every window).
cs::Slice start_from_prefix(const cs::detail::ClassRuns& c, const cs::detail::ClassWindow& w, std::int64_t draw,
                            std::int64_t length) {
  const std::int64_t target = c.prefix[w.lo] + w.skipped + draw;
  std::size_t r = w.lo;
  while (r + 1 < w.hi && c.prefix[r + 1] <= target) ++r;
  const std::int64_t start = c.runs[r].start + (target - c.prefix[r]);
  return {start, start + length};
}

TEST_CASE("ClassDraws: a chunk's start from its window is the one the class's runs give, one run or many",
          "[plan_equivalence]") {
  ConfigRng g(20261133U);
  for (int trial = 0; trial < 300; ++trial) {
    // Classes of random runs (some of one run, some of many) over random rows, clipped to a
    // random range or to a few ranges.
    const std::int64_t chunk = g.between(1, 9);
    auto table = std::make_shared<cs::detail::ClassTable>();
    table->chunk_size = chunk;
    std::int64_t row = 0;
    const auto n_classes = static_cast<std::int32_t>(g.between(1, 12));
    std::vector<std::vector<cs::Slice>> runs(static_cast<std::size_t>(n_classes));
    for (std::int64_t r = g.between(1, 40); r > 0; --r) {
      row += g.between(0, 3);
      const cs::Slice run{row, row + chunk + g.between(0, 3 * chunk)};
      runs[static_cast<std::size_t>(g.between(0, n_classes - 1))].push_back(run);
      row = run.stop;
    }
    for (std::int32_t code = 0; code < n_classes; ++code) {
      if (runs[static_cast<std::size_t>(code)].empty()) continue;
      cs::detail::ClassRuns c{.code = code, .weight = static_cast<double>(g.between(1, 5)), .runs = {}, .prefix = {0}};
      for (const cs::Slice& run : runs[static_cast<std::size_t>(code)]) {
        c.runs.push_back(run);
        c.prefix.push_back(c.prefix.back() + run.size() - chunk + 1);
      }
      table->classes.push_back(std::move(c));
    }
    std::vector<cs::Slice> ranges;
    if (g.coin()) {
      ranges.push_back(g.sub_range(row));
    } else {
      for (std::int64_t at = g.between(0, 5); at < row;) {
        const std::int64_t stop = std::min(row, at + g.between(1, 4 * chunk));
        ranges.push_back({at, stop});
        at = stop + g.between(1, 2 * chunk);
      }
      if (ranges.empty()) ranges.push_back({0, row});
    }
    const cs::detail::ClassScope scope = cs::detail::class_scope(table, ranges);
    CAPTURE(trial, chunk, ranges.size());
    if (scope.empty()) continue;
    const std::int64_t used = g.between(1, 1000);
    const cs::detail::ClassLayout layout{
        .chunk_size = chunk, .preload_nchunks = 4, .batch_size = chunk, .used_obs = used};
    const std::uint64_t key = g.next();
    const cs::detail::ClassDraws draws(scope, layout, key);
    for (std::size_t window = 0; window < draws.windows().size(); ++window) {
      const cs::detail::ClassWindow& w = draws.windows()[window];
      const cs::detail::ClassRuns& c = (*scope.classes)[w.index];
      for (std::int64_t i = 0; i < support::ceil_div(used, chunk); i += 1 + g.between(0, 3)) {
        CAPTURE(window, i, w.lo, w.hi, w.skipped, w.starts);
        // The draw chunk_of makes: its engine keyed by the chunk's index.
        cs::detail::Engine engine = cs::detail::make_engine(key, static_cast<std::uint64_t>(i));
        const auto draw = static_cast<std::int64_t>(cs::detail::bounded(engine, static_cast<std::uint64_t>(w.starts)));
        REQUIRE(draws.chunk_of(i, window) == start_from_prefix(c, w, draw, std::min(chunk, used - i * chunk)));
      }
    }
  }
}

}  // namespace test_plan_equivalence
