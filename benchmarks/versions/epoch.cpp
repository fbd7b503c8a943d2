// SPDX-License-Identifier: MIT
// One sampler's epochs timed, for scripts/bench_versions.sh, which builds this file against the
// headers of several revisions and runs the builds in turn. It uses only what every release since
// 0.2 has: rank 0 of 8 of DistributedSampler(RandomSampler or SequentialSampler), chunk 256,
// preload 64, batches of 256, every position of every batch summed; the sampler built inside the
// timing, as chunksampler_bench does.
//
//   epoch contiguous|global|sequential N EPOCHS    # prints the median ns per position

#include <chunksampler.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace cs = chunksampler;

namespace {

template <class Sampler>
std::int64_t walk(Sampler sampler, std::int64_t n, std::int64_t& sum) {
  std::int64_t positions = 0;
  for (const cs::LoadRequest& request : sampler.sample(n))
    for (const auto batch : request.splits) {
      positions += static_cast<std::int64_t>(batch.size());
      for (const std::int64_t position : batch) sum += position;
    }
  return positions;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: epoch contiguous|global|sequential N EPOCHS\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  const std::int64_t n = std::atoll(argv[2]);
  const int epochs = std::atoi(argv[3]);
  if ((mode != "contiguous" && mode != "global" && mode != "sequential") || n < 1 || epochs < 1) {
    std::fprintf(stderr, "epoch: bad arguments\n");
    return 2;
  }
  const cs::DistInfo rank0{.rank = 0, .world_size = 8};
  std::int64_t sum = 0;
  const auto one = [&] {
    if (mode == "sequential")
      return walk(cs::DistributedSampler(
                      cs::SequentialSampler({.chunk_size = 256, .preload_nchunks = 64, .batch_size = 256}), rank0),
                  n, sum);
    const cs::RandomSampler random({.chunk_size = 256, .preload_nchunks = 64, .batch_size = 256, .seed = 42});
    return walk(cs::DistributedSampler(random, rank0,
                                       {.mode = mode == "global" ? cs::ShardMode::global : cs::ShardMode::contiguous}),
                n, sum);
  };
  one();  // warm: the first epoch pays for page faults no later one does
  std::vector<double> ns;
  for (int e = 0; e < epochs; ++e) {
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t positions = one();
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                 static_cast<double>(positions));
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%.4f\n", ns[ns.size() / 2]);
  static volatile std::int64_t sink = 0;  // the sums are used, so the walks are not optimized away
  sink = sum;
  return 0;
}
