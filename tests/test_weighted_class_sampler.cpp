// SPDX-License-Identifier: MIT
// WeightedClassSampler: chunks chosen as ClassSampler chooses them, one class per chunk, and a
// request's rows shuffled together before they are cut into batches. Invariants over random code
// layouts and masks of many ranges in both compositions (every chunk a valid start of a sampled
// class inside one range, every request's rows used once, stratified counts within one chunk of
// the weights in every request and over the epoch), worked examples, determinism, errors, sizes
// near 2^62 and a pinned stream. Frequencies against chi-square bounds are tested in
// test_weighted_class_statistics.cpp, resume, workers and DistributedSampler in
// test_weighted_class_distributed.cpp. The model is class_support.hpp's, with weighted_support.hpp's
// checks.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "support.hpp"
#include "weighted_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace test_weighted_class_sampler {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using namespace support::weighted;
using Catch::Matchers::Contains;
using support::ceil_div;
using support::ConfigRng;
using support::OwnedRequest;

}  // namespace
TEST_CASE("WeightedClassSampler is a distributable sampler", "[weighted]") {
  STATIC_REQUIRE(cs::Sampler<cs::WeightedClassSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::WeightedClassSampler>);
  STATIC_REQUIRE(cs::EpochPlan<cs::WeightedClassPlan>);
  STATIC_REQUIRE(cs::Sampler<WDist>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::WeightedClassSampler::range_type>);
}

TEST_CASE("WeightedClassSampler epoch invariants over random code layouts, both compositions", "[weighted]") {
  ConfigRng g(2201);
  int masked = 0;
  int stratified = 0;
  int partial_last = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Weighted w{random_config(g), compositions[trial % 2]};
    INFO(w.describe());
    cs::WeightedClassSampler sampler = w.sampler();
    CHECK(sampler.composition() == w.composition);
    CHECK(sampler.shuffle());
    CHECK(sampler.replacement());
    CHECK(sampler.num_samples() == *w.c.options.num_samples);
    CHECK(sampler.class_weights() == w.c.weights);
    CHECK(sampler.epoch_size(w.c.n_obs()) == *w.c.options.num_samples);
    REQUIRE(sampler.n_batches(w.c.n_obs()) == ceil_div(w.c.used(), w.c.options.batch_size));
    check_epoch(w, w.c.range(), w.c.used(), support::epoch(sampler, w.c.n_obs()));
    check_epoch(w, w.c.range(), w.c.used(), support::epoch(sampler, w.c.n_obs()));  // the next epoch too
    masked += w.c.options.mask ? 1 : 0;
    stratified += w.composition == cs::Composition::stratified ? 1 : 0;
    partial_last += ceil_div(w.c.used(), w.c.options.chunk_size) % w.c.options.preload_nchunks != 0 ? 1 : 0;
  }
  CHECK(masked > 100);
  CHECK(stratified == 150);
  CHECK(partial_last > 100);
}

TEST_CASE("WeightedClassSampler, stratified: every request and the epoch within one chunk, 2 to 600 classes",
          "[weighted]") {
  // One or two runs per class, integer weights from 1:1 to 1:1000, requests of 1 to 40 chunks,
  // epochs of whole requests and of a partial last one (the last chunk short or not).
  ConfigRng g(2202);
  int skewed = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Weighted w;
    w.composition = cs::Composition::stratified;
    ClassConfig& c = w.c;
    // Now and then hundreds of classes, where the shares' sum nears 2^62.
    const auto n_classes = static_cast<std::int32_t>(trial % 20 == 0 ? g.between(300, 600) : g.between(2, 50));
    const std::int64_t chunk = g.between(1, 3);
    c.options.chunk_size = chunk;
    c.options.preload_nchunks = g.between(1, 40);
    c.options.batch_size = g.divisor_of(chunk * c.options.preload_nchunks);
    const int shape = trial % 3;  // uniform-ish, 1:1000 skew, one rare class
    for (std::int32_t k = 0; k < n_classes; ++k)
      c.weights.push_back(shape == 0   ? static_cast<double>(g.between(1, 9))
                          : shape == 1 ? (g.coin() ? 1.0 : 1000.0)
                                       : (k == 0 ? 1.0 : static_cast<double>(g.between(100, 1000))));
    skewed += shape != 0 ? 1 : 0;
    c.options.class_weights = c.weights;
    for (int pass = 0; pass < 2; ++pass)
      for (std::int32_t k = 0; k < n_classes; ++k)
        if (pass == 0 || g.coin())
          c.codes.insert(c.codes.end(), static_cast<std::size_t>(g.between(chunk, 3 * chunk)), k);
    c.options.drop_last = g.coin();
    c.options.seed = g.next();
    c.options.num_samples = g.between(1, 12 * chunk * c.options.preload_nchunks + chunk);
    INFO(w.describe());
    cs::WeightedClassSampler sampler = w.sampler();
    for (int epoch = 0; epoch < 3; ++epoch) check_epoch(w, c.range(), c.used(), support::epoch(sampler, c.n_obs()));
  }
  CHECK(skewed > 100);
}

TEST_CASE("WeightedClassSampler, stratified: worked examples with exact numbers", "[weighted]") {
  const Codes codes = runs_of({{0, 40}, {1, 40}, {2, 40}});
  const auto counts_of = [&](const std::vector<cs::Slice>& chunks) {
    std::vector<std::int64_t> counts(3, 0);
    for (const cs::Slice& chunk : chunks)
      ++counts[static_cast<std::size_t>(codes[static_cast<std::size_t>(chunk.start)])];
    return counts;
  };
  const auto requests_of = [&](cs::WeightedClassOptions options) {
    options.composition = cs::Composition::stratified;
    std::vector<std::vector<std::int64_t>> counts;
    for (const auto& chunks : planned_chunks(cs::WeightedClassSampler(codes, options), 120))
      counts.push_back(counts_of(chunks));
    return counts;
  };
  SECTION("weights 5:3:2 (or 0.5, 0.3, 0.2), 10 chunks a request: 5, 3 and 2 in every request") {
    for (const std::vector<double>& weights : {std::vector<double>{5, 3, 2}, std::vector<double>{0.5, 0.3, 0.2}}) {
      INFO(fmt::format("weights {}", fmt::join(weights, ", ")));
      const auto counts = requests_of({.chunk_size = 4,
                                       .preload_nchunks = 10,
                                       .batch_size = 8,
                                       .seed = 7,
                                       .num_samples = 6 * 40,
                                       .class_weights = weights});
      REQUIRE(counts.size() == 6);
      for (const auto& c : counts) CHECK(c == std::vector<std::int64_t>{5, 3, 2});
    }
  }
  SECTION("weights 5:3:2, 8 chunks a request: 4, 2.4 and 1.6, so 2 requests of (4, 3, 1) and 3 of (4, 2, 2)") {
    const auto counts = requests_of({.chunk_size = 4,
                                     .preload_nchunks = 8,
                                     .batch_size = 8,
                                     .seed = 7,
                                     .num_samples = 5 * 32,
                                     .class_weights = {5, 3, 2}});
    REQUIRE(counts.size() == 5);
    std::map<std::vector<std::int64_t>, int> kinds;
    for (const auto& c : counts) ++kinds[c];
    CHECK(kinds == std::map<std::vector<std::int64_t>, int>{{{4, 2, 2}, 3}, {{4, 3, 1}, 2}});
  }
  SECTION("weights 5:3:2, 8 chunks a request, 43 chunks: 5 whole requests and one of 3 chunks") {
    // The epoch: 21.5, 12.9 and 8.6 chunks, each rounded down or up so that they sum to 43:
    // (21, 13, 9), (22, 12, 9) or (22, 13, 8); the last request: 1.5, 0.9 and 0.6, likewise to 3.
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      INFO("seed " << seed);
      const auto counts = requests_of({.chunk_size = 4,
                                       .preload_nchunks = 8,
                                       .batch_size = 4,
                                       .seed = seed,
                                       .num_samples = 42 * 4 + 2,
                                       .class_weights = {5, 3, 2}});
      REQUIRE(counts.size() == 6);
      std::vector<std::int64_t> total(3, 0);
      for (std::size_t r = 0; r < counts.size(); ++r)
        for (std::size_t k = 0; k < 3; ++k) total[k] += counts[r][k];
      CHECK(total[0] + total[1] + total[2] == 43);
      CHECK((total == std::vector<std::int64_t>{21, 13, 9} || total == std::vector<std::int64_t>{22, 12, 9} ||
             total == std::vector<std::int64_t>{22, 13, 8}));
      const auto& last = counts.back();
      CHECK(last[0] + last[1] + last[2] == 3);
      CHECK((last[0] == 1 || last[0] == 2));
      CHECK(last[1] <= 1);
      CHECK(last[2] <= 1);
    }
  }
  SECTION("independent: the same weights, counts that vary from request to request") {
    std::set<std::vector<std::int64_t>> kinds;
    cs::WeightedClassSampler sampler(codes, {.chunk_size = 4,
                                             .preload_nchunks = 10,
                                             .batch_size = 8,
                                             .seed = 7,
                                             .num_samples = 50 * 40,
                                             .class_weights = {5, 3, 2}});
    for (const auto& chunks : planned_chunks(sampler, 120)) kinds.insert(counts_of(chunks));
    CHECK(kinds.size() > 10);
  }
}

TEST_CASE("WeightedClassSampler over masks of many ranges: chunks inside one range and one run", "[weighted]") {
  ConfigRng g(2212);
  int served = 0;
  for (int trial = 0; trial < 150; ++trial) {
    Weighted w;
    w.composition = compositions[trial % 2];
    support::Config shape;
    w.c = shaped_config(g, shape, 6, 5);
    draw_codes(g, w.c, g.between(4, 30), 3 * shape.chunk);
    w.c.options.drop_last = g.coin();
    w.c.options.seed = g.next();
    w.c.options.num_samples = g.between(1, 6 * shape.chunk * shape.preload);
    w.c.options.mask = random_mask(g, w.c.n_obs(), 25);
    INFO(w.describe());
    if (valid_starts(w.c.codes, w.c.weights, shape.chunk, w.c.range()).empty()) {
      CHECK_THROWS_WITH(w.sampler(), Contains("no chunk"));
      continue;
    }
    cs::WeightedClassSampler sampler = w.sampler();
    check_epoch(w, w.c.range(), w.c.used(), support::epoch(sampler, w.c.n_obs()));
    ++served;
  }
  CHECK(served > 80);
}

TEST_CASE("WeightedClassSampler is deterministic per (seed, epoch); epochs, seeds and compositions differ",
          "[weighted]") {
  const Codes codes = runs_of({{0, 30}, {1, 40}, {2, 30}, {0, 20}});
  for (const cs::Composition composition : compositions) {
    INFO(composition_name(composition));
    const cs::WeightedClassOptions o{.chunk_size = 5,
                                     .preload_nchunks = 4,
                                     .batch_size = 10,
                                     .seed = 11,
                                     .num_samples = 400,
                                     .class_weights = {1, 2, 3},
                                     .composition = composition};
    cs::WeightedClassSampler a(codes, o);
    cs::WeightedClassSampler b(codes, o);
    const auto a0 = support::epoch(a, 120);
    const auto a1 = support::epoch(a, 120);
    CHECK(support::epoch(b, 120) == a0);
    CHECK(support::epoch(b, 120) == a1);
    CHECK(a0 != a1);
    b.set_epoch(0);
    CHECK(support::epoch(b, 120) == a0);
    cs::WeightedClassOptions reseeded = o;
    reseeded.seed = 12;
    cs::WeightedClassSampler c(codes, reseeded);
    CHECK(support::epoch(c, 120) != a0);
  }
  // Fingerprints: the composition, the weights' bits and the kind of sampler count.
  const cs::WeightedClassOptions o{
      .chunk_size = 5, .preload_nchunks = 4, .batch_size = 10, .num_samples = 400, .class_weights = {1, 2, 3}};
  cs::WeightedClassOptions stratified = o;
  stratified.composition = cs::Composition::stratified;
  cs::WeightedClassOptions nudged = o;
  nudged.class_weights = {1, 2, 3.0000000000000004};
  const cs::ClassSampler coherent(
      codes, {.chunk_size = 5, .preload_nchunks = 4, .batch_size = 10, .num_samples = 400, .class_weights = {1, 2, 3}});
  const std::set<std::uint64_t> prints{cs::WeightedClassSampler(codes, o).fingerprint(),
                                       cs::WeightedClassSampler(codes, stratified).fingerprint(),
                                       cs::WeightedClassSampler(codes, nudged).fingerprint(), coherent.fingerprint()};
  CHECK(prints.size() == 4);
  cs::WeightedClassSampler played(codes, o);
  (void)support::epoch(played, 120);
  cs::WeightedClassSampler other(codes, stratified);
  CHECK_THROWS_AS(other.restore(played.state(1)), cs::StateMismatchError);
  // A state names the kind of sampler: a ClassSampler of the same options refuses it.
  cs::ClassSampler coherent_copy = coherent;
  CHECK_THROWS_AS(coherent_copy.restore(played.state(1)), cs::StateMismatchError);
}

TEST_CASE("WeightedClassSampler refuses bad input with a ConfigError naming the value", "[weighted][validation]") {
  const Codes codes = runs_of({{0, 10}, {1, 20}, {0, 10}});
  const cs::WeightedClassOptions ok{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 20};
  const auto with = [&](auto edit) {
    cs::WeightedClassOptions o = ok;
    edit(o);
    return o;
  };
#define REQUIRE_CONFIG_ERROR(expr, matcher)   \
  do {                                        \
    REQUIRE_THROWS_AS(expr, cs::ConfigError); \
    REQUIRE_THROWS_WITH(expr, matcher);       \
  } while (false)

  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.class_weights = {1.0, -0.5}; })),
                       Contains("WeightedClassSampler") && Contains("class_weights[1] (-0.5)") && Contains(">= 0"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.class_weights = {0.0, 0.0}; })),
                       Contains("class_weights must have at least one positive weight (all 2 are 0)"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.num_samples = 0; })),
                       Contains("num_samples must be greater than 1 or equal to 1 (got 0)"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.num_samples = -3; })),
                       Contains("num_samples must be greater than 1 or equal to 1 (got -3)"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.num_samples.reset(); })),
                       Contains("num_samples must be set"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes,
                                                with([](auto& o) { o.composition = static_cast<cs::Composition>(7); })),
                       Contains("composition (7)") && Contains("Composition::stratified"));
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(codes, with([](auto& o) { o.batch_size = 3; })),
                       Contains("batch_size (3)"));
  // A short run of a sampled class, named with its class; excluded (weight 0), the same run is fine.
  const Codes short_run = runs_of({{0, 10}, {1, 3}, {0, 10}, {2, 8}});
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(short_run, ok),
                       Contains("chunk_size (5)") && Contains("class 1 (1 short run, shortest 3)"));
  CHECK_NOTHROW(cs::WeightedClassSampler(short_run, with([](auto& o) { o.class_weights = {1.0, 0.0, 1.0}; })));
  Codes negative = codes;
  negative[17] = -2;
  REQUIRE_CONFIG_ERROR(cs::WeightedClassSampler(negative, ok), Contains("codes[17] (-2)"));
  cs::WeightedClassSampler sampler(codes, ok);
  REQUIRE_CONFIG_ERROR(sampler.validate(39), Contains("n_obs (39)") && Contains("(40)"));
  REQUIRE_CONFIG_ERROR(sampler.with_shard({.mask = {11, 14}, .stream = 0, .budget = 5}).validate(40),
                       Contains("[11, 14)") && Contains("holds no chunk"));
#undef REQUIRE_CONFIG_ERROR
}

TEST_CASE("WeightedClassSampler: sizes near 2^62 are planned at once, stratified requests still exact", "[weighted]") {
  // 2^62 - 3 positions in chunks of one row, 64 a request: 2^56 requests, the last of 61 chunks.
  // Any request is computed from its index alone; none holds more than a request's buffers.
  const Codes codes = runs_of({{0, 100}, {1, 300}, {2, 600}});
  constexpr std::int64_t positions = (std::int64_t{1} << 62) - 3;
  const cs::WeightedClassSampler sampler(codes, {.chunk_size = 1,
                                                 .preload_nchunks = 64,
                                                 .batch_size = 64,
                                                 .seed = 3,
                                                 .num_samples = positions,
                                                 .class_weights = {1, 3, 6},
                                                 .composition = cs::Composition::stratified});
  CHECK(sampler.n_batches(1000) == ceil_div(positions, 64));
  const cs::WeightedClassPlan plan = sampler.plan(1000, 9);
  REQUIRE(plan.n_requests() == std::int64_t{1} << 56);
  cs::RequestBuffers buffers;
  for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1} << 40, plan.n_requests() - 2, plan.n_requests() - 1}) {
    INFO("request " << k);
    plan.fill(k, buffers);
    const auto n = static_cast<std::int64_t>(buffers.chunks.size());
    CHECK(n == (k == plan.n_requests() - 1 ? 61 : 64));
    std::vector<std::int64_t> counts(3, 0);
    for (const cs::Slice& chunk : buffers.chunks)
      ++counts[static_cast<std::size_t>(codes[static_cast<std::size_t>(chunk.start)])];
    for (std::size_t c = 0; c < 3; ++c) CHECK(within_one(counts[c], n, std::vector<double>{1, 3, 6}[c], 10));
    CHECK(std::ssize(buffers.positions) == n);
  }
}

TEST_CASE("WeightedClassSampler's random stream is pinned", "[weighted]") {
  // Computed once from the implementation and stored: a change here changes what every seed
  // produces on every platform. Change them only for a deliberate, documented change of streams.
  // The stored values are of generation 1 of its order: a change of them comes with a new
  // order_generation (which refuses the states of the old order), and a new generation with new values.
  STATIC_REQUIRE(cs::WeightedClassSampler::order_generation == 1);
  const Codes codes = runs_of({{0, 10}, {1, 20}, {2, 6}, {0, 10}});
  for (const cs::Composition composition : compositions) {
    INFO(composition_name(composition));
    cs::WeightedClassSampler sampler(codes, {.chunk_size = 5,
                                             .preload_nchunks = 3,
                                             .batch_size = 5,
                                             .seed = 42,
                                             .num_samples = 42,
                                             .class_weights = {1.0, 2.0, 3.0},
                                             .composition = composition});
    const auto e0 = support::epoch(sampler, 46);
    REQUIRE(e0.size() == 3);
    std::vector<cs::Slice> chunks;
    for (const OwnedRequest& r : e0) chunks.insert(chunks.end(), r.chunks.begin(), r.chunks.end());
    const auto e1 = support::epoch(sampler, 46);
    // The rows of a request in one order, the same for both compositions (the same key).
    CHECK(e0[0].positions() == std::vector<std::int64_t>{9, 12, 2, 4, 14, 0, 7, 6, 1, 11, 5, 10, 13, 3, 8});
    CHECK(e0[2].batches == std::vector<std::vector<std::int64_t>>{{5, 0, 4, 2, 3}, {7, 6, 9, 8, 11}, {10, 1}});
    if (composition == cs::Composition::independent) {
      // Each chunk's class and start come from the keys ClassSampler uses for a group of one chunk:
      // the chunks of its pinned stream (test_class_sampler.cpp), and one more.
      CHECK(chunks == std::vector<cs::Slice>{
                          {30, 35}, {10, 15}, {39, 44}, {31, 36}, {31, 36}, {11, 16}, {13, 18}, {30, 35}, {13, 15}});
      CHECK(e1.front().chunks == std::vector<cs::Slice>{{30, 35}, {31, 36}, {31, 36}});
    } else {
      // Shares 1/6, 2/6, 3/6 of 3 chunks: 0.5, 1, 1.5, so every request holds one of class 1, one
      // of class 2 and one more of class 0 or 2; 9 chunks in all: 1.5, 3 and 4.5.
      CHECK(chunks == std::vector<cs::Slice>{
                          {30, 35}, {10, 15}, {39, 44}, {40, 45}, {23, 28}, {30, 35}, {30, 35}, {30, 35}, {13, 15}});
      CHECK(e1.front().chunks == std::vector<cs::Slice>{{3, 8}, {31, 36}, {21, 26}});
    }
  }
}

}  // namespace test_weighted_class_sampler
