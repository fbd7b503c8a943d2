// SPDX-License-Identifier: MIT
// MixtureSampler: epoch invariants over random configurations (one dataset per request, the
// aligned grid, exact largest-remainder quotas, whole passes when a dataset is oversampled),
// worked examples, the uniformity of the interleaving (chi-square), temperature, update_weights,
// determinism, exact resume and workers, DistributedSampler in both modes, validation messages,
// sizes near 2^62, and a pinned stream.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/sampler.hpp>

#include "harness.hpp"
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

namespace {

namespace cs = chunksampler;
using support::after;
using support::ceil_div;
using support::check_resume;
using support::check_workers;
using support::ConfigRng;
using support::OwnedRequest;
using support::Tally;
using Requests = std::vector<OwnedRequest>;
using Mixture = cs::DistributedSampler<cs::MixtureSampler>;

__extension__ using int128 = __int128;
__extension__ using uint128 = unsigned __int128;

// A mixture's configuration; weights are small integers (or none) so the quotas can be computed
// exactly here, from the specification, when the temperature is 1.
struct MixConfig {
  std::vector<std::int64_t> sizes;
  std::int64_t chunk = 1;
  std::int64_t preload = 1;
  std::int64_t batch = 1;
  bool drop_last = false;
  std::optional<std::int64_t> num_samples;
  std::vector<std::int64_t> weights;  // empty: equal weights
  double temperature = 1.0;
  std::uint64_t seed = 0;
  std::int64_t after = 0;  // observations past the last dataset

  [[nodiscard]] std::int64_t total() const { return std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}); }
  [[nodiscard]] std::int64_t n_obs() const { return total() + after; }
  [[nodiscard]] std::int64_t budget() const { return num_samples.value_or(total()); }
  [[nodiscard]] std::int64_t used(std::int64_t positions) const {
    return drop_last ? positions / batch * batch : positions;
  }
  [[nodiscard]] std::vector<std::int64_t> boundaries() const {
    std::vector<std::int64_t> b{0};
    for (const std::int64_t s : sizes) b.push_back(b.back() + s);
    return b;
  }
  [[nodiscard]] std::vector<cs::Slice> datasets() const {
    const auto b = boundaries();
    std::vector<cs::Slice> result;
    for (std::size_t d = 0; d + 1 < b.size(); ++d) result.push_back({b[d], b[d + 1]});
    return result;
  }
  [[nodiscard]] std::vector<std::int64_t> integer_weights() const {
    return weights.empty() ? std::vector<std::int64_t>(sizes.size(), 1) : weights;
  }
  [[nodiscard]] cs::MixtureOptions options() const {
    return {.chunk_size = chunk,
            .preload_nchunks = preload,
            .batch_size = batch,
            .drop_last = drop_last,
            .seed = seed,
            .num_samples = num_samples,
            .weights = std::vector<double>(weights.begin(), weights.end()),
            .temperature = temperature};
  }
  [[nodiscard]] cs::MixtureSampler sampler() const { return cs::MixtureSampler(sizes, options()); }
  [[nodiscard]] std::string describe() const {
    return fmt::format("sizes {} chunk {} preload {} batch {} drop_last {} num_samples {} weights {} temperature {} "
                       "seed {} n_obs {}",
                       sizes, chunk, preload, batch, drop_last,
                       num_samples ? std::to_string(*num_samples) : std::string("none"), weights, temperature, seed,
                       n_obs());
  }
};

// 1 to 5 datasets of 1 to 6 chunks, some with a tail the grid leaves out; weights 0 to 6 (or none),
// a quarter of them at another temperature; num_samples (up to 3 times the sizes) a third of the time.
MixConfig random_mix(ConfigRng& g, std::int64_t min_chunks = 1) {
  MixConfig c;
  c.chunk = g.between(1, 8);
  c.preload = g.between(1, 4);
  c.batch = g.divisor_of(c.chunk * c.preload);
  const std::int64_t n = g.between(1, 5);
  for (std::int64_t d = 0; d < n; ++d)
    c.sizes.push_back(c.chunk * g.between(min_chunks, min_chunks + 5) + (g.coin() ? g.between(0, c.chunk - 1) : 0));
  if (g.between(0, 3) != 0) {
    for (std::int64_t d = 0; d < n; ++d) c.weights.push_back(g.between(0, 3) == 0 ? 0 : g.between(1, 6));
    if (std::ranges::all_of(c.weights, [](std::int64_t w) { return w == 0; }))
      c.weights[static_cast<std::size_t>(g.between(0, n - 1))] = g.between(1, 6);
  }
  if (g.between(0, 3) == 0) {
    constexpr double temperatures[] = {0.5, 2.0, 7.5};
    c.temperature = temperatures[g.between(0, 2)];
  }
  if (g.between(0, 2) == 0) c.num_samples = g.between(1, 3 * c.total());
  c.drop_last = g.coin();
  c.seed = g.next();
  c.after = g.coin() ? g.between(0, 20) : 0;
  return c;
}

// Largest-remainder quotas of `requests` by integer weights, from the specification.
std::vector<std::int64_t> expected_quotas(std::int64_t requests, const std::vector<std::int64_t>& weights) {
  const std::int64_t sum = std::accumulate(weights.begin(), weights.end(), std::int64_t{0});
  std::vector<std::int64_t> quotas;
  std::vector<std::int64_t> remainders;
  for (const std::int64_t w : weights) {
    quotas.push_back(requests * w / sum);
    remainders.push_back(requests * w % sum);
  }
  std::int64_t left = requests - std::accumulate(quotas.begin(), quotas.end(), std::int64_t{0});
  while (left-- > 0) {
    std::size_t best = 0;
    for (std::size_t d = 1; d < remainders.size(); ++d)
      if (remainders[d] > remainders[best]) best = d;
    ++quotas[best];
    remainders[best] = -1;
  }
  return quotas;
}

// Dataset d's part under the shard [a, b) of a collection of `total`: the same fraction of it, in
// whole chunks of its grid of size / chunk chunks.
cs::Slice expected_part(cs::Slice dataset, std::int64_t chunk, std::int64_t a, std::int64_t b, std::int64_t total) {
  const int128 chunks = dataset.size() / chunk;
  const auto at = [&](std::int64_t x) {
    return dataset.start + static_cast<std::int64_t>(static_cast<int128>(x) * chunks / total) * chunk;
  };
  return {at(a), at(b)};
}

// What one epoch read, dataset by dataset, and whether its requests have the mixture's shape.
struct Reads {
  std::vector<std::int64_t> requests;                              // per dataset
  std::vector<std::int64_t> chunks;                                // per dataset
  std::vector<std::map<std::int64_t, std::int64_t>> grid_reads;   // per dataset: grid chunk -> times read
  std::vector<std::size_t> order;                                  // the dataset of each request
  bool one_part = true;     // every request's chunks lie in one part
  bool on_grid = true;      // every chunk starts on its part's grid, inside its m full chunks
  bool full_chunks = true;  // every chunk is chunk_size long, but the epoch's last, cut to `last_rows`
  bool full_requests = true;  // every request but the last has preload chunks
  bool all_rows_used = true;  // every request uses each row of its buffer exactly once
};

// `parts`: the range each dataset reads; `last_rows`: the rows of the epoch's last request.
Reads analyze(const Requests& requests, const std::vector<cs::Slice>& parts, std::int64_t chunk,
              std::int64_t preload, std::int64_t last_rows) {
  Reads r;
  r.requests.assign(parts.size(), 0);
  r.chunks.assign(parts.size(), 0);
  r.grid_reads.resize(parts.size());
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const OwnedRequest& request = requests[k];
    const bool last = k + 1 == requests.size();
    if (request.chunks.empty()) {
      r.one_part = false;
      continue;
    }
    const std::int64_t first = request.chunks[0].start;
    const auto part_it = std::ranges::find_if(parts, [&](const cs::Slice& p) { return p.contains(first); });
    if (part_it == parts.end()) {
      r.one_part = false;
      continue;
    }
    const auto d = static_cast<std::size_t>(part_it - parts.begin());
    const cs::Slice part = *part_it;
    const std::int64_t grid_end = part.start + part.size() / chunk * chunk;
    ++r.requests[d];
    r.order.push_back(d);
    if (!last && static_cast<std::int64_t>(request.chunks.size()) != preload) r.full_requests = false;
    for (std::size_t j = 0; j < request.chunks.size(); ++j) {
      const cs::Slice c = request.chunks[j];
      if (!(part.contains(c.start) && c.stop <= grid_end)) r.one_part = false;
      if ((c.start - part.start) % chunk != 0 || c.start + chunk > grid_end) r.on_grid = false;
      const bool final_chunk = last && j + 1 == request.chunks.size();
      const std::int64_t expected = final_chunk ? last_rows - (static_cast<std::int64_t>(j) * chunk) : chunk;
      if (c.size() != expected) r.full_chunks = false;
      ++r.chunks[d];
      ++r.grid_reads[d][(c.start - part.start) / chunk];
    }
    std::vector<std::int64_t> p = request.positions();
    std::ranges::sort(p);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(request.buffer_size()));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    if (p != rows) r.all_rows_used = false;
  }
  return r;
}

// Every grid chunk of dataset d read floor(c / m) or ceil(c / m) times, c the chunks it read:
// whole passes over the grid, then part of one (which reads each chunk at most once).
bool whole_passes(const Reads& r, std::size_t d, std::int64_t grid) {
  const std::int64_t c = r.chunks[d];
  std::int64_t above = 0;
  for (std::int64_t i = 0; i < grid; ++i) {
    const auto it = r.grid_reads[d].find(i);
    const std::int64_t times = it == r.grid_reads[d].end() ? 0 : it->second;
    if (times != c / grid && times != c / grid + 1) return false;
    above += times == c / grid + 1 ? 1 : 0;
  }
  return above == c % grid;
}

template <class S>
std::vector<Requests> epochs_of(S sampler, std::int64_t n_obs, int count) {
  std::vector<Requests> result;
  for (int e = 0; e < count; ++e) result.push_back(support::epoch(sampler, n_obs));
  return result;
}

// Chi-square statistic of `observed` against `expected` counts.
double chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
  double total = 0.0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double diff = observed[i] - expected[i];
    const double term = diff * diff;
    total += term / expected[i];
  }
  return total;
}

}  // namespace

TEST_CASE("MixtureSampler is a DistributableSampler and DistributedSampler wraps it", "[mixture]") {
  STATIC_REQUIRE(cs::Sampler<cs::MixtureSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::MixtureSampler>);
  STATIC_REQUIRE(cs::EpochPlan<cs::detail::MixturePlan>);
  STATIC_REQUIRE(cs::Sampler<Mixture>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<Mixture>);

  const cs::MixtureSampler mix({100, 50, 30}, {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5,
                                               .weights = {2, 1, 1}});
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
  CHECK(mix.n_iters(200) == 36);
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
    cs::MixtureSampler mix({60, 30, 10}, {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 5, .seed = 11,
                                          .num_samples = num_samples, .weights = weights});
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
    const cs::MixtureOptions options{.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 3,
                                     .weights = {1, 2, 3}};
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
  cs::MixtureSampler mix({400, 100}, {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 5,
                                      .weights = {4, 1}});
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
    cs::MixtureSampler three({300, 200, 100}, {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10,
                                               .seed = seed, .weights = {3, 2, 1}});
    const Requests requests = support::epoch(three, 600);
    const Reads r = analyze(requests, {{0, 300}, {300, 500}, {500, 600}}, 10, 1, 10);
    REQUIRE(r.requests == std::vector<std::int64_t>{30, 20, 10});
    for (std::size_t k = 0; k < 60; ++k) per_slot[k][r.order[k]] += 1.0;
  }
  double statistic = 0.0;
  for (const auto& counts : per_slot)
    statistic += chi_square({counts[0], counts[1], counts[2]}, {150.0, 100.0, 50.0});
  CHECK(statistic < 173.6);
}

TEST_CASE("MixtureSampler temperature: 1 keeps the weights, large tends to uniform, 0 excludes", "[mixture]") {
  const std::vector<std::int64_t> sizes = {50, 50, 50, 50, 50};
  const auto probabilities = [&](std::vector<double> weights, double temperature) {
    return cs::MixtureSampler(sizes, {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10,
                                      .weights = std::move(weights), .temperature = temperature})
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
      cs::MixtureSampler mix(sizes, {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 9,
                                     .num_samples = 1000, .weights = {1, 0, 5, 0, 2}, .temperature = temperature});
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
  const cs::MixtureOptions options{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = 77,
                                   .weights = {1, 1, 1}};
  const std::vector<std::int64_t> sizes = {100, 60, 40};
  const std::vector<double> other = {1, 0, 8};
  cs::MixtureOptions other_options = options;
  other_options.weights = other;
  const auto fresh = [&](const cs::MixtureOptions& o, std::uint64_t epoch) {
    cs::MixtureSampler s(sizes, o);
    s.set_epoch(epoch);
    return s;
  };

  cs::MixtureSampler mix(sizes, options);
  auto epoch0 = mix.sample(200);
  const cs::SamplerState before = mix.state(3);
  const std::uint64_t old_fingerprint = mix.fingerprint();
  mix.update_weights(other);
  CHECK(mix.weights() == other);
  CHECK(mix.fingerprint() != old_fingerprint);
  // The range returned before the update keeps its plan.
  const Requests played0 = support::collect(epoch0);
  auto reference0 = fresh(options, 0);
  CHECK(played0 == support::epoch(reference0, 200));
  // The next epoch is played under the new weights: dataset 1 is never read.
  const Requests played1 = support::epoch(mix, 200);
  auto reference1 = fresh(other_options, 1);
  CHECK(played1 == support::epoch(reference1, 200));
  auto old1 = fresh(options, 1);
  CHECK(played1 != support::epoch(old1, 200));
  for (const auto& batch : support::observations(played1))
    for (const std::int64_t obs : batch) CHECK_FALSE((obs >= 100 && obs < 160));

  // A state taken under the old weights is refused under the new ones, and accepted once they are
  // set back; it then resumes the epoch as it was played.
  cs::MixtureSampler updated = fresh(other_options, 0);
  CHECK_THROWS_WITH(updated.restore(before), Contains("fingerprint"));
  updated.update_weights({1, 1, 1});
  CHECK(updated.fingerprint() == old_fingerprint);
  updated.restore(before);
  CHECK(support::collect(updated.sample(200)) == after(played0, 3));

  // A restore is checked when it is made: weights changed after it would replay another epoch.
  cs::MixtureSampler pending(sizes, options);
  pending.restore(before);
  CHECK_THROWS_WITH(pending.update_weights(other), Contains("pending"));
  pending.update_weights({1, 1, 1});  // the same weights: nothing changes
  CHECK(support::collect(pending.sample(200)) == after(played0, 3));

  // update_weights checks as the constructor does, and a refused update changes nothing.
  cs::MixtureSampler checked(sizes, options);
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

TEST_CASE("DistributedSampler<MixtureSampler>: sampler() updates the weights on every rank; a stale restore is refused",
          "[mixture][distributed]") {
  using Catch::Matchers::Contains;
  using Dist = cs::DistributedSampler<cs::MixtureSampler>;
  const cs::MixtureOptions options{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = 78,
                                   .weights = {1, 1, 1}};
  const std::vector<std::int64_t> sizes = {100, 60, 40};
  const std::vector<double> other = {1, 0, 8};
  cs::MixtureOptions other_options = options;
  other_options.weights = other;
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
    INFO((mode == cs::ShardMode::global ? "global" : "contiguous"));
    for (std::int64_t r = 0; r < 2; ++r) {
      INFO("rank " << r);
      const cs::DistInfo info{.rank = r, .world_size = 2};
      Dist dist(cs::MixtureSampler(sizes, options), info, {.mode = mode});
      const Requests epoch0 = support::epoch(dist, 200);
      const cs::SamplerState before = dist.state(2);
      dist.sampler().update_weights(other);
      // The next epoch is what a job built with the new weights plays; dataset 1 is never read.
      Dist built(cs::MixtureSampler(sizes, other_options), info, {.mode = mode});
      built.set_epoch(1);
      const Requests epoch1 = support::epoch(dist, 200);
      CHECK(epoch1 == support::epoch(built, 200));
      for (const auto& batch : support::observations(epoch1))
        for (const std::int64_t obs : batch) CHECK_FALSE((obs >= 100 && obs < 160));

      // A state restored, then the weights changed: sample() refuses to continue an epoch that was
      // never played; set back, the state continues the first epoch exactly.
      Dist stale(cs::MixtureSampler(sizes, options), info, {.mode = mode});
      stale.restore(before);
      stale.sampler().update_weights(other);
      CHECK_THROWS_WITH(stale.sample(200), Contains("fingerprint"));
      stale.sampler().update_weights({1, 1, 1});
      CHECK(support::collect(stale.sample(200)) == after(epoch0, 2));
    }
  }
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
      return cs::MixtureOptions{.chunk_size = 10, .preload_nchunks = 3, .batch_size = 6, .seed = s,
                                .weights = {1, 2, 3}};
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
    const cs::MixtureSampler mix({103, 61, 37}, {.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 8,
                                                 .weights = {1, 2, 3}});
    for (const cs::Remainder policy : {cs::Remainder::pad, cs::Remainder::rotate}) {
      for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
        std::set<std::int64_t> counts;
        for (std::int64_t r = 0; r < 3; ++r) {
          Mixture dist(mix, cs::DistInfo{.rank = r, .world_size = 3}, {.remainder = policy});
          dist.set_epoch(epoch);
          const cs::Slice shard = dist.shard(201);
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

TEST_CASE("MixtureSampler with_shard: the same fraction of every dataset, disjoint for disjoint masks",
          "[mixture]") {
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
    cs::MixtureSampler mix({two62 / 2, two62 / 2}, {.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1,
                                                    .weights = {1, 2}});
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
    const cs::MixtureSampler mix(sizes, {.chunk_size = 1024, .preload_nchunks = 4, .batch_size = 256, .seed = 5,
                                         .weights = {1, 1, 2}});
    for (const std::int64_t world : {std::int64_t{3}, std::int64_t{7}}) {
      for (std::int64_t r = 0; r < world; ++r) {
        Mixture dist(mix, cs::DistInfo{.rank = r, .world_size = world});
        const cs::Slice shard = dist.shard(two62);
        const std::int64_t n = dist.n_batches(two62);
        cs::SamplerState state = dist.state(0);  // the epoch's start, moved to the point of its middle
        state.n_obs = two62;
        state.batches_done = n / 2 + 1;
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
                    Contains("batch_size (21) must be <= chunk_size * preload_nchunks (20)"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.batch_size = 3; })),
                    Contains("batch_size (3) must divide chunk_size * preload_nchunks (20)"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.preload_nchunks = std::int64_t{1} << 61; })),
                    Contains("chunk_size * preload_nchunks"));
  CHECK_THROWS_WITH(make(sizes, with([](auto& o) { o.num_samples = 0; })),
                    Contains("num_samples (0) must be in [1, 2^62]"));
  CHECK_THROWS_WITH(make({}, ok), Contains("sizes is empty"));
  CHECK_THROWS_WITH(make({30, 9, 40}, ok), Contains("sizes[1] (9) must be >= chunk_size (10)"));
  CHECK_THROWS_WITH(make({std::int64_t{1} << 62, 10}, ok), Contains("sizes' sum must be <= 2^62") &&
                                                                 Contains("sizes[1] (10)"));
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
  CHECK_THROWS_WITH(mix.with_shard({.mask = {20, 20}, .stream = 0, .budget = 5}), Contains("non-empty"));
  // [0, 25) of 50: dataset 1's 2 chunks give it chunk [0, floor(25 * 2 / 50)) = [0, 1), rows [30, 40).
  // [0, 24) gives it [0, floor(48 / 50)) = [0, 0): no chunk.
  CHECK_NOTHROW(mix.with_shard({.mask = {0, 25}, .stream = 0, .budget = 5}));
  CHECK_THROWS_WITH(mix.with_shard({.mask = {0, 24}, .stream = 0, .budget = 5}),
                    Contains("dataset 1 a part [30, 30) of 0 observations, fewer than chunk_size (10)"));
}

TEST_CASE("MixtureSampler's random stream is pinned", "[mixture]") {
  // Computed once from the implementation and stored: they pin the streams (dataset order, chunk
  // order per pass, positions). Change them only for a deliberate, documented change.
  cs::MixtureSampler mix({100, 50, 30}, {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 42,
                                         .weights = {2, 1, 1}});
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
