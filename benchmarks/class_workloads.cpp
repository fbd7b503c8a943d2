// SPDX-License-Identifier: MIT
// The class samplers and the mixture as benchmark workloads: ClassSampler, WeightedClassSampler
// (independent and stratified) and MixtureSampler, each as rank 0 of 8 in both shard modes, the
// class samplers over 10, 1,000 and 100,000 classes and a skewed layout.

#include "sampler_workload.hpp"
#include "workloads.hpp"

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace bench {
namespace {

constexpr std::uint64_t seed = 42;

// How a dataset's classes lie on disk: in runs of `chunk_size` rows, run j of class j mod
// `classes` (every class alike), or with `skewed`, run j of a class drawn from a Zipf law over
// `classes` classes (class c's share proportional to 1 / (c + 1)); neighbouring runs of one class
// are one run, as the codes' scan makes them.
struct Layout {
  std::int64_t classes = 0;
  bool skewed = false;
  [[nodiscard]] std::string name() const {
    return skewed ? fmt::format("{} classes, Zipf", classes) : fmt::format("{} classes", classes);
  }
};

// The runs of `layout` over n rows as ClassSampler's scan of the codes would keep them (every
// class has a positive weight), built without the codes: at 10^9 rows they would take 4 GB.
cs::ClassRunTable run_table(const Layout& layout, std::int64_t n) {
  std::vector<double> cdf;
  if (layout.skewed) {
    double total = 0;
    for (std::int64_t c = 0; c < layout.classes; ++c) cdf.push_back(total += 1.0 / static_cast<double>(c + 1));
    for (double& p : cdf) p /= total;
  }
  cs::ClassRunTable table{.n_obs = n, .n_classes = layout.classes, .runs_hash = 0x72756e73ULL};
  const std::int64_t runs = n / chunk_size;
  table.codes.reserve(static_cast<std::size_t>(runs));
  table.runs.reserve(static_cast<std::size_t>(runs));
  for (std::int64_t j = 0; j < runs; ++j) {
    std::int32_t code = 0;
    if (layout.skewed) {
      const double u = static_cast<double>(cs::detail::mix64(seed + static_cast<std::uint64_t>(j)) >> 11U) * 0x1p-53;
      code = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(std::ranges::upper_bound(cdf, u) - cdf.begin(),
                                                                static_cast<std::ptrdiff_t>(layout.classes - 1)));
    } else {
      code = static_cast<std::int32_t>(j % layout.classes);
    }
    // The last run takes the rows after the last whole chunk.
    const cs::Slice run{j * chunk_size, j + 1 == runs ? n : (j + 1) * chunk_size};
    if (!table.codes.empty() && table.codes.back() == code) table.runs.back().stop = run.stop;
    else table.codes.push_back(code), table.runs.push_back(run);
  }
  for (std::size_t r = 0; r < table.runs.size(); ++r)
    table.runs_hash =
        cs::detail::derive(cs::detail::derive(table.runs_hash, static_cast<std::uint64_t>(table.runs[r].stop)),
                           static_cast<std::uint64_t>(table.codes[r]));
  return table;
}

cs::DistInfo rank0() { return {.rank = 0, .world_size = world_size}; }

const char* mode_name(cs::ShardMode mode) { return mode == cs::ShardMode::global ? "global" : "contiguous"; }

// Rank 0 of `DistributedSampler(sampler)` in both shard modes, where `sampler` over each N is
// `make(run_table(layout, N))`: made once, before the timing (`prepare`), as a job scans its codes
// once, and shared by the two modes' workloads (at 10^9 rows it holds 3.9 million runs); each
// timed epoch copies it (the copies share its runs) and wraps the copy.
template <class Make>
void add_both_modes(std::vector<Workload>& all, const std::string& name, const Layout& layout, Make make) {
  using Sampler = decltype(make(std::declval<const cs::ClassRunTable&>()));
  auto made = std::make_shared<std::map<std::int64_t, Sampler>>();
  const auto prepare = [made, layout, make](std::int64_t n) {
    if (!made->contains(n)) made->emplace(n, make(run_table(layout, n)));
  };
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
    Workload w = sampler_workload(fmt::format("{} {}: {}", name, mode_name(mode), layout.name()),
                                  [made, prepare, mode](std::int64_t n) {
                                    prepare(n);
                                    return cs::DistributedSampler(made->at(n), rank0(), {.mode = mode});
                                  });
    w.prepare = prepare;
    w.max_n = max_walked_n;  // the runs' table grows with N (20 bytes a run)
    all.push_back(std::move(w));
  }
}

cs::ClassOptions class_options(std::int64_t n) {
  return {.chunk_size = chunk_size,
          .preload_nchunks = preload_nchunks,
          .batch_size = batch_size,
          .seed = seed,
          .num_samples = n,
          .class_weights = {}};
}

}  // namespace

std::vector<Workload> class_workloads() {
  std::vector<Workload> all;
  const Layout layouts[] = {
      {.classes = 10}, {.classes = 1'000}, {.classes = 100'000}, {.classes = 1'000, .skewed = true}};
  for (const Layout& layout : layouts)
    add_both_modes(all, "ClassSampler", layout,
                   [](const cs::ClassRunTable& runs) { return cs::ClassSampler(runs, class_options(runs.n_obs)); });
  for (const cs::Composition composition : {cs::Composition::independent, cs::Composition::stratified})
    for (const Layout& layout : layouts)
      add_both_modes(
          all, composition == cs::Composition::stratified ? "WeightedClassSampler stratified" : "WeightedClassSampler",
          layout, [composition](const cs::ClassRunTable& runs) {
            // Weights as skewed as a Zipf law: class c weighs 1 / (c + 1).
            cs::WeightedClassOptions options = cs::weighted_options_of(class_options(runs.n_obs), composition);
            options.class_weights.resize(static_cast<std::size_t>(runs.n_classes));
            for (std::size_t c = 0; c < options.class_weights.size(); ++c)
              options.class_weights[c] = 1.0 / static_cast<double>(c + 1);
            return cs::WeightedClassSampler(runs, options);
          });
  // Three datasets end to end, a third of N each, mixed 5:3:2; its memory is flat in N, so to 10^12.
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global})
    all.push_back(
        sampler_workload(fmt::format("MixtureSampler {}: 3 datasets, 5:3:2", mode_name(mode)), [mode](std::int64_t n) {
          const std::int64_t third = n / 3;
          return cs::DistributedSampler(cs::MixtureSampler({third, third, n - 2 * third},
                                                           {.chunk_size = chunk_size,
                                                            .preload_nchunks = preload_nchunks,
                                                            .batch_size = batch_size,
                                                            .seed = seed,
                                                            .weights = {5, 3, 2}}),
                                        rank0(), {.mode = mode});
        }));
  return all;
}

}  // namespace bench
