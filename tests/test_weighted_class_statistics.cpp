// SPDX-License-Identifier: MIT
// WeightedClassSampler's frequencies against chi-square bounds: classes by weight and each chunk
// its own draw (independent), starts uniform within a class, a batch a uniform sample without
// replacement of its request's rows, a stratified request's chunks in a uniform order; ClassMix's
// windows and epochs within one chunk of the shares, and an epoch's expected count of a class its
// share exactly. The model is class_support.hpp's, with weighted_support.hpp's checks.

#include <chunksampler/detail/class_mix.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "statistics.hpp"
#include "support.hpp"
#include "weighted_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace test_weighted_class_statistics {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using namespace support::weighted;
using support::chi_square_z;
using support::ConfigRng;
using support::OwnedRequest;
__extension__ using uint128 = unsigned __int128;

}  // namespace
TEST_CASE("WeightedClassSampler, independent: classes by weight, each chunk its own draw (chi-square)", "[weighted]") {
  // Class 5 lies outside the mask of the second case, class 2 is excluded (short runs), and runs
  // of a class differ in length. Each chunk draws its class: chunk classes follow the weights,
  // and two chunks of a request are independent (pairs follow the products).
  const Codes codes =
      runs_of({{5, 10}, {3, 30}, {0, 8}, {1, 12}, {4, 8}, {2, 3}, {0, 20}, {4, 8}, {1, 9}, {2, 1}, {4, 12}, {3, 25}});
  const std::vector<double> weights{1, 2, 0, 3, 4, 5};
  std::uint64_t seed = 2203;
  for (const std::optional<cs::Slice> mask : {std::optional<cs::Slice>{}, std::optional<cs::Slice>{{15, 131}}}) {
    const cs::Slice range = mask.value_or(cs::Slice{0, std::ssize(codes)});
    INFO("range [" << range.start << ", " << range.stop << ")");
    constexpr std::int64_t n_requests = 6'000;
    const cs::WeightedClassSampler sampler(codes, {.chunk_size = 8,
                                                   .preload_nchunks = 4,
                                                   .batch_size = 8,
                                                   .mask = mask,
                                                   .seed = seed++,
                                                   .num_samples = n_requests * 4 * 8,
                                                   .class_weights = weights});
    std::map<std::int32_t, std::int64_t> per_class;
    std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> pairs;
    for (const auto& chunks : planned_chunks(sampler, std::ssize(codes))) {
      for (const cs::Slice& chunk : chunks) ++per_class[codes[static_cast<std::size_t>(chunk.start)]];
      ++pairs[{codes[static_cast<std::size_t>(chunks[0].start)], codes[static_cast<std::size_t>(chunks[3].start)]}];
    }
    const auto p = class_probabilities(codes, weights, 8, range);
    CHECK(p.size() == (mask ? 4U : 5U));
    const double z = chi_square_z(per_class, p);
    INFO("classes: z " << z);
    CHECK(z < 5.0);
    std::map<std::pair<std::int32_t, std::int32_t>, double> products;
    for (const auto& [a, pa] : p)
      for (const auto& [b, pb] : p) products[{a, b}] = pa * pb;
    const double pair_z = chi_square_z(pairs, products);
    INFO("pairs of a request's first and last chunk: z " << pair_z);
    CHECK(pair_z < 5.0);
  }
}

TEST_CASE("WeightedClassSampler: starts uniform within a class, runs by the starts they hold (chi-square)",
          "[weighted]") {
  // Class 0: a run of 400 rows and one of 40; with chunks of 10 they hold 391 and 31 of the
  // class's 422 starts, so the short run gets 31/422 of its chunks (drawing a run first would give
  // it half). Class 1 (two runs of 15 and 30) and class 3 (one run) are sampled too.
  const Codes codes = runs_of({{0, 400}, {1, 15}, {3, 60}, {0, 40}, {2, 5}, {1, 30}});
  const std::vector<double> weights{3, 1, 0, 2};
  for (const cs::Composition composition : compositions) {
    INFO(composition_name(composition));
    const cs::WeightedClassSampler sampler(codes, {.chunk_size = 10,
                                                   .preload_nchunks = 6,
                                                   .batch_size = 15,
                                                   .seed = 2204,
                                                   .num_samples = 100'000 * 10,
                                                   .class_weights = weights,
                                                   .composition = composition});
    std::map<std::int32_t, std::map<std::int64_t, std::int64_t>> per_start;
    for (const auto& chunks : planned_chunks(sampler, std::ssize(codes)))
      for (const cs::Slice& chunk : chunks) ++per_start[codes[static_cast<std::size_t>(chunk.start)]][chunk.start];
    const auto starts = valid_starts(codes, weights, 10, cs::Slice{0, std::ssize(codes)});
    REQUIRE(starts.size() == 3);
    for (const auto& [c, list] : starts) {
      INFO("class " << c << ", " << list.size() << " starts");
      std::map<std::int64_t, double> uniform;
      for (const std::int64_t s : list) uniform[s] = 1.0 / static_cast<double>(list.size());
      for (const auto& [s, count] : per_start[c]) REQUIRE(uniform.contains(s));
      const double z = chi_square_z(per_start[c], uniform);
      INFO("starts: z " << z);
      CHECK(z < 5.0);
    }
    std::int64_t short_run = 0;
    std::int64_t class0 = 0;
    for (const auto& [s, count] : per_start[0]) {
      class0 += count;
      short_run += s >= 400 ? count : 0;
    }
    const double share = 31.0 / 422.0;
    const double sd = std::sqrt(static_cast<double>(class0) * share * (1 - share));
    INFO("short run: " << short_run << " of " << class0);
    CHECK(std::abs(static_cast<double>(short_run) - share * static_cast<double>(class0)) < 5 * sd);
  }
}

TEST_CASE("WeightedClassSampler: a batch is a uniform sample without replacement of its request's rows", "[weighted]") {
  // annbatch's test of the same: given a request's class counts, a batch's count of a class is
  // hypergeometric. The first batch of each request (requests are independent), its count of
  // class 0 against the mixture of hypergeometric laws, merged into bins that expect 5 or more;
  // and which batch each row of a full request lands in, uniform.
  const Codes codes = runs_of({{0, 100}, {1, 100}, {2, 100}, {3, 100}});
  for (const cs::Composition composition : compositions) {
    INFO(composition_name(composition));
    constexpr std::int64_t rows = 40;  // chunks of 10, 4 per request
    constexpr std::int64_t batch = 10;
    cs::WeightedClassSampler sampler(codes, {.chunk_size = 10,
                                             .preload_nchunks = 4,
                                             .batch_size = batch,
                                             .seed = 2205,
                                             .num_samples = 8'000 * rows,
                                             .class_weights = {1, 2, 3, 4},
                                             .composition = composition});
    std::vector<double> expected(batch + 1, 0.0);
    std::vector<std::int64_t> observed(batch + 1, 0);
    std::vector<std::int64_t> row_batch(rows * 4, 0);
    int mixed = 0;
    for (const OwnedRequest& request : support::epoch(sampler, 400)) {
      std::vector<std::int32_t> buffer;
      for (const cs::Slice& chunk : request.chunks)
        for (std::int64_t r = chunk.start; r < chunk.stop; ++r) buffer.push_back(codes[static_cast<std::size_t>(r)]);
      const auto total0 = static_cast<std::int64_t>(std::ranges::count(buffer, 0));
      // P(X = x) for X ~ Hypergeometric(rows, total0, batch).
      for (std::int64_t x = 0; x <= batch; ++x) {
        if (x > total0 || batch - x > rows - total0) continue;
        const auto log_choose = [](double n, double k) {
          return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
        };
        expected[static_cast<std::size_t>(x)] +=
            std::exp(log_choose(static_cast<double>(total0), static_cast<double>(x)) +
                     log_choose(static_cast<double>(rows - total0), static_cast<double>(batch - x)) -
                     log_choose(static_cast<double>(rows), static_cast<double>(batch)));
      }
      std::set<std::int32_t> classes;
      std::int64_t x = 0;
      for (const std::int64_t position : request.batches[0]) {
        x += buffer[static_cast<std::size_t>(position)] == 0 ? 1 : 0;
        classes.insert(buffer[static_cast<std::size_t>(position)]);
      }
      ++observed[static_cast<std::size_t>(x)];
      mixed += classes.size() > 1 ? 1 : 0;
      for (std::size_t b = 0; b < request.batches.size(); ++b)
        for (const std::int64_t position : request.batches[b]) ++row_batch[static_cast<std::size_t>(position) * 4 + b];
    }
    CHECK(mixed > 7'000);
    // Merge the bins from both ends until each expects at least 5.
    std::vector<double> e;
    std::vector<std::int64_t> o;
    double pending_e = 0;
    std::int64_t pending_o = 0;
    for (std::size_t x = 0; x < expected.size(); ++x) {
      pending_e += expected[x];
      pending_o += observed[x];
      if (pending_e >= 5) {
        e.push_back(pending_e);
        o.push_back(pending_o);
        pending_e = 0;
        pending_o = 0;
      }
    }
    e.back() += pending_e;
    o.back() += pending_o;
    REQUIRE(e.size() >= 4);
    const double z = support::wilson_hilferty_z(support::chi_square(o, e), static_cast<double>(e.size() - 1));
    INFO("class 0 in the first batch: " << fmt::format("{}", fmt::join(o, " ")) << " expected "
                                        << fmt::format("{:.1f}", fmt::join(e, " ")) << ", z " << z);
    CHECK(z < 5.0);
    // Every row of a request in every batch alike: a contingency table of 40 rows by 4 batches.
    const double rows_z = support::wilson_hilferty_z(support::chi_square_uniform(row_batch), 39.0 * 3.0);
    INFO("rows by batch: z " << rows_z);
    CHECK(rows_z < 5.0);
  }
}

TEST_CASE("WeightedClassSampler, stratified: a request's chunks in a uniform order", "[weighted]") {
  // Weights 1:7 over 8 chunks: one chunk of class 0 in every request, at each of the 8 places alike.
  const Codes codes = runs_of({{0, 50}, {1, 50}});
  cs::WeightedClassSampler sampler(codes, {.chunk_size = 5,
                                           .preload_nchunks = 8,
                                           .batch_size = 10,
                                           .seed = 2206,
                                           .num_samples = 20'000 * 40,
                                           .class_weights = {1, 7},
                                           .composition = cs::Composition::stratified});
  std::vector<std::int64_t> places(8, 0);
  for (const auto& chunks : planned_chunks(sampler, 100)) {
    REQUIRE(chunks.size() == 8);
    for (std::size_t j = 0; j < chunks.size(); ++j) places[j] += chunks[j].start < 50 ? 1 : 0;
  }
  REQUIRE(std::accumulate(places.begin(), places.end(), std::int64_t{0}) == 20'000);
  const double z = support::wilson_hilferty_z(support::chi_square_uniform(places), 7.0);
  INFO(fmt::format("places {} z {}", fmt::join(places, " "), z));
  CHECK(z < 5.0);
}

TEST_CASE("ClassMix: every window and the epoch within one chunk, over many small epochs", "[weighted]") {
  // The stratified construction alone, over 40,000 small epochs of every shape: 1 to 8 classes
  // with shares from 1:1 to 1:2^40, windows of 1 to 12 chunks, epochs of up to 6 whole windows
  // and a partial last one. The last window is where a careless layout of the epoch's extras
  // fails now and then (a few epochs in 10,000): it must still hold exactly its chunks.
  ConfigRng g(2213);
  std::int64_t partial = 0;
  for (int trial = 0; trial < 40'000; ++trial) {
    const auto n = static_cast<std::size_t>(g.between(1, 8));
    const int scale = trial % 3;
    std::vector<std::uint64_t> shares(n);
    for (std::uint64_t& q : shares)
      q = static_cast<std::uint64_t>(scale == 0   ? g.between(1, 9)
                                     : scale == 1 ? g.between(1, 1000)
                                                  : g.between(1, std::int64_t{1} << 40));
    const std::uint64_t total = std::accumulate(shares.begin(), shares.end(), std::uint64_t{0});
    const std::int64_t per_window = g.between(1, 12);
    const std::int64_t n_chunks = g.between(1, 7 * per_window);
    INFO(fmt::format("shares {} window {} chunks {}", fmt::join(shares, ":"), per_window, n_chunks));
    const cs::detail::ClassMix mix(shares, per_window, n_chunks, g.next());
    REQUIRE(mix.full_windows() == n_chunks / per_window);
    REQUIRE(mix.last_chunks() == n_chunks % per_window);
    partial += mix.last_chunks() > 0 ? 1 : 0;
    // |count - m * q / total| < 1, in integers: |count * total - m * q| < total.
    const auto close = [&](std::int64_t count, std::int64_t m, std::uint64_t q) {
      const auto a = static_cast<uint128>(count) * total;
      const auto b = static_cast<uint128>(m) * q;
      return (a > b ? a - b : b - a) < total;
    };
    std::vector<std::int64_t> epoch(n, 0);
    std::vector<std::int64_t> classes(static_cast<std::size_t>(per_window));
    for (std::int64_t k = 0; k * per_window < n_chunks; ++k) {
      const std::int64_t m = std::min(per_window, n_chunks - k * per_window);
      std::ranges::fill(classes, -1);
      mix.classes_of(k, std::span<std::int64_t>(classes.data(), static_cast<std::size_t>(m)));
      std::vector<std::int64_t> counts(n, 0);
      for (std::int64_t j = 0; j < m; ++j) {
        const std::int64_t c = classes[static_cast<std::size_t>(j)];
        REQUIRE(c >= 0);
        REQUIRE(c < static_cast<std::int64_t>(n));
        ++counts[static_cast<std::size_t>(c)];
      }
      for (std::size_t c = 0; c < n; ++c) {
        INFO("window " << k << " of " << m << " chunks, class " << c << ": " << counts[c]);
        REQUIRE(close(counts[c], m, shares[c]));
        epoch[c] += counts[c];
      }
    }
    for (std::size_t c = 0; c < n; ++c) {
      INFO("the epoch's class " << c << ": " << epoch[c]);
      REQUIRE(close(epoch[c], n_chunks, shares[c]));
    }
  }
  CHECK(partial > 25'000);
}

TEST_CASE("ClassMix: a thousand classes with shares of 52 bits, windows of 64 chunks", "[weighted]") {
  // Shares as share_numerators gives them for 1000 weights (the largest near 2^52): their sum
  // nears 2^62, so the windows' fractions times it pass 2^64; the counts must not care.
  ConfigRng g(2214);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<std::uint64_t> shares(1000);
    for (std::uint64_t& q : shares) q = (std::uint64_t{1} << 51) + g.next() % (std::uint64_t{1} << 51);
    const std::uint64_t total = std::accumulate(shares.begin(), shares.end(), std::uint64_t{0});
    const std::int64_t n_chunks = 64 * g.between(1, 20) + g.between(0, 63);
    const cs::detail::ClassMix mix(shares, 64, n_chunks, g.next());
    std::vector<std::int64_t> epoch(shares.size(), 0);
    std::vector<std::int64_t> classes(64);
    for (std::int64_t k = 0; k * 64 < n_chunks; ++k) {
      const std::int64_t m = std::min<std::int64_t>(64, n_chunks - k * 64);
      std::ranges::fill(classes, -1);
      mix.classes_of(k, std::span<std::int64_t>(classes.data(), static_cast<std::size_t>(m)));
      for (std::int64_t j = 0; j < m; ++j) {
        const std::int64_t c = classes[static_cast<std::size_t>(j)];
        REQUIRE(c >= 0);
        REQUIRE(c < 1000);
        ++epoch[static_cast<std::size_t>(c)];
      }
    }
    for (std::size_t c = 0; c < shares.size(); ++c) {
      // Each share is below 1/64 of the total: at most one chunk of a class per window, and the
      // epoch's count within one of n_chunks * share.
      const auto a = static_cast<uint128>(epoch[c]) * total;
      const auto b = static_cast<uint128>(n_chunks) * shares[c];
      INFO("class " << c << ": " << epoch[c] << " of " << n_chunks);
      REQUIRE((a > b ? a - b : b - a) < total);
    }
  }
}

TEST_CASE("WeightedClassSampler, stratified: an epoch's expected count of a class is its share exactly", "[weighted]") {
  // 3 requests of 4 chunks and one of 2 (14 chunks), weights 1:1:1 and 1:2:5: per epoch a class
  // gets floor(14 s_c) or one more, and over seeds ceil as often as the fraction says, so the mean
  // is 14 s_c (within 5 standard errors).
  const Codes codes = runs_of({{0, 30}, {1, 30}, {2, 30}});
  for (const std::vector<double>& weights : {std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 5}}) {
    INFO(fmt::format("weights {}", fmt::join(weights, ", ")));
    constexpr int epochs = 4'000;
    std::vector<std::int64_t> sums(3, 0);
    for (int seed = 0; seed < epochs; ++seed) {
      const cs::WeightedClassSampler sampler(codes, {.chunk_size = 3,
                                                     .preload_nchunks = 4,
                                                     .batch_size = 6,
                                                     .seed = static_cast<std::uint64_t>(seed),
                                                     .num_samples = 14 * 3,
                                                     .class_weights = weights,
                                                     .composition = cs::Composition::stratified});
      for (const auto& chunks : planned_chunks(sampler, 90))
        for (const cs::Slice& chunk : chunks)
          ++sums[static_cast<std::size_t>(codes[static_cast<std::size_t>(chunk.start)])];
    }
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    for (std::size_t c = 0; c < 3; ++c) {
      const double target = 14 * weights[c] / total;
      const double p = target - std::floor(target);
      const double mean = static_cast<double>(sums[c]) / epochs;
      const double standard_error = std::sqrt(p * (1 - p) / epochs);
      INFO("class " << c << ": mean " << mean << ", share " << target);
      CHECK(std::abs(mean - target) < 5 * standard_error);
    }
  }
}

}  // namespace test_weighted_class_statistics
