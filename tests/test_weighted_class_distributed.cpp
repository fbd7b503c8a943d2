// SPDX-License-Identifier: MIT
// WeightedClassSampler resumed exactly at every batch and split between workers, and under
// DistributedSampler in both modes with 1 to 9 ranks: equal batches, each rank its own stream,
// remainder policies, resume with workers, and elastic restores from W to W' ranks (global mode).
// The model is class_support.hpp's, with weighted_support.hpp's checks.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "harness.hpp"
#include "support.hpp"
#include "weighted_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace test_weighted_class_distributed {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using namespace support::weighted;
using Catch::Matchers::Contains;
using support::Batches;
using support::ConfigRng;
using support::OwnedRequest;
using support::Tally;

}  // namespace
TEST_CASE("WeightedClassSampler resumes exactly at every batch of small epochs; workers split the epoch",
          "[weighted][resume][workers]") {
  ConfigRng g(2207);
  Tally tally;
  for (int trial = 0; trial < 60; ++trial) {
    const Weighted w{random_config(g), compositions[trial % 2]};
    INFO(w.describe());
    const auto epoch = static_cast<std::uint64_t>(g.between(0, 4));
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      support::check_resume([&] { return w.sampler(); }, w.c.n_obs(), epoch, {.id = id, .num_workers = workers}, g,
                            tally);
    if (trial % 2 == 0)
      for (std::int64_t k = 2; k <= 4; ++k)
        support::check_workers(
            [&] {
              cs::WeightedClassSampler s = w.sampler();
              s.set_epoch(epoch);
              return s;
            },
            w.c.n_obs(), k);
  }
  INFO(tally.points << " points, " << tally.mid_request << " inside a request");
  CHECK(tally.points > 500);
  CHECK(tally.mid_request > 200);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>: equal batches on 1 to 9 ranks, each rank its own stream",
          "[weighted][distributed]") {
  // Contiguous mode: each rank draws its share from the runs clipped to its shard, on its own
  // stream, which may span several ranges of a many-range mask. Global mode: the ranks deal one
  // plan of draws from the whole mask in blocks.
  ConfigRng g(2208);
  int served = 0;
  int spanning = 0;
  for (int trial = 0; trial < 140; ++trial) {
    const std::int64_t world = g.between(1, 9);
    const cs::ShardMode mode = trial % 2 == 0 ? cs::ShardMode::global : cs::ShardMode::contiguous;
    Weighted w = weighted_distributed_config(g, world);
    if (trial % 3 == 0) w.c.options.mask = random_mask(g, w.c.n_obs(), 20);
    const cs::Ranges closed = w.c.range();
    const std::int64_t batch = w.c.options.batch_size;
    INFO(w.describe() << " | world " << world << (mode == cs::ShardMode::global ? " global" : " contiguous"));
    if (valid_starts(w.c.codes, w.c.weights, w.c.options.chunk_size, closed).empty() || closed.count() / world < batch)
      continue;
    const cs::WeightedClassSampler base = w.sampler();
    const auto rank_of = [&](std::int64_t r) {
      return WDist(base, cs::DistInfo{.rank = r, .world_size = world}, {.mode = mode});
    };
    if (mode == cs::ShardMode::contiguous) {
      const std::int64_t per_rank = closed.count() / world / batch * batch;
      const std::int64_t budget = *w.c.options.num_samples / world / batch * batch;
      for (std::int64_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        WDist rank = rank_of(r);
        const cs::Ranges shard = rank.shard(w.c.n_obs());
        REQUIRE(shard == closed.sub(r * per_rank, per_rank));
        if (valid_starts(w.c.codes, w.c.weights, w.c.options.chunk_size, shard).empty()) {
          REQUIRE_THROWS_WITH(rank.n_batches(w.c.n_obs()), Contains("no chunk"));
          continue;
        }
        spanning += shard.size() > 1 ? 1 : 0;
        REQUIRE(rank.n_batches(w.c.n_obs()) == budget / batch);
        CHECK(rank.rng() == cs::Rng(w.c.options.seed).spawn(static_cast<std::uint64_t>(r)));
        const std::vector<OwnedRequest> requests = support::epoch(rank, w.c.n_obs());
        Weighted model = w;
        model.c.options.drop_last = false;  // the budget is whole batches already
        check_epoch(model, shard, budget, requests);
        cs::WeightedClassSampler own =
            base.with_shard({.mask = shard, .stream = static_cast<std::uint64_t>(r), .budget = budget});
        CHECK(support::epoch(own, w.c.n_obs()) == requests);
        ++served;
      }
    } else {
      Weighted model = w;
      model.c.options.drop_last = false;
      check_deal(base, model,
                 {.mask = closed,
                  .n_obs = w.c.n_obs(),
                  .world = world,
                  .batch = batch,
                  .num_samples = *w.c.options.num_samples},
                 rank_of);
      served += static_cast<int>(world);
    }
  }
  INFO(served << " ranks served, " << spanning << " shards of several ranges");
  CHECK(served > 400);
  CHECK(spanning > 10);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>: remainder policies keep every rank's batch count",
          "[weighted][distributed]") {
  ConfigRng g(2209);
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t world = g.between(1, 6);
    const Weighted w = weighted_distributed_config(g, world);
    const cs::DistributedOptions options{.enforce_equal_batches = g.between(0, 3) != 0,
                                         .mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous,
                                         .remainder = support::draw_remainder(g)};
    INFO(w.describe() << " | world " << world << " " << support::policy_name(options.remainder) << " enforce "
                      << options.enforce_equal_batches);
    std::set<std::int64_t> counts;
    for (std::int64_t r = 0; r < world; ++r) {
      WDist rank(w.sampler(), cs::DistInfo{.rank = r, .world_size = world}, options);
      for (int epoch = 0; epoch < 2; ++epoch) {
        const std::int64_t announced = rank.n_batches(w.c.n_obs());
        const std::vector<OwnedRequest> requests = support::epoch(rank, w.c.n_obs());
        CHECK(support::n_batches(requests) == announced);
        counts.insert(announced);
        const support::EpochRecord rec = support::record(requests);
        if (options.enforce_equal_batches) CHECK(rec.batches_all_full(w.c.options.batch_size));
        for (const support::Draw& d : rec.draws)
          REQUIRE(weight_of(w.c.weights, w.c.codes[static_cast<std::size_t>(d.obs)]) > 0);
      }
    }
    if (options.enforce_equal_batches) {
      CHECK(counts.size() == 1);
    } else {
      CHECK(*counts.rbegin() - *counts.begin() <= 1);
    }
  }
}

TEST_CASE("DistributedSampler<WeightedClassSampler> resumes, with workers, in both modes", "[weighted][distributed]") {
  ConfigRng g(2210);
  Tally tally;
  check_rank_resume(g, 30, weighted_distributed_config, tally, [&g](const auto& make, std::int64_t n_obs) {
    support::check_workers(make, n_obs, g.between(2, 4));
  });
  CHECK(tally.points > 150);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>, global: elastic restore from W to W' ranks",
          "[weighted][distributed][elastic]") {
  // Every old rank read b batches; rank 0's state restores W' new ranks, which read the old
  // ranks' unread batches, in order, dealt in blocks: drop leaves out fewer than W' of them, pad
  // repeats as many from the start.
  ConfigRng g(2211);
  int restarts = 0;
  for (std::int64_t w1 = 1; w1 <= 4; ++w1)
    for (std::int64_t w2 = 1; w2 <= 4; ++w2)
      for (const cs::Remainder policy : {cs::Remainder::drop, cs::Remainder::pad}) {
        const Weighted w = weighted_distributed_config(g, std::max(w1, w2) + 1);
        const cs::DistributedOptions options{.mode = cs::ShardMode::global, .remainder = policy};
        INFO(w.describe() << " | W " << w1 << " -> W' " << w2 << " " << support::policy_name(policy));
        std::vector<WDist> old_ranks;
        std::vector<Batches> read;
        for (std::int64_t r = 0; r < w1; ++r) {
          old_ranks.emplace_back(w.sampler(), cs::DistInfo{.rank = r, .world_size = w1}, options);
          read.push_back(support::observations(support::epoch(old_ranks.back(), w.c.n_obs())));
        }
        const auto n = static_cast<std::int64_t>(read[0].size());
        REQUIRE(n >= 1);
        const std::int64_t b = g.between(0, n);
        Batches left;
        for (const Batches& mine : read) left.insert(left.end(), mine.begin() + b, mine.end());
        const std::string text = old_ranks[0].state(b).to_string();
        Batches again;
        for (std::int64_t r = 0; r < w2; ++r) {
          WDist rank(w.sampler(), cs::DistInfo{.rank = r, .world_size = w2}, options);
          rank.restore(cs::SamplerState::parse(text));
          const Batches mine = support::observations(support::epoch(rank, w.c.n_obs()));
          again.insert(again.end(), mine.begin(), mine.end());
        }
        const auto total = static_cast<std::size_t>(left.size());
        const std::size_t each = policy == cs::Remainder::pad
                                     ? (total + static_cast<std::size_t>(w2) - 1) / static_cast<std::size_t>(w2)
                                     : total / static_cast<std::size_t>(w2);
        Batches dealt;
        for (std::size_t i = 0; i < each * static_cast<std::size_t>(w2) && total > 0; ++i)
          dealt.push_back(left[i % total]);
        CHECK(again == dealt);
        ++restarts;
      }
  CHECK(restarts == 32);
}

}  // namespace test_weighted_class_distributed
