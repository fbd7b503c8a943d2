// SPDX-License-Identifier: MIT
// What a restore accepts and what it refuses, and the counts a pending restore reports: a state
// is tied to its epoch's n_obs (refused for any other, on every path), a point past the epoch's
// end is refused on any world size, n_batches() counts the restored epoch from its start and
// n_batches_left() what the next sample() yields, and shard() names the restored epoch's window.
// A sweep restores states into samplers that differ in exactly one setting: each is refused, but
// for what the README allows (global mode: another world size, or workers reading a state taken
// without them), which yields exactly the rest of the epoch. A state records the generation of
// its sampler's order: one of another generation is refused, and one written by chunksampler 0.3
// (format 5, which had none) restores as generation 1.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "harness.hpp"
#include "restore_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ranges>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_restore_checks {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;
using support::Batches;
using support::restore::Dist;
using support::restore::global;
using support::restore::issue_base;
using support::restore::state_at_37;

// The message of the std::invalid_argument `f` throws, or "" if it throws nothing.
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a state is refused for another n_obs, naming both sizes", "[restore]") {
  SECTION("RandomSampler: 100 rows, then 200") {
    cs::RandomSampler s({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    (void)s.sample(100);
    const cs::SamplerState st = s.state(3);
    CHECK(st.n_obs() == 100);
    cs::RandomSampler t({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    t.restore(cs::SamplerState::parse(st.to_string()));
    // (Catch2 v2's combined matchers hold their parts by reference: spelled out in each check.)
    CHECK_THROWS_WITH(t.sample(200), Contains("n_obs = 100") && Contains("n_obs = 200"));
    CHECK_THROWS_WITH(t.n_batches(200), Contains("n_obs = 100") && Contains("n_obs = 200"));
    CHECK_THROWS_WITH(t.n_batches_left(200), Contains("n_obs = 100") && Contains("n_obs = 200"));
    CHECK(t.epoch() == 0);  // refused, not half-applied
    // The state still restores the epoch it was taken in: 25 batches, 22 left.
    CHECK(t.n_batches(100) == 25);
    CHECK(t.n_batches_left(100) == 22);
    CHECK(support::n_batches(support::collect(t.sample(100))) == 22);
  }
  SECTION("an elastic restore: 5,000 rows on 4 ranks, then 10,000 on 3") {
    const cs::SamplerState st = state_at_37(5000);
    Dist d(issue_base, cs::DistInfo{.rank = 0, .world_size = 3}, global);
    d.restore(st);
    CHECK_THROWS_WITH(d.sample(10'000), Contains("n_obs = 5000") && Contains("n_obs = 10000"));
    CHECK_THROWS_WITH(d.n_batches(10'000), Contains("n_obs = 5000"));
    CHECK_NOTHROW(d.sample(5000));
  }
  SECTION("a state at an epoch's start that no sample() began restores into any n_obs") {
    cs::RandomSampler s({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    s.set_epoch(4);
    const cs::SamplerState start = s.state(0);
    CHECK_FALSE(start.n_obs());
    CHECK(start.to_string().find(" n_obs=any ") != std::string::npos);
    CHECK_THROWS_WITH(s.state(1), Contains("batches_done (1) must be 0 before sample() has begun the epoch"));
    cs::RandomSampler t({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    t.restore(start);
    CHECK(t.n_batches(200) == 50);
    CHECK(support::n_batches(support::collect(t.sample(200))) == 50);
  }
}

TEST_CASE("an elastic restore past the end of the epoch is refused on any world size", "[restore]") {
  // 10,007 rows on 4 ranks of batches of 32: 78 batches per rank.
  Dist a(issue_base, cs::DistInfo{.rank = 0, .world_size = 4}, global);
  CHECK(a.n_batches(10'007) == 78);
  (void)a.sample(10'007);
  for (const std::int64_t world : {1, 3, 4, 5, 8}) {
    CAPTURE(world);
    for (const std::int64_t done : {79, 1000}) {
      Dist d(issue_base, cs::DistInfo{.rank = 0, .world_size = world}, global);
      d.restore(a.state(done));
      const std::string past_the_end = fmt::format("state's batches_done ({}) exceed the 78 batches", done);
      CHECK_THROWS_WITH(d.sample(10'007), Contains(past_the_end));
      CHECK_THROWS_WITH(d.n_batches(10'007), Contains(past_the_end));
      CHECK(d.epoch() == 0);
    }
    // At the very end: nothing left, on any world size.
    Dist end(issue_base, cs::DistInfo{.rank = 0, .world_size = world}, global);
    end.restore(a.state(78));
    CHECK(end.n_batches_left(10'007) == 0);
    CHECK(end.n_batches(10'007) == 78);
    CHECK(support::collect(end.sample(10'007)).empty());
  }
}

TEST_CASE("a state taken without workers: refused by workers in contiguous mode, re-dealt in global mode",
          "[restore][workers]") {
  const cs::WorkerInfo two{.id = 1, .num_workers = 2};
  SECTION("contiguous mode refuses it on the same world size (another is refused at restore)") {
    Dist a(issue_base, cs::DistInfo{.rank = 1, .world_size = 4});
    (void)a.sample(10'007);
    const cs::SamplerState st = a.state(20);
    Dist d(issue_base, cs::DistInfo{.rank = 1, .world_size = 4});
    d.restore(st);
    CHECK_THROWS_WITH(d.sample(10'007, two), Contains("the state is of worker 0 of 1"));
    CHECK_THROWS_WITH(d.n_batches(10'007, two), Contains("the state is of worker 0 of 1"));
    Dist e(issue_base, cs::DistInfo{.rank = 1, .world_size = 3});
    CHECK_THROWS_WITH(e.restore(st), Contains("contiguous shards cannot change world size"));
  }
  SECTION("global mode accepts it on the same world size as on another: the workers split the rest") {
    for (const std::int64_t world : {4, 3}) {
      CAPTURE(world);
      const cs::SamplerState st = state_at_37(10'007);
      // On the same world size the rest of rank 1's epoch is its own 41 unread batches.
      Dist whole(issue_base, cs::DistInfo{.rank = 1, .world_size = world}, global);
      whole.restore(st);
      const std::int64_t left = whole.n_batches_left(10'007);
      if (world == 4) CHECK(left == 78 - 37);
      Batches rest = support::observations(support::collect(whole.sample(10'007)));
      Batches split;
      for (std::int64_t id = 0; id < 2; ++id) {
        Dist w(issue_base, cs::DistInfo{.rank = 1, .world_size = world}, global);
        w.restore(st);
        const cs::WorkerInfo worker{.id = id, .num_workers = 2};
        const std::int64_t mine = w.n_batches_left(10'007, worker);
        CHECK(w.n_batches(10'007, worker) == 37 + mine);
        const Batches read = support::observations(support::collect(w.sample(10'007, worker)));
        CHECK(static_cast<std::int64_t>(read.size()) == mine);
        split.insert(split.end(), read.begin(), read.end());
      }
      std::ranges::sort(rest);
      std::ranges::sort(split);
      CHECK(split == rest);
      if (world == 4) {
        Dist alone(issue_base, cs::DistInfo{.rank = 1, .world_size = 4}, global);
        Batches uninterrupted = support::observations(support::collect(alone.sample(10'007)));
        uninterrupted.erase(uninterrupted.begin(), uninterrupted.begin() + 37);
        std::ranges::sort(uninterrupted);
        CHECK(split == uninterrupted);
      }
    }
  }
  SECTION("a worker's state is refused without workers, and by another split") {
    for (const auto mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
      Dist a(issue_base, cs::DistInfo{.rank = 0, .world_size = 2}, {.mode = mode});
      (void)a.sample(10'007, two);
      const cs::SamplerState st = a.state(5);
      Dist d(issue_base, cs::DistInfo{.rank = 0, .world_size = 2}, {.mode = mode});
      d.restore(st);
      CHECK_THROWS_WITH(d.sample(10'007), Contains("the state is of worker 1 of 2"));
      CHECK_THROWS_WITH(d.sample(10'007, {.id = 1, .num_workers = 3}), Contains("the state is of worker 1 of 2"));
      CHECK(support::n_batches(support::collect(d.sample(10'007, two))) == d.n_batches(10'007, two) - 5);
    }
  }
}

TEST_CASE("n_batches(), n_batches_left() and shard() speak of the restored epoch", "[restore]") {
  SECTION("37 batches read on 4 ranks, resumed on 8 and on 3") {
    const cs::SamplerState st = state_at_37(10'007);
    for (const auto& [world, left] : {std::pair<std::int64_t, std::int64_t>{8, 20}, {3, 54}}) {
      CAPTURE(world);
      Dist d(issue_base, cs::DistInfo{.rank = 0, .world_size = world}, global);
      d.restore(st);
      CHECK(d.n_batches(10'007) == 37 + left);
      CHECK(d.n_batches(10'007) == 37 + left);
      CHECK(d.n_batches_left(10'007) == left);
      CHECK(support::n_batches(support::collect(d.sample(10'007))) == left);
      // Played: the next epoch is a fresh one on this world size.
      CHECK(d.n_batches(10'007) == d.n_batches_left(10'007));
    }
  }
  SECTION("shard() is the window of the 4-rank plan being resumed on 3 ranks") {
    Dist a(issue_base, cs::DistInfo{.rank = 0, .world_size = 4}, global);
    CHECK(a.shard(10'100) == cs::Slice{0, 9984});
    (void)a.sample(10'100);
    const cs::SamplerState st = a.state(37);
    std::int64_t largest = -1;
    for (std::int64_t r = 0; r < 3; ++r) {
      Dist d(issue_base, cs::DistInfo{.rank = r, .world_size = 3}, global);
      CHECK(d.shard(10'100) == cs::Slice{0, 10'080});  // a fresh 3-rank epoch's window
      d.restore(st);
      CHECK(d.shard(10'100) == cs::Slice{0, 9984});
      CHECK(d.shard(10'100, 0) == cs::Slice{0, 9984});
      CHECK(d.shard(10'100, 1) == cs::Slice{0, 10'080});  // not the restored epoch
      for (const auto& batch : support::observations(support::collect(d.sample(10'100))))
        for (const std::int64_t obs : batch) largest = std::max(largest, obs);
      CHECK(d.shard(10'100) == cs::Slice{0, 10'080});  // epoch 1, fresh
    }
    CHECK(largest < 9984);
  }
}

TEST_CASE("MixtureSampler under a contiguous DistributedSampler reads every row of its datasets",
          "[restore][mixture]") {
  using Mixture = cs::DistributedSampler<cs::MixtureSampler>;
  SECTION("the worked example: 60, 30 and 30 rows, chunk 10, on 1, 2 and 3 ranks") {
    const cs::MixtureSampler m({60, 30, 30},
                               {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .weights = {2, 1, 1}});
    for (const std::int64_t world : {1, 2, 3}) {
      CAPTURE(world);
      std::set<std::int64_t> read;
      for (std::int64_t r = 0; r < world; ++r) {
        Mixture dist(m, cs::DistInfo{.rank = r, .world_size = world});
        for (int epoch = 0; epoch < 20; ++epoch)
          for (const auto& batch : support::observations(support::collect(dist.sample(120))))
            read.insert(batch.begin(), batch.end());
      }
      CHECK(read.size() == 120);
    }
  }
  SECTION("random sizes that chunk_size divides, weights and world sizes: every row, once per rank") {
    support::ConfigRng g(230004);
    int served = 0;
    for (int trial = 0; trial < 120; ++trial) {
      const std::int64_t world = g.between(1, 6);
      const std::int64_t chunk = g.between(1, 6);
      const std::int64_t preload = g.between(1, 3);
      const std::int64_t batch = g.divisor_of(chunk * preload);
      std::vector<std::int64_t> sizes;
      std::vector<double> weights;
      for (std::int64_t d = g.between(1, 4); d > 0; --d) {
        sizes.push_back(chunk * g.between(1, 3 * world + 2));
        weights.push_back(static_cast<double>(sizes.back()));  // each rank's share of d covers its part
      }
      std::int64_t total = 0;
      for (const std::int64_t s : sizes) total += s;
      // Four times the collection per rank: every rank reads its part of every dataset whole.
      const cs::MixtureSampler m(sizes, {.chunk_size = chunk,
                                         .preload_nchunks = preload,
                                         .batch_size = batch,
                                         .seed = g.next(),
                                         .num_samples = 4 * world * total,
                                         .weights = weights});
      // Pad cuts the collection into balanced shards that tile it, so every row is promised.
      const cs::DistributedOptions pad{.remainder = cs::Remainder::pad};
      INFO("sizes " << fmt::format("{}", sizes) << " chunk " << chunk << " preload " << preload << " batch " << batch
                    << " world " << world);
      std::vector<std::set<std::int64_t>> read(static_cast<std::size_t>(world));
      const bool servable = std::ranges::all_of(std::views::iota(std::int64_t{0}, world), [&](std::int64_t r) {
        return refusal([&] { Mixture(m, cs::DistInfo{.rank = r, .world_size = world}, pad).validate(total); }).empty();
      });
      if (!servable) continue;
      ++served;
      for (std::int64_t r = 0; r < world; ++r) {
        Mixture dist(m, cs::DistInfo{.rank = r, .world_size = world}, pad);
        for (const auto& rows : support::observations(support::collect(dist.sample(total))))
          read[static_cast<std::size_t>(r)].insert(rows.begin(), rows.end());
      }
      std::set<std::int64_t> all;
      std::size_t sum = 0;
      for (const auto& mine : read) {
        all.insert(mine.begin(), mine.end());
        sum += mine.size();
      }
      CHECK(sum == all.size());  // the ranks' parts are disjoint
      CHECK(static_cast<std::int64_t>(all.size()) == total);
      CHECK((all.empty() || (*all.begin() == 0 && *all.rbegin() == total - 1)));
    }
    CHECK(served > 80);
  }
}

namespace {

// One setting changed between the job that took a state and the one that restores it.
struct Variant {
  const char* setting;
  std::function<void(support::Config&)> change;
  bool workers = false;  // the restoring job samples with 2 workers
};

// Every rank's batches of the epoch, each rank's from batch `from` on, rank after rank.
Batches job_rest(const support::Config& c, std::int64_t world, std::int64_t from) {
  Batches out;
  for (std::int64_t r = 0; r < world; ++r) {
    Dist d = c.rank(r, world);
    d.set_epoch(c.epoch);
    const Batches mine = support::observations(support::collect(d.sample(c.n_obs)));
    if (from < static_cast<std::int64_t>(mine.size())) out.insert(out.end(), mine.begin() + from, mine.end());
  }
  return out;
}

// Restores `text` into every rank of the changed job (with `workers`, into each worker of each
// rank); returns what they yield, or the refusal. n_batches and n_batches_left must agree with
// the stream, and refuse exactly when sample() does.
std::optional<Batches> resume_job(const support::Config& changed, const std::string& text, bool workers,
                                  std::string& why) {
  Batches out;
  const cs::SamplerState state = cs::SamplerState::parse(text);
  const std::int64_t k = workers ? 2 : 1;
  for (std::int64_t r = 0; r < changed.world; ++r)
    for (std::int64_t id = 0; id < k; ++id) {
      const cs::WorkerInfo worker{.id = id, .num_workers = k};
      Dist d = changed.rank(r);
      why = refusal([&] { d.restore(state); });
      if (!why.empty()) return std::nullopt;
      std::int64_t whole = -1;
      std::int64_t left = -1;
      const std::string counted = refusal([&] {
        whole = d.n_batches(changed.n_obs, worker);
        left = d.n_batches_left(changed.n_obs, worker);
      });
      std::optional<Batches> read;
      why = refusal([&] { read = support::observations(support::collect(d.sample(changed.n_obs, worker))); });
      CHECK(counted == why);
      if (!why.empty()) return std::nullopt;
      CHECK(whole - left == state.batches_done());
      CHECK(static_cast<std::int64_t>(read->size()) == left);
      out.insert(out.end(), read->begin(), read->end());
    }
  return out;
}

}  // namespace

TEST_CASE("a sweep: states restored into samplers that differ in one setting", "[restore]") {
  const std::vector<Variant> variants = {
      {"nothing", [](support::Config&) {}},
      {"n_obs", [](support::Config& c) { c.n_obs += 1 + static_cast<std::int64_t>(c.seed % 7); }},
      {"seed", [](support::Config& c) { ++c.seed; }},
      {"chunk_size", [](support::Config& c) { c.chunk *= 2; }},
      {"batch_size", [](support::Config& c) { c.batch = c.batch == 1 ? c.chunk * c.preload : 1; }},
      {"preload_nchunks", [](support::Config& c) { c.preload *= 2; }},
      {"mask", [](support::Config& c) { c.mask = c.mask ? std::nullopt : std::optional(cs::Slice{0, c.n_obs - 1}); }},
      {"drop_last", [](support::Config& c) { c.drop_last = !c.drop_last; }},
      {"mode",
       [](support::Config& c) {
         c.mode = c.mode == cs::ShardMode::global ? cs::ShardMode::contiguous : cs::ShardMode::global;
       }},
      {"remainder",
       [](support::Config& c) {
         c.remainder = c.remainder == cs::Remainder::drop ? cs::Remainder::pad : cs::Remainder::drop;
       }},
      {"enforce_equal_batches", [](support::Config& c) { c.enforce = !c.enforce; }},
      {"workers", [](support::Config&) {}, true},
      {"world size (one more)", [](support::Config& c) { ++c.world; }},
      {"world size (one fewer)", [](support::Config& c) { c.world = std::max<std::int64_t>(1, c.world - 1); }},
  };
  support::ConfigRng g(230005);
  std::map<std::string, int> accepted;
  std::map<std::string, int> refused;
  for (int trial = 0; trial < 150; ++trial) {
    support::Config c = support::servable_config(g, {.max_world = 4, .sequential = false, .sampling = false});
    c.world = std::max<std::int64_t>(c.world, 2);
    c.epoch = static_cast<std::uint64_t>(g.between(0, 2));
    // The old job: every rank at the same point of the epoch, as in synchronous training.
    Dist probe = c.rank(0);
    probe.set_epoch(c.epoch);
    const std::int64_t n = probe.n_batches(c.n_obs);
    const std::int64_t done = g.between(0, n);
    (void)probe.sample(c.n_obs);
    const std::string text = probe.state(done).to_string();
    const Batches unread = job_rest(c, c.world, done);
    for (const Variant& v : variants) {
      support::Config changed = c;
      v.change(changed);
      // A change that changes nothing (batch 1 of a one-row request, one rank fewer than one) is no variant.
      if (changed.describe() == c.describe() && !v.workers && v.setting != std::string("nothing")) continue;
      INFO(c.describe() << " | state " << text << " | another " << v.setting << ": " << changed.describe());
      std::string why;
      const std::optional<Batches> rest = resume_job(changed, text, v.workers, why);
      const bool elastic = changed.world != c.world;
      const bool allowed = c.mode == cs::ShardMode::global && (elastic || v.workers);
      if (!rest) {
        ++refused[v.setting];
        CHECK_FALSE(v.setting == std::string("nothing"));
        CHECK_FALSE(allowed);
        continue;
      }
      ++accepted[v.setting];
      CHECK((allowed || v.setting == std::string("nothing")));
      Batches got = *rest;
      Batches want = unread;
      if (!elastic && !(c.enforce && c.remainder == cs::Remainder::pad)) {
        // The same world size continues, or re-deals, each rank's own unread batches.
        if (v.workers) {
          std::ranges::sort(got);
          std::ranges::sort(want);
        }
        CHECK(got == want);
        continue;
      }
      // Another world size: the unread batches dealt among the new ranks; equal counts cost fewer
      // than world_size batches (drop leaves them out, pad repeats them).
      std::ranges::sort(got);
      std::ranges::sort(want);
      const auto slack = static_cast<std::ptrdiff_t>(changed.world);
      const std::ptrdiff_t diff = std::ssize(got) - std::ssize(want);
      if (c.enforce && c.remainder == cs::Remainder::pad) {
        CHECK(std::ranges::includes(got, want));
        CHECK((diff >= 0 && diff < slack * (v.workers ? 2 : 1)));
      } else {
        CHECK(std::ranges::includes(want, got));
        CHECK((diff <= 0 && -diff < (c.enforce ? slack : 1)));
      }
    }
  }
  // Every setting but the allowed ones was refused every time, and the sweep saw both outcomes.
  for (const Variant& v : variants) {
    INFO(v.setting);
    CHECK(accepted[v.setting] + refused[v.setting] > 60);
  }
  CHECK(refused["nothing"] == 0);
  CHECK(accepted["workers"] > 20);
  CHECK(refused["workers"] > 20);
  CHECK(accepted["world size (one more)"] > 20);
  CHECK(refused["world size (one more)"] > 20);
  for (const char* setting : {"n_obs", "seed", "chunk_size", "batch_size", "preload_nchunks", "mask", "drop_last",
                              "mode", "remainder", "enforce_equal_batches"})
    CHECK(accepted[setting] == 0);
}

TEST_CASE("set_epoch forgets the worker of the epoch played before", "[restore][workers]") {
  // The state at the start of an epoch no sample() has begun names no worker: set_epoch after
  // worker 2 of 3 played an epoch gives the state a fresh sampler gives.
  const cs::WorkerInfo worker{.id = 2, .num_workers = 3};
  SECTION("RandomSampler") {
    const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    cs::RandomSampler s = base;
    (void)s.sample(200, worker);
    s.set_epoch(4);
    const cs::SamplerState start = s.state(0);
    CHECK_FALSE(start.n_obs());
    CHECK(start.num_workers() == 1);
    CHECK(start.worker() == 0);
    cs::RandomSampler fresh = base;
    fresh.set_epoch(4);
    CHECK(start == fresh.state(0));
  }
  SECTION("DistributedSampler, contiguous and global") {
    for (const auto mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
      CAPTURE(mode == cs::ShardMode::global);
      const Dist base(issue_base, cs::DistInfo{.rank = 1, .world_size = 2}, {.mode = mode});
      Dist d = base;
      (void)d.sample(10'007, worker);
      d.set_epoch(4);
      const cs::SamplerState start = d.state(0);
      CHECK_FALSE(start.n_obs());
      CHECK(start.num_workers() == 1);
      CHECK(start.worker() == 0);
      Dist fresh = base;
      fresh.set_epoch(4);
      CHECK(start == fresh.state(0));
    }
  }
}

TEST_CASE("a state at an epoch's start that no sample() began is read by any workers", "[restore][workers]") {
  // n_obs=any: batches_done is 0, so the state names no worker's point, and any split of its
  // epoch may begin it, as any n_obs may. A state of worker 2 of 3 (a restored one, or one taken
  // before set_epoch forgot the worker) is played without workers or by another split.
  const std::vector<cs::WorkerInfo> splits{{}, {.id = 0, .num_workers = 2}, {.id = 2, .num_workers = 3}};
  const auto of_worker = [](const cs::SamplerState& start) {
    REQUIRE_FALSE(start.n_obs());
    return support::edited(start, [](cs::detail::StateFields& f) {
      f.num_workers = 3;
      f.worker = 2;
    });
  };
  SECTION("RandomSampler") {
    const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 3});
    cs::RandomSampler fresh = base;
    fresh.set_epoch(4);
    const cs::SamplerState start = of_worker(fresh.state(0));
    for (const cs::WorkerInfo& w : splits) {
      CAPTURE(w.id, w.num_workers);
      cs::RandomSampler t = base;
      t.restore(start);
      CHECK(t.n_batches(200, w) == fresh.n_batches(200, w));
      CHECK(t.n_batches_left(200, w) == fresh.n_batches(200, w));
      cs::RandomSampler uninterrupted = fresh;
      CHECK(support::observations(support::collect(t.sample(200, w))) ==
            support::observations(support::collect(uninterrupted.sample(200, w))));
      CHECK(t.epoch() == 5);
    }
  }
  SECTION("DistributedSampler, contiguous and global") {
    for (const auto mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
      const Dist base(issue_base, cs::DistInfo{.rank = 1, .world_size = 2}, {.mode = mode});
      Dist fresh = base;
      fresh.set_epoch(4);
      const cs::SamplerState start = of_worker(fresh.state(0));
      for (const cs::WorkerInfo& w : splits) {
        CAPTURE(mode == cs::ShardMode::global, w.id, w.num_workers);
        Dist d = base;
        d.restore(start);
        CHECK(d.n_batches(10'007, w) == fresh.n_batches(10'007, w));
        CHECK(d.n_batches_left(10'007, w) == fresh.n_batches(10'007, w));
        Dist uninterrupted = fresh;
        CHECK(support::observations(support::collect(d.sample(10'007, w))) ==
              support::observations(support::collect(uninterrupted.sample(10'007, w))));
        CHECK(d.epoch() == 5);
      }
    }
  }
}

namespace {

// One sampler of each kind, and the state text chunksampler 0.3 wrote for it (format 5, no
// order_generation) after 3 batches of epoch 2; the texts were taken from that code and stored.
template <class S>
struct Legacy {
  S sampler;
  std::int64_t n_obs;
  std::string_view text;
};

std::vector<std::int8_t> legacy_codes() {
  std::vector<std::int8_t> codes(200);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::int8_t>((i / 20) % 3);
  return codes;
}

const cs::RandomSampler legacy_random({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 5});

// Calls `check(legacy, name)` for each kind of sampler.
template <class Check>
void for_each_legacy(Check&& check) {
  const std::vector<std::int8_t> codes = legacy_codes();
  check(
      Legacy<cs::RandomSampler>{
          legacy_random, 100,
          "chunksampler-state/5 fingerprint=7acc617fb46bb00f seed=5 epoch=2 n_obs=100 batches_done=3 "
          "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"},
      "RandomSampler");
  check(
      Legacy<cs::SequentialSampler>{
          cs::SequentialSampler({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6}), 100,
          "chunksampler-state/5 fingerprint=92a16d8d1b0d40a6 seed=0 epoch=2 n_obs=100 batches_done=3 "
          "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"},
      "SequentialSampler");
  check(
      Legacy<cs::ClassSampler>{
          cs::ClassSampler(codes,
                           {.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 5, .num_samples = 60}),
          200,
          "chunksampler-state/5 fingerprint=fa46b9734aec0377 seed=5 epoch=2 n_obs=200 batches_done=3 "
          "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"},
      "ClassSampler");
  check(
      Legacy<cs::WeightedClassSampler>{
          cs::WeightedClassSampler(
              codes, {.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 5, .num_samples = 60}),
          200,
          "chunksampler-state/5 fingerprint=2cc50327418621d7 seed=5 epoch=2 n_obs=200 batches_done=3 "
          "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"},
      "WeightedClassSampler");
  check(
      Legacy<cs::MixtureSampler>{
          cs::MixtureSampler({60, 40}, {.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 5}), 100,
          "chunksampler-state/5 fingerprint=da3f8fd59ed89a4b seed=5 epoch=2 n_obs=100 batches_done=3 "
          "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"},
      "MixtureSampler");
  // DistributedSampler deals its wrapped sampler's order: its states are of that generation.
  check(Legacy<Dist>{Dist(legacy_random, cs::DistInfo{.rank = 1, .world_size = 3}, global), 100,
                     "chunksampler-state/5 fingerprint=fdd701e4def3ec24 seed=5 epoch=2 n_obs=100 batches_done=3 "
                     "world_size=3 num_workers=1 worker=0 plan_world_size=3 runs=all dealt_at=0"},
        "RandomSampler");
}

}  // namespace

TEST_CASE("a state of chunksampler 0.3 (format 5) restores where the order is of generation 1",
          "[restore][generation]") {
  for_each_legacy([](const auto& legacy, std::string_view order) {
    using S = std::remove_cvref_t<decltype(legacy.sampler)>;
    INFO(order << ": " << legacy.text);
    const cs::SamplerState state = cs::SamplerState::parse(legacy.text);
    CHECK(state.order_generation() == 1);
    // The fingerprint is the configuration's alone, as 0.3 computed it: the state this version
    // takes at that point is the same state.
    S played = legacy.sampler;
    played.set_epoch(2);
    const support::Batches whole = support::observations(support::collect(played.sample(legacy.n_obs)));
    // (recording this version's generation: RandomSampler's is 2, which reads these orders alike)
    CHECK(played.state(3) == support::edited(state, [](cs::detail::StateFields& f) {
            f.order_generation = cs::detail::order_generation_of<S>;
          }));
    REQUIRE(whole.size() > 3);
    S restored = legacy.sampler;
    restored.restore(state);
    CHECK(support::observations(support::collect(restored.sample(legacy.n_obs))) ==
          support::Batches(whole.begin() + 3, whole.end()));
  });
}

TEST_CASE("a state of another generation of the order is refused, naming the sampler and both generations",
          "[restore][generation]") {
  for_each_legacy([](const auto& legacy, std::string_view order) {
    using S = std::remove_cvref_t<decltype(legacy.sampler)>;
    INFO(order);
    const cs::SamplerState current = cs::SamplerState::parse(legacy.text);
    constexpr std::uint32_t generation_now = cs::detail::order_generation_of<S>;
    for (const std::uint32_t generation : {generation_now + 1, 0xffffffffU}) {
      const cs::SamplerState forged =
          support::edited(current, [&](cs::detail::StateFields& f) { f.order_generation = generation; });
      // the generation goes through the text and back
      const std::string text = forged.to_string();
      CHECK(text.find(fmt::format(" order_generation={} ", generation)) != std::string::npos);
      CHECK(cs::SamplerState::parse(text) == forged);
      CHECK(cs::SamplerState::parse(text).order_generation() == generation);

      S sampler = legacy.sampler;
      const std::string message = refusal([&] { sampler.restore(cs::SamplerState::parse(text)); });
      INFO(message);
      CHECK_THAT(message, Contains(fmt::format("written by generation {} of {}'s order", generation, order)));
      CHECK_THAT(message, Contains(fmt::format("this version draws generation {}", generation_now)) &&
                              Contains("take a new state"));
      CHECK_THROWS_AS(sampler.restore(forged), cs::StateMismatchError);
      CHECK(sampler.epoch() == 0);  // refused, not half-applied
    }
  });
}

TEST_CASE("RandomSampler's generation 2 restores generation 1's states where its orders are unchanged, and only there",
          "[restore][generation]") {
  // Generation 2 orders the slots of a mask's short chunks past 256 of them. Over at most 128
  // ranges (or none, or with replacement) no order changed, and a state of generation 1 restores
  // to the same rest of the epoch; over more, one is refused, and the message says so.
  const auto ranges = [](std::int64_t count) {
    std::vector<cs::Slice> slices;
    for (std::int64_t i = 0; i < count; ++i) slices.push_back({10 * i + 3, 10 * i + 8});
    return cs::Ranges(slices);
  };
  const auto options = [](const cs::Ranges& mask, bool replacement) {
    return cs::RandomOptions{
        .chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = mask, .seed = 9, .replacement = replacement};
  };
  const auto generation_1 = [](const cs::SamplerState& s) {
    return support::edited(s, [](cs::detail::StateFields& f) { f.order_generation = 1; });
  };
  for (const auto& [count, replacement, restores] :
       {std::tuple{128, false, true}, std::tuple{129, false, false}, std::tuple{400, true, true}}) {
    CAPTURE(count, replacement);
    const cs::RandomSampler sampler(options(ranges(count), replacement));
    REQUIRE(sampler.oldest_order_generation() == (restores ? 1U : 2U));
    const std::int64_t n_obs = 10 * count;
    cs::RandomSampler played = sampler;
    const support::Batches whole = support::observations(support::collect(played.sample(n_obs)));
    const cs::SamplerState old = generation_1(played.state(3));
    cs::RandomSampler restored = sampler;
    if (restores) {
      restored.restore(old);
      CHECK(support::observations(support::collect(restored.sample(n_obs))) ==
            support::Batches(whole.begin() + 3, whole.end()));
    } else {
      const std::string message = refusal([&] { restored.restore(old); });
      CHECK_THAT(message, Contains("written by generation 1 of RandomSampler's order; this version draws generation "
                                   "2: take a new state"));
    }
    // Under DistributedSampler, the same.
    const cs::DistributedSampler dist(sampler, cs::DistInfo{.rank = 1, .world_size = 2});
    cs::DistributedSampler dist_played = dist;
    { auto epoch = dist_played.sample(n_obs); }
    cs::DistributedSampler dist_restored = dist;
    if (restores) CHECK_NOTHROW(dist_restored.restore(generation_1(dist_played.state(1))));
    else CHECK_THROWS_AS(dist_restored.restore(generation_1(dist_played.state(1))), cs::StateMismatchError);
  }
}

}  // namespace test_restore_checks
