// SPDX-License-Identifier: MIT
// DistributedSampler: shard invariants over random configurations (disjoint, contiguous, tiling,
// equal batch counts, coverage), per-rank streams, the copy of the wrapped sampler, the dist_info
// call, validation, num_samples shares, and annbatch's worked examples.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sequential_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_distributed_sampler {

namespace {

namespace cs = chunksampler;
using support::ceil_div;
using Dist = cs::DistributedSampler<cs::RandomSampler>;

using DistConfig = support::Config;

DistConfig random_config(support::ConfigRng& g) {
  DistConfig c = support::small_config(g, 10, 4, 400);
  c.enforce = g.coin();
  c.world = g.between(1, 8);
  c.seed = g.next();
  return c;
}

Dist make(const DistConfig& c, std::int64_t rank) {
  return Dist(cs::RandomSampler(c.options()), cs::DistInfo{.rank = rank, .world_size = c.world},
              {.enforce_equal_batches = c.enforce});
}

// The start offsets of a request's chunks relative to the rank's shard, plus its positions:
// what two ranks with equally sized shards would share if they shuffled alike.
struct RelativeRequest {
  std::vector<std::int64_t> chunk_offsets;
  std::vector<std::int64_t> positions;
  friend bool operator==(const RelativeRequest&, const RelativeRequest&) = default;
};

RelativeRequest relative(const support::OwnedRequest& r, cs::Slice shard) {
  RelativeRequest rel;
  for (const cs::Slice& c : r.chunks) rel.chunk_offsets.push_back(c.start - shard.start);
  rel.positions = r.positions();
  return rel;
}

}  // namespace

TEST_CASE("DistributedSampler wraps any distributable sampler and is itself a sampler", "[distributed]") {
  STATIC_REQUIRE(cs::DistributableSampler<cs::RandomSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::SequentialSampler>>);
  STATIC_REQUIRE(cs::HasEpochs<cs::DistributedSampler<cs::RandomSampler>>);
}

TEST_CASE("DistributedSampler shard invariants over random configurations", "[distributed]") {
  support::ConfigRng g(8675309);
  int served = 0;
  int compared_ranks = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const DistConfig c = random_config(g);
    INFO(c.describe());
    const cs::Slice range = c.range();
    const std::int64_t per = c.per_rank();

    std::vector<Dist> ranks;
    for (std::int64_t r = 0; r < c.world; ++r) ranks.push_back(make(c, r));

    if (per < 1) {
      for (auto& d : ranks) {
        CHECK_THROWS_AS(d.shard(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.n_batches(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.validate(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.sample(c.n_obs), std::invalid_argument);
      }
      continue;
    }
    ++served;

    const std::int64_t expected_batches = c.enforce || c.drop_last ? per / c.batch : ceil_div(per, c.batch);
    const std::int64_t used = c.enforce || c.drop_last ? per / c.batch * c.batch : per;
    std::vector<cs::Slice> shards;
    std::vector<support::EpochRecord> records;
    for (std::int64_t r = 0; r < c.world; ++r) {
      INFO("rank " << r);
      Dist& d = ranks[static_cast<std::size_t>(r)];
      const cs::Slice shard = support::only_range(d.shard(c.n_obs));
      shards.push_back(shard);
      CHECK(shard == cs::Slice{range.start + r * per, range.start + (r + 1) * per});
      CHECK(d.n_batches(c.n_obs) == expected_batches);
      CHECK_NOTHROW(d.validate(c.n_obs));

      records.push_back(support::walk(d, c.n_obs));
      const support::EpochRecord& rec = records.back();
      CHECK(rec.n_batches() == expected_batches);
      CHECK(rec.chunks_valid(shard, c.chunk));
      CHECK(rec.chunks_on_grid(shard, c.chunk));
      CHECK(rec.positions_valid());
      CHECK(rec.draws_inside(shard));
      CHECK(rec.no_repeats());
      CHECK(static_cast<std::int64_t>(rec.draws.size()) == used);
      if (c.enforce || c.drop_last) {
        CHECK(rec.batches_all_full(c.batch));
      } else {
        CHECK(rec.batches_full_but_last(c.batch));
        CHECK(rec.covers_exactly_once(shard));
      }

      // Same seed and rank: the same requests, from a second, independent object.
      Dist twin = make(c, r);
      CHECK(support::epoch(twin, c.n_obs) == rec.requests);
      CHECK(d.rng() == cs::Rng(c.seed).spawn(static_cast<std::uint64_t>(r)));
    }

    // Shards are disjoint, contiguous, inside the range, and tile the promised prefix.
    CHECK(shards.front().start == range.start);
    CHECK(shards.back().stop == range.start + c.world * per);
    CHECK(shards.back().stop <= range.stop);
    for (std::size_t r = 1; r < shards.size(); ++r) CHECK(shards[r].start == shards[r - 1].stop);
    std::set<std::int64_t> all;
    std::size_t total = 0;
    for (const auto& rec : records) {
      for (const support::Draw& d : rec.draws) all.insert(d.obs);
      total += rec.draws.size();
    }
    CHECK(all.size() == total);  // no observation on two ranks

    // Ranks do not shuffle alike: equal streams would give equal positions in their first
    // requests. With >= 10 positions a chance match is < 1e-6.
    if (c.world > 1 && !records.front().requests.empty() && records.front().requests.front().positions().size() >= 10) {
      ++compared_ranks;
      std::vector<RelativeRequest> firsts;
      for (std::size_t r = 0; r < records.size(); ++r)
        firsts.push_back(relative(records[r].requests.front(), shards[r]));
      for (std::size_t a = 0; a < firsts.size(); ++a)
        for (std::size_t b = a + 1; b < firsts.size(); ++b) {
          INFO("ranks " << a << " and " << b);
          CHECK(firsts[a].positions != firsts[b].positions);
        }
    }
  }
  CHECK(served > 200);
  CHECK(compared_ranks > 50);
}

TEST_CASE("DistributedSampler worked example: 107 observations, 3 ranks, chunk 10, batch 10", "[distributed]") {
  const bool enforce = GENERATE(true, false);
  INFO("enforce_equal_batches " << enforce);
  // annbatch: 30 observations per rank with equal batches (3 batches), 35 without (4, the last of 5).
  const std::vector<cs::Slice> expected_shards = enforce ? std::vector<cs::Slice>{{0, 30}, {30, 60}, {60, 90}}
                                                         : std::vector<cs::Slice>{{0, 35}, {35, 70}, {70, 105}};
  const std::vector<std::size_t> expected_lengths =
      enforce ? std::vector<std::size_t>{10, 10, 10} : std::vector<std::size_t>{10, 10, 10, 5};
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    cs::DistributedSampler dist(base, cs::DistInfo{.rank = rank, .world_size = 3}, {.enforce_equal_batches = enforce});
    CHECK(dist.rank() == rank);
    CHECK(dist.world_size() == 3);
    CHECK(dist.options().enforce_equal_batches == enforce);
    const cs::Slice shard = support::only_range(dist.shard(107));
    CHECK(shard == expected_shards[static_cast<std::size_t>(rank)]);
    CHECK(dist.n_batches(107) == static_cast<std::int64_t>(expected_lengths.size()));
    CHECK(dist.n_batches(107) == static_cast<std::int64_t>(expected_lengths.size()));
    const support::EpochRecord rec = support::walk(dist, 107);
    CHECK(rec.batch_lengths == expected_lengths);
    CHECK(rec.covers_exactly_once(shard));
  }
}

TEST_CASE("DistributedSampler worked example: 20,000 observations, 2 ranks, RandomSampler(64, 32, 256)",
          "[distributed]") {
  const cs::RandomSampler base({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
  const std::vector<cs::Slice> expected{{0, 9984}, {9984, 19968}};  // 39 * 256 = 9984 per rank
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    cs::DistributedSampler dist(base, cs::DistInfo{.rank = rank, .world_size = 2});
    CHECK(dist.shard(20'000) == expected[static_cast<std::size_t>(rank)]);
    CHECK(dist.n_batches(20'000) == 39);
    const support::EpochRecord rec = support::walk(dist, 20'000);
    CHECK(rec.n_batches() == 39);
    CHECK(rec.batches_all_full(256));
    CHECK(rec.covers_exactly_once(expected[static_cast<std::size_t>(rank)]));
    CHECK(rec.chunks_valid(expected[static_cast<std::size_t>(rank)], 64));
  }
}

TEST_CASE("DistributedSampler cuts shards inside the wrapped sampler's mask", "[distributed]") {
  const bool enforce = GENERATE(true, false);
  INFO("enforce_equal_batches " << enforce);
  const cs::RandomSampler base(
      {.chunk_size = 16, .preload_nchunks = 4, .batch_size = 32, .mask = cs::Slice{1000, 5000}, .seed = 5});
  // 4000 observations over 4 ranks: 1000 each, or 992 (31 batches of 32) with equal batches.
  const std::int64_t per = enforce ? 992 : 1000;
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    cs::DistributedSampler dist(base, cs::DistInfo{.rank = rank, .world_size = 4}, {.enforce_equal_batches = enforce});
    CHECK(dist.mask() == cs::Slice{1000, 5000});
    const cs::Slice shard = support::only_range(dist.shard(6000));
    CHECK(shard == cs::Slice{1000 + rank * per, 1000 + (rank + 1) * per});
    CHECK(dist.n_batches(6000) == (enforce ? 31 : 32));
    const support::EpochRecord rec = support::walk(dist, 6000);
    CHECK(rec.covers_exactly_once(shard));
    CHECK(rec.chunks_valid(shard, 16));
    // Chunks stay on the storage grid of multiples of 16 from row 0, though the mask and the
    // shards start off it (1000 = 62 * 16 + 8): the shard's head and tail are short chunks.
    CHECK(rec.chunks_on_grid(shard, 16));
  }
  // The mask must fit n_obs: a dataset that ends inside the mask cannot be served.
  cs::DistributedSampler dist(base, cs::DistInfo{.rank = 0, .world_size = 4});
  CHECK_THROWS_AS(dist.shard(4999), std::invalid_argument);
  CHECK_THROWS_AS(dist.sample(4999), std::invalid_argument);
}

TEST_CASE("DistributedSampler over a SequentialSampler reads each shard in order", "[distributed]") {
  const cs::SequentialSampler base({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5});
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    cs::DistributedSampler dist(base, cs::DistInfo{.rank = rank, .world_size = 3});
    CHECK_FALSE(dist.shuffle());
    const cs::Slice shard = support::only_range(dist.shard(100));  // 33 per rank, 30 with whole batches
    CHECK(shard == cs::Slice{rank * 30, rank * 30 + 30});
    const support::EpochRecord rec = support::walk(dist, 100);
    std::vector<std::int64_t> seen;
    for (const support::Draw& d : rec.draws) seen.push_back(d.obs);
    std::vector<std::int64_t> expected;
    for (std::int64_t i = shard.start; i < shard.stop; ++i) expected.push_back(i);
    CHECK(seen == expected);
  }
}

TEST_CASE("DistributedSampler epochs: deterministic, advancing, replayable", "[distributed]") {
  const cs::RandomSampler base({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 16, .seed = 11});
  cs::DistributedSampler a(base, cs::DistInfo{.rank = 2, .world_size = 4});
  cs::DistributedSampler b(base, cs::DistInfo{.rank = 2, .world_size = 4});
  CHECK(a.epoch() == 0);
  const auto a0 = support::epoch(a, 2000);
  CHECK(a.epoch() == 1);
  const auto a1 = support::epoch(a, 2000);
  CHECK(a.epoch() == 2);
  CHECK(a0 != a1);  // 15 chunks, 32-position requests: equal orders are a broken stream
  CHECK(support::epoch(b, 2000) == a0);
  b.set_epoch(1);
  CHECK(b.epoch() == 1);
  CHECK(support::epoch(b, 2000) == a1);
  // The distributed sampler keeps the epoch; the wrapped copy keeps settings, not a position.
  CHECK(b.sampler().epoch() == 0);

  // Wrapping a sampler mid-way: the DistributedSampler starts at its epoch; the copy it keeps is
  // reset (epoch 0, no pending restore).
  cs::RandomSampler played = base;
  played.set_epoch(3);
  (void)support::epoch(played, 2000);
  played.restore(played.next_state());  // a restore pending at epoch 4's start
  cs::DistributedSampler wrapped(played, cs::DistInfo{.rank = 2, .world_size = 4});
  CHECK(wrapped.epoch() == 4);
  CHECK(wrapped.sampler().epoch() == 0);
  CHECK(wrapped.sampler().next_state() == base.next_state());
  cs::DistributedSampler d(base, cs::DistInfo{.rank = 2, .world_size = 4});
  d.set_epoch(4);
  CHECK(support::epoch(wrapped, 2000) == support::epoch(d, 2000));

  // Same seed, other rank with an equally sized shard: different order.
  cs::DistributedSampler other(base, cs::DistInfo{.rank = 1, .world_size = 4});
  const auto o0 = support::epoch(other, 2000);
  CHECK(o0.front().positions() != a0.front().positions());
  // Other seed, same rank: different order.
  cs::RandomSampler reseeded({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 16, .seed = 12});
  cs::DistributedSampler c(reseeded, cs::DistInfo{.rank = 2, .world_size = 4});
  CHECK(support::epoch(c, 2000) != a0);
}

TEST_CASE("DistributedSampler copies the wrapped sampler", "[distributed]") {
  const cs::RandomOptions options{.chunk_size = 5, .preload_nchunks = 3, .batch_size = 5, .seed = 21};
  auto original = std::make_unique<cs::RandomSampler>(options);
  cs::DistributedSampler dist(*original, cs::DistInfo{.rank = 1, .world_size = 3});
  const cs::DistributedSampler reference(cs::RandomSampler(options), cs::DistInfo{.rank = 1, .world_size = 3});

  // Change the original in every way it can change, then destroy it.
  *original =
      cs::RandomSampler({.chunk_size = 7, .preload_nchunks = 1, .batch_size = 7, .mask = cs::Slice{3, 50}, .seed = 99});
  original->set_epoch(17);
  (void)support::epoch(*original, 300);
  original.reset();

  CHECK(dist.sampler().chunk_size() == 5);
  CHECK_FALSE(dist.sampler().mask().has_value());
  CHECK(dist.sampler().rng() == cs::Rng(21));
  CHECK(dist.epoch() == 0);
  CHECK(dist.shard(300) == reference.shard(300));
  CHECK(dist.shard(300) == cs::Slice{100, 200});
  auto twin = reference;
  CHECK(support::epoch(dist, 300) == support::epoch(twin, 300));
  CHECK(support::epoch(dist, 300) == support::epoch(twin, 300));
}

TEST_CASE("DistributedSampler calls its dist_info source exactly once", "[distributed]") {
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4});
  int calls = 0;
  SECTION("an lvalue callable") {
    auto info = [&calls] {
      ++calls;
      return cs::DistInfo{.rank = 1, .world_size = 2};
    };
    cs::DistributedSampler dist(base, info);
    CHECK(calls == 1);
    CHECK(dist.rank() == 1);
    CHECK(dist.world_size() == 2);
    (void)dist.shard(100);
    (void)dist.n_batches(100);
    dist.validate(100);
    (void)support::epoch(dist, 100);
    (void)support::epoch(dist, 100);
    auto copy = dist;
    (void)support::epoch(copy, 100);
    CHECK(calls == 1);
  }
  SECTION("an rvalue function object") {
    struct Counting {
      int* calls;
      cs::DistInfo operator()() const {
        ++*calls;
        return {.rank = 0, .world_size = 4};
      }
    };
    cs::DistributedSampler dist(base, Counting{&calls});
    CHECK(calls == 1);
    CHECK(dist.world_size() == 4);
    CHECK(dist.shard(100) == cs::Slice{0, 24});
    (void)support::epoch(dist, 100);
    CHECK(calls == 1);
  }
}

TEST_CASE("DistributedSampler rejects a bad rank or world size", "[distributed]") {
  using Catch::Matchers::Contains;
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4});
  CHECK_THROWS_AS(Dist(base, cs::DistInfo{.rank = 0, .world_size = 0}), std::invalid_argument);
  CHECK_THROWS_WITH(Dist(base, cs::DistInfo{.rank = 0, .world_size = 0}), Contains("world_size"));
  CHECK_THROWS_AS(Dist(base, cs::DistInfo{.rank = 0, .world_size = -3}), std::invalid_argument);
  CHECK_THROWS_AS(Dist(base, cs::DistInfo{.rank = -1, .world_size = 2}), std::invalid_argument);
  CHECK_THROWS_WITH(Dist(base, cs::DistInfo{.rank = -1, .world_size = 2}), Contains("rank") && Contains("-1"));
  CHECK_THROWS_AS(Dist(base, cs::DistInfo{.rank = 2, .world_size = 2}), std::invalid_argument);
  CHECK_THROWS_WITH(Dist(base, cs::DistInfo{.rank = 2, .world_size = 2}), Contains("rank") && Contains("2"));
  CHECK_THROWS_AS(Dist(base, cs::DistInfo{.rank = 7, .world_size = 2}), std::invalid_argument);
  CHECK_THROWS_AS(Dist(base, [] { return cs::DistInfo{.rank = 3, .world_size = 3}; }), std::invalid_argument);
  CHECK_NOTHROW(Dist(base, cs::DistInfo{.rank = 0, .world_size = 1}));
  CHECK_NOTHROW(Dist(base, cs::DistInfo{.rank = 2, .world_size = 3}));
}

TEST_CASE("DistributedSampler throws when a rank's share is empty", "[distributed]") {
  SECTION("fewer observations than ranks") {
    Dist dist(cs::RandomSampler({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1}), cs::DistInfo{3, 8},
              {.enforce_equal_batches = false});
    CHECK_THROWS_AS(dist.shard(5), std::invalid_argument);
    CHECK_THROWS_AS(dist.n_batches(5), std::invalid_argument);
    CHECK_THROWS_AS(dist.sample(5), std::invalid_argument);
    CHECK(dist.shard(8) == cs::Slice{3, 4});  // one observation each is enough
  }
  SECTION("less than one whole batch per rank with enforce_equal_batches") {
    const cs::RandomSampler base({.chunk_size = 32, .preload_nchunks = 1, .batch_size = 32});
    Dist equal(base, cs::DistInfo{0, 4});
    CHECK_THROWS_AS(equal.shard(100), std::invalid_argument);  // 25 per rank < 32
    CHECK_THROWS_AS(equal.validate(100), std::invalid_argument);
    CHECK_THROWS_AS(equal.sample(100), std::invalid_argument);
    Dist unequal(base, cs::DistInfo{0, 4}, {.enforce_equal_batches = false});
    CHECK(unequal.shard(100) == cs::Slice{0, 25});
    CHECK(unequal.n_batches(100) == 1);
  }
}

TEST_CASE("DistributedSampler splits num_samples over the ranks", "[distributed]") {
  const cs::RandomSampler base(
      {.chunk_size = 16, .preload_nchunks = 2, .batch_size = 32, .seed = 8, .num_samples = 1000});
  SECTION("whole batches with enforce_equal_batches") {
    // 1000 / 4 = 250 per rank, 224 in whole batches of 32; shards of 1248 (5000 / 4 = 1250 -> 39 * 32).
    std::set<std::int64_t> all;
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      INFO("rank " << rank);
      Dist dist(base, cs::DistInfo{rank, 4});
      const cs::Slice shard = support::only_range(dist.shard(5000));
      CHECK(shard == cs::Slice{rank * 1248, (rank + 1) * 1248});
      CHECK(dist.n_batches(5000) == 7);
      const support::EpochRecord rec = support::walk(dist, 5000);
      CHECK(rec.n_batches() == 7);
      CHECK(rec.batches_all_full(32));
      CHECK(rec.draws.size() == 224);
      CHECK(rec.draws_inside(shard));
      CHECK(rec.no_repeats());
      for (const support::Draw& d : rec.draws) all.insert(d.obs);
    }
    CHECK(all.size() == 4 * 224);
  }
  SECTION("a short last batch without") {
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      INFO("rank " << rank);
      Dist dist(base, cs::DistInfo{rank, 4}, {.enforce_equal_batches = false});
      const cs::Slice shard = support::only_range(dist.shard(5000));
      CHECK(shard == cs::Slice{rank * 1250, (rank + 1) * 1250});
      CHECK(dist.n_batches(5000) == 8);  // ceil(250 / 32)
      const support::EpochRecord rec = support::walk(dist, 5000);
      CHECK(rec.n_batches() == 8);
      CHECK(rec.batches_full_but_last(32));
      CHECK(rec.batch_lengths.back() == 250 - 7 * 32);
      CHECK(rec.draws.size() == 250);
      CHECK(rec.draws_inside(shard));
      CHECK(rec.no_repeats());
    }
  }
  SECTION("a share below one batch throws") {
    const cs::RandomSampler small({.chunk_size = 8, .preload_nchunks = 1, .batch_size = 8, .num_samples = 10});
    Dist dist(small, cs::DistInfo{1, 4});  // 10 / 4 = 2, no whole batch of 8
    CHECK_THROWS_AS(dist.n_batches(1000), std::invalid_argument);
    CHECK_THROWS_AS(dist.sample(1000), std::invalid_argument);
    Dist loose(small, cs::DistInfo{1, 4}, {.enforce_equal_batches = false});
    CHECK(loose.n_batches(1000) == 1);
    const support::EpochRecord rec = support::walk(loose, 1000);
    CHECK(rec.draws.size() == 2);
  }
  SECTION("with replacement") {
    const cs::RandomSampler repl(
        {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 20, .seed = 4, .replacement = true, .num_samples = 600});
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      Dist dist(repl, cs::DistInfo{rank, 3});
      const cs::Slice shard = support::only_range(dist.shard(90));  // 90 / 3 = 30 per rank, 20 in whole batches
      CHECK(shard == cs::Slice{rank * 20, rank * 20 + 20});
      CHECK(dist.n_batches(90) == 10);  // 600 / 3 = 200 observations per rank
      const support::EpochRecord rec = support::walk(dist, 90);
      CHECK(rec.draws.size() == 200);
      CHECK(rec.draws_inside(shard));
      CHECK(rec.chunks_valid(shard, 10));
    }
  }
}

}  // namespace test_distributed_sampler
