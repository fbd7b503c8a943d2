// SPDX-License-Identifier: MIT
// Arithmetic near the limits (issue 7): n_obs = 2^62 (detail::max_size), chunk sizes near it, batch
// size 1, worker counts up to 2^62, epochs near 2^64 - 1, states near 2^62 batches, Feistel
// cycle-walking over 2^61 + 1 chunks, and the 124-bit products of mixtures, for every sampler.
// Each count is checked against a value computed here from the README's formulas in 128-bit
// arithmetic, and each request read against the plan's own request of that index (or the
// uninterrupted stream's); a product that cannot fit is refused with std::invalid_argument naming
// the parameter. Only the first or last requests of a huge epoch are read. DistributedSampler's
// world sizes, modes and policies at these sizes are tested in test_limits_distributed.cpp.
#include <chunksampler.hpp>

#include "limits_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_limits {

namespace {

namespace cs = chunksampler;
using namespace support::limits;
using Catch::Contains;
using support::OwnedRequest;

// ---- batch counts ---------------------------------------------------------------------------

struct Shape {
  std::int64_t chunk = 1;
  std::int64_t preload = 1;
  std::int64_t batch = 1;
  bool drop_last = false;
  std::optional<cs::Slice> mask = std::nullopt;
  bool replacement = false;
  std::optional<std::int64_t> num_samples = std::nullopt;
};

// An epoch's batches, requests and batches per full request, from the README: n positions
// (num_samples, else the range's size), floor or ceil of n / batch_size, requests of
// chunk_size * preload_nchunks positions.
struct Counts {
  int128 batches;
  int128 requests;
  int128 per_request;
};

Counts expected_counts(const Shape& s, std::int64_t n_obs) {
  const cs::Slice range = s.mask.value_or(cs::Slice{0, n_obs});
  const int128 positions = s.num_samples.value_or(range.size());
  const int128 used = s.drop_last ? positions / s.batch * s.batch : positions;
  const int128 request = int128{s.chunk} * s.preload;
  return {ceil128(used, s.batch), ceil128(used, request), request / s.batch};
}

// Worker `id` of `k` reads requests id, id + k, ...: all full but possibly the epoch's last.
int128 expected_worker_batches(const Counts& c, int128 id, int128 k) {
  if (id >= c.requests) return 0;
  const int128 pieces = (c.requests - 1 - id) / k + 1;
  const int128 in_last = c.batches - (c.requests - 1) * c.per_request;
  const bool owns_last = (c.requests - 1) % k == id;
  return pieces * c.per_request - (owns_last ? c.per_request - in_last : 0);
}

template <class S>
void check_counts(const S& sampler, const Shape& s) {
  const Counts c = expected_counts(s, two62);
  REQUIRE(sampler.n_batches(two62) == narrow(c.batches));
  REQUIRE(sampler.n_batches(two62) == narrow(c.batches));
  REQUIRE(sampler.plan(two62, 0).n_requests() == narrow(c.requests));
  for (const std::int64_t k : {std::int64_t{2}, std::int64_t{3}, std::int64_t{1} << 20, two62}) {
    for (const std::int64_t id : {std::int64_t{0}, std::int64_t{1}, k - 1}) {
      CAPTURE(k, id);
      REQUIRE(sampler.n_batches(two62, cs::WorkerInfo{.id = id, .num_workers = k}) ==
              narrow(expected_worker_batches(c, id, k)));
    }
  }
}

}  // namespace

TEST_CASE("n_batches at n_obs = 2^62 for every shape, whole and per worker", "[limits]") {
  const std::vector<Shape> shapes = {
      {.chunk = 1, .preload = 1, .batch = 1},
      {.chunk = 3, .preload = 1, .batch = 3, .drop_last = true},
      {.chunk = 3, .preload = 5, .batch = 5},
      {.chunk = two62 - 1, .preload = 1, .batch = 1},
      {.chunk = two62 - 1, .preload = 1, .batch = two62 - 1},
      {.chunk = two62 - 1, .preload = 1, .batch = two62 - 1, .drop_last = true},
      {.chunk = two61 + 1, .preload = 1, .batch = two61 + 1},
      {.chunk = two61 + 1, .preload = 1, .batch = two61 + 1, .drop_last = true},
      {.chunk = two62, .preload = 1, .batch = two62},
      {.chunk = two62, .preload = 1, .batch = 1},
      {.chunk = two61, .preload = 2, .batch = two62},
      {.chunk = std::int64_t{1} << 31, .preload = std::int64_t{1} << 31, .batch = std::int64_t{1} << 31},
      {.chunk = 7, .preload = 3, .batch = 7, .drop_last = true, .mask = cs::Slice{5, two62}},
      {.chunk = 1000, .preload = 4, .batch = 1000, .replacement = true, .num_samples = two62},
      {.chunk = 7, .preload = 3, .batch = 7, .mask = cs::Slice{5, two62}, .num_samples = two62 - 6},
      {.chunk = two62 - 1, .preload = 1, .batch = 1, .replacement = true, .num_samples = two62},
      {.chunk = two62, .preload = 1, .batch = two62, .replacement = true, .num_samples = two62},
      {.chunk = 10,
       .preload = 1,
       .batch = 5,
       .drop_last = true,
       .mask = cs::Slice{two62 - 10, two62},
       .replacement = true,
       .num_samples = two62 - 3},
  };
  for (const Shape& s : shapes) {
    CAPTURE(s.chunk, s.preload, s.batch, s.drop_last, s.replacement, s.num_samples.value_or(-1));
    check_counts(cs::RandomSampler({.chunk_size = s.chunk,
                                    .preload_nchunks = s.preload,
                                    .batch_size = s.batch,
                                    .drop_last = s.drop_last,
                                    .mask = s.mask,
                                    .seed = 3,
                                    .replacement = s.replacement,
                                    .num_samples = s.num_samples}),
                 s);
    if (!s.replacement && !s.num_samples)
      check_counts(cs::SequentialSampler({.chunk_size = s.chunk,
                                          .preload_nchunks = s.preload,
                                          .batch_size = s.batch,
                                          .drop_last = s.drop_last,
                                          .mask = s.mask}),
                   s);
  }
  // The worked numbers behind two of the shapes: 2^62 = 3 * 1537228672809129301 + 1, and a
  // request of 2^62 - 1 rows over 2^62 observations leaves a second request of one row.
  REQUIRE(cs::SequentialSampler({.chunk_size = 3, .preload_nchunks = 1, .batch_size = 3, .drop_last = true})
              .n_batches(two62) == 1537228672809129301);
  REQUIRE(
      cs::RandomSampler({.chunk_size = two62 - 1, .preload_nchunks = 1, .batch_size = two62 - 1}).n_batches(two62) ==
      2);
}

TEST_CASE("chunks of 2^62 - 1, 2^61 + 1 and 2^62 rows over 2^62 observations", "[limits]") {
  const auto options = [](std::int64_t chunk, std::int64_t preload, std::optional<cs::Slice> mask) {
    return cs::RandomOptions{.chunk_size = chunk, .preload_nchunks = preload, .batch_size = 1, .mask = mask, .seed = 9};
  };
  const auto sequential = [](std::int64_t chunk, std::optional<cs::Slice> mask) {
    return cs::SequentialSampler({.chunk_size = chunk, .preload_nchunks = 1, .batch_size = 1, .mask = mask});
  };
  SECTION("one full chunk and the short tail: in order, or in either order when shuffled") {
    for (const std::int64_t chunk : {two62 - 1, two61 + 1}) {
      CAPTURE(chunk);
      const auto in_order = sequential(chunk, std::nullopt).plan(two62, 0);
      REQUIRE(in_order.stream_chunks() == 2);
      REQUIRE(in_order.chunk(0) == cs::Slice{0, chunk});
      REQUIRE(in_order.chunk(1) == cs::Slice{chunk, two62});
      std::set<std::int64_t> first_starts;
      for (std::uint64_t epoch = 0; epoch < 16; ++epoch) {
        const auto random = cs::RandomSampler(options(chunk, 1, std::nullopt)).plan(two62, epoch);
        REQUIRE(random.stream_chunks() == 2);
        const std::set<std::int64_t> starts = {random.chunk(0).start, random.chunk(1).start};
        REQUIRE(starts == std::set<std::int64_t>{0, chunk});
        first_starts.insert(random.chunk(0).start);
      }
      REQUIRE(first_starts.size() == 2);  // the short tail is shuffled among the chunks, not last
      for (const auto* plan : {&in_order}) {
        REQUIRE(plan->n_requests() == 2);
        REQUIRE(plan->request_begin(1) == chunk);
        REQUIRE(plan->request_of(two62 - 1) == 1);
      }
    }
  }
  SECTION("a chunk as large as the data, and one larger than the mask") {
    const auto whole = cs::RandomSampler(options(two62, 1, std::nullopt)).plan(two62, 1);
    REQUIRE(whole.stream_chunks() == 1);
    REQUIRE(whole.chunk(0) == cs::Slice{0, two62});
    const auto masked = cs::RandomSampler(options(two62, 1, cs::Slice{1, two62})).plan(two62, 1);
    REQUIRE(masked.stream_chunks() == 1);
    REQUIRE(masked.chunk(0) == cs::Slice{1, two62});
    // On the storage grid of 2^61 from row 0: a short head [3, 2^61), then the cell [2^61, 2^62).
    const auto in_order = sequential(two61, cs::Slice{3, two62}).plan(two62, 0);
    REQUIRE(in_order.stream_chunks() == 2);
    REQUIRE(in_order.chunk(0) == cs::Slice{3, two61});
    REQUIRE(in_order.chunk(1) == cs::Slice{two61, two62});
  }
  SECTION("a request of exactly 2^62 rows: two chunks of 2^61 in either order") {
    std::set<std::int64_t> first_starts;
    for (std::uint64_t epoch = 0; epoch < 16; ++epoch) {
      const auto plan = cs::RandomSampler(options(two61, 2, std::nullopt)).plan(two62, epoch);
      REQUIRE(plan.n_requests() == 1);
      REQUIRE(plan.max_positions() == two62);
      const std::set<std::int64_t> starts = {plan.chunk(0).start, plan.chunk(1).start};
      REQUIRE(starts == std::set<std::int64_t>{0, two61});
      REQUIRE(plan.chunk(0).size() == two61);
      first_starts.insert(plan.chunk(0).start);
    }
    REQUIRE(first_starts.size() == 2);  // the order is random, not fixed
  }
  SECTION("with replacement a chunk of 2^62 - 1 starts at 0 or 1, and one of 2^62 at 0") {
    std::set<std::int64_t> starts;
    for (std::uint64_t epoch = 0; epoch < 64; ++epoch) {
      cs::RandomOptions o = options(two62 - 1, 1, std::nullopt);
      o.replacement = true;
      o.num_samples = two62;
      const auto plan = cs::RandomSampler(o).plan(two62, epoch);
      REQUIRE(plan.stream_chunks() == 2);
      const cs::Slice full = plan.chunk(0);
      REQUIRE(full.size() == two62 - 1);
      starts.insert(full.start);
      const cs::Slice tail = plan.chunk(1);
      REQUIRE(tail.size() == 1);
      REQUIRE((tail.start >= 0 && tail.stop <= two62));
    }
    REQUIRE(starts == std::set<std::int64_t>{0, 1});
    cs::RandomOptions o = options(two62, 1, std::nullopt);
    o.replacement = true;
    REQUIRE(cs::RandomSampler(o).plan(two62, 3).chunk(0) == cs::Slice{0, two62});
  }
  SECTION("a request above 2^62 rows is refused, naming both factors") {
    REQUIRE_INVALID(cs::RandomSampler(options(two61 + 1, 2, std::nullopt)),
                    Contains("chunk_size * preload_nchunks (2305843009213693953 * 2) must be <= 2^62"));
    REQUIRE_INVALID(cs::RandomSampler(options(two62 + 1, 1, std::nullopt)),
                    Contains("chunk_size * preload_nchunks (4611686018427387905 * 1)"));
    REQUIRE_INVALID(cs::SequentialSampler({.chunk_size = INT64_MAX, .preload_nchunks = 1, .batch_size = 1}),
                    Contains("chunk_size * preload_nchunks (9223372036854775807 * 1)"));
    REQUIRE_NOTHROW(cs::RandomSampler(options(two61, 2, std::nullopt)));
  }
}

TEST_CASE("batch_size 1 over 2^62 observations: the first and the last request", "[limits]") {
  cs::RandomSampler sampler({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 11});
  const auto plan = sampler.plan(two62, 0);
  REQUIRE(sampler.n_batches(two62) == two62);
  REQUIRE(plan.n_requests() == two62);

  const std::vector<OwnedRequest> first = first_requests(sampler.sample(two62), 2);
  REQUIRE(first.size() == 2);
  REQUIRE(first[0] == filled(plan, 0));
  REQUIRE(first[1] == filled(plan, 1));
  REQUIRE(first[0].batches == std::vector<std::vector<std::int64_t>>{{0}});
  for (const OwnedRequest& r : first) {
    REQUIRE(r.chunks.size() == 1);
    REQUIRE(r.chunks[0].size() == 1);
    REQUIRE((r.chunks[0].start >= 0 && r.chunks[0].stop <= two62));
  }

  // The state after 2^62 - 1 batches resumes at the last request, and the range ends after it.
  sampler.set_epoch(0);
  skip_to(sampler, two62 - 1);
  const std::vector<OwnedRequest> last = first_requests(sampler.sample(two62), 2);
  REQUIRE(last.size() == 1);
  REQUIRE(last[0] == filled(plan, two62 - 1));
  REQUIRE(last[0].chunks[0] != first[0].chunks[0]);
  // After all 2^62 batches nothing is left; one more is past the epoch, or past any state.
  sampler.set_epoch(0);
  skip_to(sampler, two62);
  REQUIRE(first_requests(sampler.sample(two62), 1).empty());
  REQUIRE_INVALID(sampler.state(two62 + 1), Contains("batches_done (4611686018427387905) must be in [0, 2^62]"));
  REQUIRE_INVALID(sampler.state(INT64_MAX), Contains("batches_done (9223372036854775807)"));
  REQUIRE_THROWS_AS(sampler.state(INT64_MAX), cs::ConfigError);
  // A state of the 2^62-row epoch is refused over fewer observations, naming both sizes; one of
  // a 1000-row epoch this far in lies past that epoch's end.
  sampler.set_epoch(0);
  skip_to(sampler, two62 - 1);
  REQUIRE_INVALID(sampler.sample(1000), Contains("n_obs = 4611686018427387904") && Contains("n_obs = 1000"));
  REQUIRE(sampler.epoch() == 0);
  skip_to(sampler, two62 - 1, 1000);
  REQUIRE_INVALID(sampler.sample(1000), Contains("state's batches_done (4611686018427387903) exceed the 1000 batches"));
  REQUIRE(sampler.epoch() == 0);
}

TEST_CASE("SequentialSampler's last request at 2^62: the tail of 2^62 mod 3000 rows", "[limits]") {
  cs::SequentialSampler sampler({.chunk_size = 1000, .preload_nchunks = 3, .batch_size = 3000});
  const std::int64_t rows = narrow(int128{two62} % 3000);
  REQUIRE(rows == 904);
  const std::int64_t batches = narrow(ceil128(two62, 3000));
  REQUIRE(sampler.n_batches(two62) == batches);

  const std::vector<OwnedRequest> head = first_requests(sampler.sample(two62), 1);
  REQUIRE(head.size() == 1);
  REQUIRE(head[0].chunks == std::vector<cs::Slice>{{0, 1000}, {1000, 2000}, {2000, 3000}});
  REQUIRE(head[0].batches.size() == 1);
  REQUIRE(head[0].batches[0].size() == 3000);
  REQUIRE(head[0].batches[0].back() == 2999);

  sampler.set_epoch(0);
  skip_to(sampler, batches - 1);
  const std::vector<OwnedRequest> tail = first_requests(sampler.sample(two62), 2);
  REQUIRE(tail.size() == 1);
  REQUIRE(tail[0].chunks == std::vector<cs::Slice>{{two62 - rows, two62}});
  std::vector<std::int64_t> in_order(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < in_order.size(); ++i) in_order[i] = static_cast<std::int64_t>(i);
  REQUIRE(tail[0].batches == std::vector<std::vector<std::int64_t>>{in_order});
}

TEST_CASE("with replacement at the top of the range: starts of 2^62 - chunk_size", "[limits]") {
  SECTION("a range of exactly one chunk: every chunk is that range") {
    cs::RandomSampler sampler({.chunk_size = 10,
                               .preload_nchunks = 4,
                               .batch_size = 20,
                               .mask = cs::Slice{two62 - 10, two62},
                               .seed = 2,
                               .replacement = true,
                               .num_samples = two62});
    REQUIRE(sampler.n_batches(two62) == two62 / 20 + 1);  // 2^62 = 20 * (2^62 / 20) + 4
    const auto plan = sampler.plan(two62, 0);
    for (const std::int64_t i : {std::int64_t{0}, std::int64_t{1}, two62 / 10 - 1})
      REQUIRE(plan.chunk(i) == cs::Slice{two62 - 10, two62});
    // The epoch's tail chunk of 2^62 mod 10 = 4 rows starts anywhere it fits in the range.
    const cs::Slice tail = plan.chunk(two62 / 10);
    REQUIRE((tail.size() == 4 && tail.start >= two62 - 10 && tail.stop <= two62));
    // The last request holds 2^62 mod 40 = 24 rows: a full batch, then the epoch's last, of 4.
    const OwnedRequest whole = filled(plan, plan.n_requests() - 1);
    REQUIRE(whole.batches.size() == 2);
    REQUIRE(whole.batches.back().size() == 4);
    REQUIRE(whole.chunks.back() == tail);
    skip_to(sampler, sampler.n_batches(two62) - 1);
    const std::vector<OwnedRequest> last = first_requests(sampler.sample(two62), 2);
    REQUIRE(last.size() == 1);
    REQUIRE(last[0].chunks == whole.chunks);
    REQUIRE(last[0].batches == std::vector<std::vector<std::int64_t>>{whole.batches.back()});
  }
  SECTION("one row wider: both starts occur") {
    const cs::RandomSampler sampler({.chunk_size = 10,
                                     .preload_nchunks = 1,
                                     .batch_size = 10,
                                     .mask = cs::Slice{two62 - 11, two62},
                                     .seed = 2,
                                     .replacement = true,
                                     .num_samples = two62 - 4});
    const auto plan = sampler.plan(two62, 7);
    std::set<std::int64_t> starts;
    for (std::int64_t i = 0; i < 64; ++i) starts.insert(plan.chunk(two62 / 10 - 1 - i).start);
    REQUIRE(starts == std::set<std::int64_t>{two62 - 11, two62 - 10});
  }
  SECTION("over all 2^62 rows, starts spread over the whole range") {
    const cs::RandomSampler sampler(
        {.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 2, .replacement = true});
    const auto plan = sampler.plan(two62, 0);
    std::int64_t highest = 0;
    for (std::int64_t i = 0; i < 64; ++i) {
      const cs::Slice c = plan.chunk(two62 - 1 - i);
      REQUIRE((c.start >= 0 && c.stop <= two62 && c.size() == 1));
      highest = std::max(highest, c.start);
    }
    REQUIRE(highest > two62 / 2);  // a 64-bit draw, not one truncated to 32 bits
  }
}

TEST_CASE("workers at the limits: 2^62 workers, and more refused", "[limits]") {
  cs::RandomSampler sampler({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 13});
  const auto plan = sampler.plan(two62, 0);
  for (const std::int64_t id : {std::int64_t{0}, two61, two62 - 1}) {
    CAPTURE(id);
    const cs::WorkerInfo worker{.id = id, .num_workers = two62};
    REQUIRE(sampler.n_batches(two62, worker) == 1);
    sampler.set_epoch(0);
    const std::vector<OwnedRequest> mine = first_requests(sampler.sample(two62, worker), 2);
    REQUIRE(mine.size() == 1);
    REQUIRE(mine[0] == filled(plan, id));
  }
  // Worker 2^20 - 1 of 2^20 on rank 3 of 4: 2^60 one-batch requests shared by 2^20 workers.
  const cs::DistributedSampler rank(sampler, cs::DistInfo{.rank = 3, .world_size = 4});
  REQUIRE(rank.n_batches(two62, cs::WorkerInfo{.id = (1 << 20) - 1, .num_workers = 1 << 20}) == std::int64_t{1} << 40);
  REQUIRE(rank.n_batches(two62, cs::WorkerInfo{.id = 5, .num_workers = two62}) == 1);
  REQUIRE(rank.n_batches(two62, cs::WorkerInfo{.id = two62 / 4, .num_workers = two62}) == 0);

  // Above 2^62 workers a worker's next request index would pass 2^63 - 1.
  cs::RandomSampler small({.chunk_size = 4, .preload_nchunks = 1, .batch_size = 2});
  for (const std::int64_t k : {two62 + 1, INT64_MAX}) {
    CAPTURE(k);
    const cs::WorkerInfo worker{.id = 1, .num_workers = k};
    REQUIRE_INVALID(small.n_batches(40, worker),
                    Contains("num_workers (" + std::to_string(k) + ")") && Contains("[1, 2^62]"));
    REQUIRE_INVALID(small.sample(40, worker), Contains("num_workers"));
    REQUIRE_INVALID(rank.n_batches(two62, worker), Contains("num_workers"));
  }
  REQUIRE(small.epoch() == 0);
}

TEST_CASE("epochs near 2^64 - 1: played, resumed, and wrapping to 0", "[limits]") {
  const cs::RandomOptions options{.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 5};
  constexpr std::int64_t n_obs = 1001;
  cs::RandomSampler sampler(options);
  sampler.set_epoch(last_epoch);
  REQUIRE(sampler.epoch() == last_epoch);
  const auto plan = sampler.plan(n_obs, last_epoch);
  std::vector<OwnedRequest> from_plan;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) from_plan.push_back(filled(plan, k));
  const std::vector<OwnedRequest> played = support::epoch(sampler, n_obs);
  REQUIRE(played == from_plan);
  REQUIRE(support::record(played).covers_exactly_once({0, n_obs}));
  REQUIRE(sampler.epoch() == 0);

  // A state of epoch 2^64 - 1 round-trips through text and resumes exactly.
  const cs::SamplerState state = sampler.state(7);
  REQUIRE(state.epoch() == last_epoch);
  REQUIRE(state.to_string().find("epoch=18446744073709551615") != std::string::npos);
  cs::RandomSampler resumed(options);
  resumed.restore(cs::SamplerState::parse(state.to_string()));
  const support::Batches all = support::observations(played);
  REQUIRE(support::observations(support::epoch(resumed, n_obs)) == support::Batches(all.begin() + 7, all.end()));
  // Then both go on to epoch 0, the same as a fresh sampler's first.
  cs::RandomSampler fresh(options);
  const std::vector<OwnedRequest> first = support::epoch(fresh, n_obs);
  REQUIRE(resumed.epoch() == 0);
  REQUIRE(support::epoch(resumed, n_obs) == first);
  REQUIRE(support::epoch(sampler, n_obs) == first);
  REQUIRE(first != played);

  REQUIRE_INVALID(
      cs::SamplerState::parse(
          "chunksampler-state/6 fingerprint=0 order_generation=1 seed=0 epoch=18446744073709551616 n_obs=any "
          "batches_done=0 world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0"),
      Contains("epoch") && Contains("18446744073709551616"));
}

TEST_CASE("Feistel cycle-walking over 2^61 + 1 and 2^62 - 1 chunks", "[limits]") {
  // Above its table limit the chunk order is a Feistel network on the square [0, s)^2,
  // s = ceil(sqrt(n)): the walk from position i applies the network of s^2 elements until the
  // value falls below n. A sampler over n chunks of one row reads chunk i at that value. (The
  // network's closing transposition of 0 and 1 acts only on a value below n, the walk's last.)
  namespace detail = cs::detail;
  for (const std::int64_t n : {two61 + 1, two62 - 1}) {
    CAPTURE(n);
    const cs::RandomSampler sampler(
        {.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .mask = cs::Slice{two62 - n, two62}, .seed = 12});
    const auto plan = sampler.plan(two62, 3);
    REQUIRE(plan.stream_chunks() == n);
    const std::uint64_t side = detail::ceil_sqrt(static_cast<std::uint64_t>(n));
    REQUIRE(side * side >= static_cast<std::uint64_t>(n));
    REQUIRE((side - 1) * (side - 1) < static_cast<std::uint64_t>(n));
    const std::uint64_t key = detail::RngAccess::key(sampler.rng(), 3, detail::Purpose::chunk_order);
    const detail::FeistelPermutation domain(side * side, key);
    detail::Engine engine = detail::make_engine(3, static_cast<std::uint64_t>(n));
    std::set<std::int64_t> positions;
    for (std::int64_t t = 0; t < 1000; ++t) positions.insert(n - 1 - t);
    for (int t = 0; t < 1000; ++t)
      positions.insert(static_cast<std::int64_t>(detail::bounded(engine, static_cast<std::uint64_t>(n))));
    std::set<std::int64_t> values;
    for (const std::int64_t i : positions) {
      std::uint64_t x = domain(static_cast<std::uint64_t>(i));
      while (x >= static_cast<std::uint64_t>(n)) x = domain(x);
      const cs::Slice chunk = plan.chunk(i);
      REQUIRE(chunk ==
              cs::Slice{two62 - n + static_cast<std::int64_t>(x), two62 - n + static_cast<std::int64_t>(x) + 1});
      values.insert(chunk.start);
    }
    REQUIRE(values.size() == positions.size());  // distinct positions, distinct chunks
  }
}

TEST_CASE("ClassSampler: num_samples = 2^62 on one rank, 4 ranks and 2^20 ranks", "[limits]") {
  // The README's codes: class 0 in [0, 10) and [30, 40), class 1 in [10, 30).
  std::vector<std::int32_t> codes(40, 0);
  std::fill(codes.begin() + 10, codes.begin() + 30, 1);
  const auto class_at = [&](std::int64_t obs) { return codes[static_cast<std::size_t>(obs)]; };
  const auto coherent = [&](const cs::Slice& c) {
    return !c.empty() && c.start >= 0 && c.stop <= 40 && class_at(c.start) == class_at(c.stop - 1) &&
           (c.stop <= 10 || c.start >= 30 || (c.start >= 10 && c.stop <= 30));
  };
  // Chunks of 3 in groups of 5 (one lcm(3, 5) = 15-row request): 2^62 = 15 * q + 4, so the last
  // request holds 4 rows, a chunk of 3 and one of 1 (2^62 = 3 * q' + 1), both of one group.
  cs::ClassSampler sampler(codes,
                           {.chunk_size = 3, .preload_nchunks = 5, .batch_size = 5, .seed = 4, .num_samples = two62});
  const std::int64_t batches = narrow(ceil128(two62, 5));
  REQUIRE(sampler.n_batches(40) == batches);
  const auto plan = sampler.plan(40, 0);
  REQUIRE(plan.n_chunks() == narrow(ceil128(two62, 3)));
  skip_to(sampler, batches - 1, 40);
  const std::vector<OwnedRequest> last = first_requests(sampler.sample(40), 2);
  REQUIRE(last.size() == 1);
  REQUIRE(last[0] == filled(plan, plan.n_requests() - 1));
  REQUIRE(last[0].chunks.size() == 2);
  REQUIRE(last[0].chunks[0].size() == 3);
  REQUIRE(last[0].chunks[1].size() == 1);
  REQUIRE(std::ranges::all_of(last[0].chunks, coherent));
  REQUIRE(class_at(last[0].chunks[0].start) == class_at(last[0].chunks[1].start));
  REQUIRE(last[0].batches.size() == 1);
  REQUIRE(last[0].batches[0].size() == 4);

  // 4 contiguous ranks: shards of 10 rows, each 2^60 rounded down to whole batches of 5.
  const cs::DistributedSampler quarter(sampler, cs::DistInfo{.rank = 3, .world_size = 4});
  REQUIRE(quarter.shard(40) == cs::Slice{30, 40});
  REQUIRE(quarter.n_batches(40) == narrow(int128{two62} / 4 / 5));
  // 2^20 global ranks: the budget rounded down to a multiple of 5 * 2^20.
  const std::int64_t world = std::int64_t{1} << 20;
  cs::DistributedSampler global(sampler, cs::DistInfo{.rank = world - 1, .world_size = world},
                                {.mode = cs::ShardMode::global});
  REQUIRE(global.n_batches(40) == narrow(int128{two62} / (5 * int128{world})));
  const std::vector<OwnedRequest> first = first_requests(global.sample(40), 1);
  REQUIRE(first.size() == 1);
  REQUIRE(std::ranges::all_of(first[0].chunks, coherent));
}

TEST_CASE("MixtureSampler: 2^62 positions over small datasets, and 2^20 ranks over huge ones", "[limits]") {
  SECTION("oversampling 40 rows 2^62 / 40 times") {
    // Equal weights split R = ceil(2^62 / 10) requests: R is odd, so dataset 0 gets the extra one.
    cs::MixtureSampler mix({10, 30},
                           {.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 3, .num_samples = two62});
    const int128 requests = ceil128(two62, 10);
    REQUIRE(requests % 2 == 1);
    const auto plan = mix.plan(40, 0);
    REQUIRE(plan.n_requests() == narrow(requests));
    REQUIRE(plan.quotas() == std::vector<std::int64_t>{narrow(requests / 2 + 1), narrow(requests / 2)});
    REQUIRE(mix.n_batches(40) == narrow(requests));
    skip_to(mix, narrow(requests) - 1, 40);
    const std::vector<OwnedRequest> last = first_requests(mix.sample(40), 2);
    REQUIRE(last.size() == 1);
    REQUIRE(last[0] == filled(plan, narrow(requests) - 1));
    // The last request is its dataset's last: 4 rows from the start of one grid chunk.
    REQUIRE(last[0].chunks.size() == 1);
    const cs::Slice c = last[0].chunks[0];
    REQUIRE(c.size() == 4);
    REQUIRE(c.start % 10 == 0);
    REQUIRE(c.stop <= 40);
    // A request deep in dataset 1's passes stays on its grid.
    for (const std::int64_t k : {std::int64_t{0}, narrow(requests / 2), narrow(requests) - 2}) {
      const OwnedRequest r = filled(plan, k);
      REQUIRE(r.chunks.size() == 1);
      REQUIRE((r.chunks[0].size() == 10 && r.chunks[0].start % 10 == 0 && r.chunks[0].stop <= 40));
    }
  }
  SECTION("2^20 contiguous ranks read the same fraction of both datasets") {
    const std::vector<std::int64_t> sizes = {two61 + 12345, two61 - 12345};
    const cs::MixtureSampler mix(
        sizes, {.chunk_size = 1024, .preload_nchunks = 1, .batch_size = 1024, .seed = 3, .weights = {1, 3}});
    const std::int64_t world = std::int64_t{1} << 20;
    const std::int64_t per_rank = two62 / world;
    for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, world / 3, world - 1}) {
      CAPTURE(r);
      cs::DistributedSampler rank(mix, cs::DistInfo{.rank = r, .world_size = world});
      const cs::Slice shard{r * per_rank, (r + 1) * per_rank};
      REQUIRE(rank.shard(two62) == shard);
      REQUIRE(rank.n_batches(two62) == per_rank / 1024);
      // Dataset d's part, on its grid of m_d = floor(size_d / 1024) whole chunks:
      // [b_d + floor(a * m_d / 2^62) * 1024, b_d + floor(b * m_d / 2^62) * 1024).
      std::vector<cs::Slice> parts;
      std::int64_t begin = 0;
      for (const std::int64_t size : sizes) {
        const std::int64_t chunks = size / 1024;
        parts.push_back({narrow(begin + int128{shard.start} * chunks / two62 * 1024),
                         narrow(begin + int128{shard.stop} * chunks / two62 * 1024)});
        begin += size;
      }
      for (const OwnedRequest& request : first_requests(rank.sample(two62), 3)) {
        REQUIRE(request.chunks.size() == 1);
        const cs::Slice c = request.chunks[0];
        REQUIRE(c.size() == 1024);
        REQUIRE(std::ranges::any_of(parts, [&](const cs::Slice& p) {
          return p.start <= c.start && c.stop <= p.stop && (c.start - p.start) % 1024 == 0;
        }));
      }
    }
  }
}

}  // namespace test_limits
