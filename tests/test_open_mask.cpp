// SPDX-License-Identifier: MIT
// Open-ended masks: `Slice::from(start)` is annbatch's `mask=slice(start, None)`, the range
// `[start, n_obs)` whatever each epoch's n_obs is, accepted by every sampler that takes a mask,
// distributed or not.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sequential_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace test_open_mask {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;

}  // namespace

TEST_CASE("Slice::from(start) ends at n_obs, whatever n_obs is", "[open_mask]") {
  constexpr cs::Slice open = cs::Slice::from(30);
  STATIC_REQUIRE(open.open_ended());
  STATIC_REQUIRE(open.resolve(100) == cs::Slice{30, 100});
  STATIC_REQUIRE(!cs::Slice{30, 100}.open_ended());
  STATIC_REQUIRE(cs::Slice{30, 100}.resolve(500) == cs::Slice{30, 100});
}

TEST_CASE("an open-ended mask reads what the closed mask up to n_obs reads, at every n_obs", "[open_mask]") {
  for (const std::int64_t n_obs : {31, 100, 257, 1'000}) {
    CAPTURE(n_obs);
    const cs::RandomOptions base{.chunk_size = 8, .preload_nchunks = 2, .batch_size = 4, .seed = 5};
    cs::RandomOptions open = base;
    open.mask = cs::Slice::from(30);
    cs::RandomOptions closed = base;
    closed.mask = cs::Slice{30, n_obs};
    cs::RandomSampler a(open);
    cs::RandomSampler b(closed);
    CHECK(a.n_batches(n_obs) == b.n_batches(n_obs));
    const support::Batches read = support::observations(support::epoch(a, n_obs));
    CHECK(read == support::observations(support::epoch(b, n_obs)));
    // Every observation of [30, n_obs) once, nothing else.
    std::vector<int> seen(static_cast<std::size_t>(n_obs), 0);
    for (const auto& batch : read)
      for (const std::int64_t obs : batch) ++seen[static_cast<std::size_t>(obs)];
    for (std::int64_t i = 0; i < n_obs; ++i) REQUIRE(seen[static_cast<std::size_t>(i)] == (i >= 30 ? 1 : 0));

    cs::SequentialSampler seq({.chunk_size = 8, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice::from(30)});
    const support::Batches in_order = support::observations(support::epoch(seq, n_obs));
    REQUIRE(!in_order.empty());
    CHECK(in_order.front().front() == 30);
    CHECK(in_order.back().back() == n_obs - 1);
  }
}

TEST_CASE("an open-ended mask under DistributedSampler: shards inside it, in both modes", "[open_mask]") {
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice::from(100)});
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
    for (const std::int64_t n_obs : {197, 500}) {
      CAPTURE(static_cast<int>(mode), n_obs);
      std::vector<int> seen(static_cast<std::size_t>(n_obs), 0);
      std::int64_t batches = -1;
      for (std::int64_t r = 0; r < 3; ++r) {
        cs::DistributedSampler rank(base, cs::DistInfo{.rank = r, .world_size = 3}, {.mode = mode});
        CHECK(rank.mask() == cs::Slice::from(100));
        const cs::Slice shard = support::only_range(rank.shard(n_obs));
        CHECK((shard.start >= 100 && shard.stop <= n_obs));
        const support::Batches read = support::observations(support::epoch(rank, n_obs));
        if (batches >= 0) CHECK(static_cast<std::int64_t>(read.size()) == batches);
        batches = static_cast<std::int64_t>(read.size());
        for (const auto& batch : read)
          for (const std::int64_t obs : batch) ++seen[static_cast<std::size_t>(obs)];
      }
      // Disjoint, inside the mask, and (drop) all but fewer than 3 batches of 4 rows of it.
      std::int64_t read = 0;
      for (std::int64_t i = 0; i < n_obs; ++i) {
        REQUIRE(seen[static_cast<std::size_t>(i)] <= 1);
        if (i < 100) REQUIRE(seen[static_cast<std::size_t>(i)] == 0);
        read += seen[static_cast<std::size_t>(i)];
      }
      CHECK(n_obs - 100 - read < 3 * 4);
    }
  }
}

TEST_CASE("an open-ended mask in ClassSampler, and the refusals", "[open_mask]") {
  std::vector<std::int32_t> codes(60, 0);
  for (std::size_t i = 30; i < 60; ++i) codes[i] = 1;
  cs::ClassSampler classes(
      codes, {.chunk_size = 5, .preload_nchunks = 1, .batch_size = 5, .mask = cs::Slice::from(30), .num_samples = 50});
  for (const auto& batch : support::observations(support::epoch(classes, 60)))
    for (const std::int64_t obs : batch) REQUIRE(obs >= 30);
  CHECK_THROWS_AS(
      cs::ClassSampler(
          codes,
          {.chunk_size = 5, .preload_nchunks = 1, .batch_size = 5, .mask = cs::Slice::from(60), .num_samples = 5}),
      std::invalid_argument);

  cs::RandomSampler at_end({.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice::from(100)});
  CHECK_THROWS_WITH(at_end.validate(100), Contains("[100, 100) is empty"));
  CHECK_NOTHROW(at_end.validate(101));
  CHECK_THROWS_WITH(cs::RandomSampler(
                        {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice::from(-1)}),
                    Contains("mask.start must be >= 0 (got -1)"));
  CHECK_THROWS_WITH(
      cs::RandomSampler(
          {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 4, .mask = cs::Slice::from(std::int64_t{1} << 62)}),
      Contains("must be < 2^62"));
}

}  // namespace test_open_mask
