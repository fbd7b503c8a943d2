// SPDX-License-Identifier: MIT
// Workers inside a rank: sample(n_obs, WorkerInfo{i, k}) gives worker i the pieces i, i + k, ...
// of the rank's stream. For k = 1..6 and random configurations of RandomSampler,
// SequentialSampler and DistributedSampler (contiguous and global, every remainder policy): the
// workers' shares together are exactly the rank's epoch (the same requests, batch for batch),
// they are disjoint, each worker's n_batches(n_obs, WorkerInfo) is what it yields, a share is
// the same however often it is computed, and an invalid WorkerInfo throws std::invalid_argument.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/worker_info.hpp>

#include "harness.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_workers {

namespace {

namespace cs = chunksampler;
using support::Batches;
using support::check_workers;

// The invalid WorkerInfos: sample() and n_batches() throw, and the epoch does not move.
template <class S>
void check_invalid_workers(S sampler, std::int64_t n_obs) {
  using Catch::Matchers::Contains;
  const std::vector<cs::WorkerInfo> invalid = {
      {.id = 0, .num_workers = 0}, {.id = 0, .num_workers = -1}, {.id = -1, .num_workers = 2},
      {.id = 2, .num_workers = 2}, {.id = 5, .num_workers = 3},
  };
  for (const cs::WorkerInfo& w : invalid) {
    INFO("id " << w.id << " num_workers " << w.num_workers);
    CHECK_THROWS_AS(sampler.sample(n_obs, w), std::invalid_argument);
    CHECK_THROWS_AS(sampler.n_batches(n_obs, w), std::invalid_argument);
    CHECK_THROWS_WITH(sampler.n_batches(n_obs, w), Contains(w.num_workers < 1 ? "num_workers" : "id"));
    CHECK(sampler.epoch() == 0);
  }
  CHECK_NOTHROW(sampler.n_batches(n_obs, cs::WorkerInfo{.id = 2, .num_workers = 3}));
}

// A configuration of a RandomSampler (or SequentialSampler) whose range holds at least `min_size`
// observations.
[[nodiscard]] support::Config random_base(support::ConfigRng& g, std::int64_t min_size = 1) {
  support::Config c;
  support::draw_shape(g, c, 6, 3);
  c.drop_last = g.coin();
  c.seed = g.next();
  const std::int64_t size = g.between(std::max(min_size, std::int64_t{1}), min_size + 250);
  support::place(g, c, size);
  return c;
}

template <class S>
[[nodiscard]] S at_epoch(S sampler, std::uint64_t epoch) {
  sampler.set_epoch(epoch);
  return sampler;
}

}  // namespace

TEST_CASE("Workers split a RandomSampler's epoch", "[workers]") {
  support::ConfigRng g(31);
  for (int trial = 0; trial < 40; ++trial) {
    support::Config c = random_base(g);
    const int variant = static_cast<int>(g.between(0, 2));
    if (variant == 1) c.num_samples = g.between(1, c.size());  // fewer than the range
    if (variant == 2 && c.size() >= c.chunk) {                 // with replacement
      c.replacement = true;
      c.num_samples = g.between(1, 2 * c.size());
    }
    c.epoch = static_cast<std::uint64_t>(g.between(0, 5));
    INFO(c.describe());
    const auto make = [&] { return at_epoch(cs::RandomSampler(c.options()), c.epoch); };
    for (std::int64_t k = 1; k <= 6; ++k) check_workers(make, c.n_obs, k);
  }
}

TEST_CASE("Workers split a SequentialSampler's epoch", "[workers]") {
  support::ConfigRng g(32);
  for (int trial = 0; trial < 30; ++trial) {
    support::Config c = random_base(g);
    c.sequential = true;
    INFO(c.describe());
    const auto make = [&] { return cs::SequentialSampler(c.sequential_options()); };
    for (std::int64_t k = 1; k <= 6; ++k) check_workers(make, c.n_obs, k);
  }
}

TEST_CASE("Workers split a DistributedSampler rank's epoch, contiguous and global", "[workers][distributed]") {
  support::ConfigRng g(33);
  int global_runs = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t world = g.between(1, 5);
    support::Config c = random_base(g, world * 18);  // >= one whole batch per rank (batch <= 18)
    c.world = world;
    c.enforce = g.between(0, 3) != 0;
    c.mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous;
    c.remainder = support::draw_remainder(g);
    const cs::DistInfo info{.rank = g.between(0, world - 1), .world_size = world};
    c.sequential = g.between(0, 4) == 0;
    c.epoch = static_cast<std::uint64_t>(g.between(0, 3));
    INFO(c.describe() << " rank " << info.rank);
    if (c.mode == cs::ShardMode::global) ++global_runs;
    c.with_base([&](const auto& base) {
      for (std::int64_t k = 1; k <= 6; ++k)
        check_workers([&] { return at_epoch(cs::DistributedSampler(base, info, c.dist_options()), c.epoch); }, c.n_obs,
                      k);
    });
  }
  CHECK(global_runs > 15);
}

TEST_CASE("Workers split a rank's stream after an elastic restart", "[workers][distributed][elastic]") {
  // After an elastic restart a rank reads several runs of the plan (and, with pad, wraps around):
  // the workers still split exactly that stream.
  support::ConfigRng g(34);
  for (int trial = 0; trial < 30; ++trial) {
    const std::int64_t w = g.between(2, 5);
    std::int64_t w2 = g.between(1, 4);
    if (w2 >= w) ++w2;  // another world size: a restore on the same one keeps the worker of the state
    support::Config c = random_base(g, std::max(w, w2) * 18);
    c.world = w;
    c.mode = cs::ShardMode::global;
    c.remainder = g.coin() ? cs::Remainder::pad : cs::Remainder::drop;
    auto old = c.rank(0);
    const std::int64_t n = old.n_batches(c.n_obs);
    (void)support::collect(old.sample(c.n_obs));
    const std::string state = old.state(g.between(1, std::max<std::int64_t>(n - 1, 1))).to_string();
    const std::int64_t rank = g.between(0, w2 - 1);
    INFO(c.describe() << " -> " << w2 << " rank " << rank << " state " << state);
    const auto make = [&] {
      auto d = c.rank(rank, w2);
      d.restore(cs::SamplerState::parse(state));
      return d;
    };
    for (std::int64_t k = 1; k <= 6; ++k) check_workers(make, c.n_obs, k, false);
  }
}

TEST_CASE("Workers: a worked example of who reads what", "[workers]") {
  // 100 observations, chunk 10, preload 2: 5 requests of 20 rows (4 batches of 5). With 2
  // workers, worker 0 reads requests 0, 2, 4 (12 batches) and worker 1 requests 1, 3 (8).
  const cs::SequentialSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5});
  std::vector<std::vector<cs::Slice>> chunks(2);
  for (std::int64_t id = 0; id < 2; ++id) {
    cs::SequentialSampler s = sampler;
    const cs::WorkerInfo worker{.id = id, .num_workers = 2};
    CHECK(s.n_batches(100, worker) == (id == 0 ? 12 : 8));
    for (const support::OwnedRequest& r : support::collect(s.sample(100, worker)))
      chunks[static_cast<std::size_t>(id)].insert(chunks[static_cast<std::size_t>(id)].end(), r.chunks.begin(),
                                                  r.chunks.end());
  }
  CHECK(chunks[0] == std::vector<cs::Slice>{{0, 10}, {10, 20}, {40, 50}, {50, 60}, {80, 90}, {90, 100}});
  CHECK(chunks[1] == std::vector<cs::Slice>{{20, 30}, {30, 40}, {60, 70}, {70, 80}});
  // Six workers: the sixth has no request and yields nothing.
  cs::SequentialSampler s = sampler;
  CHECK(s.n_batches(100, cs::WorkerInfo{.id = 5, .num_workers = 6}) == 0);
  CHECK(support::collect(s.sample(100, cs::WorkerInfo{.id = 5, .num_workers = 6})).empty());
}

TEST_CASE("Workers: an invalid WorkerInfo throws std::invalid_argument", "[workers]") {
  const cs::RandomSampler random({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 2});
  const cs::SequentialSampler sequential({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4});
  SECTION("RandomSampler") { check_invalid_workers(random, 100); }
  SECTION("SequentialSampler") { check_invalid_workers(sequential, 100); }
  SECTION("DistributedSampler, contiguous") {
    check_invalid_workers(cs::DistributedSampler(random, cs::DistInfo{.rank = 1, .world_size = 2}), 100);
  }
  SECTION("DistributedSampler, global") {
    check_invalid_workers(
        cs::DistributedSampler(random, cs::DistInfo{.rank = 1, .world_size = 2}, {.mode = cs::ShardMode::global}), 100);
  }
}

}  // namespace test_workers
