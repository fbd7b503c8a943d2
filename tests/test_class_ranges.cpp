// SPDX-License-Identifier: MIT
// ClassSampler over masks of many ranges: runs clipped to every range (worked examples with their
// exact starts), invariants over random codes and range sets (chunks inside one range and one run
// of their group's class, nothing outside the union, deterministic), DistributedSampler in both
// modes with workers, chi-square uniformity of starts and classes, resume at every batch, errors,
// and the cost of 10^5 ranges. The model is class_support.hpp's, over the mask's ranges.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/ranges.hpp>

#include "class_support.hpp"
#include "harness.hpp"
#include "statistics.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace test_class_ranges {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using Catch::Matchers::Contains;
using support::chi_square_z;
using support::ConfigRng;
using support::DrawnRanges;
using support::OwnedRequest;
using support::Tally;

// 1 to about `most` ranges over [0, n_obs) (n_obs >= 1): ranges and gaps of up to `slot` rows,
// where `slot` spreads the drawn number of ranges over the rows, and a gap of 0 now and then
// (adjacent ranges, merged); a third of the time long ranges of up to `long_rows`. The first
// range starts at 0 half the time; the last reaches n_obs half the time, and is then open-ended
// half the time.
DrawnRanges random_mask(ConfigRng& g, std::int64_t n_obs, std::int64_t most, std::int64_t long_rows) {
  DrawnRanges mask;
  mask.n_obs = n_obs;
  const std::int64_t wanted = g.between(1, most);
  const std::int64_t slot = std::max<std::int64_t>(2, n_obs / wanted);
  const bool long_ranges = g.between(0, 2) == 0;
  std::int64_t at = g.coin() ? 0 : g.between(0, slot);
  while (at < n_obs && std::ssize(mask.slices) < wanted) {
    const std::int64_t length = long_ranges ? g.between(1, long_rows) : g.between(1, slot);
    mask.slices.push_back({at, std::min(at + length, n_obs)});
    at = mask.slices.back().stop + (g.between(0, 9) == 0 ? 0 : g.between(1, slot));
  }
  if (mask.slices.empty()) mask.slices.push_back({n_obs - 1, n_obs});
  if (g.coin()) {
    mask.slices.back().stop = n_obs;
    mask.open = g.coin();
  }
  return mask;
}

// The valid starts per class, in code order, as the sampler's windows count them.
std::vector<std::int64_t> start_counts(const std::map<std::int32_t, std::vector<std::int64_t>>& starts) {
  std::vector<std::int64_t> counts;
  for (const auto& [c, list] : starts) counts.push_back(std::ssize(list));
  return counts;
}

std::vector<std::int64_t> window_counts(const cs::ClassPlan& plan) {
  std::vector<std::int64_t> counts;
  for (const cs::detail::ClassWindow& w : plan.windows()) counts.push_back(w.starts);
  return counts;
}

// The start of every chunk of `sampler`'s epoch 0 over `n_obs`, in order, straight from its plan.
std::vector<std::int64_t> drawn_starts(const cs::ClassSampler& sampler, std::int64_t n_obs) {
  const cs::ClassPlan plan = sampler.plan(n_obs, 0);
  std::vector<std::int64_t> starts;
  cs::RequestBuffers buffers;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
    plan.fill(k, buffers);
    for (const cs::Slice& chunk : buffers.chunks) starts.push_back(chunk.start);
  }
  return starts;
}

// The worked layout: class 0 in [0, 10) and [30, 40), class 1 in [10, 30).
const Codes worked_codes = runs_of({{0, 10}, {1, 20}, {0, 10}});
// Three ranges over it: [2, 14) keeps class 0's [2, 10) (starts 2..5 for chunks of 5) and a
// 4-row piece of class 1; [17, 33) keeps class 1's [17, 30) (starts 17..25) and a 3-row piece of
// class 0; [35, 40) keeps exactly one chunk of class 0 (start 35).
const cs::Ranges worked_mask{{2, 14}, {17, 33}, {35, 40}};

}  // namespace

TEST_CASE("ClassSampler over three ranges, worked: the valid starts, counted", "[class][ranges]") {
  cs::ClassSampler sampler(
      worked_codes,
      {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .mask = worked_mask, .seed = 4, .num_samples = 23});
  CHECK(sampler.mask() == worked_mask);
  const cs::ClassPlan plan = sampler.plan(40, 0);
  REQUIRE(plan.windows().size() == 2);
  CHECK(plan.windows()[0].starts == 5);  // class 0: 2, 3, 4, 5 and 35
  CHECK(plan.windows()[1].starts == 9);  // class 1: 17..25
  CHECK(plan.windows()[0].cumulative == 1.0);
  CHECK(plan.windows()[1].cumulative == 2.0);
  // The epoch's shape does not depend on the mask: 5 chunks (5, 5, 5, 5, 3 rows) in 3 requests.
  const std::vector<OwnedRequest> requests = support::epoch(sampler, 40);
  REQUIRE(requests.size() == 3);
  CHECK(support::n_batches(requests) == 5);
  check_epoch({.codes = worked_codes,
               .weights = {},
               .options = {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 23}},
              worked_mask, 23, requests);

  // Over a long epoch every valid start is drawn, and nothing else.
  cs::ClassSampler long_epoch(worked_codes, {.chunk_size = 5,
                                             .preload_nchunks = 2,
                                             .batch_size = 5,
                                             .mask = worked_mask,
                                             .seed = 5,
                                             .num_samples = 5 * 4'000});
  const std::vector<std::int64_t> drawn = drawn_starts(long_epoch, 40);
  const std::set<std::int64_t> seen(drawn.begin(), drawn.end());
  CHECK(seen == std::set<std::int64_t>{2, 3, 4, 5, 17, 18, 19, 20, 21, 22, 23, 24, 25, 35});

  SECTION("a shard of two ranges, through with_shard") {
    // [2, 14) and [17, 20): class 1's piece [17, 20) is shorter than a chunk, so only class 0.
    const cs::ClassSampler shard =
        long_epoch.with_shard({.mask = cs::Ranges{{2, 14}, {17, 20}}, .stream = 1, .budget = 5'000});
    CHECK(shard.mask() == cs::Ranges{{2, 14}, {17, 20}});
    const std::vector<std::int64_t> starts = drawn_starts(shard, 40);
    CHECK(std::set<std::int64_t>(starts.begin(), starts.end()) == std::set<std::int64_t>{2, 3, 4, 5});
  }
  SECTION("DistributedSampler, 2 ranks, contiguous: shards cut by count over the union") {
    // 12 + 16 + 5 = 33 rows, 16 per rank rounded to batches: 15. Rank 0 reads positions
    // [0, 15): [2, 14) and [17, 20), so class 0's starts 2..5; rank 1 positions [15, 30):
    // [20, 33) and [35, 37), so class 1's starts 20..25 (the pieces of class 0 hold no chunk).
    const std::set<std::int64_t> expected[] = {{2, 3, 4, 5}, {20, 21, 22, 23, 24, 25}};
    const cs::Ranges shards[] = {{{2, 14}, {17, 20}}, {{20, 33}, {35, 37}}};
    for (std::int64_t r = 0; r < 2; ++r) {
      INFO("rank " << r);
      Dist rank(long_epoch, cs::DistInfo{.rank = r, .world_size = 2});
      CHECK(rank.shard(40) == shards[r]);
      CHECK(rank.n_batches(40) == 2'000);
      std::set<std::int64_t> starts;
      for (const OwnedRequest& request : support::epoch(rank, 40))
        for (const cs::Slice& chunk : request.chunks) starts.insert(chunk.start);
      CHECK(starts == expected[r]);
    }
  }
  SECTION("DistributedSampler, 4 ranks, contiguous: a shard without a chunk is refused, naming it") {
    // 33 rows, 8 per rank (batches of 1 here): rank 1 reads [10, 14) and [17, 21), pieces of 4
    // rows of class 1; rank 3 [29, 33) and [35, 38). Neither holds a chunk of 5; ranks 0 and 2
    // do, and read as many batches as each other. (Global mode serves every rank.)
    cs::ClassSampler small(
        worked_codes,
        {.chunk_size = 5, .preload_nchunks = 1, .batch_size = 1, .mask = worked_mask, .seed = 6, .num_samples = 400});
    for (std::int64_t r = 0; r < 4; ++r) {
      INFO("rank " << r);
      const Dist rank(small, cs::DistInfo{.rank = r, .world_size = 4});
      CHECK(rank.shard(40).count() == 8);
      if (r % 2 == 1) {
        REQUIRE_THROWS_AS(rank.n_batches(40), cs::ConfigError);
        REQUIRE_THROWS_WITH(rank.n_batches(40),
                            Contains(r == 1 ? "the sampled ranges (2 ranges, the first [10, 14)) hold no chunk"
                                            : "the sampled ranges (2 ranges, the first [29, 33)) hold no chunk"));
      } else {
        CHECK(rank.n_batches(40) == 100);
      }
      const Dist global(small, cs::DistInfo{.rank = r, .world_size = 4}, {.mode = cs::ShardMode::global});
      CHECK(global.n_batches(40) == 100);
    }
  }
}

TEST_CASE("ClassSampler: extra ranges that hold no chunk change nothing; one range draws as before",
          "[class][ranges]") {
  // The many-range path numbers a class's valid starts in row order as the one-range path does:
  // a mask [a, b) plus ranges shorter than a chunk (no valid start) gives the very same epochs.
  ConfigRng g(9191);
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    ClassConfig c = random_config(g);
    const std::int64_t chunk = c.options.chunk_size;
    if (chunk < 2) continue;
    const cs::Slice one = c.options.mask ? (*c.options.mask)[0] : cs::Slice{0, c.n_obs()};
    std::vector<cs::Slice> many;
    // Short ranges before and after the range, a row apart from it and from each other.
    for (std::int64_t stop = one.start - 1; stop > 0 && many.size() < 3; stop -= chunk)
      many.insert(many.begin(), cs::Slice{std::max<std::int64_t>(0, stop - g.between(1, chunk - 1)), stop});
    many.push_back(one);
    for (std::int64_t start = one.stop + 1; start < c.n_obs() && many.size() < 7; start += chunk)
      many.push_back(cs::Slice{start, std::min(c.n_obs(), start + g.between(1, chunk - 1))});
    if (many.size() == 1) continue;
    INFO(c.describe());
    cs::ClassOptions extra = c.options;
    extra.mask = cs::Ranges(many);
    INFO("with " << mask_text(*extra.mask));
    cs::ClassSampler a = c.sampler();
    cs::ClassSampler b(c.codes, extra);
    CHECK(window_counts(a.plan(c.n_obs(), 0)) == window_counts(b.plan(c.n_obs(), 0)));
    CHECK(support::epoch(a, c.n_obs()) == support::epoch(b, c.n_obs()));
    CHECK(support::epoch(a, c.n_obs()) == support::epoch(b, c.n_obs()));
    CHECK(a.fingerprint() != b.fingerprint());
    ++compared;
  }
  CHECK(compared > 70);
}

TEST_CASE("ClassSampler over random range sets: chunks inside one range and one run, one class per batch",
          "[class][ranges]") {
  ConfigRng g(6161);
  int served = 0;
  int refused = 0;
  int many = 0;
  int open = 0;
  int at_zero = 0;
  int at_end = 0;
  for (int trial = 0; trial < 300; ++trial) {
    ClassConfig c = coded_config(g, 80, 4);
    const DrawnRanges drawn = random_mask(g, c.n_obs(), trial % 3 == 0 ? 200 : 20, 6 * c.options.chunk_size);
    c.options.mask = drawn.ranges();
    const cs::Ranges closed = drawn.closed();
    INFO(c.describe());
    const auto starts = valid_starts(c.codes, c.weights, c.options.chunk_size, closed);
    if (starts.empty()) {
      // The constructor refuses exactly the masks that hold no chunk of a sampled class.
      REQUIRE_THROWS_AS(c.sampler(), cs::ConfigError);
      REQUIRE_THROWS_WITH(c.sampler(),
                          Contains("hold") && Contains("no chunk") && Contains(cs::detail::range_text(closed[0])));
      ++refused;
      continue;
    }
    cs::ClassSampler sampler = c.sampler();
    REQUIRE(window_counts(sampler.plan(c.n_obs(), 0)) == start_counts(starts));
    const std::vector<OwnedRequest> requests = support::epoch(sampler, c.n_obs());
    check_epoch(c, closed, c.used(), requests);
    // Deterministic per seed: a fresh sampler, and this one set back to epoch 0.
    cs::ClassSampler fresh = c.sampler();
    CHECK(support::epoch(fresh, c.n_obs()) == requests);
    sampler.set_epoch(0);
    CHECK(support::epoch(sampler, c.n_obs()) == requests);
    ++served;
    many += closed.size() >= 50 ? 1 : 0;
    open += drawn.open ? 1 : 0;
    at_zero += closed[0].start == 0 ? 1 : 0;
    at_end += closed[closed.size() - 1].stop == c.n_obs() ? 1 : 0;
  }
  INFO(served << " served, " << refused << " refused, " << many << " of 50 ranges or more, " << open << " open-ended, "
              << at_zero << " from 0, " << at_end << " to n_obs");
  CHECK(served > 200);
  CHECK(refused > 3);
  CHECK(many > 20);
  CHECK(open > 20);
  CHECK(at_zero > 50);
  CHECK(at_end > 50);
}

TEST_CASE("DistributedSampler<ClassSampler> over random range sets, both modes, 1 to 9 ranks, workers",
          "[class][ranges][distributed]") {
  ConfigRng g(6262);
  int served_contiguous = 0;
  int served_global = 0;
  int spanning = 0;
  int refused_ranks = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const std::int64_t world = g.between(1, 9);
    const cs::ShardMode mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous;
    support::Config shape;
    ClassConfig c = shaped_config(g, shape, 6, 4);
    // Runs of one to two chunks, every class sampled, and enough rows for every rank.
    draw_chunk_runs(g, c, 4, world * 12 * (shape.chunk + shape.batch));
    c.options.drop_last = g.coin();
    c.options.seed = g.next();
    c.options.num_samples = g.between(world * shape.batch, 3 * world * shape.chunk * shape.preload);
    const DrawnRanges drawn = random_mask(g, c.n_obs(), 30, 8 * shape.chunk);
    c.options.mask = drawn.ranges();
    const cs::Ranges closed = drawn.closed();
    const std::int64_t batch = shape.batch;
    INFO(c.describe() << " | world " << world << (mode == cs::ShardMode::global ? " global" : " contiguous"));
    if (valid_starts(c.codes, c.weights, shape.chunk, closed).empty() || closed.count() / world < batch) continue;
    const cs::ClassSampler base = c.sampler();
    const cs::DistributedOptions options{.mode = mode};
    const auto rank_of = [&](std::int64_t r) {
      return Dist(base, cs::DistInfo{.rank = r, .world_size = world}, options);
    };
    std::optional<std::int64_t> serving;  // a rank whose shard holds a chunk

    if (mode == cs::ShardMode::contiguous) {
      const std::int64_t per_rank = closed.count() / world / batch * batch;
      const std::int64_t budget = *c.options.num_samples / world / batch * batch;
      for (std::int64_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        Dist rank = rank_of(r);
        const cs::Ranges shard = rank.shard(c.n_obs());
        INFO("shard " << mask_text(shard));
        // The shard: positions [r * per_rank, (r + 1) * per_rank) of the union.
        REQUIRE(shard == closed.sub(r * per_rank, per_rank));
        if (valid_starts(c.codes, c.weights, shape.chunk, shard).empty()) {
          REQUIRE_THROWS_WITH(rank.n_batches(c.n_obs()), Contains("no chunk"));
          ++refused_ranks;
          continue;
        }
        spanning += shard.size() > 1 ? 1 : 0;
        REQUIRE(rank.n_batches(c.n_obs()) == budget / batch);  // every serving rank alike
        serving = r;
        const std::vector<OwnedRequest> requests = support::epoch(rank, c.n_obs());
        check_epoch(c, shard, budget, requests);
        cs::ClassSampler own =
            base.with_shard({.mask = shard, .stream = static_cast<std::uint64_t>(r), .budget = budget});
        CHECK(support::epoch(own, c.n_obs()) == requests);
        ++served_contiguous;
      }
    } else {
      check_deal(
          base, c,
          {.mask = closed, .n_obs = c.n_obs(), .world = world, .batch = batch, .num_samples = *c.options.num_samples},
          rank_of);
      served_global += static_cast<int>(world);
      serving = world - 1;
    }
    if (trial % 4 == 0 && serving)
      support::check_workers([&] { return rank_of(*serving); }, c.n_obs(), g.between(2, 4));
  }
  INFO(served_contiguous << " contiguous and " << served_global << " global ranks served, " << spanning
                         << " shards of several ranges, " << refused_ranks << " ranks without a chunk");
  CHECK(served_contiguous > 150);
  CHECK(served_global > 150);
  CHECK(spanning > 50);
}

TEST_CASE("ClassSampler over many ranges: starts uniform within a class, classes by weight (chi-square)",
          "[class][ranges]") {
  // Runs of classes 0, 1, 3 (and 2, excluded) of varied lengths, and 60 ranges drawn over them:
  // many runs are cut by range edges, some pieces hold no chunk.
  ConfigRng g(6363);
  Codes codes;
  while (codes.size() < 1'200) {
    const auto k = static_cast<std::int32_t>(g.between(0, 3));
    codes.insert(codes.end(), static_cast<std::size_t>(k == 2 ? g.between(1, 4) : g.between(6, 40)), k);
  }
  const std::vector<double> weights{1, 2, 0, 3};
  std::vector<cs::Slice> slices;
  for (std::int64_t at = g.between(0, 5); at < std::ssize(codes) && slices.size() < 60;) {
    const std::int64_t stop = std::min(std::ssize(codes), at + g.between(2, 25));
    slices.push_back({at, stop});
    at = stop + g.between(1, 6);
  }
  const cs::Ranges mask(slices);
  REQUIRE(mask.size() == 60);
  struct Case {
    std::int64_t chunk, preload, batch;
  };
  // g = 1 (a class per chunk) and g = 2 (chunk 6, batch 4: a class per two chunks).
  std::uint64_t seed = 77;
  for (const Case& k : {Case{5, 4, 5}, Case{6, 6, 4}}) {
    INFO("chunk " << k.chunk << " batch " << k.batch);
    const std::int64_t group = k.batch / std::gcd(k.chunk, k.batch);
    constexpr std::int64_t n_groups = 60'000;
    const cs::ClassSampler sampler(codes, {.chunk_size = k.chunk,
                                           .preload_nchunks = k.preload,
                                           .batch_size = k.batch,
                                           .mask = mask,
                                           .seed = seed++,
                                           .num_samples = n_groups * group * k.chunk,
                                           .class_weights = weights});
    const std::vector<std::int64_t> drawn = drawn_starts(sampler, std::ssize(codes));
    REQUIRE(std::ssize(drawn) == n_groups * group);
    std::map<std::int32_t, std::int64_t> per_class;
    std::map<std::int32_t, std::map<std::int64_t, std::int64_t>> per_start;
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      const std::int32_t c = codes[static_cast<std::size_t>(drawn[i])];
      if (static_cast<std::int64_t>(i) % group == 0) ++per_class[c];
      ++per_start[c][drawn[i]];
    }
    const auto probabilities = class_probabilities(codes, weights, k.chunk, mask);
    REQUIRE(probabilities.size() == 3);
    const double z = chi_square_z(per_class, probabilities);
    INFO("classes: z " << z);
    CHECK(z < 5.0);
    const auto starts = valid_starts(codes, weights, k.chunk, mask);
    for (const auto& [c, list] : starts) {
      INFO("class " << c << ", " << list.size() << " valid starts");
      REQUIRE(list.size() > 30);
      std::map<std::int64_t, double> uniform;
      for (const std::int64_t s : list) uniform[s] = 1.0 / static_cast<double>(list.size());
      for (const auto& [s, count] : per_start[c]) REQUIRE(uniform.contains(s));
      const double start_z = chi_square_z(per_start[c], uniform);
      INFO("starts: z " << start_z);
      CHECK(start_z < 5.0);
    }
  }
}

TEST_CASE("ClassSampler over many ranges resumes at every batch, alone and distributed, with workers",
          "[class][ranges][resume]") {
  ConfigRng g(6464);
  Tally tally;
  int trials = 0;
  for (int trial = 0; trial < 60; ++trial) {
    support::Config shape;
    ClassConfig c = shaped_config(g, shape, 5, 3);
    draw_codes(g, c, g.between(4, 30), 2 * shape.chunk);
    c.options.seed = g.next();
    c.options.drop_last = g.coin();
    // Small epochs: at most 40 batches per stream, so every batch is a resume point.
    c.options.num_samples = g.between(2 * shape.batch, 30 * shape.batch);
    const DrawnRanges drawn = random_mask(g, c.n_obs(), 12, 5 * shape.chunk);
    c.options.mask = drawn.ranges();
    const cs::Ranges closed = drawn.closed();
    if (valid_starts(c.codes, c.weights, shape.chunk, closed).empty()) continue;
    INFO(c.describe());
    const std::uint64_t epoch = static_cast<std::uint64_t>(g.between(0, 3));
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      support::check_resume([&] { return c.sampler(); }, c.n_obs(), epoch, {.id = id, .num_workers = workers}, g,
                            tally);
    // Distributed: a rank of 2 or 3 whose shard holds a chunk, in either mode.
    const std::int64_t world = g.between(2, 3);
    const cs::ShardMode mode = trial % 2 == 0 ? cs::ShardMode::global : cs::ShardMode::contiguous;
    const std::int64_t r = g.between(0, world - 1);
    const auto make = [&] {
      return Dist(c.sampler(), cs::DistInfo{.rank = r, .world_size = world}, cs::DistributedOptions{.mode = mode});
    };
    if (*c.options.num_samples / world < shape.batch || closed.count() / world < shape.batch) continue;
    if (valid_starts(c.codes, c.weights, shape.chunk, make().shard(c.n_obs())).empty()) continue;
    INFO("rank " << r << " of " << world << (mode == cs::ShardMode::global ? " global" : " contiguous"));
    support::check_resume(make, c.n_obs(), epoch, {.id = 0, .num_workers = workers}, g, tally);
    ++trials;
  }
  INFO(tally.points << " points, " << tally.mid_request << " inside a request, " << trials << " distributed");
  CHECK(trials > 25);
  CHECK(tally.points > 1'000);
  CHECK(tally.mid_request > 300);
}

TEST_CASE("ClassSampler: a mask of many ranges is in the fingerprint", "[class][ranges]") {
  const cs::ClassOptions o{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = 3, .num_samples = 50};
  const auto with_mask = [&](const cs::Ranges& mask) {
    cs::ClassOptions m = o;
    m.mask = mask;
    return cs::ClassSampler(worked_codes, m);
  };
  const cs::ClassSampler base = with_mask(worked_mask);
  CHECK(with_mask(worked_mask).fingerprint() == base.fingerprint());
  // The same first and last range, another middle one; an open-ended last range.
  const std::set<std::uint64_t> prints{base.fingerprint(),
                                       with_mask(cs::Ranges{{2, 14}, {18, 33}, {35, 40}}).fingerprint(),
                                       with_mask(cs::Ranges{{2, 14}, {17, 33}, cs::Slice::from(35)}).fingerprint(),
                                       with_mask(cs::Ranges{{2, 14}, {35, 40}}).fingerprint(),
                                       cs::ClassSampler(worked_codes, o).fingerprint()};
  CHECK(prints.size() == 5);
  cs::ClassSampler played = base;
  (void)support::epoch(played, 40);
  cs::ClassSampler other = with_mask(cs::Ranges{{2, 14}, {18, 33}, {35, 40}});
  CHECK_THROWS_AS(other.restore(played.state(1)), cs::StateMismatchError);
  CHECK_NOTHROW(with_mask(worked_mask).restore(played.state(1)));
}

TEST_CASE("ClassSampler refuses a many-range mask past the codes, or one without a chunk, naming it",
          "[class][ranges][validation]") {
  const cs::ClassOptions o{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 20};
  const auto with_mask = [&](const cs::Ranges& mask) {
    cs::ClassOptions m = o;
    m.mask = mask;
    return m;
  };
  REQUIRE_THROWS_AS(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{0, 10}, {20, 30}, {38, 45}})),
                    cs::ConfigError);
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{0, 10}, {20, 30}, {38, 45}})),
                      Contains("ClassSampler: mask[2] = [38, 45) must end at or before n_obs (40)"));
  // Past the codes from the second range on: the first range past them is named.
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{0, 10}, {39, 41}, {50, 60}})),
                      Contains("mask[1] = [39, 41) must end at or before n_obs (40)"));
  // An open-ended last range is resolved against the number of codes.
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{0, 10}, cs::Slice::from(40)})),
                      Contains("ClassSampler: the open-ended mask[1] = [40, end) must start before n_obs (40)"));
  const cs::ClassSampler open(worked_codes, with_mask(cs::Ranges{{0, 10}, cs::Slice::from(32)}));
  const cs::ClassPlan plan = open.plan(40, 0);
  REQUIRE(plan.windows().size() == 1);
  CHECK(plan.windows()[0].starts == 6 + 4);  // class 0: 0..5 and 32..35

  // No range holds a whole chunk of a sampled class: [8, 12) and [28, 33) leave class 0 pieces of
  // 2 and 3 rows and class 1 two of 2 rows; below, [12, 17) holds a chunk of class 1 alone, whose
  // weight is 0.
  REQUIRE_THROWS_AS(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{8, 12}, {28, 33}})), cs::ConfigError);
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, with_mask(cs::Ranges{{8, 12}, {28, 33}})),
                      Contains("ClassSampler: the sampled ranges (2 ranges, the first [8, 12)) hold no chunk") &&
                          Contains("chunk_size (5)"));
  cs::ClassOptions weighted = with_mask(cs::Ranges{{0, 4}, {12, 17}, {36, 40}});
  weighted.class_weights = {1.0, 0.0};
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, weighted),
                      Contains("the sampled ranges (3 ranges, the first [0, 4)) hold no chunk"));
  // The same with a one-range mask keeps its wording.
  REQUIRE_THROWS_WITH(cs::ClassSampler(worked_codes, with_mask(cs::Slice{8, 12})),
                      Contains("ClassSampler: the sampled range [8, 12) holds no chunk"));
  // A shard of several ranges without a chunk is refused when it is planned, as a one-range one.
  const cs::ClassSampler whole(worked_codes, o);
  const cs::ClassSampler shard = whole.with_shard({.mask = cs::Ranges{{8, 12}, {28, 33}}, .stream = 0, .budget = 5});
  REQUIRE_THROWS_AS(shard.plan(40, 0), cs::ConfigError);
  REQUIRE_THROWS_WITH(shard.validate(40), Contains("the sampled ranges (2 ranges, the first [8, 12)) hold no chunk"));
  REQUIRE_THROWS_WITH(whole.with_shard({.mask = cs::Ranges{{0, 10}, {30, 50}}, .stream = 0, .budget = 5}).validate(40),
                      Contains("mask[1] = [30, 50) must end at or before n_obs (40)"));
  REQUIRE_THROWS_WITH(shard.validate(41), Contains("the class codes' length (40) does not match loader n_obs (41)"));
}

TEST_CASE("ClassSampler: 10^5 ranges over 10^6 codes are clipped at once", "[class][ranges]") {
  // About 40,000 runs of 4 classes and 10^5 ranges: clipping every run against every range
  // would take 4 * 10^9 steps; the merge takes a few hundred thousand.
  ConfigRng g(6565);
  Codes codes;
  codes.reserve(1'000'000);
  while (codes.size() < 1'000'000) {
    const auto k = static_cast<std::int32_t>(g.between(0, 3));
    codes.insert(codes.end(),
                 std::min<std::size_t>(static_cast<std::size_t>(g.between(8, 40)), 1'000'000 - codes.size()), k);
  }
  // 99,999 ranges of 1 to 12 rows a few rows apart (about 900,000 rows), and an open-ended one
  // over the last 10 codes.
  std::vector<cs::Slice> slices;
  for (std::int64_t at = 0; slices.size() < 99'999;) {
    slices.push_back({at, at + g.between(1, 12)});
    at = slices.back().stop + g.between(1, 4);
  }
  REQUIRE(slices.back().stop < 999'990);
  slices.push_back(cs::Slice::from(999'990));
  const cs::Ranges mask(slices);
  const cs::ClassSampler sampler(codes, {.chunk_size = 4,
                                         .preload_nchunks = 16,
                                         .batch_size = 64,
                                         .mask = mask,
                                         .seed = 1,
                                         .num_samples = 1'000'000'000'000});
  const cs::ClassPlan plan = sampler.plan(1'000'000, 0);
  cs::RequestBuffers buffers;
  plan.fill(plan.n_requests() / 2, buffers);
  // Eight contiguous shards, each spanning thousands of ranges.
  std::int64_t batches = 0;
  for (std::int64_t r = 0; r < 8; ++r) {
    const Dist rank(sampler, cs::DistInfo{.rank = r, .world_size = 8});
    CHECK(rank.shard(1'000'000).size() > 10'000);
    batches += rank.n_batches(1'000'000);
  }
  CHECK(batches == 8 * (1'000'000'000'000 / 8 / 64));
  CHECK(buffers.chunks.size() == 16);
  for (const cs::Slice& chunk : buffers.chunks) {
    const std::optional<std::size_t> r = mask.range_of(chunk.start);
    REQUIRE(r);
    CHECK(chunk.stop <= std::min<std::int64_t>(mask[*r].stop, 1'000'000));
  }
  // About 0.1 s to construct (half of it the scan of the codes) and 0.2 s for the rest in a Debug
  // build; clipping every run against every range instead took 17 s. Timed by the run, not by
  // an assertion that a loaded machine could fail.
}

TEST_CASE("ClassSampler's stream over many ranges is pinned", "[class][ranges]") {
  // Computed once from the implementation and stored (see test_class_sampler.cpp's pinned stream).
  // The stored values are of generation 1 of its order: a change of them comes with a new
  // order_generation (which refuses the states of the old order), and a new generation with new values.
  STATIC_REQUIRE(cs::ClassSampler::order_generation == 1);
  cs::ClassSampler sampler(worked_codes, {.chunk_size = 5,
                                          .preload_nchunks = 2,
                                          .batch_size = 5,
                                          .mask = worked_mask,
                                          .seed = 42,
                                          .num_samples = 40,
                                          .class_weights = {1.0, 2.0}});
  const std::vector<OwnedRequest> e0 = support::epoch(sampler, 40);
  std::vector<cs::Slice> chunks;
  for (const OwnedRequest& r : e0) chunks.insert(chunks.end(), r.chunks.begin(), r.chunks.end());
  CHECK(chunks == std::vector<cs::Slice>{{18, 23}, {2, 7}, {5, 10}, {24, 29}, {24, 29}, {17, 22}, {3, 8}, {17, 22}});
  CHECK(e0[0].batches[0] == std::vector<std::int64_t>{1, 0, 4, 3, 2});
  CHECK(e0[3].batches[1] == std::vector<std::int64_t>{7, 8, 6, 9, 5});
}

}  // namespace test_class_ranges
