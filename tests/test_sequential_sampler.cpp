// SPDX-License-Identifier: MIT
// SequentialSampler: in-order, contiguous chunks and positions over random configurations, every
// row used, identical epochs, batch counts, and worked examples with exact chunks and splits.

#include <chunksampler/sequential_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace test_sequential_sampler {

namespace {

namespace cs = chunksampler;
using support::ceil_div;

std::vector<std::int64_t> iota(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

using Batches = std::vector<std::vector<std::int64_t>>;

}  // namespace

TEST_CASE("SequentialSampler reads in order over random configurations", "[sequential]") {
  support::ConfigRng g(31337);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t chunk = g.between(1, 12);
    const std::int64_t preload = g.between(1, 5);
    const std::int64_t batch = g.divisor_of(chunk * preload);
    const std::int64_t n_obs = g.between(1, 300);
    const std::optional<cs::Slice> mask = g.coin() ? std::optional<cs::Slice>(g.sub_range(n_obs)) : std::nullopt;
    const bool drop_last = g.coin();
    const cs::Slice range = mask.value_or(cs::Slice{0, n_obs});
    const std::int64_t s = range.size();
    INFO(fmt::format("chunk {} preload {} batch {} n_obs {} mask [{}, {}) drop_last {}", chunk, preload, batch, n_obs,
                     range.start, range.stop, drop_last));

    const cs::SequentialOptions options{
        .chunk_size = chunk, .preload_nchunks = preload, .batch_size = batch, .drop_last = drop_last, .mask = mask};
    cs::SequentialSampler sampler(options);
    CHECK_FALSE(sampler.shuffle());

    const std::int64_t used = drop_last ? s / batch * batch : s;
    const std::int64_t expected_batches = drop_last ? s / batch : ceil_div(s, batch);
    CHECK(sampler.n_batches(n_obs) == expected_batches);
    const support::EpochRecord rec = support::walk(sampler, n_obs);
    CHECK(rec.n_batches() == expected_batches);
    CHECK(static_cast<std::int64_t>(rec.requests.size()) == ceil_div(used, chunk * preload));
    CHECK(rec.chunks_valid(range, chunk));
    CHECK((drop_last ? rec.batches_all_full(batch) : rec.batches_full_but_last(batch)));

    // Chunks follow each other from the range's start and end exactly where the used rows end
    // (the last chunk is cut when drop_last drops rows), each inside one cell of the storage grid
    // of multiples of chunk_size from row 0: a chunk is short only at the range's ends or where
    // it straddles two requests, which read it in two pieces.
    std::int64_t at = range.start;
    bool contiguous = true;
    for (std::size_t i = 0; i < rec.chunks.size(); ++i) {
      contiguous = contiguous && rec.chunks[i].start == at;
      at = rec.chunks[i].stop;
    }
    CHECK(contiguous);
    CHECK(at == range.start + used);
    CHECK(rec.chunks_on_grid(range, chunk));
    CHECK(rec.requests_full(chunk * preload));

    // Positions are 0, 1, ..., buffer_size - 1 in order: every row of every request is used.
    bool in_order = true;
    for (const auto& r : rec.requests) {
      in_order = in_order && r.positions() == iota(0, r.buffer_size());
      CHECK(static_cast<std::int64_t>(r.chunks.size()) <= preload + 1);
    }
    CHECK(in_order);
    // Hence the epoch yields the range's observations in order.
    std::vector<std::int64_t> seen;
    for (const support::Draw& d : rec.draws) seen.push_back(d.obs);
    CHECK(seen == iota(range.start, range.start + used));

    // Every epoch is the same, whatever the epoch number (an in-order sampler takes no seed).
    const auto again = support::epoch(sampler, n_obs);
    CHECK(again == rec.requests);
    sampler.set_epoch(41);
    CHECK(support::epoch(sampler, n_obs) == rec.requests);
    CHECK(sampler.epoch() == 42);
  }
}

TEST_CASE("SequentialSampler worked example: 100 observations, chunk 30, preload 2, batch 20", "[sequential]") {
  // Its order, pinned here, is generation 1: a change of it comes with a new order_generation
  // (which refuses the states of the old order), and a new generation with a new worked example.
  STATIC_REQUIRE(cs::SequentialSampler::order_generation == 1);
  const bool drop_last = GENERATE(false, true);  // 100 is a multiple of 20: drop_last changes nothing
  INFO("drop_last " << drop_last);
  cs::SequentialSampler sampler({.chunk_size = 30, .preload_nchunks = 2, .batch_size = 20, .drop_last = drop_last});
  CHECK(sampler.n_batches(100) == 5);
  const auto requests = support::epoch(sampler, 100);
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].chunks == std::vector<cs::Slice>{{0, 30}, {30, 60}});
  CHECK(requests[0].batches == Batches{iota(0, 20), iota(20, 40), iota(40, 60)});
  CHECK(requests[1].chunks == std::vector<cs::Slice>{{60, 90}, {90, 100}});
  CHECK(requests[1].batches == Batches{iota(0, 20), iota(20, 40)});
}

TEST_CASE("SequentialSampler worked example: 105 observations, the short tail and drop_last", "[sequential]") {
  SECTION("kept: a last batch of 5") {
    cs::SequentialSampler sampler({.chunk_size = 30, .preload_nchunks = 2, .batch_size = 20});
    CHECK(sampler.n_batches(105) == 6);
    const auto requests = support::epoch(sampler, 105);
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].chunks == std::vector<cs::Slice>{{0, 30}, {30, 60}});
    CHECK(requests[1].chunks == std::vector<cs::Slice>{{60, 90}, {90, 105}});
    CHECK(requests[1].batches == Batches{iota(0, 20), iota(20, 40), iota(40, 45)});
  }
  SECTION("dropped: the last chunk is trimmed so every row read is used") {
    cs::SequentialSampler sampler({.chunk_size = 30, .preload_nchunks = 2, .batch_size = 20, .drop_last = true});
    CHECK(sampler.n_batches(105) == 5);
    const auto requests = support::epoch(sampler, 105);
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].chunks == std::vector<cs::Slice>{{60, 90}, {90, 100}});
    CHECK(requests[1].batches == Batches{iota(0, 20), iota(20, 40)});
  }
  SECTION("dropped inside a request: fewer chunks, the last one cut") {
    // 75 observations, batch 20: 60 rows used, exactly the first request, so the epoch ends there.
    // 85 observations: 80 rows used, so request 1 is one chunk cut to [60, 80).
    cs::SequentialSampler sampler({.chunk_size = 30, .preload_nchunks = 2, .batch_size = 20, .drop_last = true});
    const auto r75 = support::epoch(sampler, 75);
    REQUIRE(r75.size() == 1);
    CHECK(r75[0].chunks == std::vector<cs::Slice>{{0, 30}, {30, 60}});
    const auto r85 = support::epoch(sampler, 85);
    REQUIRE(r85.size() == 2);
    CHECK(r85[1].chunks == std::vector<cs::Slice>{{60, 80}});
    CHECK(r85[1].batches == Batches{iota(0, 20)});
  }
}

TEST_CASE("SequentialSampler worked example with a mask", "[sequential]") {
  cs::SequentialSampler sampler({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .mask = cs::Slice{10, 21}});
  CHECK(sampler.n_batches(50) == 3);
  const auto requests = support::epoch(sampler, 50);
  REQUIRE(requests.size() == 2);
  // The grid of 4 from row 0 cuts [10, 21) into [10, 12), [12, 16), [16, 20), [20, 21); requests
  // hold 8 rows each, so [16, 20) is read in two pieces, one in each.
  CHECK(requests[0].chunks == std::vector<cs::Slice>{{10, 12}, {12, 16}, {16, 18}});
  CHECK(requests[0].batches == Batches{iota(0, 4), iota(4, 8)});
  CHECK(requests[1].chunks == std::vector<cs::Slice>{{18, 20}, {20, 21}});
  CHECK(requests[1].batches == Batches{iota(0, 3)});
}

}  // namespace test_sequential_sampler
