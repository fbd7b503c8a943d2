// SPDX-License-Identifier: MIT
#pragma once

// The WeightedClassSampler tests' configurations and checks, on top of the ClassSampler model of
// class_support.hpp: a ClassSampler configuration run as a WeightedClassSampler in either
// composition, the check of one epoch against the model (stratified counts within one chunk of the
// weights), an epoch's planned chunks, random masks of many ranges, and configurations every rank
// can serve, shared by test_weighted_class_*.cpp.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include "class_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace support::weighted {

using classes::ClassConfig;
using classes::valid_starts;
using classes::weight_of;
using WDist = cs::DistributedSampler<cs::WeightedClassSampler>;

inline constexpr cs::Composition compositions[] = {cs::Composition::independent, cs::Composition::stratified};

inline const char* composition_name(cs::Composition c) {
  return c == cs::Composition::stratified ? "stratified" : "independent";
}

// A ClassSampler configuration (class_support.hpp's model) run as a WeightedClassSampler.
struct Weighted {
  ClassConfig c;
  cs::Composition composition = cs::Composition::independent;

  [[nodiscard]] cs::WeightedClassOptions options() const { return cs::weighted_options_of(c.options, composition); }
  [[nodiscard]] cs::WeightedClassSampler sampler() const { return {c.codes, options()}; }
  [[nodiscard]] std::int64_t n_obs() const { return c.n_obs(); }
  [[nodiscard]] std::string describe() const { return c.describe() + " " + composition_name(composition); }
};

// |count - n * w / total| < 1, exactly, for the small binary fractions the tests' weights are.
inline bool within_one(std::int64_t count, std::int64_t n, double w, double total) {
  return std::abs(static_cast<double>(count) * total - static_cast<double>(n) * w) < total;
}

// Checks one epoch `requests` of `w` over `ranges` (closed) with `used` positions against the
// model: every chunk a valid start of a sampled class inside one range, full but the last; every
// request `preload_nchunks` chunks but the last, all of its rows used once; every row in the
// union and of a sampled class. Stratified: every request's class counts, and the epoch's, within
// one chunk of the weights renormalized over the classes the ranges hold.
inline void check_epoch(const Weighted& w, const cs::Ranges& ranges, std::int64_t used,
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
inline std::vector<std::vector<cs::Slice>> planned_chunks(const cs::WeightedClassSampler& sampler, std::int64_t n_obs,
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
inline cs::Ranges random_mask(ConfigRng& g, std::int64_t n_obs, std::int64_t most) {
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

// A configuration every rank of up to `world` ranks can serve (classes::distributed_config), in
// either composition.
inline Weighted weighted_distributed_config(ConfigRng& g, std::int64_t world) {
  Weighted w;
  w.c = classes::distributed_config(g, world);
  w.composition = g.coin() ? cs::Composition::stratified : cs::Composition::independent;
  return w;
}

}  // namespace support::weighted
