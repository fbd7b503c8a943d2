// Validation: every rule of the contract throws std::invalid_argument naming the parameter and its
// value, at construction or before an epoch yields anything; the edges the rules allow do not throw.
#include <chunksampler.hpp>

#include "statistics.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_validation {

namespace cs = chunksampler;

namespace {

constexpr std::int64_t max_size = std::int64_t{1} << 62;

}  // namespace

// Checks the exception's type and its message; `expr` is evaluated once per check.
#define REQUIRE_INVALID(expr, matcher)              \
  do {                                              \
    REQUIRE_THROWS_AS(expr, std::invalid_argument); \
    REQUIRE_THROWS_WITH(expr, matcher);             \
  } while (false)

using Catch::Contains;

TEST_CASE("construction: chunk_size, preload_nchunks, batch_size", "[validation]") {
  SECTION("RandomSampler") {
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 0, .preload_nchunks = 1, .batch_size = 1}),
                    Contains("RandomSampler") && Contains("chunk_size (0)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = -5, .preload_nchunks = 1, .batch_size = 1}),
                    Contains("chunk_size (-5)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 0, .batch_size = 1}),
                    Contains("preload_nchunks (0)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = -1, .batch_size = 1}),
                    Contains("preload_nchunks (-1)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 0}),
                    Contains("batch_size (0)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = -8}),
                    Contains("batch_size (-8)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 16}),
                    Contains("batch_size cannot exceed chunk_size * preload_nchunks: batch_size (16) must be <= 8"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 9}),
                    Contains("batch_size (9)"));
    REQUIRE_INVALID(cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 5}),
                    Contains("chunk_size * preload_nchunks (12) must be divisible by batch_size (5)"));
  }
  SECTION("SequentialSampler") {
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = 0, .preload_nchunks = 1, .batch_size = 1}),
                    Contains("SequentialSampler") && Contains("chunk_size (0)"));
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = 4, .preload_nchunks = 0, .batch_size = 1}),
                    Contains("SequentialSampler") && Contains("preload_nchunks (0)"));
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 0}),
                    Contains("batch_size (0)"));
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 16}),
                    Contains("batch_size cannot exceed chunk_size * preload_nchunks: batch_size (16) must be <= 8"));
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 5}),
                    Contains("batch_size (5)") && Contains("(12)"));
  }
  SECTION("default options are refused") {
    REQUIRE_THROWS_AS(cs::RandomSampler(cs::RandomOptions{}), std::invalid_argument);
    REQUIRE_THROWS_AS(cs::SequentialSampler(cs::SequentialOptions{}), std::invalid_argument);
  }
}

TEST_CASE("construction: chunk_size * preload_nchunks above 2^62 is refused without overflow", "[validation]") {
  const std::int64_t two31 = std::int64_t{1} << 31;
  // 2^31 * (2^31 + 1) just exceeds 2^62; 2^40 * 2^40 and 2^62 * 2 would overflow int64 if multiplied
  REQUIRE_INVALID(cs::RandomSampler({.chunk_size = two31, .preload_nchunks = two31 + 1, .batch_size = 1}),
                  Contains("chunk_size * preload_nchunks") && Contains("2147483648 * 2147483649"));
  REQUIRE_INVALID(cs::RandomSampler(
                      {.chunk_size = std::int64_t{1} << 40, .preload_nchunks = std::int64_t{1} << 40, .batch_size = 1}),
                  Contains("chunk_size * preload_nchunks") && Contains("1099511627776 * 1099511627776"));
  REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = max_size, .preload_nchunks = 2, .batch_size = 1}),
                  Contains("SequentialSampler") && Contains("chunk_size * preload_nchunks") &&
                      Contains("4611686018427387904 * 2"));
  REQUIRE_INVALID(cs::RandomSampler({.chunk_size = INT64_MAX, .preload_nchunks = INT64_MAX, .batch_size = 1}),
                  Contains("chunk_size * preload_nchunks"));

  // exactly 2^62 is allowed
  REQUIRE_NOTHROW(cs::RandomSampler({.chunk_size = two31, .preload_nchunks = two31, .batch_size = two31}));
  REQUIRE_NOTHROW(cs::SequentialSampler({.chunk_size = max_size, .preload_nchunks = 1, .batch_size = max_size}));
  REQUIRE_NOTHROW(cs::RandomSampler({.chunk_size = 1, .preload_nchunks = max_size, .batch_size = 1}));
}

TEST_CASE("construction: mask", "[validation]") {
  SECTION("RandomSampler") {
    REQUIRE_INVALID(cs::RandomSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{-1, 10}}),
                    Contains("mask.start must be >= 0 (got -1)"));
    REQUIRE_INVALID(cs::RandomSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{5, 5}}),
                    Contains("mask.start must be < mask.stop (got mask.start 5, mask.stop 5)"));
    REQUIRE_INVALID(cs::RandomSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{7, 3}}),
                    Contains("mask.start must be < mask.stop (got mask.start 7, mask.stop 3)"));
    REQUIRE_INVALID(cs::RandomSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{0, max_size + 1}}),
                    Contains("mask.stop (4611686018427387905)"));
  }
  SECTION("SequentialSampler") {
    REQUIRE_INVALID(cs::SequentialSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{-3, 10}}),
                    Contains("mask.start must be >= 0 (got -3)"));  // checked as the mask is made, before the sampler
    REQUIRE_INVALID(cs::SequentialSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{0, 0}}),
                    Contains("mask.start must be < mask.stop (got mask.start 0, mask.stop 0)"));
    REQUIRE_INVALID(
        cs::SequentialSampler(
            {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{max_size, INT64_MAX - 1}}),
        Contains("mask.stop (9223372036854775806)"));
    // A stop of INT64_MAX is Slice::to_end, the open-ended mask [2^62, n_obs): its start is refused.
    REQUIRE_INVALID(
        cs::SequentialSampler(
            {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{max_size, INT64_MAX}}),
        Contains("mask.start (4611686018427387904) must be < 2^62"));
  }
  SECTION("edges that are allowed") {
    REQUIRE_NOTHROW(
        cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{0, 1}}));
    REQUIRE_NOTHROW(cs::SequentialSampler(
        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice{max_size - 1, max_size}}));
  }
}

TEST_CASE("construction: num_samples", "[validation]") {
  const cs::RandomOptions base{.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4};
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, max_size + 1, INT64_MIN}) {
    cs::RandomOptions options = base;
    options.num_samples = bad;
    CAPTURE(bad);
    // Below 1 in annbatch's words, which name the bound, then the value; above 2^62 by the value.
    const std::string said = bad < 1 ? fmt::format("num_samples must be greater than 1 or equal to 1 (got {})", bad)
                                     : fmt::format("num_samples ({}) must be in [1, 2^62]", bad);
    REQUIRE_INVALID(cs::RandomSampler(options), Contains(said));
    options.replacement = true;
    REQUIRE_INVALID(cs::RandomSampler(options), Contains(said));
  }
  for (const std::int64_t good : {std::int64_t{1}, max_size}) {
    cs::RandomOptions options = base;
    options.num_samples = good;
    REQUIRE_NOTHROW(cs::RandomSampler(options));
  }
}

TEST_CASE("n_obs: validate, n_batches and sample throw, before yielding anything", "[validation]") {
  cs::RandomSampler random({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4});
  cs::SequentialSampler sequential({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4});

  // Catch's composed matchers refer to their parts: pass them as arguments, never keep them in variables.
  const auto check_all = [&](std::int64_t n_obs, const Catch::MatcherBase<std::string>& matcher) {
    CAPTURE(n_obs);
    REQUIRE_INVALID(random.validate(n_obs), Contains("RandomSampler") && matcher);
    REQUIRE_INVALID(random.n_batches(n_obs), Contains("RandomSampler") && matcher);
    REQUIRE_INVALID(random.n_batches(n_obs), matcher);
    REQUIRE_INVALID(random.sample(n_obs), matcher);  // the call itself throws, not the first increment
    REQUIRE_INVALID(sequential.validate(n_obs), Contains("SequentialSampler") && matcher);
    REQUIRE_INVALID(sequential.n_batches(n_obs), matcher);
    REQUIRE_INVALID(sequential.sample(n_obs), matcher);
  };
  check_all(-1, Contains("n_obs (-1)"));
  check_all(INT64_MIN, Contains("n_obs (-9223372036854775808)"));
  check_all(max_size + 1, Contains("n_obs (4611686018427387905)"));
  check_all(0, Contains("[0, 0)") && Contains("empty"));
  // a failed sample() plays no epoch
  REQUIRE(random.epoch() == 0);
  REQUIRE(sequential.epoch() == 0);
}

TEST_CASE("n_obs: the mask must fit in n_obs", "[validation]") {
  cs::RandomSampler random({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice{10, 100}});
  cs::SequentialSampler sequential(
      {.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice{10, 100}});
  // Catch's composed matchers refer to their parts: pass them as arguments, never keep them in variables.
  const auto check = [&](std::int64_t n_obs, const Catch::MatcherBase<std::string>& matcher) {
    CAPTURE(n_obs);
    REQUIRE_INVALID(random.validate(n_obs), matcher);
    REQUIRE_INVALID(random.n_batches(n_obs), matcher);
    REQUIRE_INVALID(random.sample(n_obs), matcher);
    REQUIRE_INVALID(sequential.validate(n_obs), matcher);
    REQUIRE_INVALID(sequential.n_batches(n_obs), matcher);
    REQUIRE_INVALID(sequential.sample(n_obs), matcher);
  };
  for (const std::int64_t n_obs : {std::int64_t{0}, std::int64_t{10}, std::int64_t{50}, std::int64_t{99}})
    check(n_obs, Contains("mask.stop (100)") && Contains("n_obs (" + std::to_string(n_obs) + ")"));
  // mask.stop == n_obs is fine
  REQUIRE_NOTHROW(random.validate(100));
  REQUIRE(random.n_batches(100) == 23);  // ceil(90 / 4)
  REQUIRE(sequential.n_batches(100) == 23);
}

TEST_CASE("n_obs: with replacement, a range shorter than a chunk holds at most num_samples = the range",
          "[validation]") {
  // annbatch serves such a range as one short chunk at a uniform random start, and refuses more
  // positions than the range holds.
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 5, .replacement = true});
  REQUIRE(sampler.n_batches(9) == 2);  // num_samples defaults to the range: 9 positions
  cs::RandomSampler over(
      {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 5, .replacement = true, .num_samples = 10});
  REQUIRE_INVALID(over.validate(9), Contains("the sampled range (9 observations) is smaller than chunk_size (10)") &&
                                        Contains("num_samples (10) must be <= 9"));
  REQUIRE_INVALID(over.n_batches(9), Contains("num_samples (10)"));
  REQUIRE_INVALID(over.sample(9), Contains("num_samples (10)"));
  REQUIRE(over.epoch() == 0);

  cs::RandomSampler masked({.chunk_size = 10,
                            .preload_nchunks = 1,
                            .batch_size = 5,
                            .mask = cs::Slice{95, 100},
                            .replacement = true,
                            .num_samples = 6});
  REQUIRE_INVALID(masked.validate(1000),
                  Contains("the sampled range (5 observations) is smaller than chunk_size (10)") &&
                      Contains("num_samples (6) must be <= 5"));

  // A whole chunk in the range: num_samples may exceed the range with replacement.
  REQUIRE(sampler.n_batches(10) == 2);
  cs::RandomSampler many(
      {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 5, .replacement = true, .num_samples = 500});
  REQUIRE(many.n_batches(10) == 100);
}

TEST_CASE("RandomSampler with replacement over a range shorter than a chunk: one short chunk, uniform start",
          "[random_sampler]") {
  // Range [100, 107) of 7 rows, chunk_size 10, num_samples 4: one chunk of 4 rows whose start is
  // uniform over the 4 starts 100..103 that keep it inside the range.
  std::vector<std::int64_t> starts(4, 0);
  constexpr std::int64_t seeds = 4000;
  for (std::int64_t seed = 0; seed < seeds; ++seed) {
    cs::RandomSampler sampler({.chunk_size = 10,
                               .preload_nchunks = 2,
                               .batch_size = 2,
                               .mask = cs::Slice{100, 107},
                               .seed = static_cast<std::uint64_t>(seed),
                               .replacement = true,
                               .num_samples = 4});
    std::int64_t requests = 0;
    for (const cs::LoadRequest& request : sampler.sample(200)) {
      ++requests;
      REQUIRE(request.chunks.size() == 1);
      const cs::Slice c = request.chunks[0];
      REQUIRE(c.size() == 4);
      REQUIRE((c.start >= 100 && c.stop <= 107));
      ++starts[static_cast<std::size_t>(c.start - 100)];
      REQUIRE(request.splits.size() == 2);
    }
    REQUIRE(requests == 1);
  }
  // Chi-square with 3 degrees of freedom against 1,000 each: its 0.999 quantile is 16.3.
  const double chi = support::chi_square(starts, std::vector<double>(4, 1000.0));
  INFO("starts 100..103: " << starts[0] << " " << starts[1] << " " << starts[2] << " " << starts[3]);
  CHECK(chi < 16.3);
}

TEST_CASE("n_obs: without replacement num_samples must fit in the range", "[validation]") {
  cs::RandomSampler sampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .num_samples = 200});
  REQUIRE_INVALID(sampler.validate(199), Contains("num_samples (200) cannot exceed the observation range (199)"));
  REQUIRE_INVALID(sampler.n_batches(199), Contains("num_samples (200)"));
  REQUIRE_INVALID(sampler.sample(199), Contains("num_samples (200)"));
  REQUIRE(sampler.epoch() == 0);
  cs::RandomSampler masked(
      {.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice{0, 150}, .num_samples = 200});
  REQUIRE_INVALID(masked.validate(1000), Contains("num_samples (200) cannot exceed the observation range (150)"));
  // num_samples == S is fine
  REQUIRE(sampler.n_batches(200) == 50);
}

TEST_CASE("edges the rules allow do not throw", "[validation]") {
  SECTION("batch_size == chunk_size * preload_nchunks") {
    cs::RandomSampler random({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 32});
    cs::SequentialSampler sequential({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 32});
    REQUIRE(random.n_batches(100) == 4);
    REQUIRE(sequential.n_batches(100) == 4);
    std::int64_t batches = 0;
    for (const cs::LoadRequest& request : random.sample(100))
      batches += static_cast<std::int64_t>(request.splits.size());
    REQUIRE(batches == 4);
  }
  SECTION("n_obs of one observation, chunk larger than the data") {
    cs::RandomSampler random({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 2});
    REQUIRE(random.n_batches(1) == 1);
    cs::RandomSampler drop({.chunk_size = 8, .preload_nchunks = 4, .batch_size = 2, .drop_last = true});
    REQUIRE(drop.n_batches(1) == 0);  // dropping the only, short batch is an empty epoch, not an error
  }
  SECTION("mask ending at n_obs = 2^62") {
    cs::SequentialSampler sequential(
        {.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice{max_size - 10, max_size}});
    REQUIRE(sequential.n_batches(max_size) == 3);
    std::int64_t total = 0;
    for (const cs::LoadRequest& request : sequential.sample(max_size))
      for (const cs::Slice& chunk : request.chunks) {
        REQUIRE(chunk.start >= max_size - 10);
        REQUIRE(chunk.stop <= max_size);
        total += chunk.size();
      }
    REQUIRE(total == 10);
  }
}

TEST_CASE("n_obs = 2^62 works without overflow", "[validation]") {
  SECTION("n_batches") {
    const cs::RandomSampler big(
        {.chunk_size = std::int64_t{1} << 20, .preload_nchunks = 1024, .batch_size = std::int64_t{1} << 20});
    REQUIRE(big.n_batches(max_size) == std::int64_t{1} << 42);
    const cs::RandomSampler unit({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1});
    REQUIRE(unit.n_batches(max_size) == max_size);
    // 2^62 = 3 * 1537228672809129301 + 1
    const cs::SequentialSampler threes({.chunk_size = 3, .preload_nchunks = 1, .batch_size = 3});
    REQUIRE(threes.n_batches(max_size) == 1537228672809129302);
    const cs::SequentialSampler threes_drop(
        {.chunk_size = 3, .preload_nchunks = 1, .batch_size = 3, .drop_last = true});
    REQUIRE(threes_drop.n_batches(max_size) == 1537228672809129301);
    // a request of 2^62 rows over 2^62 observations
    const cs::RandomSampler whole({.chunk_size = max_size, .preload_nchunks = 1, .batch_size = max_size});
    REQUIRE(whole.n_batches(max_size) == 1);
    const cs::RandomSampler with_replacement(
        {.chunk_size = 1000, .preload_nchunks = 4, .batch_size = 1000, .replacement = true, .num_samples = max_size});
    REQUIRE(with_replacement.n_batches(max_size) == max_size / 1000 + 1);
  }
  SECTION("the first request of an epoch over 2^62 observations") {
    cs::RandomSampler sampler({.chunk_size = 1000, .preload_nchunks = 4, .batch_size = 1000, .seed = 3});
    auto requests = sampler.sample(max_size);
    const auto it = requests.begin();
    REQUIRE(it != requests.end());
    const cs::LoadRequest& request = *it;
    REQUIRE(request.chunks.size() == 4);
    for (const cs::Slice& chunk : request.chunks) {
      REQUIRE(chunk.size() == 1000);
      REQUIRE(chunk.start >= 0);
      REQUIRE(chunk.stop <= max_size);
      REQUIRE(chunk.start % 1000 == 0);
    }
    REQUIRE(request.buffer_size() == 4000);
    REQUIRE(request.splits.size() == 4);
    for (const auto batch : request.splits)
      for (const std::int64_t p : batch) REQUIRE((p >= 0 && p < 4000));
  }
  SECTION("DistributedSampler over 2^62") {
    const cs::RandomSampler base({.chunk_size = 1024, .preload_nchunks = 16, .batch_size = 1024});
    const cs::DistributedSampler last(base, cs::DistInfo{.rank = 3, .world_size = 4});
    REQUIRE(last.shard(max_size) == cs::Slice{3 * (max_size / 4), max_size});
    REQUIRE(last.n_batches(max_size) == (max_size / 4) / 1024);
  }
}

TEST_CASE("DistributedSampler: rank and world_size", "[validation]") {
  const cs::RandomSampler random({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  const cs::SequentialSampler sequential({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});

  REQUIRE_INVALID(cs::DistributedSampler(random, cs::DistInfo{.rank = 0, .world_size = 0}), Contains("world_size (0)"));
  REQUIRE_INVALID(cs::DistributedSampler(random, cs::DistInfo{.rank = 0, .world_size = -2}),
                  Contains("world_size (-2)"));
  REQUIRE_INVALID(cs::DistributedSampler(random, cs::DistInfo{.rank = -1, .world_size = 4}), Contains("rank (-1)"));
  REQUIRE_INVALID(cs::DistributedSampler(random, cs::DistInfo{.rank = 4, .world_size = 4}),
                  Contains("rank (4)") && Contains("[0, 4)"));
  REQUIRE_INVALID(cs::DistributedSampler(sequential, cs::DistInfo{.rank = 7, .world_size = 3}), Contains("rank (7)"));
  // through a callable source, too
  REQUIRE_INVALID(cs::DistributedSampler(random, [] { return cs::DistInfo{.rank = 2, .world_size = 2}; }),
                  Contains("rank (2)"));
  REQUIRE_INVALID(cs::DistributedSampler(sequential, [] { return cs::DistInfo{.rank = 0, .world_size = 0}; }),
                  Contains("world_size (0)"));

  REQUIRE_NOTHROW(cs::DistributedSampler(random, cs::DistInfo{.rank = 3, .world_size = 4}));
  REQUIRE_NOTHROW(cs::DistributedSampler(random, cs::DistInfo{.rank = 0, .world_size = 1}));
}

TEST_CASE("DistributedSampler: empty shards and bad n_obs", "[validation]") {
  const cs::RandomSampler random({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  const cs::SequentialSampler sequential({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});

  SECTION("equal batches: fewer than one batch per rank") {
    // 29 / 3 = 9 per rank, rounded down to whole batches of 10: none
    cs::DistributedSampler dist(random, cs::DistInfo{.rank = 0, .world_size = 3});
    cs::DistributedSampler seq(sequential, cs::DistInfo{.rank = 2, .world_size = 3});
    const auto check = [&](const Catch::MatcherBase<std::string>& matcher) {
      REQUIRE_INVALID(dist.shard(29), matcher);
      REQUIRE_INVALID(dist.validate(29), matcher);
      REQUIRE_INVALID(dist.n_batches(29), matcher);
      REQUIRE_INVALID(dist.sample(29), matcher);
      REQUIRE_INVALID(seq.n_batches(29), matcher);
    };
    check(Contains("29 observations") && Contains("world_size (3)"));
    REQUIRE(dist.epoch() == 0);
    REQUIRE(dist.n_batches(30) == 1);  // exactly one batch each is enough
    REQUIRE(seq.shard(30) == cs::Slice{20, 30});
  }
  SECTION("unequal batches: fewer than one observation per rank") {
    cs::DistributedSampler dist(random, cs::DistInfo{.rank = 1, .world_size = 3}, {.enforce_equal_batches = false});
    REQUIRE_INVALID(dist.shard(2), Contains("2 observations") && Contains("world_size (3)"));
    REQUIRE_INVALID(dist.sample(2), Contains("2 observations"));
    REQUIRE(dist.shard(3) == cs::Slice{1, 2});
    REQUIRE(dist.n_batches(3) == 1);
    REQUIRE(dist.shard(29) == cs::Slice{9, 18});
  }
  SECTION("the wrapped sampler's own errors come through") {
    cs::DistributedSampler dist(random, cs::DistInfo{.rank = 0, .world_size = 2});
    REQUIRE_INVALID(dist.n_batches(-1), Contains("n_obs (-1)"));
    REQUIRE_INVALID(dist.sample(max_size + 1), Contains("n_obs (4611686018427387905)"));
    const cs::RandomSampler masked(
        {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .mask = cs::Slice{0, 50}});
    cs::DistributedSampler dist_masked(masked, cs::DistInfo{.rank = 1, .world_size = 2});
    REQUIRE_INVALID(dist_masked.shard(40), Contains("mask.stop (50)") && Contains("n_obs (40)"));
  }
  SECTION("a num_samples budget too small to split") {
    // 25 / 3 = 8 per rank: no whole batch of 10
    const cs::RandomSampler budget({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .num_samples = 25});
    cs::DistributedSampler dist(budget, cs::DistInfo{.rank = 0, .world_size = 3});
    const auto check = [&](const Catch::MatcherBase<std::string>& matcher) {
      REQUIRE_INVALID(dist.validate(1000), matcher);
      REQUIRE_INVALID(dist.n_batches(1000), matcher);
      REQUIRE_INVALID(dist.sample(1000), matcher);
    };
    check(Contains("num_samples (25)") && Contains("world_size (3)"));
    cs::DistributedSampler loose(budget, cs::DistInfo{.rank = 0, .world_size = 3}, {.enforce_equal_batches = false});
    REQUIRE(loose.n_batches(1000) == 1);  // 8 observations, one short batch
    const cs::RandomSampler tiny({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .num_samples = 2});
    cs::DistributedSampler tiny_loose(tiny, cs::DistInfo{.rank = 0, .world_size = 3}, {.enforce_equal_batches = false});
    REQUIRE_INVALID(tiny_loose.n_batches(1000), Contains("num_samples (2)"));
  }
}

#undef REQUIRE_INVALID

}  // namespace test_validation
