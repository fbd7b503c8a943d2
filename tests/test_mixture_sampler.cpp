// SPDX-License-Identifier: MIT
// MixtureSampler: epoch invariants over random configurations (one dataset per request, the
// aligned grid, exact largest-remainder quotas, whole passes when a dataset is oversampled),
// worked examples, the uniformity of the interleaving (chi-square), temperature, update_weights,
// determinism, exact resume and workers, validation messages, and a pinned stream.
// DistributedSampler in both modes, with_shard and sizes near 2^62 are tested in
// test_mixture_distributed.cpp, against the model of mixture_support.hpp.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/sampler.hpp>

#include "harness.hpp"
#include "mixture_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_mixture_sampler {

namespace {

namespace cs = chunksampler;
using namespace support::mixture;
using support::after;
using support::ceil_div;
using support::check_resume;
using support::check_workers;
using support::chi_square;
using support::ConfigRng;
using support::OwnedRequest;
using support::Tally;

template <class S>
std::vector<Requests> epochs_of(S sampler, std::int64_t n_obs, int count) {
  std::vector<Requests> result;
  for (int e = 0; e < count; ++e) result.push_back(support::epoch(sampler, n_obs));
  return result;
}

}  // namespace

TEST_CASE("MixtureSampler is a DistributableSampler and DistributedSampler wraps it", "[mixture]") {
  STATIC_REQUIRE(cs::Sampler<cs::MixtureSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::MixtureSampler>);
  STATIC_REQUIRE(cs::EpochPlan<cs::detail::MixturePlan>);
  STATIC_REQUIRE(cs::Sampler<Mixture>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<Mixture>);

  const cs::MixtureSampler mix({100, 50, 30},
                               {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .weights = {2, 1, 1}});
  CHECK(mix.shuffle());
  CHECK(mix.mask() == std::optional<cs::Slice>(cs::Slice{0, 180}));
  CHECK(mix.sizes() == std::vector<std::int64_t>{100, 50, 30});
  CHECK(mix.boundaries() == std::vector<std::int64_t>{0, 100, 150, 180});
  CHECK(mix.weights() == std::vector<double>{2, 1, 1});
  CHECK(mix.probabilities() == std::vector<double>{0.5, 0.25, 0.25});
  CHECK(mix.temperature() == 1.0);
  CHECK(mix.chunk_size() == 10);
  CHECK(mix.preload_nchunks() == 2);
  CHECK(mix.batch_size() == 5);
  CHECK_FALSE(mix.drop_last());
  CHECK_FALSE(mix.num_samples());
  CHECK(mix.epoch_size(180) == 180);
  CHECK(mix.n_batches(180) == 36);
  CHECK(mix.n_batches(200) == 36);
  CHECK(mix.rng() == cs::Rng(cs::default_seed));
  CHECK(cs::MixtureSampler({7}, {.chunk_size = 7, .preload_nchunks = 1, .batch_size = 7}).weights() ==
        std::vector<double>{1});
}

TEST_CASE("MixtureSampler epoch invariants over random configurations", "[mixture]") {
  ConfigRng g(20250101);
  int exact_quotas = 0;
  int excluded = 0;
  int oversampled = 0;
  int single_pass = 0;
  int tails = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const MixConfig c = random_mix(g);
    INFO(c.describe());
    cs::MixtureSampler sampler = c.sampler();
    const std::int64_t used = c.used(c.budget());
    const std::int64_t request_rows = c.chunk * c.preload;
    const std::int64_t R = ceil_div(used, request_rows);
    const auto datasets = c.datasets();
    const std::size_t D = datasets.size();

    REQUIRE(sampler.epoch_size(c.n_obs()) == c.budget());
    REQUIRE(sampler.n_batches(c.n_obs()) == ceil_div(used, c.batch));
    const cs::detail::MixturePlan plan = sampler.plan(c.n_obs(), 0);
    REQUIRE(plan.n_requests() == R);
    const support::EpochRecord rec = support::walk(sampler, c.n_obs());
    CHECK(rec.n_batches() == ceil_div(used, c.batch));
    CHECK(static_cast<std::int64_t>(rec.draws.size()) == used);
    CHECK(static_cast<std::int64_t>(rec.requests.size()) == R);
    CHECK(rec.positions_valid());
    CHECK((c.drop_last ? rec.batches_all_full(c.batch) : rec.batches_full_but_last(c.batch)));
    CHECK(rec.draws_inside({0, c.total()}));

    const Reads r = analyze(rec.requests, datasets, c.chunk, c.preload, used - (R - 1) * request_rows);
    CHECK(r.one_part);
    CHECK(r.on_grid);
    CHECK(r.full_chunks);
    CHECK(r.full_requests);
    CHECK(r.all_rows_used);

    // Quotas: exactly the largest-remainder split of the requests by the shares.
    CHECK(r.requests == plan.quotas());
    CHECK(std::accumulate(r.requests.begin(), r.requests.end(), std::int64_t{0}) == R);
    if (c.temperature == 1.0) {
      CHECK(r.requests == expected_quotas(R, c.integer_weights()));
      ++exact_quotas;
    } else {
      for (std::size_t d = 0; d < D; ++d) {
        const double share = static_cast<double>(R) * sampler.probabilities()[d];
        CHECK(std::abs(static_cast<double>(r.requests[d]) - share) < 1.0);
      }
    }
    bool fits = true;
    for (std::size_t d = 0; d < D; ++d) {
      const std::int64_t grid = c.sizes[d] / c.chunk;
      tails += c.sizes[d] % c.chunk != 0 ? 1 : 0;
      if (!c.weights.empty() && c.weights[d] == 0) {
        CHECK(r.requests[d] == 0);
        CHECK(r.chunks[d] == 0);
        ++excluded;
      }
      // Whole passes over the grid: no chunk read twice while the dataset's chunks fit in one.
      CHECK(whole_passes(r, d, grid));
      if (r.chunks[d] > grid) ++oversampled;
      fits = fits && r.chunks[d] <= grid;
    }
    if (fits) {
      CHECK(rec.no_repeats());
      ++single_pass;
    }
  }
  CHECK(exact_quotas > 300);
  CHECK(excluded > 100);
  CHECK(oversampled > 200);
  CHECK(single_pass > 60);
  CHECK(tails > 300);
}

TEST_CASE("MixtureSampler worked examples: quotas, passes and the grid", "[mixture]") {
  // Datasets [0, 60), [60, 90), [90, 100); one chunk of 10 per request: 10 requests.
  const auto reads = [](const std::vector<double>& weights, std::int64_t num_samples) {
    cs::MixtureSampler mix({60, 30, 10}, {.chunk_size = 10,
                                          .preload_nchunks = 1,
                                          .batch_size = 5,
                                          .seed = 11,
                                          .num_samples = num_samples,
                                          .weights = weights});
    const support::EpochRecord rec = support::walk(mix, 100);
    return std::pair{rec, analyze(rec.requests, {{0, 60}, {60, 90}, {90, 100}}, 10, 1, 10)};
  };
  SECTION("weights as the sizes: every row once") {
    const auto [rec, r] = reads({0.6, 0.3, 0.1}, 100);
    CHECK(r.requests == std::vector<std::int64_t>{6, 3, 1});
    CHECK(rec.covers_exactly_once({0, 100}));
  }
  SECTION("equal weights: 10 / 3 each, the one left over to the lowest index; the small dataset three times") {
    const auto [rec, r] = reads({}, 100);
    CHECK(r.requests == std::vector<std::int64_t>{4, 3, 3});
    CHECK(r.grid_reads[0].size() == 4);  // 4 of dataset 0's 6 chunks, each once
    for (const auto& [chunk, times] : r.grid_reads[0]) CHECK(times == 1);
    CHECK(r.grid_reads[1] == std::map<std::int64_t, std::int64_t>{{0, 1}, {1, 1}, {2, 1}});
    CHECK(r.grid_reads[2] == std::map<std::int64_t, std::int64_t>{{0, 3}});
    const auto counts = rec.counts();
    for (std::int64_t obs = 90; obs < 100; ++obs) CHECK(counts.at(obs) == 3);
  }
  SECTION("a budget of 250 with weight 0 for the middle: 25 requests, 12.5 each, the tie to dataset 0") {
    const auto [rec, r] = reads({1, 0, 1}, 250);
    CHECK(r.requests == std::vector<std::int64_t>{13, 0, 12});
    // Dataset 0: 13 chunks over a grid of 6 -> two whole passes and one chunk more.
    CHECK(whole_passes(r, 0, 6));
    std::multiset<std::int64_t> times;
    for (const auto& [chunk, t] : r.grid_reads[0]) times.insert(t);
    CHECK(times == std::multiset<std::int64_t>{2, 2, 2, 2, 2, 3});
    CHECK(r.grid_reads[2] == std::map<std::int64_t, std::int64_t>{{0, 12}});
    CHECK(rec.draws_inside({0, 100}));
    CHECK(std::ranges::none_of(rec.draws, [](const support::Draw& d) { return d.obs >= 60 && d.obs < 90; }));
  }
  SECTION("tails the grid leaves out; the last request cut to the budget") {
    // Datasets [0, 25) and [25, 38) with chunk 10: grids [0, 20) and [25, 35).
    cs::MixtureSampler mix({25, 13}, {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 4, .num_samples = 30});
    CHECK(mix.n_batches(38) == 8);
    const support::EpochRecord rec = support::walk(mix, 38);
    REQUIRE(rec.requests.size() == 2);
    CHECK(rec.requests[0].buffer_size() == 20);
    CHECK(rec.requests[1].buffer_size() == 10);
    CHECK(rec.requests[1].chunks.size() == 1);
    for (const support::Draw& d : rec.draws) CHECK(((d.obs >= 0 && d.obs < 20) || (d.obs >= 25 && d.obs < 35)));
    CHECK(rec.batch_lengths.back() == 2);  // 30 = 7 * 4 + 2
  }
  SECTION("from_boundaries is the same sampler") {
    const cs::MixtureOptions options{
        .chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 3, .weights = {1, 2, 3}};
    cs::MixtureSampler by_sizes({60, 30, 10}, options);
    cs::MixtureSampler by_boundaries = cs::MixtureSampler::from_boundaries({0, 60, 90, 100}, options);
    CHECK(by_boundaries.sizes() == by_sizes.sizes());
    CHECK(by_boundaries.fingerprint() == by_sizes.fingerprint());
    CHECK(epochs_of(by_boundaries, 100, 3) == epochs_of(by_sizes, 100, 3));
  }
}

TEST_CASE("MixtureSampler interleaves the datasets uniformly through the epoch (chi-square)", "[mixture]") {
  // Datasets of 400 and 100 rows, weights 4:1, one chunk of 10 per request: 50 requests, 40 and
  // 10. Over 400 epochs (a fixed seed) dataset 1's requests fall in each tenth of the epoch
  // 400 times and in each slot 80 times in expectation. The counts of one epoch are drawn without
  // replacement, so the statistic is at most chi-square distributed; the bounds are its 0.999
  // quantiles (9 and 49 degrees of freedom), and the seed is fixed: the test cannot flake.
  constexpr int n_epochs = 400;
  cs::MixtureSampler mix({400, 100},
                         {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 5, .weights = {4, 1}});
  std::vector<double> tenths(10, 0.0);
  std::vector<double> slots(50, 0.0);
  std::vector<double> first(2, 0.0);
  std::set<std::vector<std::size_t>> orders;
  for (int e = 0; e < n_epochs; ++e) {
    const Requests requests = support::epoch(mix, 500);
    const Reads r = analyze(requests, {{0, 400}, {400, 500}}, 10, 1, 10);
    REQUIRE(r.requests == std::vector<std::int64_t>{40, 10});
    for (std::size_t k = 0; k < r.order.size(); ++k)
      if (r.order[k] == 1) {
        tenths[k / 5] += 1.0;
        slots[k] += 1.0;
      }
    first[r.order.front()] += 1.0;
    orders.insert(r.order);
  }
  INFO("tenths " << fmt::format("{}", tenths));
  INFO("first request's dataset " << fmt::format("{}", first));
  CHECK(chi_square(tenths, std::vector<double>(10, 400.0)) < 27.877);
  CHECK(chi_square(slots, std::vector<double>(50, 80.0)) < 85.351);
  // The first request's dataset: 0.8 and 0.2 of the epochs (1 degree of freedom).
  CHECK(chi_square(first, {0.8 * n_epochs, 0.2 * n_epochs}) < 10.828);
  CHECK(orders.size() == n_epochs);  // C(50, 10) orders: a repeat would be a broken stream

  // Three datasets, weights 3:2:1, 60 requests: the dataset of every slot over 300 seeds,
  // expected 150, 100 and 50 per slot; the sum over the 60 slots (120 degrees of freedom) stays
  // below its 0.999 quantile, 173.6.
  std::vector<std::array<double, 3>> per_slot(60, {0.0, 0.0, 0.0});
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    cs::MixtureSampler three(
        {300, 200, 100},
        {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = seed, .weights = {3, 2, 1}});
    const Requests requests = support::epoch(three, 600);
    const Reads r = analyze(requests, {{0, 300}, {300, 500}, {500, 600}}, 10, 1, 10);
    REQUIRE(r.requests == std::vector<std::int64_t>{30, 20, 10});
    for (std::size_t k = 0; k < 60; ++k) per_slot[k][r.order[k]] += 1.0;
  }
  double statistic = 0.0;
  for (const auto& counts : per_slot) statistic += chi_square({counts[0], counts[1], counts[2]}, {150.0, 100.0, 50.0});
  CHECK(statistic < 173.6);
}

TEST_CASE("MixtureSampler temperature: 1 keeps the weights, large tends to uniform, 0 excludes", "[mixture]") {
  const std::vector<std::int64_t> sizes = {50, 50, 50, 50, 50};
  const auto probabilities = [&](std::vector<double> weights, double temperature) {
    return cs::MixtureSampler(sizes, {.chunk_size = 10,
                                      .preload_nchunks = 1,
                                      .batch_size = 10,
                                      .weights = std::move(weights),
                                      .temperature = temperature})
        .probabilities();
  };
  SECTION("200 random weight vectors at temperatures 1, 0.5, 3 and 10^6") {
    ConfigRng g(404);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<double> w;
      for (int d = 0; d < 5; ++d)
        w.push_back(g.between(0, 3) == 0 ? 0.0 : static_cast<double>(g.between(1, 1'000'000)) / 1000.0);
      if (std::ranges::all_of(w, [](double x) { return x == 0.0; })) w[2] = 0.5;
      INFO(fmt::format("weights {}", w));
      const double sum = std::accumulate(w.begin(), w.end(), 0.0);
      const double positive = static_cast<double>(std::ranges::count_if(w, [](double x) { return x > 0.0; }));
      const std::vector<double> one = probabilities(w, 1.0);
      const std::vector<double> hot = probabilities(w, 1e6);
      const std::vector<double> squared = probabilities(w, 0.5);
      const std::vector<double> cube_root = probabilities(w, 3.0);
      double squares = 0.0;
      double roots = 0.0;
      for (const double x : w) {
        const double square = x * x;  // apart from the sum: no fused multiply-add
        squares += square;
        roots += std::cbrt(x);
      }
      for (std::size_t d = 0; d < 5; ++d) {
        CHECK(std::abs(one[d] - w[d] / sum) < 1e-15);
        CHECK(std::abs(squared[d] - w[d] * w[d] / squares) < 1e-12);
        CHECK(std::abs(cube_root[d] - std::cbrt(w[d]) / roots) < 1e-12);
        if (w[d] == 0.0) {
          CHECK(one[d] == 0.0);
          CHECK(hot[d] == 0.0);
        } else {
          CHECK(std::abs(hot[d] - 1.0 / positive) < 1e-5);
        }
      }
      CHECK(std::abs(std::accumulate(hot.begin(), hot.end(), 0.0) - 1.0) < 1e-12);
      // Only the ratios count: weights scaled by a power of two give the same shares, exactly.
      std::vector<double> scaled = w;
      for (double& x : scaled) x *= 1024.0;
      CHECK(probabilities(scaled, 2.0) == probabilities(w, 2.0));
    }
  }
  SECTION("a tiny temperature puts everything on the heaviest dataset, without underflow") {
    CHECK(probabilities({1, 2, 1, 0, 1.5}, 1e-3) == std::vector<double>{0, 1, 0, 0, 0});
    CHECK(probabilities({1e-300, 1e-300, 0, 0, 0}, 1e-3) == std::vector<double>{0.5, 0.5, 0, 0, 0});
  }
  SECTION("a dataset of weight 0 is never read, at any temperature") {
    for (const double temperature : {0.25, 1.0, 1e6}) {
      cs::MixtureSampler mix(sizes, {.chunk_size = 10,
                                     .preload_nchunks = 1,
                                     .batch_size = 10,
                                     .seed = 9,
                                     .num_samples = 1000,
                                     .weights = {1, 0, 5, 0, 2},
                                     .temperature = temperature});
      for (int e = 0; e < 5; ++e) {
        const support::EpochRecord rec = support::walk(mix, 250);
        CHECK(std::ranges::none_of(rec.draws, [](const support::Draw& d) {
          return (d.obs >= 50 && d.obs < 100) || (d.obs >= 150 && d.obs < 200);
        }));
      }
    }
  }
}

TEST_CASE("MixtureSampler update_weights takes effect at the next epoch; older states are refused", "[mixture]") {
  using Catch::Matchers::Contains;
  const WeightUpdate u(77);
  const auto fresh = [&](const cs::MixtureOptions& o, std::uint64_t epoch) {
    cs::MixtureSampler s(u.sizes, o);
    s.set_epoch(epoch);
    return s;
  };

  cs::MixtureSampler mix(u.sizes, u.options);
  auto epoch0 = mix.sample(200);
  const cs::SamplerState before = mix.state(3);
  const std::uint64_t old_fingerprint = mix.fingerprint();
  mix.update_weights(u.other);
  CHECK(mix.weights() == u.other);
  CHECK(mix.fingerprint() != old_fingerprint);
  // The range returned before the update keeps its plan.
  const Requests played0 = support::collect(epoch0);
  auto reference0 = fresh(u.options, 0);
  CHECK(played0 == support::epoch(reference0, 200));
  // The next epoch is played under the new weights: dataset 1 is never read.
  const Requests played1 = support::epoch(mix, 200);
  auto reference1 = fresh(u.other_options, 1);
  CHECK(played1 == support::epoch(reference1, 200));
  auto old1 = fresh(u.options, 1);
  CHECK(played1 != support::epoch(old1, 200));
  for (const auto& batch : support::observations(played1))
    for (const std::int64_t obs : batch) CHECK_FALSE((obs >= 100 && obs < 160));

  // A state taken under the old weights is refused under the new ones, and accepted once they are
  // set back; it then resumes the epoch as it was played.
  cs::MixtureSampler updated = fresh(u.other_options, 0);
  CHECK_THROWS_WITH(updated.restore(before), Contains("fingerprint"));
  updated.update_weights({1, 1, 1});
  CHECK(updated.fingerprint() == old_fingerprint);
  updated.restore(before);
  CHECK(support::collect(updated.sample(200)) == after(played0, 3));

  // A restore is checked when it is made: weights changed after it would replay another epoch.
  cs::MixtureSampler pending(u.sizes, u.options);
  pending.restore(before);
  CHECK_THROWS_WITH(pending.update_weights(u.other), Contains("pending"));
  pending.update_weights({1, 1, 1});  // the same weights: nothing changes
  CHECK(support::collect(pending.sample(200)) == after(played0, 3));

  // update_weights checks as the constructor does, and a refused update changes nothing.
  cs::MixtureSampler checked(u.sizes, u.options);
  const std::uint64_t fingerprint = checked.fingerprint();
  CHECK_THROWS_WITH(checked.update_weights({1, 2}), Contains("update_weights") && Contains("weights has 2 values"));
  CHECK_THROWS_WITH(checked.update_weights({1, -1, 2}), Contains("weights[1] (-1) must be finite and >= 0"));
  CHECK_THROWS_WITH(checked.update_weights({0, 0, 0}), Contains("one value > 0"));
  CHECK_THROWS_WITH(checked.update_weights({1, 1, 1}, 0.0), Contains("temperature (0) must be finite and > 0"));
  CHECK(checked.fingerprint() == fingerprint);
  CHECK(checked.weights() == std::vector<double>{1, 1, 1});
  // Equal weights given as none: the same mixture and fingerprint.
  checked.update_weights({}, 1.0);
  CHECK(checked.fingerprint() == fingerprint);
  checked.update_weights({1, 1, 1}, 2.0);
  CHECK(checked.temperature() == 2.0);
  CHECK(checked.fingerprint() != fingerprint);
}

TEST_CASE("MixtureSampler is deterministic per (seed, epoch); set_epoch replays; epochs and seeds differ",
          "[mixture]") {
  ConfigRng g(9090);
  for (int trial = 0; trial < 150; ++trial) {
    const MixConfig c = random_mix(g);
    INFO(c.describe());
    const std::vector<Requests> played = epochs_of(c.sampler(), c.n_obs(), 3);
    CHECK(epochs_of(c.sampler(), c.n_obs(), 3) == played);
    cs::MixtureSampler replay = c.sampler();
    replay.set_epoch(2);
    CHECK(support::epoch(replay, c.n_obs()) == played[2]);
    CHECK(replay.epoch() == 3);
    replay.set_epoch(0);
    CHECK(support::epoch(replay, c.n_obs()) == played[0]);
  }
  // 40 requests of 3 chunks over 3 datasets: two independent epochs coincide with negligible
  // probability, so any equality is a broken stream.
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto options = [](std::uint64_t s) {
      return cs::MixtureOptions{
          .chunk_size = 10, .preload_nchunks = 3, .batch_size = 6, .seed = s, .weights = {1, 2, 3}};
    };
    const std::vector<Requests> e = epochs_of(cs::MixtureSampler({400, 400, 400}, options(seed)), 1200, 3);
    CHECK(e[0] != e[1]);
    CHECK(e[1] != e[2]);
    CHECK(e[0].front().positions() != e[1].front().positions());
    const std::vector<Requests> other = epochs_of(cs::MixtureSampler({400, 400, 400}, options(seed + 100)), 1200, 1);
    CHECK(other[0] != e[0]);
  }
}

TEST_CASE("MixtureSampler resumes exactly at any batch, and workers split its epoch", "[mixture]") {
  ConfigRng g(5150);
  Tally tally;
  constexpr std::uint64_t epochs[] = {0, 1, 5, 1'000'000'007};
  for (int trial = 0; trial < 80; ++trial) {
    const MixConfig c = random_mix(g);
    INFO(c.describe());
    const std::uint64_t epoch = epochs[g.between(0, 3)];
    const std::int64_t workers = trial % 4 + 1;
    const auto make = [&] { return c.sampler(); };
    for (std::int64_t id = 0; id < workers; ++id)
      check_resume(make, c.n_obs(), epoch, {.id = id, .num_workers = workers}, g, tally);
    check_workers(make, c.n_obs(), workers);
  }
  CHECK(tally.points > 1000);
  CHECK(tally.mid_request > 300);
}

TEST_CASE("MixtureSampler validation names the parameter, its value and the rule", "[mixture]") {
  using Catch::Matchers::Contains;
  const cs::MixtureOptions ok{.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5};
  const auto with = [&](auto change) {
    cs::MixtureOptions o = ok;
    change(o);
    return o;
  };
  const auto make = [](std::vector<std::int64_t> sizes, const cs::MixtureOptions& o) {
    return cs::MixtureSampler(std::move(sizes), o);
  };
  const std::vector<std::int64_t> sizes = {30, 20};

  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.chunk_size = 0; })), Contains("chunk_size (0) must be >= 1"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.preload_nchunks = -2; })),
                    Contains("preload_nchunks (-2) must be >= 1"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.batch_size = 0; })), Contains("batch_size (0) must be >= 1"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.batch_size = 21; })),
                    Contains("batch_size cannot exceed chunk_size * preload_nchunks: batch_size (21) must be <= 20"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.batch_size = 3; })),
                    Contains("chunk_size * preload_nchunks (20) must be divisible by batch_size (3)"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.preload_nchunks = std::int64_t{1} << 61; })),
                    Contains("chunk_size * preload_nchunks"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.num_samples = 0; })),
                    Contains("num_samples must be greater than 1 or equal to 1 (got 0): it must be in [1, 2^62]"));
  CHECK_THROWS_WITH(make({}, ok), Contains("sizes is empty"));
  CHECK_THROWS_WITH(make({30, 9, 40}, ok), Contains("sizes[1] (9) must be >= chunk_size (10)"));
  CHECK_THROWS_WITH(make({std::int64_t{1} << 62, 10}, ok),
                    Contains("sizes' sum must be <= 2^62") && Contains("sizes[1] (10)"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.weights = {1}; })),
                    Contains("weights has 1 values; it needs one per dataset (2) or none"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.weights = {1, -0.5}; })),
                    Contains("weights[1] (-0.5) must be finite and >= 0"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.weights = {std::numeric_limits<double>::quiet_NaN(), 1}; })),
                    Contains("weights[0] (nan) must be finite"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.weights = {1, std::numeric_limits<double>::infinity()}; })),
                    Contains("weights[1] (inf) must be finite"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.weights = {0, 0}; })),
                    Contains("weights must have one value > 0 (all 2 are 0)"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.temperature = 0; })),
                    Contains("temperature (0) must be finite and > 0"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.temperature = -1; })),
                    Contains("temperature (-1) must be finite and > 0"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.temperature = std::numeric_limits<double>::quiet_NaN(); })),
                    Contains("temperature (nan) must be finite and > 0"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.temperature = std::numeric_limits<double>::infinity(); })),
                    Contains("temperature (inf) must be finite and > 0"));

  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({0}, ok), Contains("boundaries has 1 values"));
  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({5, 30}, ok), Contains("boundaries[0] (5) must be 0"));
  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({0, 30, 30}, ok),
                    Contains("boundaries[2] (30) must be > boundaries[1] (30)"));
  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({0, 30, 20}, ok),
                    Contains("boundaries[2] (20) must be > boundaries[1] (30)"));
  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({0, 30, (std::int64_t{1} << 62) + 1}, ok),
                    Contains("boundaries[2] (4611686018427387905) must be <= 2^62"));
  CHECK_THROWS_WITH(cs::MixtureSampler::from_boundaries({0, 30, 35}, ok),
                    Contains("sizes[1] (5) must be >= chunk_size"));

  cs::MixtureSampler mix(sizes, ok);
  CHECK_THROWS_WITH(mix.validate(49), Contains("n_obs (49) must be >= the end of the last dataset (50)"));
  CHECK_THROWS_WITH(mix.sample(49), Contains("n_obs (49)"));
  CHECK_THROWS_WITH(mix.n_batches(-1), Contains("n_obs (-1) must be in [0, 2^62]"));
  CHECK_THROWS_AS(mix.plan((std::int64_t{1} << 62) + 1, 0), std::invalid_argument);
  CHECK(mix.epoch() == 0);  // a refused sample() does not move the epoch
  CHECK_NOTHROW(mix.validate(50));
  CHECK_NOTHROW(mix.validate(1000));

  CHECK_THROWS_WITH(mix.with_shard({.mask = {0, 50}, .stream = 0, .budget = 0}),
                    Contains("a shard's budget (0) must be in [1, 2^62]"));
  CHECK_THROWS_WITH(mix.with_shard({.mask = {10, 60}, .stream = 0, .budget = 5}),
                    Contains("a shard's mask [10, 60) must be a non-empty range inside [0, 50)"));
  // An empty mask cannot even be made: a Ranges refuses it.
  CHECK_THROWS_WITH(mix.with_shard({.mask = {20, 20}, .stream = 0, .budget = 5}),
                    Contains("mask.start must be < mask.stop (got mask.start 20, mask.stop 20)"));
  CHECK_THROWS_WITH(mix.with_shard({.mask = {{0, 10}, {20, 30}}, .stream = 0, .budget = 5}),
                    Contains("a shard's mask must be one range, not 2 ranges"));
  // [0, 25) of 50: dataset 1's 2 chunks give it chunk [0, floor(25 * 2 / 50)) = [0, 1), rows [30, 40).
  // [0, 24) gives it [0, floor(48 / 50)) = [0, 0): no chunk.
  CHECK_NOTHROW(mix.with_shard({.mask = {0, 25}, .stream = 0, .budget = 5}));
  CHECK_THROWS_WITH(mix.with_shard({.mask = {0, 24}, .stream = 0, .budget = 5}),
                    Contains("dataset 1 a part [30, 30) of 0 observations, fewer than chunk_size (10)"));
}

TEST_CASE("MixtureSampler's random stream is pinned", "[mixture]") {
  // Computed once from the implementation and stored: they pin the streams (dataset order, chunk
  // order per pass, positions). Change them only for a deliberate, documented change.
  // The stored values are of generation 1 of its order: a change of them comes with a new
  // order_generation (which refuses the states of the old order), and a new generation with new values.
  STATIC_REQUIRE(cs::MixtureSampler::order_generation == 1);
  cs::MixtureSampler mix({100, 50, 30},
                         {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 42, .weights = {2, 1, 1}});
  const Requests e0 = support::epoch(mix, 180);
  REQUIRE(e0.size() == 9);
  std::vector<std::vector<cs::Slice>> chunks;
  for (const OwnedRequest& request : e0) chunks.push_back(request.chunks);
  CHECK(chunks == std::vector<std::vector<cs::Slice>>{{{50, 60}, {60, 70}},
                                                      {{70, 80}, {10, 20}},
                                                      {{40, 50}, {30, 40}},
                                                      {{170, 180}, {170, 180}},  // pass 0's last, pass 1's first
                                                      {{160, 170}, {150, 160}},
                                                      {{130, 140}, {100, 110}},
                                                      {{80, 90}, {20, 30}},
                                                      {{0, 10}, {90, 100}},
                                                      {{120, 130}, {140, 150}}});
  CHECK(e0.front().positions() ==
        std::vector<std::int64_t>{12, 15, 2, 5, 18, 11, 8, 6, 16, 0, 9, 3, 17, 10, 13, 4, 1, 14, 19, 7});
}

}  // namespace test_mixture_sampler
