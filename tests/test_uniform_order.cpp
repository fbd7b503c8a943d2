// SPDX-License-Identifier: MIT
// The random chunk order is a uniformly random permutation at every size: statistical tests of
// the orders the samplers yield, over many seeds, over the epochs of one seed, over rank shards
// in both shard modes, over a worker's share and over MixtureSampler's orders.
//
// Each test collects orders of n chunks and computes, against the uniform distribution:
//   - position: how often chunk c stands at position p (an n x n table, (n - 1)^2 degrees of
//     freedom), a chi-square turned into a z-score by the Wilson-Hilferty transform;
//   - pairwise order: for every pair of chunks, how often the first comes before the second,
//     each pair's binomial z-score (|z| < 5.5: Bonferroni over up to 2,016 pairs);
//   - permutation: for n <= 6, how often each of the n! orders occurs (a chi-square);
//   - parity: how often the order is an odd permutation (a binomial z-score), which a marginal
//     test cannot see: the XOR Feistel network this library used before gave odd orders for 0 of
//     2,000 seeds at n = 16, 64, 256, 1,024 and 4,096.
// A correct shuffle gives |z| of a few units; the tests require z < 5. The seeds are fixed, so a
// run gives the same answer every time. Under a sanitizer the samples are 4 times smaller: the
// z-scores account for the sample size, so the threshold stays, with less power.

#include <chunksampler/detail/random.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/ranges.hpp>

#include "statistics.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace test_uniform_order {

namespace {

namespace cs = chunksampler;
using support::chi_square;
using support::chi_square_uniform;
using support::fair_coin_z;
using support::wilson_hilferty_z;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::int64_t sample_divisor = 4;
#else
constexpr std::int64_t sample_divisor = 1;
#endif

// A sample size, smaller under a sanitizer.
constexpr std::int64_t samples(std::int64_t n) { return n / sample_divisor; }

constexpr double z_limit = 5.0;
constexpr double pair_limit = 5.5;

// 1 if `order` (a permutation of [0, n)) is odd.
int parity(std::span<const std::uint32_t> order) {
  std::vector<char> seen(order.size(), 0);
  std::size_t cycles = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (seen[i] != 0) continue;
    ++cycles;
    for (std::size_t j = i; seen[j] == 0; j = order[j]) seen[j] = 1;
  }
  return static_cast<int>((order.size() - cycles) % 2);
}

// The rank of a permutation of [0, n) among the n! (its Lehmer code), for small n.
std::size_t lehmer(std::span<const std::uint32_t> order) {
  std::size_t rank = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::size_t smaller = 0;
    for (std::size_t j = i + 1; j < order.size(); ++j) smaller += order[j] < order[i] ? 1U : 0U;
    rank = rank * (order.size() - i) + smaller;
  }
  return rank;
}

// Statistics of a sample of orders: sequences of `length` distinct chunks of [0, n) (a whole
// permutation when length == n).
class OrderStats {
 public:
  OrderStats(std::size_t n, std::size_t length)
      : n_(n), length_(length), at_(n * length, 0), before_(n * n, 0), permutations_(n <= 6 ? factorial(n) : 0, 0) {}
  explicit OrderStats(std::size_t n) : OrderStats(n, n) {}

  void add(std::span<const std::uint32_t> order) {
    // One assertion per order, not per element: Catch2's bookkeeping would dominate the time.
    REQUIRE((order.size() == length_ && std::ranges::all_of(order, [&](std::uint32_t c) { return c < n_; })));
    ++count_;
    for (std::size_t p = 0; p < length_; ++p) ++at_[p * n_ + order[p]];
    if (length_ != n_) return;
    std::vector<std::size_t> where(n_);
    for (std::size_t p = 0; p < n_; ++p) where[order[p]] = p;
    for (std::size_t a = 0; a < n_; ++a)
      for (std::size_t b = a + 1; b < n_; ++b)
        if (where[a] < where[b]) ++before_[a * n_ + b];
    odd_ += parity(order);
    if (!permutations_.empty()) ++permutations_[lehmer(order)];
  }

  // The z-score of the position table. A whole permutation fixes the table's row and column
  // sums, (n - 1)^2 degrees of freedom; a partial order fixes the rows', length * (n - 1).
  [[nodiscard]] double position_z() const {
    // Every cell expects count / n: the table holds count * length entries in n * length cells.
    const double df = static_cast<double>(length_ == n_ ? (n_ - 1) * (n_ - 1) : length_ * (n_ - 1));
    return wilson_hilferty_z(chi_square_uniform(at_), df);
  }
  // The largest |z| over the pairs' "a before b" counts.
  [[nodiscard]] double pair_z() const {
    double worst = 0;
    for (std::size_t a = 0; a < n_; ++a)
      for (std::size_t b = a + 1; b < n_; ++b) worst = std::max(worst, fair_coin_z(before_[a * n_ + b], count_));
    return worst;
  }
  [[nodiscard]] double permutation_z() const {
    return wilson_hilferty_z(chi_square_uniform(permutations_), static_cast<double>(permutations_.size() - 1));
  }
  [[nodiscard]] double parity_z() const { return fair_coin_z(odd_, count_); }
  [[nodiscard]] std::int64_t odd() const { return odd_; }
  [[nodiscard]] std::int64_t count() const { return count_; }

  // Every test of a whole permutation (positions, pairs, parity and, for n <= 6, the n! orders).
  void check(const std::string& what) const {
    INFO(fmt::format("{}: n = {}, {} orders, {} odd", what, n_, count_, odd_));
    CHECK(position_z() < z_limit);
    if (length_ != n_) return;
    if (n_ >= 2) CHECK(pair_z() < pair_limit);
    if (n_ >= 2) CHECK(parity_z() < z_limit);
    if (!permutations_.empty() && n_ >= 2) CHECK(permutation_z() < z_limit);
  }

 private:
  static std::size_t factorial(std::size_t n) { return n <= 1 ? 1 : n * factorial(n - 1); }

  std::size_t n_;
  std::size_t length_;
  std::int64_t count_ = 0;
  std::int64_t odd_ = 0;
  std::vector<std::int64_t> at_;
  std::vector<std::int64_t> before_;
  std::vector<std::int64_t> permutations_;
};

// Chunks of 2 rows, one chunk per request and per batch: a request's chunk is the order's next.
constexpr std::int64_t chunk = 2;
const cs::RandomOptions one_chunk{.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk};

// The chunks (as indices from `from`) of the requests `range` yields, appended to `order`.
template <class Range>
void append_chunks(Range&& range, std::int64_t from, std::vector<std::uint32_t>& order) {
  for (const cs::LoadRequest& request : range) {
    REQUIRE(request.chunks.size() == 1);
    order.push_back(static_cast<std::uint32_t>((request.chunks[0].start - from) / chunk));
  }
}

// Epoch `epoch`'s chunk order of a RandomSampler over n chunks, read from its plan.
std::vector<std::uint32_t> plan_order(const cs::RandomSampler& sampler, std::int64_t n, std::uint64_t epoch) {
  const auto plan = sampler.plan(n * chunk, epoch);
  std::vector<std::uint32_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    order[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(plan.chunk(i).start / chunk);
  return order;
}

std::uint64_t seed_of(std::int64_t s) { return 0x5eed0000ULL + static_cast<std::uint64_t>(s); }

// Many seeds where the old network was lopsided (n <= 9), fewer above.
std::int64_t seeds_for(std::int64_t n) { return samples(n <= 9 ? 150'000 : 6'400); }

}  // namespace

TEST_CASE("uniform order: RandomSampler's epoch over seeds, n = 2..64 chunks", "[uniform]") {
  for (std::int64_t n = 2; n <= 64; ++n) {
    OrderStats stats(static_cast<std::size_t>(n));
    for (std::int64_t s = 0; s < seeds_for(n); ++s) {
      const cs::RandomSampler sampler(
          {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
      stats.add(plan_order(sampler, n, 0));
    }
    stats.check("over seeds");
  }
}

namespace {

// Ranges off the grid of 4 rows whose grid holds exactly `n` chunks, short heads and tails among
// them, spread over several ranges (fixed per n).
cs::Ranges spread_ranges(std::int64_t n) {
  support::ConfigRng g(static_cast<std::uint64_t>(n) + 400);
  std::vector<cs::Slice> slices;
  std::int64_t at = 1;
  std::int64_t chunks = 0;
  while (chunks < n) {
    std::int64_t length = g.between(1, 12);
    while (cs::Ranges(at, at + length).n_chunks(4) > n - chunks) --length;
    slices.push_back({at, at + length});
    chunks += cs::Ranges(at, at + length).n_chunks(4);
    at += length + g.between(1, 6);
  }
  return cs::Ranges(slices);
}

}  // namespace

TEST_CASE("uniform order: a mask of several off-grid ranges, 2..64 grid chunks, over seeds", "[uniform]") {
  for (const std::int64_t n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 33, 48, 64}) {
    const cs::Ranges mask = spread_ranges(n);
    const cs::Ranges::Grid grid = mask.grid(4);
    REQUIRE(grid.n_chunks() == n);
    std::map<std::int64_t, std::uint32_t> index_of;  // a grid chunk's start -> its index
    for (std::int64_t j = 0; j < n; ++j) index_of[grid.chunk(j).start] = static_cast<std::uint32_t>(j);
    INFO(fmt::format("{} ranges", mask.size()));
    OrderStats stats(static_cast<std::size_t>(n));
    const std::int64_t n_obs = mask[mask.size() - 1].stop;
    for (std::int64_t s = 0; s < samples(n <= 9 ? 40'000 : 4'000); ++s) {
      const cs::RandomSampler sampler(
          {.chunk_size = 4, .preload_nchunks = 1, .batch_size = 1, .mask = mask, .seed = seed_of(s)});
      const auto plan = sampler.plan(n_obs, 0);
      std::vector<std::uint32_t> order(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = index_of.at(plan.chunk(i).start);
      stats.add(order);
    }
    stats.check("a mask of several ranges, over seeds");
  }
}

TEST_CASE("uniform order: a mask of more short chunks than placed_shorts, full chunks and slots, over seeds",
          "[uniform]") {
  // 300 ranges of 1 or 2 rows, every 25th a run of two full chunks of 16 between short ends: past
  // ChunkPlan::placed_shorts the order is over the full chunks and the short rows' slots of 16
  // (each told apart by its first row), which must be uniform as the chunks' order is.
  std::vector<cs::Slice> slices;
  std::int64_t at = 5;
  for (std::int64_t i = 0; i < 300; ++i) {
    const std::int64_t length = i % 25 == 0 ? 16 * 3 + 1 : 1 + i % 2;
    slices.push_back({at, at + length});
    at = (at + length) / 16 * 16 + 16 + 5 + i % 7;
  }
  const cs::Ranges mask(slices);
  const cs::Ranges::Grid grid = mask.grid(16);
  REQUIRE(grid.n_short() > cs::detail::ChunkPlan::placed_shorts);
  const std::int64_t n = grid.n_full() + cs::detail::ceil_div(grid.short_rows(), 16);
  INFO(fmt::format("{} full chunks, {} short rows, {} slots", grid.n_full(), grid.short_rows(), n));
  REQUIRE(n <= 64);
  std::map<std::int64_t, std::uint32_t> index_of;  // a slot's first row -> its index
  for (std::int64_t j = 0; j < grid.n_full(); ++j) index_of[grid.full_chunk(j).start] = static_cast<std::uint32_t>(j);
  for (std::int64_t q = 0; q * 16 < grid.short_rows(); ++q) {
    std::vector<cs::Slice> pieces;
    grid.short_pieces(q * 16, std::min<std::int64_t>(16, grid.short_rows() - q * 16), pieces);
    index_of[pieces.front().start] = static_cast<std::uint32_t>(grid.n_full() + q);
  }
  REQUIRE(static_cast<std::int64_t>(index_of.size()) == n);
  OrderStats stats(static_cast<std::size_t>(n));
  for (std::int64_t s = 0; s < samples(6'400); ++s) {
    const cs::RandomSampler sampler(
        {.chunk_size = 16, .preload_nchunks = 1, .batch_size = 16, .mask = mask, .seed = seed_of(s)});
    const auto plan = sampler.plan(at, 0);
    REQUIRE(plan.stream_chunks() == n);
    std::vector<std::uint32_t> order(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = index_of.at(plan.chunk(i).start);
    stats.add(order);
  }
  stats.check("slots of a many-short mask, over seeds");
}

TEST_CASE("uniform order: RandomSampler over the epochs of one seed, n = 2..64 chunks", "[uniform]") {
  for (std::int64_t n = 2; n <= 64; ++n) {
    OrderStats stats(static_cast<std::size_t>(n));
    const cs::RandomSampler sampler({.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = 77});
    for (std::int64_t e = 0; e < seeds_for(n); ++e) stats.add(plan_order(sampler, n, static_cast<std::uint64_t>(e)));
    stats.check("over epochs");
  }
}

namespace {

// The |z| of how often `order_of(s)` (a permutation of [0, n)) is odd over seeds s < `seeds`.
template <class OrderOf>
double parity_z(std::int64_t seeds, OrderOf&& order_of) {
  std::int64_t odd = 0;
  for (std::int64_t s = 0; s < seeds; ++s) odd += parity(order_of(s));
  return fair_coin_z(odd, seeds);
}

// How often epoch 0's order over n chunks is odd: |z| < 5. At 2^20 + 3 the 32 seeds are few,
// but an order that is never odd (the old network at n = 4^k) would give z = 5.7.
void check_parity(std::int64_t n, std::int64_t seeds) {
  INFO(fmt::format("n = {}, {} seeds", n, seeds));
  CHECK(parity_z(seeds, [n](std::int64_t s) {
          const cs::RandomSampler sampler(
              {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
          return plan_order(sampler, n, 0);
        }) < z_limit);
}

// The chunk order of chunksampler 0.1: a balanced Feistel network with XOR rounds on the smallest
// even number of bits covering n, cycle-walked into [0, n). Kept here only to show that these
// tests see its defects.
std::vector<std::uint32_t> xor_feistel_order(std::uint64_t n, std::uint64_t key) {
  unsigned bits = 0;
  while ((std::uint64_t{1} << bits) < n) ++bits;
  const unsigned half = bits <= 2 ? 1U : (bits + 1) / 2;
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  const auto encrypt = [&](std::uint64_t x) {
    std::uint64_t left = x >> half;
    std::uint64_t right = x & mask;
    for (std::uint64_t r = 0; r < 8; ++r) {
      const std::uint64_t next = left ^ (cs::detail::mix64(right ^ cs::detail::derive(key, r)) & mask);
      left = right;
      right = next;
    }
    return (left << half) | right;
  };
  std::vector<std::uint32_t> order(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t x = i;
    do x = encrypt(x);
    while (x >= n);
    order[i] = static_cast<std::uint32_t>(x);
  }
  return order;
}

}  // namespace

TEST_CASE("uniform order: parity at 100 to 4,096 chunks, over seeds", "[uniform]") {
  for (const std::int64_t n : {100, 256, 1'000, 1'024, 4'096}) check_parity(n, samples(2'000));
}

TEST_CASE("uniform order: parity on both sides of the table limit and at 2^20 + 3 chunks, over seeds", "[uniform]") {
  for (const std::int64_t n : {65'536, 65'537}) check_parity(n, samples(200));
  check_parity((1 << 20) + 3, std::max<std::int64_t>(samples(32), 32));
}

TEST_CASE("uniform order: the tests reject chunksampler 0.1's XOR Feistel order", "[uniform]") {
  // The power of the tests above, on the order they replaced: never odd at n = 4^k, and a
  // lopsided family of orders at n = 5 that the table of the 120 orders sees. The same samples
  // under a sanitizer: the outcome is fixed by the seeds.
  for (const std::uint64_t n : {16U, 64U, 256U}) {
    CAPTURE(n);
    CHECK(parity_z(2'000, [n](std::int64_t s) { return xor_feistel_order(n, cs::detail::mix64(seed_of(s))); }) >
          z_limit);
  }
  OrderStats stats(5);
  for (std::int64_t s = 0; s < 150'000; ++s) stats.add(xor_feistel_order(5, cs::detail::mix64(seed_of(s))));
  INFO(fmt::format("n = 5: permutation z {:.1f}", stats.permutation_z()));
  CHECK(stats.permutation_z() > z_limit);
}

TEST_CASE("uniform order: sampled positions at large sizes, over seeds", "[uniform]") {
  // Where 16 sampled positions send their chunk, in 16 equal bins, and the order of neighbours.
  for (const std::int64_t n : {1'000, 65'537, (1 << 20) + 3}) {
    const std::int64_t seeds = samples(8'000);
    constexpr std::size_t probes = 16;
    std::vector<std::int64_t> bins(probes * probes, 0);
    std::vector<std::int64_t> before(probes, 0);
    for (std::int64_t s = 0; s < seeds; ++s) {
      const cs::RandomSampler sampler(
          {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
      const auto plan = sampler.plan(n * chunk, 0);
      for (std::size_t p = 0; p < probes; ++p) {
        // positions spread over the range, each with its right neighbour
        const std::int64_t position = static_cast<std::int64_t>(p) * (n / static_cast<std::int64_t>(probes));
        const std::int64_t c = plan.chunk(position).start / chunk;
        ++bins[p * probes + static_cast<std::size_t>(c * static_cast<std::int64_t>(probes) / n)];
        if (plan.chunk(position + 1).start / chunk > c) ++before[p];
      }
    }
    // Bins hold n / 16 or one more chunk: the expected counts follow their sizes.
    std::vector<double> expected(probes * probes);
    for (std::size_t p = 0; p < probes; ++p)
      for (std::size_t b = 0; b < probes; ++b) {
        const auto bins_n = static_cast<std::int64_t>(probes);  // chunk c is in bin floor(c * 16 / n)
        const std::int64_t lo = (static_cast<std::int64_t>(b) * n + bins_n - 1) / bins_n;
        const std::int64_t hi = (static_cast<std::int64_t>(b + 1) * n + bins_n - 1) / bins_n;
        expected[p * probes + b] = static_cast<double>(seeds) * static_cast<double>(hi - lo) / static_cast<double>(n);
      }
    const double chi = chi_square(bins, expected);
    INFO(fmt::format("n = {}: position chi-square {:.1f} over {} cells", n, chi, probes * probes));
    CHECK(wilson_hilferty_z(chi, static_cast<double>(probes * (probes - 1))) < z_limit);
    for (std::size_t p = 0; p < probes; ++p) {
      INFO(fmt::format("n = {}: position {} before its neighbour in {} of {} orders", n, p, before[p], seeds));
      CHECK(fair_coin_z(before[p], seeds) < pair_limit);
    }
  }
}

TEST_CASE("uniform order: a rank's shard, contiguous and global mode, and a worker's share", "[uniform]") {
  using Dist = cs::DistributedSampler<cs::RandomSampler>;
  const std::int64_t seeds = samples(20'000);
  for (const std::int64_t n : {3, 5, 6, 8, 9, 16}) {
    SECTION(fmt::format("contiguous: rank 1 of 3 holds {} chunks", n)) {
      OrderStats stats(static_cast<std::size_t>(n));
      for (std::int64_t s = 0; s < seeds; ++s) {
        Dist rank(cs::RandomSampler(
                      {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)}),
                  cs::DistInfo{.rank = 1, .world_size = 3});
        std::vector<std::uint32_t> order;
        append_chunks(rank.sample(3 * n * chunk), n * chunk, order);
        stats.add(order);
      }
      stats.check("rank 1 of 3, contiguous");
    }
    SECTION(fmt::format("global: the order 2 ranks deal of {} chunks", 2 * n)) {
      OrderStats stats(static_cast<std::size_t>(2 * n));
      for (std::int64_t s = 0; s < seeds; ++s) {
        const cs::RandomSampler base(
            {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
        std::vector<std::uint32_t> order;
        for (std::int64_t r = 0; r < 2; ++r) {
          Dist rank(base, cs::DistInfo{.rank = r, .world_size = 2}, {.mode = cs::ShardMode::global});
          append_chunks(rank.sample(2 * n * chunk), 0, order);
        }
        stats.add(order);
      }
      stats.check("2 ranks, global");
    }
    SECTION(fmt::format("worker 1 of 2 of a RandomSampler over {} chunks", n)) {
      OrderStats stats(static_cast<std::size_t>(n), static_cast<std::size_t>(n / 2));
      for (std::int64_t s = 0; s < seeds; ++s) {
        cs::RandomSampler sampler({.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
        std::vector<std::uint32_t> order;
        append_chunks(sampler.sample(n * chunk, cs::WorkerInfo{.id = 1, .num_workers = 2}), 0, order);
        stats.add(order);
      }
      stats.check("worker 1 of 2");
    }
  }
}

TEST_CASE("uniform order: MixtureSampler's request slots and its passes over a dataset", "[uniform]") {
  const std::int64_t seeds = samples(20'000);
  for (const std::int64_t n : {3, 5, 7, 8, 16}) {
    SECTION(fmt::format("{} datasets of one chunk, one request each: their order", n)) {
      OrderStats stats(static_cast<std::size_t>(n));
      const std::vector<std::int64_t> sizes(static_cast<std::size_t>(n), chunk);
      for (std::int64_t s = 0; s < seeds; ++s) {
        cs::MixtureSampler mix(sizes,
                               {.chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)});
        std::vector<std::uint32_t> order;
        append_chunks(mix.sample(n * chunk), 0, order);  // dataset d is chunk d
        stats.add(order);
      }
      stats.check("mixture slots");
    }
    SECTION(fmt::format("one dataset of {} chunks read in one pass, and in two", n)) {
      OrderStats one(static_cast<std::size_t>(n));
      OrderStats two(static_cast<std::size_t>(n), static_cast<std::size_t>(2 * n));
      for (std::int64_t s = 0; s < seeds; ++s) {
        const cs::MixtureOptions options{
            .chunk_size = chunk, .preload_nchunks = 1, .batch_size = chunk, .seed = seed_of(s)};
        cs::MixtureSampler mix({n * chunk}, options);
        std::vector<std::uint32_t> order;
        append_chunks(mix.sample(n * chunk), 0, order);
        one.add(order);
        cs::MixtureOptions twice = options;
        twice.num_samples = 2 * n * chunk;
        cs::MixtureSampler repeated({n * chunk}, twice);
        order.clear();
        append_chunks(repeated.sample(n * chunk), 0, order);
        // A sequence of 2n chunks, each twice: every position uniform over the n chunks.
        std::vector<std::uint32_t> counts(static_cast<std::size_t>(n), 0);
        for (const std::uint32_t c : order) ++counts[c];
        REQUIRE(std::ranges::all_of(counts, [](std::uint32_t c) { return c == 2; }));
        two.add(order);
      }
      one.check("mixture, one pass");
      two.check("mixture, two passes");
    }
  }
}

}  // namespace test_uniform_order
