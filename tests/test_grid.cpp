// SPDX-License-Identifier: MIT
// Chunks on the storage grid and masks of many ranges: the worked examples of issue 21 with their
// exact chunk lists, and invariants over hundreds of random range sets for every chunk sampler,
// distributed in both modes and with workers, resumed at every batch and restored elastically.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/sequential_sampler.hpp>

#include "harness.hpp"
#include "statistics.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace test_grid {

namespace cs = chunksampler;
using Catch::Matchers::Contains;
using support::ConfigRng;
using support::DrawnRanges;
using support::OwnedRequest;

namespace {

std::vector<cs::Slice> plan_chunks(const cs::ChunkPlan& plan) {
  std::vector<cs::Slice> out;
  for (std::int64_t i = 0; i < plan.stream_chunks(); ++i) out.push_back(plan.chunk(i));
  return out;
}

// The grid chunks of `[start, stop)` for `chunk` rows: the cells of multiples of `chunk`, cut.
std::vector<cs::Slice> grid_of(std::int64_t start, std::int64_t stop, std::int64_t chunk) {
  std::vector<cs::Slice> out;
  for (std::int64_t s = start; s < stop; s = (s / chunk + 1) * chunk)
    out.push_back({s, std::min((s / chunk + 1) * chunk, stop)});
  return out;
}

// A random set of 1 to `most` ranges inside [0, n_obs): lengths from 1 row to several chunks,
// gaps from 1 row, sometimes touching 0 or n_obs, sometimes open-ended.
DrawnRanges random_ranges(ConfigRng& g, std::int64_t chunk, std::int64_t most, bool exactly = false) {
  DrawnRanges set;
  const std::int64_t n = exactly ? most : g.between(1, most);
  std::int64_t at = g.coin() ? 0 : g.between(0, 3 * chunk);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t length = g.coin() ? g.between(1, chunk) : g.between(1, 4 * chunk);
    set.slices.push_back({at, at + length});
    at += length + g.between(1, 2 * chunk);
  }
  set.n_obs = set.slices.back().stop + (g.coin() ? 0 : g.between(1, 2 * chunk));
  set.open = g.between(0, 3) == 0;
  if (set.open) set.slices.back().stop = set.n_obs;
  return set;
}

// A trial's draws: a chunk, a preload and a batch that divides a request (support::draw_shape), and
// a range set for that chunk (random_ranges).
struct Trial {
  std::int64_t chunk = 1;
  std::int64_t preload = 1;
  std::int64_t batch = 1;
  DrawnRanges set;

  [[nodiscard]] cs::RandomOptions random_options(std::uint64_t seed) const {
    return {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = batch, .mask = set.ranges(), .seed = seed};
  }
  [[nodiscard]] cs::SequentialOptions sequential_options() const {
    return {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = batch, .mask = set.ranges()};
  }
  /// For a failing test's report.
  [[nodiscard]] std::string describe() const {
    return fmt::format("chunk {} preload {} batch {}", chunk, preload, batch);
  }
};

// A trial of chunks up to `max_chunk` and preloads up to `max_preload`, over
// random_ranges(g, chunk, most, exactly).
Trial draw_trial(ConfigRng& g, std::int64_t max_chunk, std::int64_t max_preload, std::int64_t most,
                 bool exactly = false) {
  support::Config shape;
  support::draw_shape(g, shape, max_chunk, max_preload);
  return {.chunk = shape.chunk,
          .preload = shape.preload,
          .batch = shape.batch,
          .set = random_ranges(g, shape.chunk, most, exactly)};
}

// Every observation of the union exactly once, none outside, chunks inside one range and one
// grid cell, full requests: what an epoch without replacement and without drop_last promises.
void check_whole_epoch(const support::EpochRecord& rec, const cs::Ranges& closed, std::int64_t chunk,
                       std::int64_t request_obs) {
  CHECK(rec.chunks_on_grid(closed, chunk));
  CHECK(rec.requests_full(request_obs));
  CHECK(rec.positions_valid());
  std::set<std::int64_t> seen;
  bool inside = true;
  for (const support::Draw& d : rec.draws) {
    inside = inside && closed.range_of(d.obs).has_value();
    seen.insert(d.obs);
  }
  CHECK(inside);
  CHECK(static_cast<std::int64_t>(seen.size()) == closed.count());
  CHECK(static_cast<std::int64_t>(rec.draws.size()) == closed.count());
}

}  // namespace

TEST_CASE("grid: SequentialSampler with chunk 64 over the mask from 16 to 1000", "[grid]") {
  cs::SequentialSampler sampler(
      {.chunk_size = 64, .preload_nchunks = 4, .batch_size = 64, .mask = cs::Slice{16, 1000}});
  const auto plan = sampler.plan(2'000, 0);
  // Before the grid: [16, 80), [80, 144), ...: every chunk straddled two storage chunks of 64.
  std::vector<cs::Slice> expected{{16, 64}};
  for (std::int64_t s = 64; s < 960; s += 64) expected.push_back({s, s + 64});
  expected.push_back({960, 1000});
  CHECK(plan_chunks(plan) == expected);
  const std::vector<OwnedRequest> requests = support::epoch(sampler, 2'000);
  REQUIRE(requests.size() == 4);  // 984 rows, 256 per request
  // 48 + 3 * 64 = 240 rows, so the fifth grid chunk [256, 320) is read in two pieces.
  CHECK(requests[0].chunks == std::vector<cs::Slice>{{16, 64}, {64, 128}, {128, 192}, {192, 256}, {256, 272}});
  CHECK(requests[1].chunks == std::vector<cs::Slice>{{272, 320}, {320, 384}, {384, 448}, {448, 512}, {512, 528}});
  CHECK(requests[3].chunks == std::vector<cs::Slice>{{784, 832}, {832, 896}, {896, 960}, {960, 1000}});
}

TEST_CASE("grid: rank 1 of 3 over 2,000 observations with chunk 100", "[grid]") {
  // 2000 / 3 = 666 per rank, 650 in whole batches of 50: rank 1's shard is [650, 1300).
  const cs::SequentialSampler in_order({.chunk_size = 100, .preload_nchunks = 2, .batch_size = 50});
  const cs::DistributedSampler dist(in_order, cs::DistInfo{.rank = 1, .world_size = 3});
  CHECK(dist.shard(2'000) == cs::Ranges(650, 1'300));
  const auto plan = in_order.with_shard({.mask = dist.shard(2'000), .stream = 1, .budget = 650}).plan(2'000, 0);
  CHECK(plan_chunks(plan) == grid_of(650, 1'300, 100));  // [650, 700), [700, 800), ..., [1200, 1300)
  cs::DistributedSampler playing = dist;
  const std::vector<OwnedRequest> requests = support::epoch(playing, 2'000);
  REQUIRE(requests.size() == 4);
  CHECK(requests[0].chunks == std::vector<cs::Slice>{{650, 700}, {700, 800}, {800, 850}});
  CHECK(requests[3].chunks == std::vector<cs::Slice>{{1'250, 1'300}});
  // Shuffled, the same grid chunks in a random order, none across a multiple of 100.
  const cs::RandomSampler random({.chunk_size = 100, .preload_nchunks = 2, .batch_size = 50, .seed = 3});
  cs::DistributedSampler shuffled(random, cs::DistInfo{.rank = 1, .world_size = 3});
  const support::EpochRecord rec = support::walk(shuffled, 2'000);
  check_whole_epoch(rec, cs::Ranges(650, 1'300), 100, 200);
}

TEST_CASE("grid: a mask of several ranges, worked", "[grid]") {
  // Three ranges, the last open-ended, over n_obs = 100 with chunks of 8.
  const cs::Ranges mask{{3, 20}, {30, 31}, cs::Slice::from(60)};
  cs::SequentialSampler sampler({.chunk_size = 8, .preload_nchunks = 2, .batch_size = 4, .mask = mask});
  CHECK(sampler.mask() == mask);
  CHECK(sampler.epoch_size(100) == 17 + 1 + 40);
  CHECK(plan_chunks(sampler.plan(100, 0)) ==
        std::vector<cs::Slice>{
            {3, 8}, {8, 16}, {16, 20}, {30, 31}, {60, 64}, {64, 72}, {72, 80}, {80, 88}, {88, 96}, {96, 100}});
  const std::vector<OwnedRequest> requests = support::epoch(sampler, 100);
  REQUIRE(requests.size() == 4);  // 58 rows, 16 per request
  CHECK(requests[0].chunks == std::vector<cs::Slice>{{3, 8}, {8, 16}, {16, 19}});
  CHECK(requests[1].chunks == std::vector<cs::Slice>{{19, 20}, {30, 31}, {60, 64}, {64, 72}, {72, 74}});
  // Rank 1 of 2 in contiguous mode: positions [28, 56) of the union (whole batches of 4), which
  // span the end of [3, 20), [30, 31) is rank 0's, and the open range's head.
  const cs::DistributedSampler dist(sampler, cs::DistInfo{.rank = 1, .world_size = 2});
  CHECK(dist.shard(100) == cs::Ranges(70, 98));
  const cs::DistributedSampler rank0(sampler, cs::DistInfo{.rank = 0, .world_size = 2});
  CHECK(rank0.shard(100) == cs::Ranges{{3, 20}, {30, 31}, {60, 70}});
  CHECK(dist.mask() == mask);
}

TEST_CASE("grid: invariants over random range sets, every chunk sampler", "[grid]") {
  ConfigRng g(2111);
  int served = 0;
  for (int trial = 0; trial < 300; ++trial) {
    // One trial of exactly 10^4 ranges, some of 400 at most, the rest of 12 at most.
    const Trial t = draw_trial(g, 9, 4, trial == 1 ? 10'000 : trial % 10 == 0 ? 400 : 12, trial == 1);
    const cs::Ranges closed = t.set.closed();
    const bool shuffle = g.coin();
    const std::uint64_t seed = g.next();
    INFO(fmt::format("trial {} {} shuffle {} seed {} | {}", trial, t.describe(), shuffle, seed, t.set.describe()));
    const std::int64_t size = closed.count();
    const auto check = [&](auto sampler) {
      REQUIRE(sampler.n_batches(t.set.n_obs) == support::ceil_div(size, t.batch));
      const support::EpochRecord rec = support::walk(sampler, t.set.n_obs);
      CHECK(rec.n_batches() == support::ceil_div(size, t.batch));
      CHECK(rec.batches_full_but_last(t.batch));
      check_whole_epoch(rec, closed, t.chunk, t.chunk * t.preload);
      auto twin = sampler;
      twin.set_epoch(0);
      CHECK(support::epoch(twin, t.set.n_obs) == rec.requests);
    };
    if (shuffle) check(cs::RandomSampler(t.random_options(seed)));
    else check(cs::SequentialSampler(t.sequential_options()));

    // With replacement: chunks of the union's rows, one piece per range, inside it.
    const std::int64_t budget = g.between(1, 3 * size);
    cs::RandomOptions o = t.random_options(seed);
    o.replacement = true;
    o.num_samples = size < t.chunk ? std::min(budget, size) : budget;
    o.grid_starts = g.coin();
    cs::RandomSampler with(o);
    const support::EpochRecord drawn = support::walk(with, t.set.n_obs);
    CHECK(static_cast<std::int64_t>(drawn.draws.size()) == *o.num_samples);
    CHECK(drawn.requests_full(t.chunk * t.preload));
    bool pieces_inside = true;
    for (const cs::Slice& c : drawn.chunks) {
      const std::optional<std::size_t> r = closed.range_of(c.start);
      pieces_inside = pieces_inside && r && c.stop <= closed[*r].stop;
    }
    CHECK(pieces_inside);
    if (o.grid_starts && size >= t.chunk) CHECK(drawn.chunks_on_grid(closed, t.chunk));
    ++served;
  }
  CHECK(served == 300);
}

TEST_CASE("grid: DistributedSampler over random range sets, both modes, 1 to 9 ranks, workers", "[grid]") {
  ConfigRng g(2112);
  int served = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Trial t = draw_trial(g, 8, 3, 30);
    const cs::Ranges closed = t.set.closed();
    const std::int64_t world = g.between(1, 9);
    const cs::ShardMode mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous;
    const std::uint64_t seed = g.next();
    INFO(fmt::format("trial {} {} world {} {} | {}", trial, t.describe(), world,
                     mode == cs::ShardMode::global ? "global" : "contiguous", t.set.describe()));
    const cs::RandomSampler base(t.random_options(seed));
    if (closed.count() / world < t.batch) continue;  // no whole batch per rank: refused, tested elsewhere
    std::set<std::int64_t> seen;
    std::int64_t draws = 0;
    std::optional<std::int64_t> batches;
    for (std::int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      cs::DistributedSampler dist(base, cs::DistInfo{.rank = r, .world_size = world}, {.mode = mode});
      const std::int64_t n = dist.n_batches(t.set.n_obs);
      if (batches) CHECK(n == *batches);
      batches = n;
      const support::EpochRecord rec = support::walk(dist, t.set.n_obs);
      CHECK(rec.n_batches() == n);
      CHECK(rec.batches_all_full(t.batch));
      CHECK(rec.chunks_on_grid(closed, t.chunk));
      for (const support::Draw& d : rec.draws) {
        seen.insert(d.obs);
        CHECK(closed.range_of(d.obs).has_value());
      }
      draws += static_cast<std::int64_t>(rec.draws.size());
      if (mode == cs::ShardMode::contiguous) {
        const cs::Ranges shard = dist.shard(t.set.n_obs);
        CHECK(rec.chunks_on_grid(shard, t.chunk));
        CHECK(shard.count() == closed.count() / world / t.batch * t.batch);
      }
      if (r == 0 && trial % 5 == 0) {
        const cs::DistributedOptions options{.mode = mode};
        support::check_workers(
            [&] { return cs::DistributedSampler(base, cs::DistInfo{.rank = r, .world_size = world}, options); },
            t.set.n_obs, 3);
      }
    }
    CHECK(static_cast<std::int64_t>(seen.size()) == draws);  // disjoint ranks
    CHECK(draws == world * *batches * t.batch);
    ++served;
  }
  CHECK(served > 100);
}

TEST_CASE("grid: resume at every batch over many ranges, and elastic restores 4 -> 3 and 3 -> 5", "[grid]") {
  ConfigRng g(2113);
  support::Tally tally;
  for (int trial = 0; trial < 40; ++trial) {
    const Trial t = draw_trial(g, 6, 3, 8);
    const std::uint64_t seed = g.next();
    INFO(fmt::format("trial {} {} | {}", trial, t.describe(), t.set.describe()));
    const cs::RandomOptions options = t.random_options(seed);
    support::check_resume([&] { return cs::RandomSampler(options); }, t.set.n_obs, 1, {}, g, tally);
    const cs::SequentialOptions in_order = t.sequential_options();
    support::check_resume([&] { return cs::SequentialSampler(in_order); }, t.set.n_obs, 0, {.id = 1, .num_workers = 2},
                          g, tally);

    // Elastic: a global-mode job of `from` ranks stops after `done` batches; `to` ranks restore
    // and read the rest: every observation of the union once, none twice (drop leaves out
    // fewer than `to` batches).
    for (const auto& [from, to] : {std::pair<std::int64_t, std::int64_t>{4, 3}, {3, 5}}) {
      const cs::RandomSampler base(options);
      if (t.set.closed().count() / from < t.batch) continue;
      INFO(from << " -> " << to);
      std::vector<cs::DistributedSampler<cs::RandomSampler>> old;
      for (std::int64_t r = 0; r < from; ++r)
        old.emplace_back(base, cs::DistInfo{.rank = r, .world_size = from},
                         cs::DistributedOptions{.mode = cs::ShardMode::global});
      const std::int64_t per = old[0].n_batches(t.set.n_obs);
      const std::int64_t done = g.between(0, per);
      std::multiset<std::int64_t> read;
      for (auto& d : old) {
        const std::vector<OwnedRequest> all = support::epoch(d, t.set.n_obs);
        const support::Batches b = support::observations(all);
        for (std::int64_t i = 0; i < done; ++i)
          for (const std::int64_t obs : b[static_cast<std::size_t>(i)]) read.insert(obs);
      }
      const cs::SamplerState state = old[0].state(done);
      std::int64_t rest_batches = 0;
      for (std::int64_t r = 0; r < to; ++r) {
        cs::DistributedSampler fresh(base, cs::DistInfo{.rank = r, .world_size = to},
                                     cs::DistributedOptions{.mode = cs::ShardMode::global});
        fresh.restore(state);
        const support::Batches b = support::observations(support::epoch(fresh, t.set.n_obs));
        rest_batches += static_cast<std::int64_t>(b.size());
        for (const auto& batch_rows : b)
          for (const std::int64_t obs : batch_rows) read.insert(obs);
      }
      const std::set<std::int64_t> distinct(read.begin(), read.end());
      CHECK(distinct.size() == read.size());  // nothing read twice
      const std::int64_t unread = from * (per - done);
      CHECK(rest_batches == unread / to * to);
      CHECK(static_cast<std::int64_t>(read.size()) == (from * done + unread / to * to) * t.batch);
    }
  }
  CHECK(tally.points > 200);
}

TEST_CASE("grid: grid_starts draws every grid chunk equally often", "[grid][uniform]") {
  // Ranges [5, 21) and [40, 50) with chunks of 8: grid chunks [5, 8), [8, 16), [16, 21), [40, 48),
  // [48, 50); a draw starts at one of their starts and reads 8 rows of the union from there.
  const cs::Ranges mask{{5, 21}, {40, 50}};
  const std::vector<std::int64_t> starts{5, 8, 16, 40, 48};
  std::vector<std::int64_t> counts(starts.size(), 0);
  const cs::RandomSampler sampler({.chunk_size = 8,
                                   .preload_nchunks = 1,
                                   .batch_size = 8,
                                   .mask = mask,
                                   .seed = 9,
                                   .replacement = true,
                                   .num_samples = 8 * 20'000,
                                   .grid_starts = true});
  const auto plan = sampler.plan(60, 0);
  for (std::int64_t i = 0; i < plan.stream_chunks(); ++i) {
    std::vector<cs::Slice> pieces;
    plan.pieces(i, pieces);
    const auto at = std::ranges::find(starts, pieces.front().start);
    REQUIRE(at != starts.end());
    ++counts[static_cast<std::size_t>(at - starts.begin())];
    std::int64_t rows = 0;
    for (const cs::Slice& p : pieces) rows += p.size();
    REQUIRE(rows == 8);
  }
  CHECK(support::wilson_hilferty_z(support::chi_square_uniform(counts), 4.0) < 5.0);
}

TEST_CASE("grid: a many-range mask that does not fit n_obs is refused, naming the range", "[grid]") {
  const cs::RandomSampler sampler(
      {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Ranges{{0, 10}, {20, 30}, {40, 50}}});
  REQUIRE_THROWS_AS(sampler.validate(45), cs::ConfigError);
  REQUIRE_THROWS_WITH(sampler.validate(45),
                      Contains("RandomSampler: mask[2] = [40, 50) must end at or before n_obs (45)"));
  const cs::SequentialSampler open(
      {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Ranges{{0, 10}, cs::Slice::from(20)}});
  REQUIRE_THROWS_WITH(open.n_batches(20),
                      Contains("SequentialSampler: the open-ended mask[1] = [20, end) must start before n_obs (20)"));
  REQUIRE(open.n_batches(21) == 3);
  REQUIRE_THROWS_WITH(cs::Ranges({{0, 10}, {5, 20}}), Contains("ranges[0] = [0, 10) overlaps ranges[1] = [5, 20)"));
}

TEST_CASE("grid: ten million ranges under RandomSampler and DistributedSampler", "[grid][large]") {
  // Range i is the grid cell [16 i, 16 i + 8) of a grid of 8, but every 97th starts 3 rows in: ten
  // million ranges, a hundred thousand of them a short chunk. (Every range short costs seconds
  // in the Debug and sanitizer builds; the index of short chunks is the same code at any count.)
  constexpr std::int64_t count = 10'000'000;
  std::vector<cs::Slice> slices;
  slices.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) slices.push_back({16 * i + (i % 97 == 0 ? 3 : 0), 16 * i + 8});
  const cs::Ranges mask(slices);
  const std::int64_t n_obs = 16 * count;
  const cs::RandomSampler sampler({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 32, .mask = mask, .seed = 5});
  // Requests at the start, in the middle and at the end of the epoch, each computed on its own:
  // every piece inside one range, the first and a middle one full.
  const auto plan = sampler.plan(n_obs, 0);
  REQUIRE(plan.n_requests() == cs::detail::ceil_div(mask.count(), 32));
  for (const std::int64_t k : {std::int64_t{0}, plan.n_requests() / 2, plan.n_requests() - 1}) {
    CAPTURE(k);
    cs::RequestBuffers out;
    plan.fill(k, out);
    std::int64_t rows = 0;
    for (const cs::Slice& piece : out.chunks) {
      const std::optional<std::size_t> r = mask.range_of(piece.start);
      REQUIRE(r.has_value());
      REQUIRE(piece.stop <= mask[*r].stop);
      rows += piece.size();
    }
    if (k + 1 < plan.n_requests()) REQUIRE(rows == 32);
  }
  // Rank 1 of 3 in global mode resumes half-way through its share and reads what it would have
  // read; requests hold one batch each (chunk 8 x preload 4 = batch 32).
  const cs::DistributedSampler first(sampler, cs::DistInfo{.rank = 1, .world_size = 3},
                                     {.mode = cs::ShardMode::global});
  const std::int64_t half = first.n_batches(n_obs) / 2;
  cs::DistributedSampler played = first;
  { auto epoch = played.sample(n_obs); }  // a state describes the epoch last begun
  cs::DistributedSampler resumed = first;
  resumed.restore(played.state(half));
  cs::DistributedSampler whole = first;
  auto all = whole.sample(n_obs);
  auto it = all.begin();
  for (std::int64_t b = 0; b < half; ++b) ++it;
  auto rest = resumed.sample(n_obs);
  REQUIRE(support::own(*rest.begin()) == support::own(*it));
}

}  // namespace test_grid
