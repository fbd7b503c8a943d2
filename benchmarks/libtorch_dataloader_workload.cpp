// SPDX-License-Identifier: MIT
// libtorch's DataLoader over one in-memory dataset, driven by chunksampler through
// <chunksampler/torch.hpp> and by libtorch's own DistributedRandomSampler: what a libtorch user
// pays per epoch and before the first batch, sampler, batch assembly and DataLoader included.

#include "workloads.hpp"

#include <chunksampler.hpp>
#include <chunksampler/torch.hpp>

#include <benchmark/benchmark.h>
#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/data/samplers/distributed.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace bench {
namespace {

using Rows = std::vector<float>;

// The dataset: one float feature per observation, in memory (4 bytes a row: 400 MB at 10^8).
// Built once per N by `prepare`, outside the timed loop, and shared by every loader and worker.
std::shared_ptr<const Rows> rows(std::int64_t n) {
  static std::shared_ptr<const Rows> kept;
  if (!kept || std::cmp_not_equal(kept->size(), n)) {
    kept.reset();  // never two datasets at once
    auto made = std::make_shared<Rows>(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < made->size(); ++i) made->at(i) = static_cast<float>(i % 1024);
    kept = std::move(made);
  }
  return kept;
}

// The batch as both datasets make it: a [rows, 1] float tensor, the rows copied into it.
torch::data::Example<> batch_of(std::size_t size, auto row) {
  torch::Tensor data = torch::empty({static_cast<std::int64_t>(size), 1}, torch::kFloat32);
  float* out = data.data_ptr<float>();
  for (std::size_t i = 0; i < size; ++i) out[i] = row(i);
  return {data, torch::Tensor()};
}

/// For chunksampler: each request's chunks copied once into a buffer, batches gathered from it.
struct ChunkRows : cs::torch::ChunkedDataset<ChunkRows, Rows> {
  explicit ChunkRows(std::shared_ptr<const Rows> r) : rows(std::move(r)) {}
  void read_chunk(cs::Slice chunk, Rows& buffer) const {
    buffer.insert(buffer.end(), rows->begin() + chunk.start, rows->begin() + chunk.stop);
  }
  [[nodiscard]] torch::data::Example<> make_batch(const Rows& buffer, std::span<const std::int64_t> positions) const {
    return batch_of(positions.size(), [&](std::size_t i) { return buffer[static_cast<std::size_t>(positions[i])]; });
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return rows->size(); }
  std::shared_ptr<const Rows> rows;
};

/// For libtorch's samplers: each batch gathered by its indices, straight from the rows (the
/// batch-level get_batch a careful libtorch user writes, not Dataset's tensor per example).
struct IndexedRows : torch::data::datasets::BatchDataset<IndexedRows, torch::data::Example<>> {
  explicit IndexedRows(std::shared_ptr<const Rows> r) : rows(std::move(r)) {}
  torch::data::Example<> get_batch(torch::ArrayRef<std::size_t> indices) override {
    return batch_of(indices.size(), [&](std::size_t i) { return (*rows)[indices[i]]; });
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return rows->size(); }
  std::shared_ptr<const Rows> rows;
};

// Iterates up to `batches` batches of the loader's next epoch, summing every value; returns the rows.
template <class Loader>
std::int64_t consume(Loader& loader, std::int64_t batches) {
  std::int64_t positions = 0;
  double sum = 0;
  std::int64_t b = 0;
  for (auto& batch : loader) {
    const float* values = batch.data.template data_ptr<float>();
    for (std::int64_t i = 0; i < batch.data.size(0); ++i) sum += values[i];
    positions += batch.data.size(0);
    if (++b == batches) break;
  }
  benchmark::DoNotOptimize(sum);
  return positions;
}

torch::data::DataLoaderOptions options(std::size_t workers) {
  return torch::data::DataLoaderOptions(static_cast<std::size_t>(batch_size)).workers(workers);
}

std::int64_t chunksampler_loader(std::int64_t n, std::size_t workers, std::int64_t batches) {
  const cs::RandomSampler random(
      {.chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size, .seed = 42});
  const cs::DistributedSampler sampler(random, cs::DistInfo{.rank = 0, .world_size = world_size});
  auto loader = torch::data::make_data_loader(ChunkRows(rows(n)), cs::torch::adapt(sampler, n), options(workers));
  return consume(*loader, batches);
}

std::int64_t libtorch_loader(std::int64_t n, std::size_t workers, std::int64_t batches) {
  // The constructor draws a permutation and the loader's begin() (reset) another, as users pay.
  torch::data::samplers::DistributedRandomSampler sampler(static_cast<std::size_t>(n),
                                                          static_cast<std::size_t>(world_size), 0);
  auto loader = torch::data::make_data_loader(IndexedRows(rows(n)), std::move(sampler), options(workers));
  return consume(*loader, batches);
}

template <class Run>
Workload loader_workload(std::string name, std::string peer, std::size_t workers, Run run) {
  return {
      .name = std::move(name),
      .max_epoch_n = 10'000'000,
      .min_n = 0,
      .max_n = 100'000'000,
      .epoch = [run, workers](std::int64_t n) { return run(n, workers, INT64_MAX); },
      .first_batch = [run, workers](std::int64_t n) { run(n, workers, 1); },
      .restore = {},
      .prepare = [](std::int64_t n) { rows(n); },
      .peer = std::move(peer),
  };
}

}  // namespace

std::vector<Workload> dataloader_workloads() {
  std::vector<Workload> result;
  for (const std::size_t workers : {std::size_t{0}, std::size_t{2}}) {
    const std::string suffix = workers == 0 ? "" : " (2 workers)";
    const std::string peer = "libtorch DataLoader, DistributedRandomSampler" + suffix;
    result.push_back(loader_workload(peer, peer, workers, libtorch_loader));
    result.push_back(
        loader_workload("libtorch DataLoader, chunksampler adapter" + suffix, peer, workers, chunksampler_loader));
  }
  return result;
}

}  // namespace bench
