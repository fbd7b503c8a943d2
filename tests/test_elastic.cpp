// SPDX-License-Identifier: MIT
// Elastic restarts in ShardMode::global: a state taken on W ranks (all at the same batch of the
// epoch), round-tripped through text, restores on W' ranks, which read the old ranks' unread
// batches, in order, dealt in blocks. For every (W, W') in 1..6 x 1..6 and each remainder policy:
// drop/rotate read nothing twice and lose fewer than W' batches; pad loses nothing and keeps equal
// batch counts; with W' == W the rest of the epoch is exactly the uninterrupted one. Also two
// restarts in a row, the state after a restart (round-trips, carries the runs), a worked example,
// and the restores that must be refused (contiguous mode on another world size, a worker's state).

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler_state.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_elastic {

namespace {

namespace cs = chunksampler;
using Dist = cs::DistributedSampler<cs::RandomSampler>;
using support::Batches;
using Counts = std::map<std::int64_t, std::int64_t>;

// A global-mode configuration of `world` ranks that every world size up to `max_world` can serve,
// at a drawn epoch.
[[nodiscard]] support::Config random_config(support::ConfigRng& g, cs::Remainder remainder, bool enforce,
                                            std::int64_t world, std::int64_t max_world) {
  support::Config c;
  c.world = world;
  support::draw_shape(g, c, 6, 3);
  c.drop_last = enforce && g.coin();
  c.enforce = enforce;
  c.mode = cs::ShardMode::global;
  c.remainder = remainder;
  c.seed = g.next();
  c.epoch = static_cast<std::uint64_t>(g.between(0, 3));
  const std::int64_t size = g.between(max_world * c.batch, 4 * max_world * c.batch + 20);
  support::place(g, c, size, {.min_offset = 1, .max_offset = 20, .max_after = 20});
  return c;
}

[[nodiscard]] bool pads(const support::Config& c) { return c.enforce && c.remainder == cs::Remainder::pad; }

void add(Counts& counts, const Batches& batches, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  for (std::size_t i = from; i < std::min(to, batches.size()); ++i)
    for (const std::int64_t obs : batches[i]) ++counts[obs];
}

// One job of `world` ranks reading epoch `c.epoch`: fresh, or from `state` (given as its text).
struct Job {
  std::vector<Dist> ranks;
  std::vector<Batches> read;  // what each rank's sample() yields
};

[[nodiscard]] Job run_job(const support::Config& c, std::int64_t world, const std::optional<std::string>& state_text) {
  Job job;
  for (std::int64_t r = 0; r < world; ++r) {
    INFO("rank " << r << " of " << world);
    Dist& d = job.ranks.emplace_back(c.rank(r, world));
    Batches& read = job.read.emplace_back();
    // A refusal is a failure of this scenario only: report it and go on with the others.
    try {
      if (state_text) {
        d.restore(cs::SamplerState::parse(*state_text));
      } else {
        d.set_epoch(c.epoch);
      }
      CHECK(d.epoch() == c.epoch);
      auto range = d.sample(c.n_obs);
      const std::int64_t announced = range.n_batches();
      read = support::observations(support::collect(range));
      CHECK(static_cast<std::int64_t>(read.size()) == announced);
      CHECK(d.epoch() == c.epoch + 1);
    } catch (const std::exception& e) {
      FAIL_CHECK("restore/sample threw: " << e.what());
    }
  }
  return job;
}

// The batches of `read` past each rank's first `done`, rank after rank. With `pad`, the ranks'
// blocks laid end to end run past the `real` batches they were dealt (the deal wrapped around to
// fill the last blocks): those repeats are padding, not unread data, and are left out.
[[nodiscard]] Batches unread(const std::vector<Batches>& read, std::int64_t done, std::int64_t real, bool pad) {
  Batches out;
  std::int64_t position = 0;
  for (const Batches& mine : read) {
    for (std::size_t i = 0; i < mine.size(); ++i, ++position)
      if (static_cast<std::int64_t>(i) >= done && (!pad || position < real)) out.push_back(mine[i]);
  }
  return out;
}

// The old ranks' unread batches dealt among `world` new ranks in blocks, as the new ranks read
// them one after the other: enforce cuts `left.size() / world` each (drop leaves the rest out,
// pad repeats from the start to fill `ceil` each); without it, everything once.
[[nodiscard]] Batches dealt(const support::Config& c, const Batches& left, std::size_t world) {
  if (!c.enforce || left.empty()) return left;
  const std::size_t each = pads(c) ? (left.size() + world - 1) / world : left.size() / world;
  Batches out;
  for (std::size_t i = 0; i < each * world; ++i) out.push_back(left[i % left.size()]);
  return out;
}

// The new ranks' batch counts: equal with enforce_equal_batches, within one without.
void check_counts(const support::Config& c, const std::vector<Batches>& read) {
  std::size_t fewest = SIZE_MAX;
  std::size_t most = 0;
  for (const Batches& b : read) {
    fewest = std::min(fewest, b.size());
    most = std::max(most, b.size());
  }
  if (c.enforce) {
    CHECK(fewest == most);
  } else {
    CHECK(most - fewest <= 1);
  }
}

// What the whole epoch read, against the uninterrupted epoch's coverage: drop/rotate read
// nothing twice, nothing outside it, and lose fewer than `lost_batches_bound` batches' rows;
// pad and no-enforce lose nothing.
void check_epoch(const support::Config& c, const Counts& coverage, const Counts& read,
                 std::int64_t lost_batches_bound) {
  std::int64_t missing = 0;
  for (const auto& [obs, n] : coverage)
    if (!read.contains(obs)) ++missing;
  bool inside = true;
  bool once = true;
  for (const auto& [obs, n] : read) {
    inside = inside && coverage.contains(obs);
    once = once && n == 1;
  }
  CHECK(inside);
  if (pads(c) || !c.enforce) {
    CHECK(missing == 0);
  } else {
    CHECK(missing < lost_batches_bound * c.batch);
  }
  if (!pads(c)) CHECK(once);
}

// The uninterrupted epoch on W ranks and what it covers: the elastic epoch is held to it.
struct Uninterrupted {
  Job job;
  Counts coverage;
  std::int64_t fewest = 0;  // batches of the rank with the fewest
};

[[nodiscard]] Uninterrupted uninterrupted(const support::Config& c, std::int64_t world) {
  Uninterrupted u{run_job(c, world, std::nullopt), {}, INT64_MAX};
  for (const Batches& b : u.job.read) {
    add(u.coverage, b);
    u.fewest = std::min(u.fewest, static_cast<std::int64_t>(b.size()));
  }
  return u;
}

// Every old rank consumed `b` batches; rank 0's state, through text, restores `w2` new ranks.
// Checks the state, the deal of the unread batches and the epoch's coverage; returns the new job.
[[nodiscard]] Job restart(const support::Config& c, const Uninterrupted& u, std::int64_t w, std::int64_t b,
                          std::int64_t w2) {
  const cs::SamplerState state = u.job.ranks[0].state(b);
  CHECK(state.world_size() == w);
  CHECK(support::fields(state).plan_world_size == w);
  CHECK(state.epoch() == c.epoch);
  CHECK(state.batches_done() == b);
  for (const Dist& d : u.job.ranks) CHECK(d.state(b) == state);  // any rank's state serves
  const std::string text = state.to_string();
  CHECK(cs::SamplerState::parse(text) == state);

  Job new_job = run_job(c, w2, text);
  check_counts(c, new_job.read);
  if (w2 == w) {
    // Same world size: exactly the rest of the uninterrupted epoch, batch for batch.
    for (std::size_t r = 0; r < static_cast<std::size_t>(w); ++r) {
      INFO("rank " << r);
      const Batches& all = u.job.read[r];
      CHECK(new_job.read[r] == Batches(all.begin() + b, all.end()));
    }
  }
  // The old ranks' unread batches, in order, dealt in blocks among the new ranks.
  CHECK(support::concat(new_job.read) ==
        dealt(c, unread(u.job.read, b, INT64_MAX, false), static_cast<std::size_t>(w2)));
  Counts read;
  for (const Batches& mine : u.job.read) add(read, mine, 0, static_cast<std::size_t>(b));
  for (const Batches& mine : new_job.read) add(read, mine);
  check_epoch(c, u.coverage, read, w2);
  return new_job;
}

}  // namespace

TEST_CASE("Elastic restore from W to W' ranks over random configurations", "[distributed][global][elastic]") {
  support::ConfigRng g(4242);
  int lossy = 0;
  int repeated = 0;
  int carried = 0;
  for (std::int64_t w = 1; w <= 6; ++w) {
    for (std::int64_t w2 = 1; w2 <= 6; ++w2) {
      for (const cs::Remainder policy : {cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate}) {
        for (int variant = 0; variant < 2; ++variant) {
          const bool enforce = !(variant == 1 && policy == cs::Remainder::drop);
          const support::Config c = random_config(g, policy, enforce, w, std::max(w, w2) + 1);
          INFO(c.describe() << " | W " << w << " -> W' " << w2);
          const Uninterrupted u = uninterrupted(c, w);
          REQUIRE(u.fewest >= 1);
          const std::int64_t n = u.fewest;
          for (const std::int64_t b : {std::int64_t{0}, g.between(1, std::max<std::int64_t>(n - 1, 1)), n}) {
            INFO("each old rank consumed " << b << " of " << n);
            const Job new_job = restart(c, u, w, b, w2);
            const std::int64_t left = static_cast<std::int64_t>(unread(u.job.read, b, INT64_MAX, false).size());
            const std::int64_t got = static_cast<std::int64_t>(support::concat(new_job.read).size());
            if (got < left) ++lossy;
            if (got > left) ++repeated;

            // The new ranks' state round-trips and carries what is left of the W ranks' plan.
            for (const std::int64_t consumed : {std::int64_t{0}, static_cast<std::int64_t>(new_job.read[0].size())}) {
              const cs::SamplerState after = new_job.ranks[0].state(b + consumed);
              for (const Dist& d : new_job.ranks) CHECK(d.state(b + consumed) == after);
              CHECK(after.world_size() == w2);
              CHECK(support::fields(after).plan_world_size == w);  // the epoch's plan is still the W ranks'
              CHECK(after.epoch() == c.epoch);
              CHECK(cs::SamplerState::parse(after.to_string()) == after);
              if (w2 != w && 0 < b && b < n) {
                REQUIRE(support::fields(after).runs.has_value());  // part of the plan is gone: the runs say which
                CHECK_FALSE(support::fields(after).runs->empty());
                CHECK(support::fields(after).dealt_at == b);
                ++carried;
              }
            }
          }
        }
      }
    }
  }
  INFO("lossy " << lossy << " repeated " << repeated << " carried " << carried);
  CHECK(lossy > 50);
  CHECK(repeated > 50);
  CHECK(carried > 300);
}

TEST_CASE("Two elastic restarts in a row: W -> W' -> W''", "[distributed][global][elastic]") {
  // The job counts batches_done as the README's checkpoint loop does: from the epoch's start,
  // including what was read before a restart (after restore(s), sample() yields batch
  // s.batches_done first), so the new ranks' second state is state(b + b2).
  support::ConfigRng g(77);
  int double_restarts = 0;
  for (std::int64_t w = 1; w <= 6; ++w) {
    for (std::int64_t w2 = 1; w2 <= 6; ++w2) {
      for (const cs::Remainder policy : {cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate}) {
        const bool enforce = !(policy == cs::Remainder::drop && g.between(0, 3) == 0);
        const support::Config c = random_config(g, policy, enforce, w, std::max(w, w2) + 1);
        const std::int64_t w3 = g.between(1, 6);
        INFO(c.describe() << " | W " << w << " -> W' " << w2 << " -> W'' " << w3);
        const Uninterrupted u = uninterrupted(c, w);
        REQUIRE(u.fewest >= 1);
        const std::int64_t n = u.fewest;
        for (const std::int64_t b : {g.between(0, n - 1), n}) {
          const Job new_job = restart(c, u, w, b, w2);
          const auto n2 = static_cast<std::int64_t>(new_job.read.back().size());
          const std::int64_t b2 = g.between(0, n2);
          INFO("each old rank consumed " << b << " of " << n << ", each new rank " << b2 << " of " << n2);
          const cs::SamplerState state2 = new_job.ranks[0].state(b + b2);
          const std::string text2 = state2.to_string();
          CHECK(cs::SamplerState::parse(text2) == state2);

          // Restored on W' ranks again: exactly the rest of the W' job.
          const Job again = run_job(c, w2, text2);
          for (std::size_t r = 0; r < static_cast<std::size_t>(w2); ++r) {
            INFO("W' rank " << r);
            const Batches& all = new_job.read[r];
            const std::size_t from = std::min(static_cast<std::size_t>(b2), all.size());
            CHECK(again.read[r] == Batches(all.begin() + static_cast<std::ptrdiff_t>(from), all.end()));
          }

          // Restored on W'' ranks: the W' ranks' unread batches (padding aside), dealt anew.
          const Job third = run_job(c, w3, text2);
          ++double_restarts;
          check_counts(c, third.read);
          const auto left = static_cast<std::int64_t>(unread(u.job.read, b, INT64_MAX, false).size());
          const Batches left2 = unread(new_job.read, b2, left, pads(c));
          CHECK(support::concat(third.read) == dealt(c, left2, static_cast<std::size_t>(w3)));
          Counts read;
          for (const Batches& mine : u.job.read) add(read, mine, 0, static_cast<std::size_t>(b));
          for (const Batches& mine : new_job.read) add(read, mine, 0, static_cast<std::size_t>(b2));
          for (const Batches& mine : third.read) add(read, mine);
          check_epoch(c, u.coverage, read, w2 + w3);
        }
      }
    }
  }
  CHECK(double_restarts == 6 * 6 * 3 * 2);
}

TEST_CASE("A state taken after an elastic restart at the end of the epoch has nothing left",
          "[distributed][global][elastic]") {
  // 4 ranks read all of their 3 batches; the job restarts on 2 ranks, which have nothing left, and
  // checkpoints again: restoring that state, on any number of ranks, must not replay the epoch.
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 9});
  const cs::DistributedOptions options{.mode = cs::ShardMode::global};
  Dist old(base, cs::DistInfo{.rank = 0, .world_size = 4}, options);
  REQUIRE(support::observations(support::epoch(old, 120)).size() == 3);
  const std::string text = old.state(3).to_string();
  Dist restarted(base, cs::DistInfo{.rank = 0, .world_size = 2}, options);
  restarted.restore(cs::SamplerState::parse(text));
  CHECK(support::observations(support::epoch(restarted, 120)).empty());
  const std::string text2 = restarted.state(3).to_string();
  for (const std::int64_t w : {1, 2, 3}) {
    INFO("world size " << w << ", state " << text2);
    Dist again(base, cs::DistInfo{.rank = 0, .world_size = w}, options);
    again.restore(cs::SamplerState::parse(text2));
    CHECK(support::observations(support::epoch(again, 120)).empty());
  }
}

TEST_CASE("Elastic worked example: 120 observations, 4 ranks to 3 after one batch", "[distributed][global][elastic]") {
  // chunk 10, batch 10: 12 plan batches, 3 per rank; after one each, batches 1-3, 4-6, 7-9, 10-12
  // of the plan are unread: 8 batches for 3 ranks.
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 9});
  const auto policy = GENERATE(cs::Remainder::drop, cs::Remainder::pad);
  INFO(support::policy_name(policy));
  const cs::DistributedOptions options{.mode = cs::ShardMode::global, .remainder = policy};
  Counts read;
  std::string text;
  for (std::int64_t r = 0; r < 4; ++r) {
    Dist d(base, cs::DistInfo{.rank = r, .world_size = 4}, options);
    const Batches b = support::observations(support::epoch(d, 120));
    REQUIRE(b.size() == 3);
    add(read, b, 0, 1);
    text = d.state(1).to_string();
  }
  CHECK(text.ends_with("batches_done=1 world_size=4 num_workers=1 worker=0 plan_world_size=4 runs=all dealt_at=0"));
  std::int64_t new_batches = 0;
  for (std::int64_t r = 0; r < 3; ++r) {
    INFO("new rank " << r);
    Dist d(base, cs::DistInfo{.rank = r, .world_size = 3}, options);
    d.restore(cs::SamplerState::parse(text));
    const Batches b = support::observations(support::epoch(d, 120));
    CHECK(b.size() == (policy == cs::Remainder::drop ? 2U : 3U));  // 8 / 3 rounded down, or up with pad
    add(read, b);
    new_batches += static_cast<std::int64_t>(b.size());
    const cs::SamplerState after = d.state(1);  // batches_done counts from the epoch's start
    CHECK(after.world_size() == 3);
    CHECK(support::fields(after).plan_world_size == 4);
    CHECK(support::fields(after).runs == std::vector<cs::BatchRun>{{1, 3}, {4, 6}, {7, 9}, {10, 12}});
    CHECK(support::fields(after).dealt_at == 1);  // each old rank had read one batch when the rest was re-dealt
    CHECK(after.to_string().ends_with(
        "world_size=3 num_workers=1 worker=0 plan_world_size=4 runs=1-3,4-6,7-9,10-12 dealt_at=1"));
  }
  if (policy == cs::Remainder::drop) {
    CHECK(new_batches == 6);
    CHECK(read.size() == 100);  // two unread batches (20 observations) are left out
    CHECK(std::ranges::all_of(read, [](const auto& kv) { return kv.second == 1; }));
  } else {
    CHECK(new_batches == 9);
    CHECK(read.size() == 120);  // every observation, one batch repeated
    std::int64_t draws = 0;
    for (const auto& kv : read) draws += kv.second;
    CHECK(draws == 130);
  }
}

TEST_CASE("Elastic restore needs global mode and a state without workers", "[distributed][elastic]") {
  using Catch::Matchers::Contains;
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 1});
  SECTION("contiguous mode refuses another world size, accepts its own") {
    Dist two(base, cs::DistInfo{.rank = 0, .world_size = 2});
    (void)support::epoch(two, 200);
    const cs::SamplerState state = two.state(3);
    for (const std::int64_t w : {1, 3, 4}) {
      INFO("world size " << w);
      Dist other(base, cs::DistInfo{.rank = 0, .world_size = w});
      CHECK_THROWS_AS(other.restore(state), std::invalid_argument);
      CHECK_THROWS_WITH(other.restore(state), Contains("world_size") && Contains("global"));
    }
    Dist same(base, cs::DistInfo{.rank = 1, .world_size = 2});
    CHECK_NOTHROW(same.restore(state));
  }
  SECTION("global mode refuses a worker's state on another world size") {
    const cs::DistributedOptions global{.mode = cs::ShardMode::global};
    Dist two(base, cs::DistInfo{.rank = 0, .world_size = 2}, global);
    (void)support::collect(two.sample(200, cs::WorkerInfo{.id = 1, .num_workers = 2}));
    const cs::SamplerState state = two.state(2);
    CHECK(state.num_workers() == 2);
    Dist three(base, cs::DistInfo{.rank = 0, .world_size = 3}, global);
    CHECK_THROWS_AS(three.restore(state), std::invalid_argument);
    CHECK_THROWS_WITH(three.restore(state), Contains("worker"));
    Dist same(base, cs::DistInfo{.rank = 1, .world_size = 2}, global);
    CHECK_NOTHROW(same.restore(state));
  }
}

}  // namespace test_elastic
