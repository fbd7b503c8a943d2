// SPDX-License-Identifier: MIT
// Exact resume: for many random configurations of every sampler (Random, Sequential, Distributed in
// contiguous and global mode, each rank, with workers, in later epochs), a state taken after any
// batch, saved as text and restored into a fresh sampler continues the epoch batch for batch and
// then plays the next epoch from its start; a restored sampler's own states resume as well; and a
// restore to the middle of an epoch over 10^12 observations serves its requests at once.

#include <chunksampler.hpp>

#include "harness.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace test_resume {

namespace {

namespace cs = chunksampler;
using support::after;
using support::Batches;
using support::check_resume;
using support::OwnedRequest;
using support::tail;
using support::Tally;

std::uint64_t random_epoch(support::ConfigRng& g) {
  constexpr std::uint64_t epochs[] = {0, 1, 2, 3, 6, 1'000'000'007};
  return epochs[g.between(0, 5)];
}

// Every rank of a synchronous job is at the same point, so any rank's state is every rank's:
// the states of all ranks after the same batches of the same epoch are equal.
template <class MakeRank>
void check_ranks_agree(const MakeRank& make_rank, std::int64_t world, std::int64_t n_obs, std::uint64_t epoch,
                       support::ConfigRng& g) {
  std::vector<cs::SamplerState> states;
  const std::int64_t b = g.between(0, 3);
  for (std::int64_t rank = 0; rank < world; ++rank) {
    auto dist = make_rank(rank);
    dist.set_epoch(epoch);
    (void)support::collect(dist.sample(n_obs));
    states.push_back(dist.state(b));
  }
  for (const cs::SamplerState& state : states) CHECK(state == states.front());
}

// Every worker count from 1 to 4 over the trials, every worker of it.
template <class Make>
void check_workers(const Make& make, std::int64_t n_obs, std::uint64_t epoch, std::int64_t num_workers,
                   support::ConfigRng& g, Tally& tally) {
  for (std::int64_t id = 0; id < num_workers; ++id)
    check_resume(make, n_obs, epoch, cs::WorkerInfo{.id = id, .num_workers = num_workers}, g, tally);
}

// The features the random configurations exercised, so none silently drops out of the test.
struct Coverage {
  std::set<std::string> seen;
  void note(const support::Config& c) {
    seen.insert(c.sequential ? "sequential" : "random");
    if (c.replacement) seen.insert("replacement");
    if (c.num_samples) seen.insert("num_samples");
    if (c.drop_last) seen.insert("drop_last");
    if (c.mask) seen.insert("mask");
    if (c.world > 1) seen.insert("world > 1");
    if (!c.enforce) seen.insert("unequal batches");
    seen.insert(support::policy_name(c.remainder));
  }
};

// Exact resume of every rank (and every worker of it) of DistributedSamplers in `mode`, over random
// configurations drawn from `seed`: each rank's stream, and the ranks' agreement on the epoch.
void check_distributed(std::uint64_t seed, cs::ShardMode mode) {
  support::ConfigRng g(seed);
  Tally tally;
  Coverage coverage;
  for (int trial = 0; trial < 60; ++trial) {
    support::Config c = support::servable_config(g, {.max_world = 4});
    c.mode = mode;
    INFO(c.describe());
    coverage.note(c);
    const std::uint64_t epoch = random_epoch(g);
    const std::int64_t workers = trial % 4 + 1;
    c.with_base([&](const auto& base) {
      const auto make_rank = [&](std::int64_t rank) {
        return cs::DistributedSampler(base, cs::DistInfo{.rank = rank, .world_size = c.world}, c.dist_options());
      };
      check_ranks_agree(make_rank, c.world, c.n_obs, epoch, g);
      for (std::int64_t rank = 0; rank < c.world; ++rank) {
        INFO("rank " << rank << " of " << c.world);
        check_workers([&] { return make_rank(rank); }, c.n_obs, epoch, workers, g, tally);
      }
    });
  }
  for (const char* feature :
       {"sequential", "replacement", "num_samples", "world > 1", "unequal batches", "drop", "pad", "rotate"}) {
    INFO(feature);
    CHECK(coverage.seen.contains(feature));
  }
  CHECK(tally.streams > 250);
  CHECK(tally.points > 1500);
  CHECK(tally.mid_request > 700);
}

}  // namespace

TEST_CASE("resume: RandomSampler and SequentialSampler continue at every batch", "[resume]") {
  support::ConfigRng g(30001);
  Tally tally;
  Coverage coverage;
  for (int trial = 0; trial < 120; ++trial) {
    const support::Config c = support::servable_config(g, {});
    INFO(c.describe());
    coverage.note(c);
    const std::uint64_t epoch = random_epoch(g);
    const std::int64_t workers = trial % 4 + 1;
    c.with_base([&](const auto& base) { check_workers([&] { return base; }, c.n_obs, epoch, workers, g, tally); });
  }
  for (const char* feature : {"random", "sequential", "replacement", "num_samples", "drop_last", "mask"}) {
    INFO(feature);
    CHECK(coverage.seen.contains(feature));
  }
  CHECK(tally.streams > 250);
  CHECK(tally.points > 2000);
  CHECK(tally.mid_request > 1000);
}

TEST_CASE("resume: DistributedSampler with contiguous shards, on every rank", "[resume]") {
  check_distributed(30002, cs::ShardMode::contiguous);
}

TEST_CASE("resume: DistributedSampler with a global shuffle, on every rank of the same world", "[resume]") {
  check_distributed(30003, cs::ShardMode::global);
}

TEST_CASE("resume: a restored worker sampler states its worker's point before it plays", "[resume]") {
  // Taking a state right after restore (a checkpoint before the first step of the resumed run)
  // gives back the restored point: same epoch, same worker.
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
  const cs::WorkerInfo worker{.id = 2, .num_workers = 3};
  auto played = base;
  played.set_epoch(4);
  const Batches batches = support::observations(support::collect(played.sample(100, worker)));
  REQUIRE(batches.size() == 8);  // requests 2, 5, 8, 11 of 13 (2 batches each)
  const cs::SamplerState state = played.state(3);
  auto idle = base;
  idle.restore(state);
  CHECK(idle.state(3) == state);
  auto again = base;
  again.restore(idle.state(5));
  REQUIRE(support::observations(support::collect(again.sample(100, worker))) == tail(batches, 5));
}

TEST_CASE("resume: DistributedSampler over a num_samples budget above a rank's rows", "[resume]") {
  // Contiguous shards with num_samples (no replacement) larger than a shard: each rank takes
  // num_samples / world_size of its rows. 107 observations, 3 ranks, num_samples 90: 30 each.
  const cs::RandomSampler base({.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = 11, .num_samples = 90});
  support::ConfigRng g(30004);
  Tally tally;
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    const auto make = [&] { return cs::DistributedSampler(base, cs::DistInfo{.rank = rank, .world_size = 3}); };
    REQUIRE(make().n_batches(107) == 6);
    check_workers(make, 107, 1, 2, g, tally);
  }
}

namespace {

// The first `count` requests of a stream, or all if it has fewer.
template <class Range>
std::vector<OwnedRequest> first_requests(Range&& range, std::size_t count) {
  std::vector<OwnedRequest> taken;
  for (const cs::LoadRequest& request : range) {
    if (taken.size() == count) break;
    taken.push_back(support::own(request));
  }
  return taken;
}

// Restores `make()` samplers over `n_obs` to the middle of epoch `epoch` and takes a few
// requests: valid, full-sized, bounded buffers, and the same batches as a sampler restored one
// batch earlier that skips that batch.
template <class Make>
void check_huge_restore(const Make& make, std::int64_t n_obs, std::uint64_t epoch, cs::WorkerInfo worker,
                        std::int64_t expected_batches) {
  constexpr std::int64_t chunk = 256;
  constexpr std::int64_t preload = 64;
  constexpr std::int64_t batch = 256;
  // The library's part (counting, restoring, the first requests), timed apart from the checks.
  const auto started = std::chrono::steady_clock::now();
  auto probe = make();
  probe.set_epoch(epoch);
  const std::int64_t n = probe.n_batches(n_obs, worker);
  REQUIRE(n == expected_batches);
  const std::int64_t done = n / 2 + 7;
  // States speak of the epoch the last sample() started, for the worker that started it; the
  // range is not read (its first request is computed only when iterated).
  (void)probe.sample(n_obs, worker);

  auto resumed = make();
  resumed.restore(cs::SamplerState::parse(probe.state(done).to_string()));
  const std::vector<OwnedRequest> requests = first_requests(resumed.sample(n_obs, worker), 3);
  auto earlier = make();
  earlier.restore(cs::SamplerState::parse(probe.state(done - 1).to_string()));
  const std::vector<OwnedRequest> reference = first_requests(earlier.sample(n_obs, worker), 4);
  const auto elapsed = std::chrono::steady_clock::now() - started;

  REQUIRE(requests.size() == 3);
  for (const OwnedRequest& request : requests) {
    REQUIRE(request.chunks.size() <= static_cast<std::size_t>(preload));
    REQUIRE(request.buffer_size() <= chunk * preload);
    for (const cs::Slice& c : request.chunks) {
      // n_obs is a multiple of the chunk size: every chunk is full and starts on the grid
      CHECK(c.size() == chunk);
      CHECK(c.start % chunk == 0);
      CHECK(c.start >= 0);
      CHECK(c.stop <= n_obs);
    }
    REQUIRE_FALSE(request.batches.empty());
    std::vector<std::int64_t> positions = request.positions();
    for (const auto& b : request.batches) CHECK(static_cast<std::int64_t>(b.size()) == batch);
    std::ranges::sort(positions);
    CHECK(std::ranges::adjacent_find(positions) == positions.end());
    CHECK(positions.front() >= 0);
    CHECK(positions.back() < request.buffer_size());
  }
  // The first request is the one holding batch `done`, from that batch on: the sampler resumed
  // one batch earlier yields the same request with one batch more.
  REQUIRE(reference.front().chunks == requests.front().chunks);
  REQUIRE(reference.front().batches.size() == requests.front().batches.size() + 1);
  const Batches got = support::observations(requests);
  Batches expected = support::observations(reference);
  expected.erase(expected.begin());
  REQUIRE(expected.size() >= got.size());
  expected.resize(got.size());
  REQUIRE(got == expected);
  for (const auto& b : got)
    for (const std::int64_t obs : b) REQUIRE((obs >= 0 && obs < n_obs));
  // Work linear in n_obs, in its 3.9 * 10^9 chunks or even in its 6 * 10^7 requests takes
  // seconds to minutes in any build; this takes milliseconds.
  CHECK(elapsed < std::chrono::seconds(1));
}

}  // namespace

TEST_CASE("resume: the middle of an epoch over 10^12 observations is served at once", "[resume]") {
  constexpr std::int64_t n_obs = 1'000'000'000'000;
  const cs::RandomSampler base({.chunk_size = 256, .preload_nchunks = 64, .batch_size = 256, .seed = 12});
  // The epoch's plan sizes the buffers once: one request, not the epoch.
  const auto plan = base.plan(n_obs, 5);
  CHECK(plan.max_chunks() <= 64 + 4);  // a request's chunks, two cut at its ends, a range's two short ones
  CHECK(plan.max_positions() <= 256 * 64);

  SECTION("RandomSampler") {
    check_huge_restore([&] { return base; }, n_obs, 5, {}, 3'906'250'000);  // 10^12 / 256
    // The resumed request is the plan's request holding the batch, filled on its own.
    auto resumed = base;
    const std::int64_t done = 3'906'250'000 / 2 + 7;
    resumed.restore(cs::detail::StateAccess::make({.fingerprint = base.fingerprint(),
                                                   .seed = 12,
                                                   .epoch = 5,
                                                   .n_obs = n_obs,
                                                   .batches_done = done,
                                                   .world_size = 1,
                                                   .plan_world_size = 1,
                                                   .num_workers = 1,
                                                   .worker = 0,
                                                   .runs = std::nullopt,
                                                   .dealt_at = 0}));
    const std::vector<OwnedRequest> requests = first_requests(resumed.sample(n_obs), 1);
    cs::RequestBuffers buffers;
    const std::int64_t k = plan.request_of(done);
    plan.fill(k, buffers);
    REQUIRE(requests.at(0).chunks == buffers.chunks);
    const std::vector<std::int64_t> positions = requests.at(0).positions();
    const auto from = static_cast<std::ptrdiff_t>((done - plan.request_begin(k)) * 256);
    REQUIRE(positions == std::vector<std::int64_t>(buffers.positions.begin() + from, buffers.positions.end()));
  }
  SECTION("RandomSampler, one worker of three") {
    auto probe = base;
    const std::int64_t share = probe.n_batches(n_obs, {.id = 1, .num_workers = 3});
    // 61035156.25 requests of 64 batches: worker 1 of 3 holds requests 1, 4, ... of 61035157
    CHECK(share == 20'345'052 * 64);
    check_huge_restore([&] { return base; }, n_obs, 2, {.id = 1, .num_workers = 3}, share);
  }
  SECTION("DistributedSampler, global shuffle over 8 ranks") {
    for (const std::int64_t rank : {0, 3, 7}) {
      INFO("rank " << rank);
      const auto make = [&] {
        return cs::DistributedSampler(base, cs::DistInfo{.rank = rank, .world_size = 8},
                                      {.mode = cs::ShardMode::global});
      };
      check_huge_restore(make, n_obs, 9, {}, 3'906'250'000 / 8);
    }
  }
  SECTION("DistributedSampler, contiguous shards over 8 ranks") {
    const auto make = [&] { return cs::DistributedSampler(base, cs::DistInfo{.rank = 5, .world_size = 8}); };
    check_huge_restore(make, n_obs, 4, {}, 3'906'250'000 / 8);
  }
}

}  // namespace test_resume
