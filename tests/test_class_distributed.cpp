// SPDX-License-Identifier: MIT
// ClassSampler's stream cut across processes: exact resume at any batch (also in the middle of an
// epoch of 10^12 positions), workers, and DistributedSampler in both shard modes, each rank's
// stream checked against the model of class_support.hpp.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>

#include "class_support.hpp"
#include "harness.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace test_class_distributed {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using support::Batches;
using support::check_resume;
using support::check_workers;
using support::ConfigRng;
using support::OwnedRequest;
using support::Tally;

template <class S>
S at_epoch(S sampler, std::uint64_t epoch) {
  sampler.set_epoch(epoch);
  return sampler;
}

}  // namespace

TEST_CASE("ClassSampler resumes exactly at any batch, with workers", "[class][resume]") {
  ConfigRng g(3131);
  Tally tally;
  for (int trial = 0; trial < 80; ++trial) {
    const ClassConfig c = random_config(g);
    INFO(c.describe());
    const std::uint64_t epoch = static_cast<std::uint64_t>(g.between(0, 4));
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      check_resume([&] { return c.sampler(); }, c.n_obs(), epoch, {.id = id, .num_workers = workers}, g, tally);
  }
  INFO(tally.points << " points, " << tally.mid_request << " inside a request");
  CHECK(tally.points > 800);
  CHECK(tally.mid_request > 300);
}

TEST_CASE("ClassSampler: the middle of an epoch of 10^12 positions is served at once", "[class][resume]") {
  const Codes codes = runs_of({{0, 300}, {1, 500}, {2, 1000}, {0, 700}});
  const cs::ClassSampler base(
      codes,
      {.chunk_size = 256, .preload_nchunks = 64, .batch_size = 256, .seed = 12, .num_samples = 1'000'000'000'000});
  const auto started = std::chrono::steady_clock::now();
  cs::ClassSampler probe = base;
  const std::int64_t n = probe.n_batches(2500);
  REQUIRE(n == 3'906'250'000);
  (void)probe.sample(2500);
  cs::ClassSampler resumed = base;
  resumed.restore(probe.state(n / 2 + 7));
  auto range = resumed.sample(2500);
  const OwnedRequest first = support::own(*range.begin());
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
  const std::int64_t done = n / 2 + 7;
  CHECK(first.chunks.size() == 64);
  CHECK(std::ssize(first.batches) == 64 - done % 64);
  const auto plan = base.plan(2500, 0);
  cs::RequestBuffers buffers;
  plan.fill(plan.request_of(done), buffers);
  CHECK(first.chunks == buffers.chunks);
}

TEST_CASE("ClassSampler: workers split the epoch", "[class][workers]") {
  ConfigRng g(3232);
  for (int trial = 0; trial < 60; ++trial) {
    const ClassConfig c = random_config(g);
    INFO(c.describe());
    const std::uint64_t epoch = static_cast<std::uint64_t>(g.between(0, 3));
    for (std::int64_t k = 1; k <= 5; ++k) check_workers([&] { return at_epoch(c.sampler(), epoch); }, c.n_obs(), k);
  }
}

TEST_CASE("DistributedSampler<ClassSampler>, contiguous: each rank draws its share from its slice",
          "[class][distributed]") {
  ConfigRng g(7070);
  for_each_world(g, 120, 5, distributed_config, [](int, const ClassConfig& c, std::int64_t world) {
    const std::int64_t batch = c.options.batch_size;
    const std::int64_t per_rank = c.n_obs() / world / batch * batch;
    const std::int64_t budget = *c.options.num_samples / world / batch * batch;
    std::vector<std::vector<OwnedRequest>> epochs;
    for (std::int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      Dist rank(c.sampler(), cs::DistInfo{.rank = r, .world_size = world});
      const cs::Slice shard = support::only_range(rank.shard(c.n_obs()));
      REQUIRE(shard == cs::Slice{r * per_rank, (r + 1) * per_rank});
      REQUIRE(rank.n_batches(c.n_obs()) == budget / batch);
      epochs.push_back(support::epoch(rank, c.n_obs()));
      check_epoch(c, shard, budget, epochs.back());
      CHECK(rank.rng() == cs::Rng(c.options.seed).spawn(static_cast<std::uint64_t>(r)));
      // The rank's stream: the base restricted to its shard, on stream r.
      cs::ClassSampler own =
          c.sampler().with_shard({.mask = shard, .stream = static_cast<std::uint64_t>(r), .budget = budget});
      CHECK(support::epoch(own, c.n_obs()) == epochs.back());
    }
  });
}

TEST_CASE("DistributedSampler<ClassSampler>, global: the ranks deal one plan of num_samples draws",
          "[class][distributed]") {
  ConfigRng g(7171);
  for_each_world(g, 120, 5, distributed_config, [&g](int, const ClassConfig& c, std::int64_t world) {
    const GlobalJob job{.mask = cs::Ranges(0, c.n_obs()),
                        .n_obs = c.n_obs(),
                        .world = world,
                        .batch = c.options.batch_size,
                        .num_samples = *c.options.num_samples,
                        .epoch = static_cast<std::uint64_t>(g.between(0, 3))};
    check_deal(c.sampler(), c, job, [&](std::int64_t r) {
      return Dist(c.sampler(), cs::DistInfo{.rank = r, .world_size = world}, {.mode = cs::ShardMode::global});
    });
  });
}

TEST_CASE("DistributedSampler<ClassSampler>, global: a class only in the range's tail is drawn too",
          "[class][distributed]") {
  // 95 codes, class 1 only in [80, 95); 2 ranks, batches of 20: 80 positions in whole batches.
  // num_samples equals the range's size, yet with replacement nothing of the range is cut away.
  const Codes codes = runs_of({{0, 80}, {1, 15}});
  const cs::ClassSampler base(
      codes, {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 20, .seed = 12, .num_samples = 95});
  std::int64_t class1 = 0;
  for (std::int64_t r = 0; r < 2; ++r) {
    Dist rank(base, cs::DistInfo{.rank = r, .world_size = 2}, {.mode = cs::ShardMode::global});
    for (int epoch = 0; epoch < 20; ++epoch) {
      INFO("rank " << r << " epoch " << epoch);
      CHECK(rank.shard(95) == cs::Slice{0, 95});
      const Batches batches = support::observations(support::epoch(rank, 95));
      CHECK(batches.size() == 2);
      for (const auto& batch : batches) {
        const bool tail = batch.front() >= 80;
        CHECK(std::ranges::all_of(batch, [&](std::int64_t obs) { return (obs >= 80) == tail; }));
        class1 += tail ? 1 : 0;
      }
    }
  }
  // 80 batches, each of class 1 with probability 1/2 (uniform weights, both classes present).
  CHECK(class1 > 25);
  CHECK(class1 < 55);
}

TEST_CASE("DistributedSampler<ClassSampler> resumes and splits among workers in both modes", "[class][distributed]") {
  ConfigRng g(7272);
  Tally tally;
  check_rank_resume(g, 40, distributed_config, tally, [](const auto& make, std::int64_t n_obs) {
    for (std::int64_t k = 2; k <= 4; ++k) check_workers(make, n_obs, k);
  });
  CHECK(tally.points > 300);
  CHECK(tally.mid_request > 50);
}

}  // namespace test_class_distributed
