// SPDX-License-Identifier: MIT
// Prints the tutorial's batch count: 20,000 observations, 2 ranks, RandomSampler(64, 32, 256).
#include <chunksampler.hpp>

#include <cstdio>

int main() {
  namespace cs = chunksampler;
  cs::RandomSampler base({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
  cs::DistributedSampler dist(base, cs::DistInfo{.rank = 1, .world_size = 2});
  std::int64_t batches = 0;
  for (const cs::LoadRequest& request : dist.sample(20'000))
    batches += static_cast<std::int64_t>(request.splits.size());
  std::printf("%lld %lld\n", static_cast<long long>(dist.n_batches(20'000)), static_cast<long long>(batches));
  return batches == 39 && dist.n_batches(20'000) == 39 ? 0 : 1;
}
