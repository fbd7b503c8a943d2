// SPDX-License-Identifier: MIT
// ClassSampler: class-coherent batches over random code layouts (no batch mixes classes, chunks
// inside one run of their group's class and inside the range, excluded classes never read), masks
// and renormalization, a worked example, the run-length rule's message, determinism and epochs,
// fingerprints, with_shard, validation, rebuilding from the kept runs, and a pinned stream. Class frequencies are
// tested in test_class_statistics.cpp, resume, workers and DistributedSampler in test_class_distributed.cpp, masks of
// many ranges in test_class_ranges.cpp, against the model of class_support.hpp.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_class_sampler {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using support::Batches;
using support::ceil_div;
using support::ConfigRng;
using support::OwnedRequest;

}  // namespace

TEST_CASE("ClassSampler is a distributable sampler", "[class]") {
  STATIC_REQUIRE(cs::Sampler<cs::ClassSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::ClassSampler>);
  STATIC_REQUIRE(cs::EpochPlan<cs::detail::ClassPlan>);
  STATIC_REQUIRE(cs::Sampler<Dist>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::ClassSampler::range_type>);
}

TEST_CASE("ClassSampler: a group of chunks always divides a request", "[class]") {
  // batch_size | chunk_size * preload_nchunks implies batch_size / gcd(chunk_size, batch_size)
  // divides preload_nchunks, so a class group never straddles two requests.
  int checked = 0;
  for (std::int64_t chunk = 1; chunk <= 40; ++chunk)
    for (std::int64_t preload = 1; preload <= 40; ++preload)
      for (std::int64_t batch = 1; batch <= chunk * preload; ++batch) {
        if (chunk * preload % batch != 0) continue;
        ++checked;
        REQUIRE(preload % (batch / std::gcd(chunk, batch)) == 0);
      }
  CHECK(checked > 10'000);
}

TEST_CASE("ClassSampler epoch invariants over random code layouts", "[class]") {
  ConfigRng g(5150);
  int masked = 0;
  int excluded_short = 0;
  int with_drop = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const ClassConfig c = random_config(g);
    INFO(c.describe());
    cs::ClassSampler sampler = c.sampler();
    CHECK(sampler.shuffle());
    CHECK(sampler.replacement());
    CHECK(sampler.batch_size() == c.options.batch_size);
    CHECK(sampler.chunk_size() == c.options.chunk_size);
    CHECK(sampler.preload_nchunks() == c.options.preload_nchunks);
    CHECK(sampler.drop_last() == c.options.drop_last);
    CHECK(sampler.mask() == c.options.mask);
    CHECK(sampler.num_samples() == *c.options.num_samples);
    CHECK(sampler.class_weights() == c.weights);
    const std::int32_t max_code = *std::ranges::max_element(c.codes);
    CHECK(sampler.n_classes() == (c.weights.empty() ? max_code + 1 : std::ssize(c.weights)));
    CHECK(sampler.epoch_size(c.n_obs()) == *c.options.num_samples);
    const std::int64_t expected = c.options.drop_last ? *c.options.num_samples / c.options.batch_size
                                                      : ceil_div(*c.options.num_samples, c.options.batch_size);
    REQUIRE(sampler.n_batches(c.n_obs()) == expected);
    REQUIRE(sampler.n_batches(c.n_obs()) == expected);
    const std::vector<OwnedRequest> requests = support::epoch(sampler, c.n_obs());
    check_epoch(c, c.range(), c.used(), requests);
    masked += c.options.mask ? 1 : 0;
    with_drop += c.options.drop_last && c.used() < *c.options.num_samples ? 1 : 0;
    // An excluded class's short run, present and allowed.
    for (std::size_t i = 0, j = 0; i < c.codes.size(); i = j) {
      for (j = i; j < c.codes.size() && c.codes[j] == c.codes[i]; ++j) {}
      if (weight_of(c.weights, c.codes[i]) == 0 && std::cmp_less(j - i, c.options.chunk_size)) {
        ++excluded_short;
        break;
      }
    }
  }
  CHECK(masked > 100);
  CHECK(excluded_short > 30);
  CHECK(with_drop > 50);
}

TEST_CASE("ClassSampler: a mask renormalizes the weights; a mask without a sampled chunk throws", "[class]") {
  using Catch::Contains;
  // runs: class 0 [0, 10), class 1 [10, 13) (short, excluded), class 2 [13, 33), class 0 [33, 37)
  const Codes codes = runs_of({{0, 10}, {1, 3}, {2, 20}, {0, 4}});
  const std::vector<double> weights{1, 0, 3};
  const cs::ClassOptions base{
      .chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 1, .num_samples = 400, .class_weights = weights};

  SECTION("a mask holding only class 2 reads only class 2") {
    cs::ClassOptions o = base;
    o.mask = cs::Slice{8, 37};  // class 0 keeps [8, 10) and [33, 37): 2 rows, then a whole run of 4
    cs::ClassSampler sampler(codes, o);
    const Batches batches = support::observations(support::epoch(sampler, 37));
    std::set<std::int32_t> seen;
    for (const auto& b : batches)
      for (const std::int64_t obs : b) seen.insert(codes[static_cast<std::size_t>(obs)]);
    CHECK(seen == std::set<std::int32_t>{0, 2});
    o.mask = cs::Slice{8, 36};  // the last class-0 run keeps 3 rows: no chunk of class 0 remains
    cs::ClassSampler only2(codes, o);
    seen.clear();
    for (const auto& b : support::observations(support::epoch(only2, 37)))
      for (const std::int64_t obs : b) seen.insert(codes[static_cast<std::size_t>(obs)]);
    CHECK(seen == std::set<std::int32_t>{2});
  }
  SECTION("a mask over excluded or cut runs only throws, naming the range") {
    cs::ClassOptions o = base;
    o.mask = cs::Slice{7, 16};  // class 0: 3 rows, class 1 excluded, class 2: 3 rows
    REQUIRE_THROWS_AS(cs::ClassSampler(codes, o), std::invalid_argument);
    REQUIRE_THROWS_WITH(cs::ClassSampler(codes, o), Contains("[7, 16)") && Contains("chunk_size (4)"));
    o.mask = cs::Slice{7, 17};  // class 2 now holds one whole chunk
    CHECK_NOTHROW(cs::ClassSampler(codes, o));
  }
  SECTION("a shard without a sampled chunk throws when planned") {
    const cs::ClassSampler sampler(codes, base);
    const cs::ClassSampler shard = sampler.with_shard({.mask = {9, 15}, .stream = 0, .budget = 8});
    REQUIRE_THROWS_WITH(shard.validate(37), Contains("[9, 15)"));
    REQUIRE_THROWS_AS(shard.plan(37, 0), std::invalid_argument);
  }
  SECTION("the model agrees on which random masks hold a chunk") {
    ConfigRng g(616);
    int thrown = 0;
    for (int trial = 0; trial < 300; ++trial) {
      ClassConfig c;
      c.options = {
          .chunk_size = g.between(1, 6), .preload_nchunks = 1, .batch_size = 1, .seed = g.next(), .num_samples = 30};
      c.options.batch_size = g.divisor_of(c.options.chunk_size);
      draw_codes(g, c, g.between(1, 8), 6);
      const cs::Slice mask = g.sub_range(c.n_obs());
      c.options.mask = mask;
      INFO(c.describe());
      if (valid_starts(c.codes, c.weights, c.options.chunk_size, mask).empty()) {
        ++thrown;
        CHECK_THROWS_AS(c.sampler(), std::invalid_argument);
        // The same range given as a shard of the unmasked sampler throws when planned.
        c.options.mask.reset();
        const cs::ClassSampler shard = c.sampler().with_shard({.mask = mask, .stream = 1, .budget = 30});
        CHECK_THROWS_AS(shard.plan(c.n_obs(), 0), std::invalid_argument);
      } else {
        cs::ClassSampler sampler = c.sampler();
        check_epoch(c, mask, 30, support::epoch(sampler, c.n_obs()));
      }
    }
    CHECK(thrown > 30);
  }
}

TEST_CASE("ClassSampler: a worked example", "[class]") {
  // Class 0: [0, 10) and [30, 40) (6 starts each for chunk 5); class 1: [10, 30) (16 starts).
  // 23 positions: chunks of 5, 5, 5, 5, 3; batches of 5 (the last 3); requests of 2 chunks.
  const Codes codes = runs_of({{0, 10}, {1, 20}, {0, 10}});
  cs::ClassSampler sampler(codes,
                           {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = 9, .num_samples = 23});
  CHECK(sampler.n_classes() == 2);
  CHECK(sampler.n_batches(40) == 5);
  const auto plan = sampler.plan(40, 0);
  CHECK(plan.n_requests() == 3);
  CHECK(plan.n_chunks() == 5);
  CHECK(plan.group_chunks() == 1);
  const auto windows = plan.windows();
  REQUIRE(windows.size() == 2);
  CHECK(windows[0].starts == 12);
  CHECK(windows[1].starts == 16);
  const std::vector<OwnedRequest> requests = support::epoch(sampler, 40);
  REQUIRE(requests.size() == 3);
  CHECK(requests[2].chunks.size() == 1);
  CHECK(requests[2].chunks[0].size() == 3);
  CHECK(requests[2].batches.size() == 1);
  CHECK(requests[2].batches[0].size() == 3);
  check_epoch({.codes = codes,
               .weights = {},
               .options = {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 23}},
              {0, 40}, 23, requests);

  SECTION("drop_last: 4 full batches, the last chunk's 3 rows not read") {
    cs::ClassSampler dropping(
        codes,
        {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .drop_last = true, .seed = 9, .num_samples = 23});
    CHECK(dropping.n_batches(40) == 4);
    const std::vector<OwnedRequest> r = support::epoch(dropping, 40);
    REQUIRE(r.size() == 2);
    CHECK(support::n_batches(r) == 4);
    CHECK(r[1].buffer_size() == 10);
  }
  SECTION("drop_last with fewer positions than a batch: an empty epoch") {
    cs::ClassSampler empty(
        codes, {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .drop_last = true, .num_samples = 4});
    CHECK(empty.n_batches(40) == 0);
    CHECK(support::epoch(empty, 40).empty());
    CHECK(empty.epoch() == 1);
  }
  SECTION("a lcm block of chunk 4, batch 6: groups of 3 chunks, two batches each") {
    const Codes long_runs = runs_of({{0, 12}, {1, 12}, {2, 12}});
    cs::ClassSampler grouped(long_runs,
                             {.chunk_size = 4, .preload_nchunks = 6, .batch_size = 6, .seed = 5, .num_samples = 240});
    CHECK(grouped.plan(36, 0).group_chunks() == 3);
    check_epoch({.codes = long_runs,
                 .weights = {},
                 .options = {.chunk_size = 4, .preload_nchunks = 6, .batch_size = 6, .num_samples = 240}},
                {0, 36}, 240, support::epoch(grouped, 36));
  }
}

TEST_CASE("ClassSampler: the run-length rule names exactly the classes with short runs", "[class]") {
  using Catch::Contains;
  ConfigRng g(4711);
  int thrown = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t chunk = g.between(2, 7);
    const auto n_classes = static_cast<std::int32_t>(g.between(1, 8));
    std::vector<double> weights;
    if (g.coin()) {
      for (std::int32_t k = 0; k < n_classes; ++k) weights.push_back(g.between(0, 2) == 0 ? 0.0 : 1.0);
      weights[static_cast<std::size_t>(g.between(0, n_classes - 1))] = 2.0;
    }
    Codes codes;
    for (std::int64_t r = g.between(1, 12); r > 0; --r) {
      const auto k = static_cast<std::int32_t>(g.between(0, n_classes - 1));
      codes.insert(codes.end(), static_cast<std::size_t>(g.between(g.coin() ? 1 : chunk, chunk + 4)), k);
    }
    // The model: short runs of sampled classes, by class: how many and the shortest.
    std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> bad;
    for (std::size_t i = 0, j = 0; i < codes.size(); i = j) {
      for (j = i; j < codes.size() && codes[j] == codes[i]; ++j) {}
      const auto length = static_cast<std::int64_t>(j - i);
      if (weight_of(weights, codes[i]) > 0 && length < chunk) {
        auto& [count, shortest] = bad[codes[i]];
        shortest = count == 0 ? length : std::min(shortest, length);
        ++count;
      }
    }
    const cs::ClassOptions options{
        .chunk_size = chunk, .preload_nchunks = 1, .batch_size = 1, .num_samples = 10, .class_weights = weights};
    std::string message;
    try {
      (void)cs::ClassSampler(codes, options);
    } catch (const cs::ShortRunsError& e) {
      message = e.what();
      std::vector<std::int32_t> expected_codes;
      for (const auto& entry : bad) expected_codes.push_back(entry.first);
      CHECK(e.codes() == expected_codes);  // every class the message names, as data
    } catch (const std::invalid_argument& e) {
      message = e.what();
    }
    INFO("chunk " << chunk << " weights " << fmt::format("{}", fmt::join(weights, ",")) << ": " << message);
    if (bad.empty()) {
      // Without short runs it throws only when no sampled class has a run at all.
      CHECK(message.find("short") == std::string::npos);
      continue;
    }
    ++thrown;
    std::string expected;
    for (const auto& [k, v] : bad)
      expected += fmt::format("{}class {} ({} short run{}, shortest {})", expected.empty() ? "" : ", ", k, v.first,
                              v.first == 1 ? "" : "s", v.second);
    CHECK_THAT(message, Contains(fmt::format("chunk_size ({})", chunk)) &&
                            Contains(fmt::format("classes with shorter runs: {};", expected)));
  }
  CHECK(thrown > 100);
}

TEST_CASE("ClassSampler's scan keeps each sampled class's runs in row order, by code, dense codes or sparse",
          "[class]") {
  // The model: the run-length encoding of the codes, the runs of classes with a positive weight
  // grouped by code (ascending), each class's in row order. Sparse codes (up to 2^31 - 1) take
  // the scan's sort by code, dense ones its counting sort.
  ConfigRng g(20261136U);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t chunk = g.between(1, 4);
    const bool sparse = g.coin();
    const auto n_classes = static_cast<std::int32_t>(g.between(1, 9));
    std::vector<std::int32_t> names;
    for (std::int32_t k = 0; k < n_classes; ++k)
      names.push_back(sparse ? static_cast<std::int32_t>(g.between(0, std::numeric_limits<std::int32_t>::max())) : k);
    Codes codes;
    for (std::int64_t r = g.between(1, 30); r > 0; --r)
      codes.insert(codes.end(), static_cast<std::size_t>(g.between(chunk, chunk + 3)),
                   names[static_cast<std::size_t>(g.between(0, n_classes - 1))]);
    std::map<std::int32_t, std::vector<cs::Slice>> model;
    for (std::size_t i = 0, j = 0; i < codes.size(); i = j) {
      for (j = i; j < codes.size() && codes[j] == codes[i]; ++j) {}
      model[codes[i]].push_back({static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)});
    }
    std::vector<std::int32_t> expected_codes;
    std::vector<cs::Slice> expected_runs;
    for (const auto& [code, runs] : model) {
      expected_codes.insert(expected_codes.end(), runs.size(), code);
      expected_runs.insert(expected_runs.end(), runs.begin(), runs.end());
    }
    CAPTURE(trial, chunk, sparse, codes.size());
    const cs::ClassRunTable table =
        cs::ClassSampler(codes, {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = 1, .num_samples = 10}).runs();
    CHECK(table.codes == expected_codes);
    CHECK(table.runs == expected_runs);
    CHECK(table.n_classes == std::int64_t{*std::ranges::max_element(codes)} + 1);
  }
}

TEST_CASE("ClassSampler: 10^5 classes of short runs are named 20 at a time, with a count of the rest", "[class]") {
  Codes codes;
  for (std::int32_t k = 0; k < 100'000; ++k) codes.insert(codes.end(), 3, k);
  REQUIRE_THROWS_WITH(
      cs::ClassSampler(codes, {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 1, .num_samples = 10}),
      Catch::Matchers::Contains(
          "classes with shorter runs: class 0 (1 short run, shortest 3), class 1 (1 short run, shortest 3)") &&
          Catch::Matchers::Contains("class 19 (1 short run, shortest 3) and 99980 more; lower chunk_size") &&
          !Catch::Matchers::Contains("class 20 ("));
  // The message lists 20; the error's codes hold all of them.
  try {
    (void)cs::ClassSampler(codes, {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 1, .num_samples = 10});
    FAIL("no ShortRunsError");
  } catch (const cs::ShortRunsError& e) {
    CHECK(e.codes().size() == 100'000);
    CHECK(e.codes().back() == 99'999);
  }
}

TEST_CASE("ClassSampler is deterministic per (seed, epoch); epochs and seeds differ", "[class]") {
  ConfigRng g(8080);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const ClassConfig c = random_config(g);
    INFO(c.describe());
    cs::ClassSampler a = c.sampler();
    cs::ClassSampler b = c.sampler();
    const auto a0 = support::epoch(a, c.n_obs());
    const auto a1 = support::epoch(a, c.n_obs());
    const auto a2 = support::epoch(a, c.n_obs());
    CHECK(a.epoch() == 3);
    CHECK(support::epoch(b, c.n_obs()) == a0);
    CHECK(support::epoch(b, c.n_obs()) == a1);
    cs::ClassSampler replay = c.sampler();
    replay.set_epoch(2);
    CHECK(support::epoch(replay, c.n_obs()) == a2);
    replay.set_epoch(0);
    CHECK(support::epoch(replay, c.n_obs()) == a0);
    // Two independent draws of a chunk coincide with probability at most 1 / (the fewest starts
    // a class has): with 3 starts or more and 12 chunks or more, equal epochs from other keys
    // have a chance below 2e-6, so equality is a broken stream.
    const auto starts = valid_starts(c.codes, c.weights, c.options.chunk_size, c.range());
    std::size_t fewest = std::numeric_limits<std::size_t>::max();
    for (const auto& [k, list] : starts) fewest = std::min(fewest, list.size());
    if (fewest >= 3 && c.used() >= 12 * c.options.chunk_size) {
      ++compared;
      CHECK(a0 != a1);
      CHECK(a1 != a2);
      cs::ClassOptions other = c.options;
      other.seed = c.options.seed + 1;
      cs::ClassSampler reseeded(c.codes, other);
      CHECK(support::epoch(reseeded, c.n_obs()) != a0);
    }
  }
  CHECK(compared > 30);
}

TEST_CASE("Class samplers made again from their runs plan the same epochs; bad runs are refused", "[class]") {
  ConfigRng g(6060);
  for (int trial = 0; trial < 150; ++trial) {
    const ClassConfig c = random_config(g);
    INFO(c.describe());
    cs::ClassSampler a = c.sampler();
    const cs::ClassRunTable runs = a.runs();
    CHECK(runs.n_obs == c.n_obs());
    CHECK(runs.n_classes == a.n_classes());
    REQUIRE(runs.codes.size() == runs.runs.size());
    for (std::size_t i = 0; i < runs.runs.size(); ++i) {
      CHECK(runs.runs[i].size() >= c.options.chunk_size);
      CHECK(weight_of(c.weights, runs.codes[i]) > 0);
      for (std::int64_t row = runs.runs[i].start; row < runs.runs[i].stop; ++row)
        CHECK(c.codes[static_cast<std::size_t>(row)] == runs.codes[i]);
    }
    cs::ClassSampler b(runs, c.options);
    CHECK(b.fingerprint() == a.fingerprint());
    CHECK(b.runs().runs == runs.runs);
    CHECK(b.runs().codes == runs.codes);
    CHECK(b.runs().runs_hash == runs.runs_hash);
    for (int e = 0; e < 2; ++e) CHECK(support::epoch(b, c.n_obs()) == support::epoch(a, c.n_obs()));
    // Another seed and no mask: as if made from the codes with them.
    cs::ClassOptions other = c.options;
    other.seed = c.options.seed + 1;
    other.mask = std::nullopt;
    cs::ClassSampler from_codes(c.codes, other);
    cs::ClassSampler from_runs(runs, other);
    CHECK(from_runs.fingerprint() == from_codes.fingerprint());
    CHECK(support::epoch(from_runs, c.n_obs()) == support::epoch(from_codes, c.n_obs()));
    // WeightedClassSampler keeps the same runs.
    const cs::WeightedClassOptions weighted = cs::weighted_options_of(c.options, cs::Composition::stratified);
    cs::WeightedClassSampler w(c.codes, weighted);
    cs::WeightedClassSampler w_again(w.runs(), weighted);
    CHECK(w_again.fingerprint() == w.fingerprint());
    CHECK(support::epoch(w_again, c.n_obs()) == support::epoch(w, c.n_obs()));
  }

  const std::vector<std::int32_t> codes = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2};
  const cs::ClassOptions options{
      .chunk_size = 2, .preload_nchunks = 1, .batch_size = 2, .num_samples = 8, .class_weights = {1.0, 1.0, 0.0}};
  const cs::ClassRunTable good = cs::ClassSampler(codes, options).runs();
  REQUIRE(good.runs == std::vector<cs::Slice>{{0, 4}, {4, 8}});
  REQUIRE(good.codes == std::vector<std::int32_t>{0, 1});
  const auto refused = [&](const auto& edit, const std::string& part) {
    cs::ClassRunTable bad = good;
    edit(bad);
    CHECK_THROWS_WITH(cs::ClassSampler(bad, options), Catch::Contains(part));
  };
  refused([](cs::ClassRunTable& t) { t.runs[1] = {3, 8}; }, "overlap");
  refused([](cs::ClassRunTable& t) { t.runs[1] = {4, 5}; }, "hold chunk_size (2)");
  refused([](cs::ClassRunTable& t) { t.runs[1] = {6, 11}; }, "must lie in [0, n_obs = 10)");
  refused([](cs::ClassRunTable& t) { t.codes[1] = 2; }, "whose weight is 0");
  refused([](cs::ClassRunTable& t) { t.codes[1] = 3; }, "codes[1] (3) must be in [0, n_classes = 3)");
  refused([](cs::ClassRunTable& t) { t.n_classes = 4; }, "match class_weights");
  refused([](cs::ClassRunTable& t) { t.codes.pop_back(); }, "1 codes for 2 runs");
  refused([](cs::ClassRunTable& t) { t.runs = {{4, 8}, {0, 4}}, t.codes = {0, 0}; }, "must follow");
  CHECK_THROWS_AS(cs::ClassSampler(good, cs::ClassOptions{.chunk_size = 2, .preload_nchunks = 1, .batch_size = 2}),
                  cs::ConfigError);
}

TEST_CASE("ClassSampler: fingerprints tell configurations apart", "[class]") {
  const Codes codes = runs_of({{0, 10}, {1, 20}, {0, 10}});
  const cs::ClassOptions o{.chunk_size = 5,
                           .preload_nchunks = 2,
                           .batch_size = 5,
                           .seed = 3,
                           .num_samples = 50,
                           .class_weights = {1.0, 2.0}};
  const cs::ClassSampler base(codes, o);
  CHECK(cs::ClassSampler(codes, o).fingerprint() == base.fingerprint());
  cs::ClassOptions seed = o;
  seed.seed = 4;
  CHECK(cs::ClassSampler(codes, seed).fingerprint() == base.fingerprint());  // the seed travels apart
  std::vector<cs::ClassOptions> others(7, o);
  others[0].chunk_size = 10;
  others[0].batch_size = 10;
  others[1].preload_nchunks = 4;
  others[2].drop_last = true;
  others[3].mask = cs::Slice{0, 40};
  others[4].num_samples = 51;
  others[5].class_weights = {1.0, 2.0000000000000004};  // the next double: bit patterns count
  others[6].class_weights = {1.0, 2.0, 0.0};
  std::set<std::uint64_t> prints{base.fingerprint()};
  for (const cs::ClassOptions& other : others) prints.insert(cs::ClassSampler(codes, other).fingerprint());
  Codes moved = codes;
  moved[10] = 0;  // a run boundary moves by one
  prints.insert(cs::ClassSampler(moved, o).fingerprint());
  prints.insert(base.with_shard({.mask = {0, 40}, .stream = 0, .budget = 50}).fingerprint());
  CHECK(prints.size() == 10);
  // A state of another configuration is refused.
  cs::ClassSampler played = base;
  (void)support::epoch(played, 40);
  cs::ClassSampler other(codes, others[4]);
  CHECK_THROWS_AS(other.restore(played.state(1)), std::invalid_argument);
}

TEST_CASE("ClassSampler::with_shard: the shard's range, stream and budget; the original unchanged", "[class]") {
  const Codes codes = runs_of({{0, 30}, {1, 40}, {0, 30}});
  cs::ClassSampler base(codes,
                        {.chunk_size = 4, .preload_nchunks = 4, .batch_size = 8, .seed = 77, .num_samples = 200});
  base.set_epoch(3);
  const cs::ClassSampler shard = base.with_shard({.mask = {20, 80}, .stream = 5, .budget = 96});
  CHECK(shard.rng() == base.rng().spawn(5));
  CHECK(shard.epoch() == 3);
  CHECK(shard.mask() == cs::Slice{20, 80});
  CHECK(shard.epoch_size(100) == 96);
  CHECK(shard.n_batches(100) == 12);
  CHECK(base.mask() == std::nullopt);
  CHECK(base.epoch_size(100) == 200);
  CHECK(base.rng() == cs::Rng(77));
  cs::ClassSampler played = shard;
  const std::vector<OwnedRequest> requests = support::epoch(played, 100);
  ClassConfig model{.codes = codes,
                    .weights = {},
                    .options = {.chunk_size = 4, .preload_nchunks = 4, .batch_size = 8, .num_samples = 96}};
  check_epoch(model, {20, 80}, 96, requests);
  // Same stream, same epoch; another stream, another epoch (24 chunks, of 14 starts or more each).
  cs::ClassSampler twin = base.with_shard({.mask = {20, 80}, .stream = 5, .budget = 96});
  CHECK(support::epoch(twin, 100) == requests);
  cs::ClassSampler other = base.with_shard({.mask = {20, 80}, .stream = 6, .budget = 96});
  CHECK(support::epoch(other, 100) != requests);
}

TEST_CASE("ClassSampler validation names the parameter, its value and the rule", "[class][validation]") {
  using Catch::Contains;
  const Codes codes = runs_of({{0, 10}, {1, 20}, {0, 10}});
  const cs::ClassOptions ok{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 20};
  const auto with = [&](auto edit) {
    cs::ClassOptions o = ok;
    edit(o);
    return o;
  };
#define REQUIRE_INVALID(expr, matcher)              \
  do {                                              \
    REQUIRE_THROWS_AS(expr, std::invalid_argument); \
    REQUIRE_THROWS_WITH(expr, matcher);             \
  } while (false)

  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.chunk_size = 0; })),
                  Contains("ClassSampler") && Contains("chunk_size (0)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.preload_nchunks = -1; })),
                  Contains("preload_nchunks (-1)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.batch_size = 0; })), Contains("batch_size (0)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.batch_size = 11; })),
                  Contains("batch_size cannot exceed chunk_size * preload_nchunks: batch_size (11) must be <= 10"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.batch_size = 3; })),
                  Contains("chunk_size * preload_nchunks (10) must be divisible by batch_size (3)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) {
                                     o.chunk_size = std::int64_t{1} << 40;
                                     o.preload_nchunks = std::int64_t{1} << 30;
                                   })),
                  Contains("2^62"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.mask = cs::Slice{-1, 5}; })),
                  Contains("mask.start must be >= 0 (got -1)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.mask = cs::Slice{7, 7}; })),
                  Contains("mask.start must be < mask.stop (got mask.start 7, mask.stop 7)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.mask = cs::Slice{0, 41}; })),
                  Contains("mask.stop (41) exceeds loader n_obs (40)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.num_samples = 0; })),
                  Contains("num_samples must be greater than 1 or equal to 1 (got 0)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.num_samples = -3; })), Contains("(got -3)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {1.0, -0.5}; })),
                  Contains("class_weights[1] (-0.5)") && Contains(">= 0"));
  REQUIRE_INVALID(
      cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {std::numeric_limits<double>::quiet_NaN(), 1.0}; })),
      Contains("class_weights[0] (nan)") && Contains("finite"));
  REQUIRE_INVALID(
      cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {1.0, std::numeric_limits<double>::infinity()}; })),
      Contains("class_weights[1] (inf)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {1e308, 1e308}; })),
                  Contains("sum") && Contains("finite"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {0.0, 0.0}; })),
                  Contains("class_weights must have at least one positive weight (all 2 are 0)"));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {1.0}; })),
                  Contains("codes[10] (1)") && Contains("class_weights has 1 entries"));
  // Weights of classes that do not occur, and a class that occurs only with weight 0.
  CHECK_NOTHROW(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {1.0, 0.0, 5.0}; })));
  REQUIRE_INVALID(cs::ClassSampler(codes, with([](auto& o) { o.class_weights = {0.0, 0.0, 5.0}; })),
                  Contains("the sampled range [0, 40) holds no chunk: no class with a positive weight is present") &&
                      Contains("in a run of chunk_size (5) observations"));

  Codes negative = codes;
  negative[17] = -2;
  REQUIRE_INVALID(cs::ClassSampler(negative, ok), Contains("codes[17] (-2)") && Contains("must be in [0, 2^31)"));
  REQUIRE_INVALID(cs::ClassSampler(Codes{}, ok), Contains("[0, 0)"));

  const cs::ClassSampler sampler(codes, ok);
  cs::ClassSampler s = sampler;
  REQUIRE_INVALID(s.validate(39), Contains("n_obs (39)") && Contains("(40)"));
  REQUIRE_INVALID(s.n_batches(41), Contains("n_obs (41)") && Contains("(40)"));
  REQUIRE_INVALID(s.sample(-1), Contains("n_obs (-1)"));
  REQUIRE_INVALID((void)s.epoch_size(0), Contains("n_obs (0)"));
  CHECK(s.epoch() == 0);
  CHECK_NOTHROW(s.validate(40));
  REQUIRE_INVALID(sampler.with_shard({.mask = {0, 40}, .stream = 0, .budget = 0}), Contains("budget (0)"));
  REQUIRE_INVALID(sampler.with_shard({.mask = {30, 50}, .stream = 0, .budget = 5}).validate(40),
                  Contains("mask.stop (50)"));
#undef REQUIRE_INVALID
}

TEST_CASE("ClassSampler's random stream is pinned", "[class]") {
  // Computed once from the implementation and stored: a change here changes what every seed
  // produces on every platform. Change them only for a deliberate, documented change of streams.
  // The stored values are of generation 1 of its order: a change of them comes with a new
  // order_generation (which refuses the states of the old order), and a new generation with new values.
  STATIC_REQUIRE(cs::ClassSampler::order_generation == 1);
  const Codes codes = runs_of({{0, 10}, {1, 20}, {2, 6}, {0, 10}});
  cs::ClassSampler sampler(codes, {.chunk_size = 5,
                                   .preload_nchunks = 2,
                                   .batch_size = 5,
                                   .seed = 42,
                                   .num_samples = 40,
                                   .class_weights = {1.0, 2.0, 3.0}});
  const auto e0 = support::epoch(sampler, 46);
  REQUIRE(e0.size() == 4);
  std::vector<cs::Slice> chunks;
  for (const OwnedRequest& r : e0) chunks.insert(chunks.end(), r.chunks.begin(), r.chunks.end());
  CHECK(chunks ==
        std::vector<cs::Slice>{{30, 35}, {10, 15}, {39, 44}, {31, 36}, {31, 36}, {11, 16}, {13, 18}, {30, 35}});
  CHECK(e0[0].batches == std::vector<std::vector<std::int64_t>>{{1, 0, 4, 3, 2}, {6, 5, 7, 8, 9}});
  CHECK(e0[3].batches.front() == std::vector<std::int64_t>{4, 1, 2, 3, 0});
  const auto e1 = support::epoch(sampler, 46);
  CHECK(e1.front().chunks == std::vector<cs::Slice>{{30, 35}, {31, 36}});
}

}  // namespace test_class_sampler
