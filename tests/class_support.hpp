// SPDX-License-Identifier: MIT
#pragma once

// The ClassSampler tests' model of the specification, computed from the class codes directly
// (valid chunk starts by class, the renormalized class probabilities), random configurations, the
// check of one epoch against the model, and the checks of DistributedSampler over a class sampler,
// shared by test_class_*.cpp and test_weighted_class_*.cpp.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>

#include "harness.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace support::classes {

using Codes = std::vector<std::int32_t>;
using Dist = cs::DistributedSampler<cs::ClassSampler>;

// ---------------------------------------------------------------------------------------------
// A reference model of the semantics, computed from the codes directly.

// The weight the specification gives class `c`: uniform when no weights are given.
inline double weight_of(const std::vector<double>& weights, std::int32_t c) {
  return weights.empty() ? 1.0 : weights[static_cast<std::size_t>(c)];
}

// Every valid chunk start inside `ranges` (closed), by class, in row order: a start whose `chunk`
// rows lie in one range and in one run of a class with a positive weight.
inline std::map<std::int32_t, std::vector<std::int64_t>> valid_starts(const Codes& codes,
                                                                      const std::vector<double>& weights,
                                                                      std::int64_t chunk, const cs::Ranges& ranges) {
  std::vector<std::int64_t> run_end(codes.size());
  for (std::int64_t i = std::ssize(codes) - 1; i >= 0; --i) {
    const auto u = static_cast<std::size_t>(i);
    run_end[u] = i + 1 < std::ssize(codes) && codes[u + 1] == codes[u] ? run_end[u + 1] : i + 1;
  }
  std::map<std::int32_t, std::vector<std::int64_t>> starts;
  for (const cs::Slice& range : ranges)
    for (std::int64_t s = range.start; s + chunk <= range.stop; ++s) {
      const std::int32_t c = codes[static_cast<std::size_t>(s)];
      if (weight_of(weights, c) > 0 && run_end[static_cast<std::size_t>(s)] >= s + chunk) starts[c].push_back(s);
    }
  return starts;
}

// The class probabilities the specification promises over `ranges`: the weights renormalized
// over the classes holding a valid start there.
inline std::map<std::int32_t, double> class_probabilities(const Codes& codes, const std::vector<double>& weights,
                                                          std::int64_t chunk, const cs::Ranges& ranges) {
  std::map<std::int32_t, double> p;
  double total = 0;
  for (const auto& [c, starts] : valid_starts(codes, weights, chunk, ranges)) {
    p[c] = weight_of(weights, c);
    total += p[c];
  }
  for (auto& [c, w] : p) w /= total;
  return p;
}

// A mask as its ranges, `[a, b) [c, end)`, for messages.
inline std::string mask_text(const cs::Ranges& mask) {
  std::string text;
  for (const cs::Slice& r : mask) text += fmt::format("{}{}", text.empty() ? "" : " ", cs::detail::range_text(r));
  return text;
}

// Codes laid out as runs of (class, length).
inline Codes runs_of(std::initializer_list<std::pair<std::int32_t, std::int64_t>> runs) {
  Codes codes;
  for (const auto& [c, length] : runs) codes.insert(codes.end(), static_cast<std::size_t>(length), c);
  return codes;
}

// ---------------------------------------------------------------------------------------------
// Random configurations.

struct ClassConfig {
  Codes codes;
  std::vector<double> weights;
  cs::ClassOptions options;

  [[nodiscard]] std::int64_t n_obs() const { return std::ssize(codes); }
  /// The sampled ranges, closed over the codes.
  [[nodiscard]] cs::Ranges range() const {
    return options.mask ? options.mask->resolve(n_obs()) : cs::Ranges(0, n_obs());
  }
  [[nodiscard]] std::int64_t used() const {
    return options.drop_last ? *options.num_samples / options.batch_size * options.batch_size : *options.num_samples;
  }
  [[nodiscard]] cs::ClassSampler sampler() const { return cs::ClassSampler(codes, options); }
  [[nodiscard]] std::string describe() const {
    std::string runs;
    for (std::size_t i = 0; i < codes.size();) {
      std::size_t j = i;
      while (j < codes.size() && codes[j] == codes[i]) ++j;
      runs += fmt::format("{}x{} ", codes[i], j - i);
      i = j;
    }
    const auto& o = options;
    return fmt::format("chunk {} preload {} batch {} drop_last {} mask {} seed {} num_samples {} weights [{}] runs {}",
                       o.chunk_size, o.preload_nchunks, o.batch_size, o.drop_last,
                       o.mask ? mask_text(*o.mask) : std::string("none"), o.seed, *o.num_samples,
                       fmt::join(o.class_weights, ", "), runs);
  }
};

// Class codes as runs of random classes: runs of classes with a positive weight hold at least a
// chunk, runs of excluded classes (weight 0) are often shorter. Some classes of the weights may
// not occur at all.
inline void draw_codes(ConfigRng& g, ClassConfig& c, std::int64_t n_runs, std::int64_t max_extra) {
  const std::int64_t chunk = c.options.chunk_size;
  const auto n_classes = static_cast<std::int32_t>(g.between(1, 6));
  c.weights.clear();
  if (g.between(0, 3) != 0) {
    for (std::int32_t k = 0; k < n_classes; ++k)
      c.weights.push_back(g.between(0, 3) == 0 ? 0.0 : static_cast<double>(g.between(1, 40)) / 8.0);
    if (std::ranges::none_of(c.weights, [](double w) { return w > 0; }))
      c.weights[static_cast<std::size_t>(g.between(0, n_classes - 1))] = 1.5;
  }
  c.codes.clear();
  bool any_positive = false;
  for (std::int64_t r = 0; r < n_runs || !any_positive; ++r) {
    auto k = static_cast<std::int32_t>(g.between(0, n_classes - 1));
    if (r >= n_runs) {  // still no sampled class: take one
      while (weight_of(c.weights, k) <= 0) k = (k + 1) % n_classes;
    }
    const bool positive = weight_of(c.weights, k) > 0;
    any_positive = any_positive || positive;
    const std::int64_t length = positive ? g.between(chunk, chunk + max_extra) : g.between(1, chunk + 2);
    c.codes.insert(c.codes.end(), static_cast<std::size_t>(length), k);
  }
  c.options.class_weights = c.weights;
}

// A configuration without codes yet, its chunk, preload and batch sizes drawn by
// support::draw_shape (and left in `shape` for the caller).
inline ClassConfig shaped_config(ConfigRng& g, support::Config& shape, std::int64_t max_chunk,
                                 std::int64_t max_preload) {
  ClassConfig c;
  support::draw_shape(g, shape, max_chunk, max_preload);
  c.options.chunk_size = shape.chunk;
  c.options.preload_nchunks = shape.preload;
  c.options.batch_size = shape.batch;
  return c;
}

// Codes as runs of one to two chunks of random classes, at least `least` rows and then a random
// number of runs more; up to `most_classes` classes, every one sampled, weighted 1 to 9 half the
// time (else all equal).
inline void draw_chunk_runs(ConfigRng& g, ClassConfig& c, std::int32_t most_classes, std::int64_t least) {
  const std::int64_t chunk = c.options.chunk_size;
  const auto n_classes = static_cast<std::int32_t>(g.between(1, most_classes));
  if (g.coin())
    for (std::int32_t k = 0; k < n_classes; ++k) c.weights.push_back(static_cast<double>(g.between(1, 9)));
  c.options.class_weights = c.weights;
  while (c.n_obs() < least || g.between(0, 3) != 0) {
    const auto k = static_cast<std::int32_t>(g.between(0, n_classes - 1));
    c.codes.insert(c.codes.end(), static_cast<std::size_t>(g.between(chunk, 2 * chunk)), k);
  }
}

// A configuration without a mask: chunks up to 8, preloads up to 5, 1 to `max_runs` runs of
// codes (draw_codes), and num_samples up to `requests` requests and 7 more.
inline ClassConfig coded_config(ConfigRng& g, std::int64_t max_runs, std::int64_t requests) {
  support::Config shape;
  ClassConfig c = shaped_config(g, shape, 8, 5);
  draw_codes(g, c, g.between(1, max_runs), 3 * shape.chunk + 4);
  c.options.drop_last = g.coin();
  c.options.seed = g.next();
  c.options.num_samples = g.between(1, requests * shape.chunk * shape.preload + 7);
  return c;
}

// A configuration every draw of which the sampler can serve: half the time with a mask that
// still holds a valid start.
inline ClassConfig random_config(ConfigRng& g) {
  ClassConfig c = coded_config(g, 14, 5);
  if (g.coin()) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const cs::Slice mask = g.sub_range(c.n_obs());
      if (!valid_starts(c.codes, c.weights, c.options.chunk_size, mask).empty()) {
        c.options.mask = mask;
        break;
      }
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The invariants of one epoch.

// Checks one epoch `requests` of a sampler configured by `c` over `ranges` (closed) against the
// model: every chunk inside one range and one run of its group's class, every row in the union.
inline void check_epoch(const ClassConfig& c, const cs::Ranges& ranges, std::int64_t used,
                        const std::vector<OwnedRequest>& requests) {
  const std::int64_t chunk = c.options.chunk_size;
  const std::int64_t batch = c.options.batch_size;
  const std::int64_t preload = c.options.preload_nchunks;
  const std::int64_t group = batch / std::gcd(chunk, batch);
  REQUIRE(preload % group == 0);  // groups tile requests: the divisibility rule implies it
  const support::EpochRecord rec = support::record(requests);
  REQUIRE(rec.n_batches() == ceil_div(used, batch));
  REQUIRE(std::ssize(rec.draws) == used);
  CHECK(rec.positions_valid());
  CHECK(rec.batches_full_but_last(batch));
  REQUIRE(std::ssize(rec.chunks) == ceil_div(used, chunk));
  REQUIRE(std::ssize(requests) == ceil_div(used, chunk * preload));

  // Chunks: full but the last (the remainder), each starting where a whole chunk fits in one
  // run of a sampled class inside the range, one class per group.
  const auto starts = valid_starts(c.codes, c.weights, chunk, ranges);
  std::int32_t group_class = -1;
  for (std::size_t i = 0; i < rec.chunks.size(); ++i) {
    const cs::Slice& piece = rec.chunks[i];
    INFO("chunk " << i << " [" << piece.start << ", " << piece.stop << ")");
    const std::int64_t length = i + 1 < rec.chunks.size() ? chunk : used - static_cast<std::int64_t>(i) * chunk;
    REQUIRE(piece.size() == length);
    const std::int32_t k = c.codes[static_cast<std::size_t>(piece.start)];
    REQUIRE(starts.contains(k));
    REQUIRE(std::ranges::binary_search(starts.at(k), piece.start));
    if (static_cast<std::int64_t>(i) % group == 0) group_class = k;
    REQUIRE(k == group_class);
  }

  // Requests: preload chunks but the last; batch b is the buffer rows [b * batch, ...) in some order.
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const OwnedRequest& request = requests[r];
    if (r + 1 < requests.size()) REQUIRE(std::ssize(request.chunks) == preload);
    for (std::size_t b = 0; b < request.batches.size(); ++b) {
      std::vector<std::int64_t> rows = request.batches[b];
      std::ranges::sort(rows);
      std::vector<std::int64_t> expected(rows.size());
      std::iota(expected.begin(), expected.end(), static_cast<std::int64_t>(b) * batch);
      REQUIRE(rows == expected);
    }
  }

  // No batch mixes classes, and every row is of a sampled class.
  for (const std::vector<std::int64_t>& b : support::observations(requests)) {
    REQUIRE(!b.empty());
    const std::int32_t k = c.codes[static_cast<std::size_t>(b.front())];
    REQUIRE(weight_of(c.weights, k) > 0);
    for (const std::int64_t obs : b) {
      REQUIRE(ranges.position_of(obs).has_value());
      REQUIRE(c.codes[static_cast<std::size_t>(obs)] == k);
    }
  }
}

// A configuration for DistributedSampler: every class sampled, runs of one to two chunks, and at
// least 6 chunks of rows per rank after rounding to batches, so every rank's slice holds a whole
// run, hence a chunk.
inline ClassConfig distributed_config(ConfigRng& g, std::int64_t world) {
  support::Config shape;
  ClassConfig c = shaped_config(g, shape, 6, 4);
  draw_chunk_runs(g, c, 5, world * std::max<std::int64_t>(6 * 2 * shape.chunk, 2 * shape.batch));
  c.options.drop_last = g.coin();
  c.options.seed = g.next();
  c.options.num_samples = g.between(world * shape.batch, 4 * world * shape.chunk * shape.preload);
  if (c.options.num_samples == c.n_obs()) c.options.num_samples = *c.options.num_samples + 1;
  return c;
}

// ---------------------------------------------------------------------------------------------
// DistributedSampler over the class samplers (ClassSampler, and WeightedClassSampler with the
// model of weighted_support.hpp).

// Calls `check(trial, c, world)` for `trials` draws of 1 to `max_world` ranks, each followed by a
// configuration `c` for them from `draw(g, world)` (a ClassConfig, or a Weighted one).
template <class Draw, class Check>
void for_each_world(ConfigRng& g, int trials, std::int64_t max_world, const Draw& draw, const Check& check) {
  for (int trial = 0; trial < trials; ++trial) {
    const std::int64_t world = g.between(1, max_world);
    const auto c = draw(g, world);
    INFO(c.describe() << " | world " << world);
    check(trial, c, world);
  }
}

// For `trials` configurations of 1 to 4 ranks drawn by `draw(g, world)`, one rank drawn, in global
// mode on even trials and contiguous mode on odd ones: each of its 1 to 3 workers resumes exactly
// at any batch of epoch trial % 4, then `split(make, n_obs)` checks its workers' split (`make()`
// returns the rank fresh).
template <class Draw, class Split>
void check_rank_resume(ConfigRng& g, int trials, const Draw& draw, Tally& tally, const Split& split) {
  for_each_world(g, trials, 4, draw, [&](int trial, const auto& c, std::int64_t world) {
    const cs::ShardMode mode = trial % 2 == 0 ? cs::ShardMode::global : cs::ShardMode::contiguous;
    const std::int64_t r = g.between(0, world - 1);
    INFO("rank " << r << (trial % 2 == 0 ? " global" : " contiguous"));
    const auto make = [&] {
      return cs::DistributedSampler(c.sampler(), cs::DistInfo{.rank = r, .world_size = world}, {.mode = mode});
    };
    const std::int64_t workers = trial % 3 + 1;
    for (std::int64_t id = 0; id < workers; ++id)
      check_resume(make, c.n_obs(), static_cast<std::uint64_t>(trial % 4), {.id = id, .num_workers = workers}, g,
                   tally);
    split(make, c.n_obs());
  });
}

// A global-mode job: `world` ranks over `mask` (closed) of `n_obs` rows, batches of `batch`,
// `num_samples` positions an epoch, at epoch `epoch`.
struct GlobalJob {
  cs::Ranges mask;
  std::int64_t n_obs = 0;
  std::int64_t world = 1;
  std::int64_t batch = 1;
  std::int64_t num_samples = 0;
  std::uint64_t epoch = 0;
};

// Global mode, where the ranks deal one plan: the job's plan is `base` restricted to the whole
// mask, on the stream all ranks share, with num_samples cut to whole rounds of a batch per rank;
// it is checked against `model` (check_epoch: this header's for a ClassConfig, weighted_support.hpp's
// for a Weighted one), and each rank `rank_of(r)` returns, set to the job's epoch, reads the whole
// mask and plays block r of the plan's batches.
template <class Sampler, class Model, class RankOf>
void check_deal(const Sampler& base, const Model& model, const GlobalJob& job, const RankOf& rank_of) {
  const std::int64_t round = job.world * job.batch;
  const std::int64_t kept = job.num_samples / round * round;
  Sampler shared = base.with_shard({.mask = job.mask, .stream = ~std::uint64_t{0}, .budget = kept});
  shared.set_epoch(job.epoch);
  const std::vector<OwnedRequest> whole = support::epoch(shared, job.n_obs);
  check_epoch(model, job.mask, kept, whole);
  const Batches all = support::observations(whole);
  const std::int64_t each = kept / job.batch / job.world;
  for (std::int64_t r = 0; r < job.world; ++r) {
    INFO("rank " << r);
    auto rank = rank_of(r);
    rank.set_epoch(job.epoch);
    CHECK(rank.shard(job.n_obs) == job.mask);
    REQUIRE(rank.n_batches(job.n_obs) == each);
    CHECK(support::observations(support::epoch(rank, job.n_obs)) ==
          Batches(all.begin() + r * each, all.begin() + (r + 1) * each));
  }
}

}  // namespace support::classes
