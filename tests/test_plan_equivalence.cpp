// SPDX-License-Identifier: MIT
// The hot path's shortcuts give the plan they replace: a request filled for a reader of its first
// positions only (`ChunkPlan::fill(k, out, needed)`, which stops the shuffle there) holds the same
// chunks and the same first positions as the whole request; and an `Epoch` that uses it yields
// exactly what one that fills every request whole yields, for any runs, workers and skip.

#include "support.hpp"

#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace test_plan_equivalence {

namespace cs = chunksampler;
using cs::detail::ChunkPlan;
using support::Config;
using support::ConfigRng;

// A `ChunkPlan` that fills every request whole: `Epoch` finds no `fill(k, out, needed)` in it.
class WholeRequests {
 public:
  explicit WholeRequests(ChunkPlan plan) : plan_(std::move(plan)) {}
  [[nodiscard]] std::int64_t n_batches() const noexcept { return plan_.n_batches(); }
  [[nodiscard]] std::int64_t n_requests() const noexcept { return plan_.n_requests(); }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return plan_.batch_size(); }
  [[nodiscard]] std::int64_t request_of(std::int64_t i) const noexcept { return plan_.request_of(i); }
  [[nodiscard]] std::int64_t request_begin(std::int64_t k) const noexcept { return plan_.request_begin(k); }
  [[nodiscard]] std::int64_t max_chunks() const noexcept { return plan_.max_chunks(); }
  [[nodiscard]] std::int64_t max_positions() const noexcept { return plan_.max_positions(); }
  void fill(std::int64_t k, cs::RequestBuffers& out) const { plan_.fill(k, out); }

 private:
  ChunkPlan plan_;
};
static_assert(cs::EpochPlan<WholeRequests>);

// A configuration of RandomSampler (with or without replacement, num_samples, drop_last) or
// SequentialSampler, over a dataset or a mask.
Config draw(ConfigRng& g) {
  return support::servable_config(g, {.max_chunk = 9, .max_preload = 5, .max_extra_obs = 300});
}

ChunkPlan plan_of(const Config& c, std::uint64_t epoch) {
  return c.with_base([&](const auto& sampler) { return sampler.plan(c.n_obs, epoch); });
}

TEST_CASE("ChunkPlan: a request filled for its first positions holds the whole request's chunks and those positions",
          "[plan_equivalence]") {
  ConfigRng g(20261129U);
  for (int trial = 0; trial < 400; ++trial) {
    const Config c = draw(g);
    const ChunkPlan plan = plan_of(c, static_cast<std::uint64_t>(g.between(0, 2)));
    CAPTURE(trial, c.describe());
    cs::RequestBuffers whole;
    cs::RequestBuffers part;
    for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
      plan.fill(k, whole);
      const auto size = static_cast<std::int64_t>(whole.positions.size());
      for (const std::int64_t needed :
           {std::int64_t{0}, std::int64_t{1}, g.between(0, size), size - 1, size, size + 7}) {
        CAPTURE(k, needed, size);
        plan.fill(k, part, needed);
        REQUIRE(part.chunks == whole.chunks);
        REQUIRE(part.positions.size() == whole.positions.size());
        const auto prefix = static_cast<std::ptrdiff_t>(std::clamp<std::int64_t>(needed, 0, size));
        REQUIRE(std::equal(part.positions.begin(), part.positions.begin() + prefix, whole.positions.begin()));
      }
    }
  }
}

TEST_CASE("Epoch: stopping each request's shuffle after its share yields what whole requests yield",
          "[plan_equivalence]") {
  ConfigRng g(20261130U);
  for (int trial = 0; trial < 300; ++trial) {
    const Config c = draw(g);
    const ChunkPlan plan = plan_of(c, 0);
    const std::int64_t n = plan.n_batches();
    // Runs as a rank's share in global mode is dealt: a few stretches of the epoch's batches.
    std::vector<cs::BatchRun> runs;
    for (std::int64_t begin = g.between(0, n); begin < n;) {
      const std::int64_t end = g.between(begin, n);
      runs.push_back({begin, end});
      begin = end + g.between(0, 3);
    }
    const std::int64_t workers = g.between(1, 3);
    const cs::WorkerInfo worker{.id = g.between(0, workers - 1), .num_workers = workers};
    CAPTURE(trial, c.describe(), runs.size(), worker.id, worker.num_workers);
    cs::Epoch<ChunkPlan> shortcut(plan, runs, worker, 0, {});
    const std::int64_t skip = g.between(0, shortcut.n_batches());
    CAPTURE(skip);
    REQUIRE(support::collect(cs::Epoch<ChunkPlan>(plan, runs, worker, skip, {})) ==
            support::collect(cs::Epoch<WholeRequests>(WholeRequests(plan), runs, worker, skip, {})));
  }
}

}  // namespace test_plan_equivalence
