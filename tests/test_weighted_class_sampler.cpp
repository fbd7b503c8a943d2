// SPDX-License-Identifier: MIT
// WeightedClassSampler: chunks chosen as ClassSampler chooses them, one class per chunk, and a
// request's rows shuffled together before they are cut into batches. Invariants over random code
// layouts and masks of many ranges in both compositions (every chunk a valid start of a sampled
// class inside one range, every request's rows used once, stratified counts within one chunk of
// the weights in every request and over the epoch), frequencies against chi-square bounds (classes
// by weight, chunks independent, starts uniform within a class, batches a uniform sample of their
// request), exact resume, workers, DistributedSampler in both modes with 1 to 9 ranks and elastic
// restarts, errors, worked examples and a pinned stream. The model is class_support.hpp's.

#include <chunksampler/detail/class_mix.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "harness.hpp"
#include "statistics.hpp"
#include "support.hpp"

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

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using Catch::Matchers::Contains;
using support::Batches;
using support::ceil_div;
using support::chi_square_z;
using support::ConfigRng;
using support::OwnedRequest;
using support::Tally;
using WDist = cs::DistributedSampler<cs::WeightedClassSampler>;
__extension__ using uint128 = unsigned __int128;

constexpr cs::Composition compositions[] = {cs::Composition::independent, cs::Composition::stratified};

const char* composition_name(cs::Composition c) {
  return c == cs::Composition::stratified ? "stratified" : "independent";
}

// A ClassSampler configuration (class_support.hpp's model) run as a WeightedClassSampler.
struct Weighted {
  ClassConfig c;
  cs::Composition composition = cs::Composition::independent;

  [[nodiscard]] cs::WeightedClassOptions options() const {
    const cs::ClassOptions& o = c.options;
    return {.chunk_size = o.chunk_size,
            .preload_nchunks = o.preload_nchunks,
            .batch_size = o.batch_size,
            .drop_last = o.drop_last,
            .mask = o.mask,
            .seed = o.seed,
            .num_samples = o.num_samples,
            .class_weights = o.class_weights,
            .composition = composition};
  }
  [[nodiscard]] cs::WeightedClassSampler sampler() const { return {c.codes, options()}; }
  [[nodiscard]] std::string describe() const { return c.describe() + " " + composition_name(composition); }
};

// |count - n * w / total| < 1, exactly, for the small binary fractions the tests' weights are.
bool within_one(std::int64_t count, std::int64_t n, double w, double total) {
  return std::abs(static_cast<double>(count) * total - static_cast<double>(n) * w) < total;
}

// Checks one epoch `requests` of `w` over `ranges` (closed) with `used` positions against the
// model: every chunk a valid start of a sampled class inside one range, full but the last; every
// request `preload_nchunks` chunks but the last, all of its rows used once; every row in the
// union and of a sampled class. Stratified: every request's class counts, and the epoch's, within
// one chunk of the weights renormalized over the classes the ranges hold.
void check_epoch(const Weighted& w, const cs::Ranges& ranges, std::int64_t used,
                 const std::vector<OwnedRequest>& requests) {
  const cs::ClassOptions& o = w.c.options;
  const support::EpochRecord rec = support::record(requests);
  REQUIRE(rec.n_batches() == ceil_div(used, o.batch_size));
  REQUIRE(std::ssize(rec.draws) == used);
  CHECK(rec.positions_valid());
  CHECK(rec.batches_full_but_last(o.batch_size));
  REQUIRE(std::ssize(rec.chunks) == ceil_div(used, o.chunk_size));
  REQUIRE(std::ssize(requests) == ceil_div(used, o.chunk_size * o.preload_nchunks));

  const auto starts = valid_starts(w.c.codes, w.c.weights, o.chunk_size, ranges);
  const auto class_of = [&](const cs::Slice& chunk) { return w.c.codes[static_cast<std::size_t>(chunk.start)]; };
  for (std::size_t i = 0; i < rec.chunks.size(); ++i) {
    const cs::Slice& chunk = rec.chunks[i];
    INFO("chunk " << i << " [" << chunk.start << ", " << chunk.stop << ")");
    REQUIRE(chunk.size() ==
            (i + 1 < rec.chunks.size() ? o.chunk_size : used - static_cast<std::int64_t>(i) * o.chunk_size));
    REQUIRE(starts.contains(class_of(chunk)));
    REQUIRE(std::ranges::binary_search(starts.at(class_of(chunk)), chunk.start));
  }
  for (std::size_t r = 0; r < requests.size(); ++r) {
    if (r + 1 < requests.size()) REQUIRE(std::ssize(requests[r].chunks) == o.preload_nchunks);
    std::vector<std::int64_t> rows = requests[r].positions();
    std::ranges::sort(rows);
    std::vector<std::int64_t> all(static_cast<std::size_t>(requests[r].buffer_size()));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    REQUIRE(rows == all);
  }
  for (const support::Draw& d : rec.draws) {
    REQUIRE(ranges.position_of(d.obs).has_value());
    REQUIRE(weight_of(w.c.weights, w.c.codes[static_cast<std::size_t>(d.obs)]) > 0);
  }
  if (w.composition != cs::Composition::stratified) return;
  double total = 0;
  for (const auto& [k, list] : starts) total += weight_of(w.c.weights, k);
  std::map<std::int32_t, std::int64_t> epoch_counts;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    std::map<std::int32_t, std::int64_t> counts;
    for (const cs::Slice& chunk : requests[r].chunks) ++counts[class_of(chunk)];
    for (const auto& [k, list] : starts) {
      INFO("request " << r << " of " << requests.size() << ", class " << k << ": " << counts[k] << " of "
                      << requests[r].chunks.size() << " chunks");
      CHECK(within_one(counts[k], std::ssize(requests[r].chunks), weight_of(w.c.weights, k), total));
      epoch_counts[k] += counts[k];
    }
  }
  for (const auto& [k, list] : starts) {
    INFO("the epoch's class " << k << ": " << epoch_counts[k] << " of " << rec.chunks.size() << " chunks");
    CHECK(within_one(epoch_counts[k], std::ssize(rec.chunks), weight_of(w.c.weights, k), total));
  }
}

// The chunks of epoch `epoch` of `sampler` over `n_obs`, request by request, from its plan.
std::vector<std::vector<cs::Slice>> planned_chunks(const cs::WeightedClassSampler& sampler, std::int64_t n_obs,
                                                   std::uint64_t epoch = 0) {
  const cs::WeightedClassPlan plan = sampler.plan(n_obs, epoch);
  std::vector<std::vector<cs::Slice>> requests;
  cs::RequestBuffers buffers;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
    plan.fill(k, buffers);
    requests.push_back(buffers.chunks);
  }
  return requests;
}

// 1 to about `most` ranges over [0, n_obs): ranges and gaps of up to `slot` rows, the last
// reaching n_obs (open-ended) now and then.
cs::Ranges random_mask(ConfigRng& g, std::int64_t n_obs, std::int64_t most) {
  std::vector<cs::Slice> slices;
  const std::int64_t slot = std::max<std::int64_t>(2, n_obs / g.between(1, most));
  for (std::int64_t at = g.coin() ? 0 : g.between(0, slot); at < n_obs && std::ssize(slices) < most;) {
    slices.push_back({at, std::min(at + g.between(1, slot), n_obs)});
    at = slices.back().stop + (g.between(0, 9) == 0 ? 0 : g.between(1, slot));
  }
  if (slices.empty()) slices.push_back({n_obs - 1, n_obs});
  if (g.coin()) slices.back() = cs::Slice::from(slices.back().start);
  return cs::Ranges(slices);
}

// A configuration every rank of up to `world` ranks can serve: runs of one to two chunks, every
// class sampled, at least six chunks of rows per rank.
Weighted distributed_config(ConfigRng& g, std::int64_t world) {
  Weighted w;
  ClassConfig& c = w.c;
  support::Config shape;
  support::draw_shape(g, shape, 6, 4);
  c.options.chunk_size = shape.chunk;
  c.options.preload_nchunks = shape.preload;
  c.options.batch_size = shape.batch;
  const auto n_classes = static_cast<std::int32_t>(g.between(1, 5));
  if (g.coin())
    for (std::int32_t k = 0; k < n_classes; ++k) c.weights.push_back(static_cast<double>(g.between(1, 9)));
  c.options.class_weights = c.weights;
  const std::int64_t least = world * std::max<std::int64_t>(12 * shape.chunk, 2 * shape.batch);
  while (c.n_obs() < least || g.between(0, 3) != 0) {
    const auto k = static_cast<std::int32_t>(g.between(0, n_classes - 1));
    c.codes.insert(c.codes.end(), static_cast<std::size_t>(g.between(shape.chunk, 2 * shape.chunk)), k);
  }
  c.options.drop_last = g.coin();
  c.options.seed = g.next();
  c.options.num_samples = g.between(world * shape.batch, 4 * world * shape.chunk * shape.preload);
  w.composition = g.coin() ? cs::Composition::stratified : cs::Composition::independent;
  return w;
}

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

TEST_CASE("WeightedClassSampler resumes exactly at every batch of small epochs; workers split the epoch",
          "[weighted][resume][workers]") {
  ConfigRng g(2207);
  Tally tally;
  for (int trial = 0; trial < 60; ++trial) {
    const Weighted w{random_config(g), compositions[trial % 2]};
    INFO(w.describe());
    const auto epoch = static_cast<std::uint64_t>(g.between(0, 4));
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      support::check_resume([&] { return w.sampler(); }, w.c.n_obs(), epoch, {.id = id, .num_workers = workers}, g,
                            tally);
    if (trial % 2 == 0)
      for (std::int64_t k = 2; k <= 4; ++k)
        support::check_workers(
            [&] {
              cs::WeightedClassSampler s = w.sampler();
              s.set_epoch(epoch);
              return s;
            },
            w.c.n_obs(), k);
  }
  INFO(tally.points << " points, " << tally.mid_request << " inside a request");
  CHECK(tally.points > 500);
  CHECK(tally.mid_request > 200);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>: equal batches on 1 to 9 ranks, each rank its own stream",
          "[weighted][distributed]") {
  // Contiguous mode: each rank draws its share from the runs clipped to its shard, on its own
  // stream, which may span several ranges of a many-range mask. Global mode: the ranks deal one
  // plan of draws from the whole mask in blocks.
  ConfigRng g(2208);
  int served = 0;
  int spanning = 0;
  for (int trial = 0; trial < 140; ++trial) {
    const std::int64_t world = g.between(1, 9);
    const cs::ShardMode mode = trial % 2 == 0 ? cs::ShardMode::global : cs::ShardMode::contiguous;
    Weighted w = distributed_config(g, world);
    if (trial % 3 == 0) w.c.options.mask = random_mask(g, w.c.n_obs(), 20);
    const cs::Ranges closed = w.c.range();
    const std::int64_t batch = w.c.options.batch_size;
    INFO(w.describe() << " | world " << world << (mode == cs::ShardMode::global ? " global" : " contiguous"));
    if (valid_starts(w.c.codes, w.c.weights, w.c.options.chunk_size, closed).empty() || closed.count() / world < batch)
      continue;
    const cs::WeightedClassSampler base = w.sampler();
    const auto rank_of = [&](std::int64_t r) {
      return WDist(base, cs::DistInfo{.rank = r, .world_size = world}, {.mode = mode});
    };
    if (mode == cs::ShardMode::contiguous) {
      const std::int64_t per_rank = closed.count() / world / batch * batch;
      const std::int64_t budget = *w.c.options.num_samples / world / batch * batch;
      for (std::int64_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        WDist rank = rank_of(r);
        const cs::Ranges shard = rank.shard(w.c.n_obs());
        REQUIRE(shard == closed.sub(r * per_rank, per_rank));
        if (valid_starts(w.c.codes, w.c.weights, w.c.options.chunk_size, shard).empty()) {
          REQUIRE_THROWS_WITH(rank.n_batches(w.c.n_obs()), Contains("no chunk"));
          continue;
        }
        spanning += shard.size() > 1 ? 1 : 0;
        REQUIRE(rank.n_batches(w.c.n_obs()) == budget / batch);
        CHECK(rank.rng() == cs::Rng(w.c.options.seed).spawn(static_cast<std::uint64_t>(r)));
        const std::vector<OwnedRequest> requests = support::epoch(rank, w.c.n_obs());
        Weighted model = w;
        model.c.options.drop_last = false;  // the budget is whole batches already
        check_epoch(model, shard, budget, requests);
        cs::WeightedClassSampler own =
            base.with_shard({.mask = shard, .stream = static_cast<std::uint64_t>(r), .budget = budget});
        CHECK(support::epoch(own, w.c.n_obs()) == requests);
        ++served;
      }
    } else {
      const std::int64_t kept = *w.c.options.num_samples / (world * batch) * (world * batch);
      cs::WeightedClassSampler job = base.with_shard({.mask = closed, .stream = ~std::uint64_t{0}, .budget = kept});
      const std::vector<OwnedRequest> whole = support::epoch(job, w.c.n_obs());
      Weighted model = w;
      model.c.options.drop_last = false;
      check_epoch(model, closed, kept, whole);
      const Batches all = support::observations(whole);
      const std::int64_t each = kept / batch / world;
      for (std::int64_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        WDist rank = rank_of(r);
        CHECK(rank.shard(w.c.n_obs()) == closed);
        REQUIRE(rank.n_batches(w.c.n_obs()) == each);
        CHECK(support::observations(support::epoch(rank, w.c.n_obs())) ==
              Batches(all.begin() + r * each, all.begin() + (r + 1) * each));
        ++served;
      }
    }
  }
  INFO(served << " ranks served, " << spanning << " shards of several ranges");
  CHECK(served > 400);
  CHECK(spanning > 10);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>: remainder policies keep every rank's batch count",
          "[weighted][distributed]") {
  ConfigRng g(2209);
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t world = g.between(1, 6);
    const Weighted w = distributed_config(g, world);
    const cs::DistributedOptions options{.enforce_equal_batches = g.between(0, 3) != 0,
                                         .mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous,
                                         .remainder = support::draw_remainder(g)};
    INFO(w.describe() << " | world " << world << " " << support::policy_name(options.remainder) << " enforce "
                      << options.enforce_equal_batches);
    std::set<std::int64_t> counts;
    for (std::int64_t r = 0; r < world; ++r) {
      WDist rank(w.sampler(), cs::DistInfo{.rank = r, .world_size = world}, options);
      for (int epoch = 0; epoch < 2; ++epoch) {
        const std::int64_t announced = rank.n_batches(w.c.n_obs());
        const std::vector<OwnedRequest> requests = support::epoch(rank, w.c.n_obs());
        CHECK(support::n_batches(requests) == announced);
        counts.insert(announced);
        const support::EpochRecord rec = support::record(requests);
        if (options.enforce_equal_batches) CHECK(rec.batches_all_full(w.c.options.batch_size));
        for (const support::Draw& d : rec.draws)
          REQUIRE(weight_of(w.c.weights, w.c.codes[static_cast<std::size_t>(d.obs)]) > 0);
      }
    }
    if (options.enforce_equal_batches) {
      CHECK(counts.size() == 1);
    } else {
      CHECK(*counts.rbegin() - *counts.begin() <= 1);
    }
  }
}

TEST_CASE("DistributedSampler<WeightedClassSampler> resumes, with workers, in both modes", "[weighted][distributed]") {
  ConfigRng g(2210);
  Tally tally;
  for (int trial = 0; trial < 30; ++trial) {
    const std::int64_t world = g.between(1, 4);
    const Weighted w = distributed_config(g, world);
    const cs::ShardMode mode = trial % 2 == 0 ? cs::ShardMode::global : cs::ShardMode::contiguous;
    const std::int64_t r = g.between(0, world - 1);
    INFO(w.describe() << " | rank " << r << " of " << world << (trial % 2 == 0 ? " global" : " contiguous"));
    const auto make = [&] { return WDist(w.sampler(), cs::DistInfo{.rank = r, .world_size = world}, {.mode = mode}); };
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      support::check_resume(make, w.c.n_obs(), static_cast<std::uint64_t>(trial % 4),
                            {.id = id, .num_workers = workers}, g, tally);
    support::check_workers(make, w.c.n_obs(), g.between(2, 4));
  }
  CHECK(tally.points > 150);
}

TEST_CASE("DistributedSampler<WeightedClassSampler>, global: elastic restore from W to W' ranks",
          "[weighted][distributed][elastic]") {
  // Every old rank read b batches; rank 0's state restores W' new ranks, which read the old
  // ranks' unread batches, in order, dealt in blocks: drop leaves out fewer than W' of them, pad
  // repeats as many from the start.
  ConfigRng g(2211);
  int restarts = 0;
  for (std::int64_t w1 = 1; w1 <= 4; ++w1)
    for (std::int64_t w2 = 1; w2 <= 4; ++w2)
      for (const cs::Remainder policy : {cs::Remainder::drop, cs::Remainder::pad}) {
        const Weighted w = distributed_config(g, std::max(w1, w2) + 1);
        const cs::DistributedOptions options{.mode = cs::ShardMode::global, .remainder = policy};
        INFO(w.describe() << " | W " << w1 << " -> W' " << w2 << " " << support::policy_name(policy));
        std::vector<WDist> old_ranks;
        std::vector<Batches> read;
        for (std::int64_t r = 0; r < w1; ++r) {
          old_ranks.emplace_back(w.sampler(), cs::DistInfo{.rank = r, .world_size = w1}, options);
          read.push_back(support::observations(support::epoch(old_ranks.back(), w.c.n_obs())));
        }
        const auto n = static_cast<std::int64_t>(read[0].size());
        REQUIRE(n >= 1);
        const std::int64_t b = g.between(0, n);
        Batches left;
        for (const Batches& mine : read) left.insert(left.end(), mine.begin() + b, mine.end());
        const std::string text = old_ranks[0].state(b).to_string();
        Batches again;
        for (std::int64_t r = 0; r < w2; ++r) {
          WDist rank(w.sampler(), cs::DistInfo{.rank = r, .world_size = w2}, options);
          rank.restore(cs::SamplerState::parse(text));
          const Batches mine = support::observations(support::epoch(rank, w.c.n_obs()));
          again.insert(again.end(), mine.begin(), mine.end());
        }
        const auto total = static_cast<std::size_t>(left.size());
        const std::size_t each = policy == cs::Remainder::pad
                                     ? (total + static_cast<std::size_t>(w2) - 1) / static_cast<std::size_t>(w2)
                                     : total / static_cast<std::size_t>(w2);
        Batches dealt;
        for (std::size_t i = 0; i < each * static_cast<std::size_t>(w2) && total > 0; ++i)
          dealt.push_back(left[i % total]);
        CHECK(again == dealt);
        ++restarts;
      }
  CHECK(restarts == 32);
}

TEST_CASE("WeightedClassSampler over masks of many ranges: chunks inside one range and one run", "[weighted]") {
  ConfigRng g(2212);
  int served = 0;
  for (int trial = 0; trial < 150; ++trial) {
    Weighted w;
    w.composition = compositions[trial % 2];
    support::Config shape;
    support::draw_shape(g, shape, 6, 5);
    w.c.options.chunk_size = shape.chunk;
    w.c.options.preload_nchunks = shape.preload;
    w.c.options.batch_size = shape.batch;
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
