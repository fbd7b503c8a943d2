// SPDX-License-Identifier: MIT
// MixtureSampler across ranks: DistributedSampler in both modes (each rank's part of every
// dataset, or its deal of one shared plan; weights updated through sampler(); the other remainder
// policies), with_shard's parts, and sizes near 2^62, checked against the model of
// mixture_support.hpp.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>

#include "harness.hpp"
#include "mixture_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

namespace test_mixture_distributed {

namespace {

namespace cs = chunksampler;
using namespace support::mixture;
using support::after;
using support::ceil_div;
using support::check_resume;
using support::check_workers;
using support::ConfigRng;
using support::Tally;

}  // namespace

TEST_CASE("DistributedSampler<MixtureSampler>: sampler() updates the weights on every rank; a stale restore is refused",
          "[mixture][distributed]") {
  using Catch::Matchers::Contains;
  using Dist = cs::DistributedSampler<cs::MixtureSampler>;
  const WeightUpdate u(78);
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
    INFO((mode == cs::ShardMode::global ? "global" : "contiguous"));
    for (std::int64_t r = 0; r < 2; ++r) {
      INFO("rank " << r);
      const cs::DistInfo info{.rank = r, .world_size = 2};
      Dist dist(cs::MixtureSampler(u.sizes, u.options), info, {.mode = mode});
      const Requests epoch0 = support::epoch(dist, 200);
      const cs::SamplerState before = dist.state(2);
      dist.update_weights(u.other);
      // The next epoch is what a job built with the new weights plays; dataset 1 is never read.
      Dist built(cs::MixtureSampler(u.sizes, u.other_options), info, {.mode = mode});
      built.set_epoch(1);
      const Requests epoch1 = support::epoch(dist, 200);
      CHECK(epoch1 == support::epoch(built, 200));
      for (const auto& batch : support::observations(epoch1))
        for (const std::int64_t obs : batch) CHECK_FALSE((obs >= 100 && obs < 160));

      // A state restored, then the weights changed: sample() refuses to continue an epoch that was
      // never played; set back, the state continues the first epoch exactly.
      Dist stale(cs::MixtureSampler(u.sizes, u.options), info, {.mode = mode});
      stale.restore(before);
      stale.update_weights(u.other);
      CHECK_THROWS_WITH(stale.sample(200), Contains("fingerprint"));
      stale.update_weights({1, 1, 1});
      CHECK(support::collect(stale.sample(200)) == after(epoch0, 2));
    }
  }
}

TEST_CASE("DistributedSampler<MixtureSampler>, contiguous: each rank reads its part of every dataset", "[mixture]") {
  using Catch::Matchers::Contains;
  SECTION("200 random configurations, every rank") {
    ConfigRng g(777001);
    int served = 0;
    int refused = 0;
    Tally tally;
    for (int trial = 0; trial < 200; ++trial) {
      const std::int64_t world = g.between(1, 4);
      MixConfig c = random_mix(g, world);
      INFO(c.describe() << " | world " << world);
      const cs::MixtureSampler base = c.sampler();
      const std::int64_t S = c.total();
      const std::int64_t per_rank = S / world / c.batch * c.batch;
      const std::int64_t budget = c.num_samples ? *c.num_samples / world / c.batch * c.batch : per_rank;
      const auto datasets = c.datasets();

      // A rank whose part of some dataset holds no chunk is refused; the job needs every rank.
      bool servable = true;
      for (std::int64_t r = 0; r < world; ++r) {
        bool rank_ok = per_rank >= 1 && budget >= 1;
        for (const cs::Slice& dataset : datasets)
          rank_ok = rank_ok && expected_part(dataset, c.chunk, r * per_rank, (r + 1) * per_rank, S).size() >= c.chunk;
        const Mixture dist(base, cs::DistInfo{.rank = r, .world_size = world});
        if (rank_ok) CHECK_NOTHROW(dist.validate(c.n_obs()));
        else CHECK_THROWS_AS(dist.validate(c.n_obs()), std::invalid_argument);
        servable = servable && rank_ok;
      }
      if (!servable) {
        ++refused;
        continue;
      }
      ++served;
      const std::int64_t R = ceil_div(budget, c.chunk * c.preload);
      std::vector<std::set<std::int64_t>> read(static_cast<std::size_t>(world));
      for (std::int64_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        Mixture dist(base, cs::DistInfo{.rank = r, .world_size = world});
        CHECK(dist.shard(c.n_obs()) == cs::Slice{r * per_rank, (r + 1) * per_rank});
        CHECK(dist.n_batches(c.n_obs()) == budget / c.batch);
        const Requests requests = support::epoch(dist, c.n_obs());
        CHECK(support::n_batches(requests) == budget / c.batch);
        std::vector<cs::Slice> parts;
        for (const cs::Slice& dataset : datasets)
          parts.push_back(expected_part(dataset, c.chunk, r * per_rank, (r + 1) * per_rank, S));
        const Reads reads = analyze(requests, parts, c.chunk, c.preload, budget - (R - 1) * c.chunk * c.preload);
        CHECK(reads.one_part);
        CHECK(reads.on_grid);
        CHECK(reads.full_chunks);
        if (c.temperature == 1.0) CHECK(reads.requests == expected_quotas(R, c.integer_weights()));
        for (const auto& batch : support::observations(requests)) {
          CHECK(static_cast<std::int64_t>(batch.size()) == c.batch);
          read[static_cast<std::size_t>(r)].insert(batch.begin(), batch.end());
        }
      }
      for (std::size_t a = 0; a < read.size(); ++a)
        for (std::size_t b = a + 1; b < read.size(); ++b)
          for (const std::int64_t obs : read[a]) CHECK_FALSE(read[b].contains(obs));
      // Resume and workers on one rank.
      if (trial % 4 == 0) {
        const std::int64_t r = g.between(0, world - 1);
        const auto make = [&] { return Mixture(base, cs::DistInfo{.rank = r, .world_size = world}); };
        check_resume(make, c.n_obs(), static_cast<std::uint64_t>(g.between(0, 3)), {}, g, tally);
        check_workers(make, c.n_obs(), g.between(2, 3));
      }
    }
    CHECK(served > 120);
    CHECK(refused > 5);
    CHECK(tally.points > 100);
  }

  SECTION("a rank's part too small for a chunk is refused, naming the dataset") {
    // Datasets of 40 and 12 over 4 ranks of 12 rows ([0, 12), [12, 24), ...): dataset 1 has 3
    // chunks of 4, and rank 0's mask is 12 / 52 of the collection, chunks [0, floor(36 / 52)) =
    // [0, 0) of it; rank 2 gets chunks [floor(72 / 52), floor(108 / 52)) = [1, 2), rows [44, 48).
    const cs::MixtureSampler mix({40, 12}, {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 2});
    Mixture dist(mix, cs::DistInfo{.rank = 0, .world_size = 4});
    CHECK_THROWS_WITH(dist.validate(52), Contains("dataset 1") && Contains("a part [40, 40) of 0 observations") &&
                                             Contains("chunk_size (4)"));
    CHECK_NOTHROW(Mixture(mix, cs::DistInfo{.rank = 2, .world_size = 4}).validate(52));
    // Over 2 ranks of 26 rows, dataset 1 splits into chunks [0, 1) and [1, 3).
    CHECK_NOTHROW(Mixture(mix, cs::DistInfo{.rank = 0, .world_size = 2}).validate(52));
  }
  SECTION("the other remainder policies keep equal batch counts and the parts") {
    const cs::MixtureSampler mix(
        {103, 61, 37}, {.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 8, .weights = {1, 2, 3}});
    for (const cs::Remainder policy : {cs::Remainder::pad, cs::Remainder::rotate}) {
      for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
        std::set<std::int64_t> counts;
        for (std::int64_t r = 0; r < 3; ++r) {
          Mixture dist(mix, cs::DistInfo{.rank = r, .world_size = 3}, {.remainder = policy});
          dist.set_epoch(epoch);
          const cs::Slice shard = support::only_range(dist.shard(201));
          const Requests requests = support::epoch(dist, 201);
          counts.insert(support::n_batches(requests));
          std::vector<cs::Slice> parts;
          for (const cs::Slice& dataset : std::vector<cs::Slice>{{0, 103}, {103, 164}, {164, 201}})
            parts.push_back(expected_part(dataset, 4, shard.start, shard.stop, 201));
          CHECK(analyze(requests, parts, 4, 3, 0).one_part);
        }
        CHECK(counts.size() == 1);
      }
    }
  }
}

TEST_CASE("DistributedSampler<MixtureSampler>, global: the ranks deal one shared plan", "[mixture]") {
  ConfigRng g(777002);
  int served = 0;
  Tally tally;
  for (int trial = 0; trial < 150; ++trial) {
    const std::int64_t world = g.between(1, 4);
    const MixConfig c = random_mix(g, 2);
    INFO(c.describe() << " | world " << world);
    const cs::MixtureSampler base = c.sampler();
    const std::int64_t S = c.total();
    const std::int64_t kept = c.budget() / (world * c.batch) * (world * c.batch);
    const bool whole = c.budget() == S;
    const cs::Slice window = whole ? cs::Slice{0, kept} : cs::Slice{0, S};
    bool servable = kept >= 1;
    for (const cs::Slice& dataset : c.datasets())
      servable = servable && expected_part(dataset, c.chunk, window.start, window.stop, S).size() >= c.chunk;
    const cs::DistributedOptions options{.mode = cs::ShardMode::global};
    if (!servable) {
      CHECK_THROWS_AS(Mixture(base, cs::DistInfo{.rank = 0, .world_size = world}, options).validate(c.n_obs()),
                      std::invalid_argument);
      continue;
    }
    ++served;
    const std::uint64_t epoch = static_cast<std::uint64_t>(g.between(0, 5));
    cs::MixtureSampler shared = base.with_shard({.mask = window, .stream = ~std::uint64_t{0}, .budget = kept});
    shared.set_epoch(epoch);
    const support::Batches plan = support::observations(support::epoch(shared, c.n_obs()));
    const auto each = static_cast<std::int64_t>(plan.size()) / world;
    for (std::int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      Mixture dist(base, cs::DistInfo{.rank = r, .world_size = world}, options);
      dist.set_epoch(epoch);
      CHECK(dist.n_batches(c.n_obs()) == each);
      const support::Batches mine = support::observations(support::epoch(dist, c.n_obs()));
      CHECK(mine == support::Batches(plan.begin() + r * each, plan.begin() + (r + 1) * each));
    }
    if (trial % 5 == 0) {
      const std::int64_t r = g.between(0, world - 1);
      const auto make = [&] { return Mixture(base, cs::DistInfo{.rank = r, .world_size = world}, options); };
      check_resume(make, c.n_obs(), epoch, {}, g, tally);
      check_workers(make, c.n_obs(), g.between(2, 3));
    }
  }
  CHECK(served > 120);
  CHECK(tally.points > 50);
}

TEST_CASE("MixtureSampler with_shard: the same fraction of every dataset, disjoint for disjoint masks", "[mixture]") {
  using Catch::Matchers::Contains;
  ConfigRng g(31337);
  for (int trial = 0; trial < 200; ++trial) {
    const MixConfig c = random_mix(g, 3);
    INFO(c.describe());
    const cs::MixtureSampler base = c.sampler();
    const std::int64_t S = c.total();
    // Three adjacent masks [0, a), [a, b), [b, S).
    std::int64_t a = g.between(1, S - 2);
    std::int64_t b = g.between(a + 1, S - 1);
    const std::vector<cs::Slice> masks = {{0, a}, {a, b}, {b, S}};
    std::vector<std::set<std::int64_t>> read;
    for (std::size_t i = 0; i < masks.size(); ++i) {
      const cs::Slice mask = masks[i];
      std::vector<cs::Slice> parts;
      bool servable = true;
      for (const cs::Slice& dataset : c.datasets()) {
        parts.push_back(expected_part(dataset, c.chunk, mask.start, mask.stop, S));
        servable = servable && parts.back().size() >= c.chunk;
      }
      const cs::Shard shard{.mask = mask, .stream = i, .budget = g.between(1, 2 * S)};
      if (!servable) {
        CHECK_THROWS_WITH(base.with_shard(shard), Contains("fewer than chunk_size"));
        continue;
      }
      cs::MixtureSampler copy = base.with_shard(shard);
      CHECK(copy.rng() == base.rng().spawn(i));
      CHECK(copy.epoch_size(c.n_obs()) == shard.budget);
      CHECK(copy.weights() == base.weights());
      CHECK(base.epoch_size(c.n_obs()) == c.budget());  // the original is unchanged
      const Requests requests = support::epoch(copy, c.n_obs());
      const std::int64_t used = c.used(shard.budget);
      const std::int64_t R = ceil_div(used, c.chunk * c.preload);
      const Reads r = analyze(requests, parts, c.chunk, c.preload, used - (R - 1) * c.chunk * c.preload);
      CHECK(r.one_part);
      CHECK(r.on_grid);
      CHECK(r.full_chunks);
      std::set<std::int64_t>& mine = read.emplace_back();
      for (const auto& batch : support::observations(requests)) mine.insert(batch.begin(), batch.end());
    }
    for (std::size_t x = 0; x < read.size(); ++x)
      for (std::size_t y = x + 1; y < read.size(); ++y)
        for (const std::int64_t obs : read[x]) CHECK_FALSE(read[y].contains(obs));
  }
}

TEST_CASE("MixtureSampler: sizes near 2^62 do not overflow, and nothing grows with the requests", "[mixture]") {
  constexpr std::int64_t two62 = std::int64_t{1} << 62;
  SECTION("mul_div against 128-bit arithmetic") {
    ConfigRng g(8);
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t c = g.next() % (std::uint64_t{1} << 62) + 1;
      const std::uint64_t a = g.next() % (c + 1);
      const std::uint64_t b = g.coin() ? g.next() % (std::uint64_t{1} << 62) : g.next() % 1000;
      const cs::detail::QuotientRemainder qr = cs::detail::mul_div(a, b, c);
      const uint128 product = static_cast<uint128>(a) * b;
      CHECK(qr.quotient == static_cast<std::uint64_t>(product / c));
      CHECK(qr.remainder == static_cast<std::uint64_t>(product % c));
    }
  }
  SECTION("2^62 requests of one row: the plan and any request at once") {
    // Weights 1:2 give shares 2^52 and 2^53: 2^62 / 3 = 1537228672809129301 rest 1, and twice that
    // rest 2, so the one request left over goes to dataset 1.
    cs::MixtureSampler mix({two62 / 2, two62 / 2},
                           {.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .weights = {1, 2}});
    const cs::detail::MixturePlan plan = mix.plan(two62, 7);
    CHECK(plan.n_requests() == two62);
    CHECK(plan.quotas() == std::vector<std::int64_t>{1537228672809129301, 3074457345618258603});
    cs::RequestBuffers buffers;
    for (const std::int64_t k : {std::int64_t{0}, two62 / 3, two62 - 1}) {
      plan.fill(k, buffers);
      REQUIRE(buffers.chunks.size() == 1);
      CHECK(buffers.chunks[0].size() == 1);
      CHECK(buffers.chunks[0].start >= 0);
      CHECK(buffers.chunks[0].stop <= two62);
    }
  }
  SECTION("shards of huge datasets, under DistributedSampler, resumed mid-epoch") {
    const std::vector<std::int64_t> sizes = {two62 / 2 + 12345, two62 / 4 - 999, two62 / 4 - 11346};
    const std::int64_t total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
    REQUIRE(total == two62);
    const cs::MixtureSampler mix(
        sizes, {.chunk_size = 1024, .preload_nchunks = 4, .batch_size = 256, .seed = 5, .weights = {1, 1, 2}});
    for (const std::int64_t world : {std::int64_t{3}, std::int64_t{7}}) {
      for (std::int64_t r = 0; r < world; ++r) {
        Mixture dist(mix, cs::DistInfo{.rank = r, .world_size = world});
        const cs::Slice shard = support::only_range(dist.shard(two62));
        const std::int64_t n = dist.n_batches(two62);
        cs::SamplerState state = dist.state(0);  // the epoch's start, moved to the point of its middle
        state = support::edited(state, [&](cs::detail::StateFields& f) { f.n_obs = two62; });
        state = support::edited(state, [&](cs::detail::StateFields& f) { f.batches_done = n / 2 + 1; });
        Mixture resumed(mix, cs::DistInfo{.rank = r, .world_size = world});
        resumed.restore(state);
        auto range = resumed.sample(two62);
        const cs::LoadRequest& request = *range.begin();
        REQUIRE_FALSE(request.chunks.empty());
        // The request's chunks lie in one dataset's part of this rank's shard.
        std::int64_t start = 0;
        bool inside = false;
        for (const std::int64_t size : sizes) {
          const cs::Slice part = expected_part({start, start + size}, 1024, shard.start, shard.stop, total);
          inside = inside || std::ranges::all_of(request.chunks, [&](const cs::Slice& ch) {
                     return part.start <= ch.start && ch.stop <= part.stop && (ch.start - part.start) % 1024 == 0;
                   });
          start += size;
        }
        CHECK(inside);
      }
    }
  }
}

}  // namespace test_mixture_distributed
