// SPDX-License-Identifier: MIT
// The peer: libtorch's C++ DistributedRandomSampler, driven as its users drive it.

#include "workloads.hpp"

#include <benchmark/benchmark.h>
#include <torch/data/samplers/distributed.h>
#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

namespace bench {
namespace {

using torch::data::samplers::DistributedRandomSampler;

DistributedRandomSampler rank0(std::int64_t n) {
  return DistributedRandomSampler(static_cast<std::size_t>(n), static_cast<std::size_t>(world_size), 0);
}

// Consumes up to `batches` batches; returns the positions they held.
std::int64_t consume(DistributedRandomSampler& sampler, std::int64_t batches) {
  std::int64_t positions = 0;
  std::size_t sum = 0;
  for (std::int64_t b = 0; b < batches; ++b) {
    const auto batch = sampler.next(static_cast<std::size_t>(batch_size));
    if (!batch) break;
    positions += static_cast<std::int64_t>(batch->size());
    for (const std::size_t index : *batch) sum += index;
  }
  benchmark::DoNotOptimize(sum);
  return positions;
}

}  // namespace

Workload libtorch_workload() {
  return {
      .name = "libtorch DistributedRandomSampler",
      // It materializes a permutation of all N indices: 8 GB at 10^9, 8 TB at 10^12.
      .max_epoch_n = 1'000'000'000,
      .min_n = 0,
      .max_n = 1'000'000'000,
      .epoch =
          [](std::int64_t n) {
            auto sampler = rank0(n);  // the constructor draws the epoch's permutation, as reset() does
            return consume(sampler, INT64_MAX);
          },
      .first_batch =
          [](std::int64_t n) {
            auto sampler = rank0(n);
            consume(sampler, 1);
          },
      .restore = [](std::int64_t n) -> std::function<void()> {
        auto sampler = rank0(n);
        consume(sampler, rank_positions(n) / batch_size / 2);
        torch::serialize::OutputArchive archive;
        sampler.save(archive);
        std::ostringstream saved;
        archive.save_to(saved);
        return [n, text = std::move(saved).str()] {
          auto restarted = rank0(n);
          torch::serialize::InputArchive checkpoint;
          std::istringstream in(text);
          checkpoint.load_from(in);
          restarted.load(checkpoint);
          consume(restarted, 1);
        };
      },
      .prepare = {},
      .peer = {},
  };
}

}  // namespace bench
