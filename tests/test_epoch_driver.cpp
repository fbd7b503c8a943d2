// SPDX-License-Identifier: MIT
// epoch_driver.hpp: the one driver of every sampler's epochs. Where a sampler stands (before any
// sample(), after one, after set_epoch, with a restore pending) and what state() and next_state()
// say there; that a refused restore changes nothing; and that each call which needs an epoch's plan
// lays it out once (sample(), n_batches(), n_batches_left()), and a state none, for a plain sampler
// and under DistributedSampler: what lets the adapters count only the batches they hand on. The
// invariants every sampler keeps (an Epoch's state(k) equals the sampler's, at every resume point)
// are in harness.hpp's check_resume.

#include "support.hpp"

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/epoch_driver.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_state.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

namespace test_epoch_driver {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;

// A RandomSampler that counts the epochs it lays out (its plan() calls), in a counter its shards
// share.
class CountingSampler : public cs::SamplerBase<CountingSampler, cs::ChunkPlan> {
 public:
  static constexpr std::string_view name = "CountingSampler";

  CountingSampler(cs::RandomSampler inner, std::shared_ptr<std::int64_t> plans)
      : SamplerBase(inner.rng().seed()), inner_(std::move(inner)), plans_(std::move(plans)) {}

  [[nodiscard]] std::int64_t batch_size() const noexcept { return inner_.batch_size(); }
  [[nodiscard]] bool shuffle() const noexcept { return inner_.shuffle(); }
  void validate(std::int64_t n_obs) const { inner_.validate(n_obs); }
  [[nodiscard]] const std::optional<cs::Ranges>& mask() const noexcept { return inner_.mask(); }
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const { return inner_.epoch_size(n_obs); }
  [[nodiscard]] std::uint64_t fingerprint() const noexcept { return inner_.fingerprint(); }
  [[nodiscard]] cs::ChunkPlan plan(std::int64_t n_obs, std::uint64_t epoch) const {
    ++*plans_;
    return inner_.plan(n_obs, epoch);
  }
  [[nodiscard]] CountingSampler with_shard(const cs::Shard& shard) const { return {inner_.with_shard(shard), plans_}; }

 private:
  cs::RandomSampler inner_;
  std::shared_ptr<std::int64_t> plans_;
};

static_assert(cs::DistributableSampler<CountingSampler>);

const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 3, .batch_size = 5, .seed = 11});
constexpr std::int64_t n_obs = 1000;

// How many plans each call lays out, on `s` (a sampler over a shared counter `plans`).
template <class S>
void check_one_plan_per_call(S& s, const std::shared_ptr<std::int64_t>& plans) {
  *plans = 0;
  const std::int64_t whole = s.n_batches(n_obs);
  CHECK(*plans == 1);
  CHECK(s.n_batches_left(n_obs) == whole);
  CHECK(*plans == 2);
  auto epoch = s.sample(n_obs);
  CHECK(*plans == 3);
  CHECK(epoch.batches_before() == 0);
  CHECK(epoch.n_batches() == whole);
  const cs::SamplerState state = s.state(7);
  CHECK(epoch.state(7) == state);
  CHECK(s.next_state().epoch() == state.epoch() + 1);
  s.restore(state);
  CHECK(*plans == 3);  // no state, restore or next_state lays an epoch out
  auto rest = s.sample(n_obs);
  CHECK(*plans == 4);
  CHECK(rest.batches_before() == 7);
  CHECK(rest.n_batches() == whole - 7);
}

TEST_CASE("each call that needs an epoch's plan lays it out once, and a state none", "[driver]") {
  const auto plans = std::make_shared<std::int64_t>(0);
  SECTION("a sampler") {
    CountingSampler s(base, plans);
    check_one_plan_per_call(s, plans);
  }
  SECTION("DistributedSampler, contiguous") {
    cs::DistributedSampler d(CountingSampler(base, plans), cs::DistInfo{.rank = 1, .world_size = 3});
    check_one_plan_per_call(d, plans);
  }
  SECTION("DistributedSampler, global") {
    cs::DistributedSampler d(CountingSampler(base, plans), cs::DistInfo{.rank = 1, .world_size = 3},
                             {.mode = cs::ShardMode::global});
    check_one_plan_per_call(d, plans);
  }
}

TEST_CASE("where a sampler stands: state() and next_state() before, during and after an epoch", "[driver]") {
  cs::RandomSampler s = base;

  // Before any sample(): the start of epoch 0, tied to no n_obs or worker.
  CHECK(s.epoch() == 0);
  CHECK_FALSE(s.state(0).n_obs());
  CHECK(s.next_state() == s.state(0));
  CHECK_THROWS_WITH(s.state(1), Contains("batches_done (1) must be 0 before sample() has begun the epoch"));
  CHECK_THROWS_AS(s.state(-1), cs::ConfigError);

  // After sample(): the played epoch, over its n_obs, for its worker; the next begins afresh.
  auto epoch = s.sample(n_obs, {.id = 1, .num_workers = 2});
  CHECK(s.epoch() == 1);
  CHECK(epoch.epoch() == 0);
  const cs::SamplerState at5 = s.state(5);
  CHECK(at5.epoch() == 0);
  CHECK(at5.n_obs() == n_obs);
  CHECK(at5.batches_done() == 5);
  CHECK(at5.worker() == 1);
  CHECK(at5.num_workers() == 2);
  CHECK(epoch.state(5) == at5);
  CHECK_THROWS_AS(epoch.state(epoch.n_batches() + 1), cs::ConfigError);
  CHECK(s.next_state().epoch() == 1);
  CHECK_FALSE(s.next_state().n_obs());
  CHECK(s.next_state().num_workers() == 1);

  // set_epoch: the start of that epoch, no worker's.
  s.set_epoch(4);
  CHECK(s.state(0).epoch() == 4);
  CHECK_FALSE(s.state(0).n_obs());
  CHECK(s.state(0).num_workers() == 1);

  // A pending restore: its point is where the next sample() begins, and states name its epoch.
  s.restore(at5);
  CHECK(s.epoch() == 0);
  CHECK(s.next_state() == at5);
  CHECK(s.state(5) == at5);
  CHECK(s.state(9).batches_done() == 9);
  CHECK(s.state(9).worker() == 1);

  // A refused restore changes nothing.
  cs::RandomSampler other({.chunk_size = 10, .preload_nchunks = 3, .batch_size = 5, .seed = 12});
  (void)other.sample(n_obs);
  const cs::SamplerState foreign = other.state(2);
  CHECK_THROWS_AS(s.restore(foreign), cs::StateMismatchError);
  CHECK(s.epoch() == 0);
  CHECK(s.next_state() == at5);

  // The restored epoch begins at its point, for its worker only.
  CHECK_THROWS_AS(s.sample(n_obs), cs::StateMismatchError);
  auto rest = s.sample(n_obs, {.id = 1, .num_workers = 2});
  CHECK(rest.batches_before() == 5);
  CHECK(rest.epoch() == 0);
  CHECK(rest.state(0) == at5);
  CHECK(s.epoch() == 1);
}

TEST_CASE("one position: the driver's phase and the epoch's count of what it has yielded", "[driver]") {
  cs::RandomSampler s = base;
  CHECK(s.phase() == cs::EpochPhase::fresh);
  auto epoch = s.sample(n_obs);
  CHECK(s.phase() == cs::EpochPhase::played);
  CHECK(epoch.yielded() == 0);
  CHECK(epoch.state() == epoch.state(0));
  std::int64_t seen = 0;
  for (const cs::LoadRequest& request : epoch) {
    seen += static_cast<std::int64_t>(request.splits.size());
    CHECK(epoch.yielded() == seen);  // the request in hand counts
    CHECK(epoch.state() == s.state(seen));
  }
  CHECK(epoch.yielded() == epoch.n_batches());

  const cs::SamplerState at3 = s.state(3);
  s.restore(at3);
  CHECK(s.phase() == cs::EpochPhase::pending);
  auto rest = s.sample(n_obs);
  auto it = rest.begin();
  CHECK(rest.yielded() == static_cast<std::int64_t>(it->splits.size()));
  CHECK(rest.state().batches_done() == 3 + rest.yielded());
  s.set_epoch(7);
  CHECK(s.phase() == cs::EpochPhase::fresh);
}

TEST_CASE("resume: a state at its epoch's end continues with the next epoch; elsewhere as restore", "[driver]") {
  cs::RandomSampler a = base;
  const std::int64_t whole = a.n_batches(n_obs, {.id = 1, .num_workers = 2});
  (void)a.sample(n_obs, {.id = 1, .num_workers = 2});
  REQUIRE(whole > 3);

  // Mid-epoch: the same as restore.
  cs::RandomSampler mid = base;
  cs::RandomSampler restored = base;
  mid.resume(a.state(3));
  restored.restore(a.state(3));
  CHECK(mid.phase() == cs::EpochPhase::pending);
  CHECK(mid.next_state() == restored.next_state());

  // At the end: the next epoch from its start, for any worker.
  cs::RandomSampler end = base;
  end.resume(a.state(whole));
  CHECK(end.phase() == cs::EpochPhase::fresh);
  CHECK(end.epoch() == 1);
  cs::RandomSampler next = base;
  next.set_epoch(1);
  CHECK(support::collect(end.sample(n_obs)) == support::collect(next.sample(n_obs)));

  // A state at an epoch's start (tied to no n_obs): restored as it is.
  cs::RandomSampler start = base;
  start.resume(a.next_state());
  CHECK(start.epoch() == 1);
  CHECK(start.phase() == cs::EpochPhase::pending);

  // Past its epoch's end: refused here, and the sampler left as it was.
  cs::RandomSampler past = base;
  past.set_epoch(5);
  CHECK_THROWS_AS(past.resume(a.state(whole + 1)), cs::StateMismatchError);
  CHECK(past.epoch() == 5);
  CHECK(past.phase() == cs::EpochPhase::fresh);
}

}  // namespace

}  // namespace test_epoch_driver
