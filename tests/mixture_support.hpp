// SPDX-License-Identifier: MIT
#pragma once

// The MixtureSampler tests' model of the specification: random mixture configurations, the exact
// largest-remainder quotas, a dataset's part under a shard, the analysis of what an epoch read,
// dataset by dataset, and the update_weights examples' mixture, shared by test_mixture_*.cpp.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>

#include "support.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace support::mixture {

using Requests = std::vector<OwnedRequest>;
using Mixture = cs::DistributedSampler<cs::MixtureSampler>;

__extension__ using int128 = __int128;
__extension__ using uint128 = unsigned __int128;

// A mixture's configuration; weights are small integers (or none) so the quotas can be computed
// exactly here, from the specification, when the temperature is 1.
struct MixConfig {
  std::vector<std::int64_t> sizes;
  std::int64_t chunk = 1;
  std::int64_t preload = 1;
  std::int64_t batch = 1;
  bool drop_last = false;
  std::optional<std::int64_t> num_samples;
  std::vector<std::int64_t> weights;  // empty: equal weights
  double temperature = 1.0;
  std::uint64_t seed = 0;
  std::int64_t after = 0;  // observations past the last dataset

  [[nodiscard]] std::int64_t total() const { return std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}); }
  [[nodiscard]] std::int64_t n_obs() const { return total() + after; }
  [[nodiscard]] std::int64_t budget() const { return num_samples.value_or(total()); }
  [[nodiscard]] std::int64_t used(std::int64_t positions) const {
    return drop_last ? positions / batch * batch : positions;
  }
  [[nodiscard]] std::vector<std::int64_t> boundaries() const {
    std::vector<std::int64_t> b{0};
    for (const std::int64_t s : sizes) b.push_back(b.back() + s);
    return b;
  }
  [[nodiscard]] std::vector<cs::Slice> datasets() const {
    const auto b = boundaries();
    std::vector<cs::Slice> result;
    for (std::size_t d = 0; d + 1 < b.size(); ++d) result.push_back({b[d], b[d + 1]});
    return result;
  }
  [[nodiscard]] std::vector<std::int64_t> integer_weights() const {
    return weights.empty() ? std::vector<std::int64_t>(sizes.size(), 1) : weights;
  }
  [[nodiscard]] cs::MixtureOptions options() const {
    return {.chunk_size = chunk,
            .preload_nchunks = preload,
            .batch_size = batch,
            .drop_last = drop_last,
            .seed = seed,
            .num_samples = num_samples,
            .weights = std::vector<double>(weights.begin(), weights.end()),
            .temperature = temperature};
  }
  [[nodiscard]] cs::MixtureSampler sampler() const { return cs::MixtureSampler(sizes, options()); }
  [[nodiscard]] std::string describe() const {
    return fmt::format("sizes {} chunk {} preload {} batch {} drop_last {} num_samples {} weights {} temperature {} "
                       "seed {} n_obs {}",
                       sizes, chunk, preload, batch, drop_last,
                       num_samples ? std::to_string(*num_samples) : std::string("none"), weights, temperature, seed,
                       n_obs());
  }
};

// The update_weights examples: datasets of 100, 60 and 40 rows at equal weights, then the weights
// `other`, under which dataset 1 (rows [100, 160)) is never read.
struct WeightUpdate {
  std::vector<std::int64_t> sizes{100, 60, 40};
  cs::MixtureOptions options;
  std::vector<double> other{1, 0, 8};
  cs::MixtureOptions other_options;  ///< `options` with the weights `other`

  explicit WeightUpdate(std::uint64_t seed)
      : options{.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .seed = seed, .weights = {1, 1, 1}},
        other_options(options) {
    other_options.weights = other;
  }
};

// 1 to 5 datasets of 1 to 6 chunks, some with a tail the grid leaves out; weights 0 to 6 (or none),
// a quarter of them at another temperature; num_samples (up to 3 times the sizes) a third of the time.
inline MixConfig random_mix(ConfigRng& g, std::int64_t min_chunks = 1) {
  MixConfig c;
  c.chunk = g.between(1, 8);
  c.preload = g.between(1, 4);
  c.batch = g.divisor_of(c.chunk * c.preload);
  const std::int64_t n = g.between(1, 5);
  for (std::int64_t d = 0; d < n; ++d)
    c.sizes.push_back(c.chunk * g.between(min_chunks, min_chunks + 5) + (g.coin() ? g.between(0, c.chunk - 1) : 0));
  if (g.between(0, 3) != 0) {
    for (std::int64_t d = 0; d < n; ++d) c.weights.push_back(g.between(0, 3) == 0 ? 0 : g.between(1, 6));
    if (std::ranges::all_of(c.weights, [](std::int64_t w) { return w == 0; }))
      c.weights[static_cast<std::size_t>(g.between(0, n - 1))] = g.between(1, 6);
  }
  if (g.between(0, 3) == 0) {
    constexpr double temperatures[] = {0.5, 2.0, 7.5};
    c.temperature = temperatures[g.between(0, 2)];
  }
  if (g.between(0, 2) == 0) c.num_samples = g.between(1, 3 * c.total());
  c.drop_last = g.coin();
  c.seed = g.next();
  c.after = g.coin() ? g.between(0, 20) : 0;
  return c;
}

// Largest-remainder quotas of `requests` by integer weights, from the specification.
inline std::vector<std::int64_t> expected_quotas(std::int64_t requests, const std::vector<std::int64_t>& weights) {
  const std::int64_t sum = std::accumulate(weights.begin(), weights.end(), std::int64_t{0});
  std::vector<std::int64_t> quotas;
  std::vector<std::int64_t> remainders;
  for (const std::int64_t w : weights) {
    quotas.push_back(requests * w / sum);
    remainders.push_back(requests * w % sum);
  }
  std::int64_t left = requests - std::accumulate(quotas.begin(), quotas.end(), std::int64_t{0});
  while (left-- > 0) {
    std::size_t best = 0;
    for (std::size_t d = 1; d < remainders.size(); ++d)
      if (remainders[d] > remainders[best]) best = d;
    ++quotas[best];
    remainders[best] = -1;
  }
  return quotas;
}

// Dataset d's part under the shard [a, b) of a collection of `total`: the same fraction of it, in
// whole chunks of its grid of size / chunk chunks.
inline cs::Slice expected_part(cs::Slice dataset, std::int64_t chunk, std::int64_t a, std::int64_t b,
                               std::int64_t total) {
  const int128 chunks = dataset.size() / chunk;
  const auto at = [&](std::int64_t x) {
    return dataset.start + static_cast<std::int64_t>(static_cast<int128>(x) * chunks / total) * chunk;
  };
  return {at(a), at(b)};
}

// What one epoch read, dataset by dataset, and whether its requests have the mixture's shape.
struct Reads {
  std::vector<std::int64_t> requests;                            // per dataset
  std::vector<std::int64_t> chunks;                              // per dataset
  std::vector<std::map<std::int64_t, std::int64_t>> grid_reads;  // per dataset: grid chunk -> times read
  std::vector<std::size_t> order;                                // the dataset of each request
  bool one_part = true;                                          // every request's chunks lie in one part
  bool on_grid = true;        // every chunk starts on its part's grid, inside its m full chunks
  bool full_chunks = true;    // every chunk is chunk_size long, but the epoch's last, cut to `last_rows`
  bool full_requests = true;  // every request but the last has preload chunks
  bool all_rows_used = true;  // every request uses each row of its buffer exactly once
};

// `parts`: the range each dataset reads; `last_rows`: the rows of the epoch's last request.
inline Reads analyze(const Requests& requests, const std::vector<cs::Slice>& parts, std::int64_t chunk,
                     std::int64_t preload, std::int64_t last_rows) {
  Reads r;
  r.requests.assign(parts.size(), 0);
  r.chunks.assign(parts.size(), 0);
  r.grid_reads.resize(parts.size());
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const OwnedRequest& request = requests[k];
    const bool last = k + 1 == requests.size();
    if (request.chunks.empty()) {
      r.one_part = false;
      continue;
    }
    const std::int64_t first = request.chunks[0].start;
    const auto part_it = std::ranges::find_if(parts, [&](const cs::Slice& p) { return p.contains(first); });
    if (part_it == parts.end()) {
      r.one_part = false;
      continue;
    }
    const auto d = static_cast<std::size_t>(part_it - parts.begin());
    const cs::Slice part = *part_it;
    const std::int64_t grid_end = part.start + part.size() / chunk * chunk;
    ++r.requests[d];
    r.order.push_back(d);
    if (!last && static_cast<std::int64_t>(request.chunks.size()) != preload) r.full_requests = false;
    for (std::size_t j = 0; j < request.chunks.size(); ++j) {
      const cs::Slice c = request.chunks[j];
      if (!(part.contains(c.start) && c.stop <= grid_end)) r.one_part = false;
      if ((c.start - part.start) % chunk != 0 || c.start + chunk > grid_end) r.on_grid = false;
      const bool final_chunk = last && j + 1 == request.chunks.size();
      const std::int64_t expected = final_chunk ? last_rows - (static_cast<std::int64_t>(j) * chunk) : chunk;
      if (c.size() != expected) r.full_chunks = false;
      ++r.chunks[d];
      ++r.grid_reads[d][(c.start - part.start) / chunk];
    }
    std::vector<std::int64_t> p = request.positions();
    std::ranges::sort(p);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(request.buffer_size()));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    if (p != rows) r.all_rows_used = false;
  }
  return r;
}

// Every grid chunk of dataset d read floor(c / m) or ceil(c / m) times, c the chunks it read:
// whole passes over the grid, then part of one (which reads each chunk at most once).
inline bool whole_passes(const Reads& r, std::size_t d, std::int64_t grid) {
  const std::int64_t c = r.chunks[d];
  std::int64_t above = 0;
  for (std::int64_t i = 0; i < grid; ++i) {
    const auto it = r.grid_reads[d].find(i);
    const std::int64_t times = it == r.grid_reads[d].end() ? 0 : it->second;
    if (times != c / grid && times != c / grid + 1) return false;
    above += times == c / grid + 1 ? 1 : 0;
  }
  return above == c % grid;
}

}  // namespace support::mixture
