// SPDX-License-Identifier: MIT
// chunksampler's samplers as benchmark workloads, and the shuffle floor they are held to.

#include "workloads.hpp"

#include <chunksampler.hpp>

#include <benchmark/benchmark.h>
#include <pcg_random.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace bench {
namespace {

constexpr std::uint64_t seed = 42;
constexpr std::int64_t max_walked_n = 1'000'000'000;  // a whole epoch at 10^12 would take minutes

template <class Sampler>
std::int64_t consume_epoch(Sampler& sampler, std::int64_t n) {
  std::int64_t sum = 0;
  std::int64_t positions = 0;
  for (const cs::LoadRequest& request : sampler.sample(n))
    for (const auto batch : request.splits) {
      positions += static_cast<std::int64_t>(batch.size());
      for (const std::int64_t position : batch) sum += position;
    }
  benchmark::DoNotOptimize(sum);
  return positions;
}

template <class Sampler>
void consume_first_batch(Sampler& sampler, std::int64_t n) {
  std::int64_t sum = 0;
  auto requests = sampler.sample(n);
  const cs::LoadRequest& request = *requests.begin();
  for (const std::int64_t position : request.splits[0]) sum += position;
  benchmark::DoNotOptimize(sum);
}

template <class Make>
Workload workload(std::string name, Make make) {
  return {
      .name = std::move(name),
      .max_epoch_n = max_walked_n,
      .max_n = cs::detail::max_size,
      .epoch =
          [make](std::int64_t n) {
            auto sampler = make();
            return consume_epoch(sampler, n);
          },
      .first_batch =
          [make](std::int64_t n) {
            auto sampler = make();
            consume_first_batch(sampler, n);
          },
      .restore = [make](std::int64_t n) -> std::function<void()> {
        auto sampler = make();
        { auto played = sampler.sample(n); }  // the epoch the state describes is the one last played
        // The checkpoint as a job keeps it: one line of text, parsed at the restart.
        std::string text = sampler.state(sampler.n_batches(n) / 2).to_string();
        return [make, n, text = std::move(text)] {
          auto restarted = make();
          restarted.restore(cs::SamplerState::parse(text));
          consume_first_batch(restarted, n);
        };
      },
      .prepare = {},
      .peer = {},
  };
}

cs::DistInfo rank0() { return {.rank = 0, .world_size = world_size}; }

}  // namespace

std::vector<Workload> chunksampler_workloads() {
  const cs::RandomSampler random(
      {.chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size, .seed = seed});
  const cs::SequentialSampler sequential(
      {.chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size});
  return {
      workload("chunksampler contiguous", [random] { return cs::DistributedSampler(random, rank0()); }),
      workload("chunksampler global",
               [random] { return cs::DistributedSampler(random, rank0(), {.mode = cs::ShardMode::global}); }),
      workload("chunksampler sequential", [sequential] { return cs::DistributedSampler(sequential, rank0()); }),
  };
}

Workload floor_workload() {
  return {
      .name = "shuffle floor",
      .max_epoch_n = max_walked_n,
      .max_n = max_walked_n,
      .epoch =
          [](std::int64_t n) {
            const std::int64_t positions = rank_positions(n);
            std::vector<std::int64_t> buffer(static_cast<std::size_t>(request_size));
            pcg32 engine(seed);
            std::int64_t sum = 0;
            for (std::int64_t done = 0; done < positions; done += request_size) {
              const auto size = static_cast<std::size_t>(std::min(request_size, positions - done));
              std::iota(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(size), std::int64_t{0});
              for (std::size_t i = size - 1; i > 0; --i) {
                // Lemire's nearly divisionless draw from [0, i]
                const auto bound = static_cast<std::uint32_t>(i + 1);
                std::uint64_t m = std::uint64_t{engine()} * bound;
                if (static_cast<std::uint32_t>(m) < bound) {
                  const std::uint32_t threshold = static_cast<std::uint32_t>(-bound) % bound;
                  while (static_cast<std::uint32_t>(m) < threshold) m = std::uint64_t{engine()} * bound;
                }
                std::swap(buffer[i], buffer[static_cast<std::size_t>(m >> 32U)]);
              }
              for (std::size_t batch = 0; batch < size; batch += static_cast<std::size_t>(batch_size))
                for (std::size_t i = batch; i < std::min(size, batch + static_cast<std::size_t>(batch_size)); ++i)
                  sum += buffer[i];
            }
            benchmark::DoNotOptimize(sum);
            return positions;
          },
      .first_batch = {},
      .restore = {},
      .prepare = {},
      .peer = {},
  };
}

}  // namespace bench
