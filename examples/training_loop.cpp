// SPDX-License-Identifier: MIT
// training_loop: the loop a data loader runs around a chunk sampler, on an in-memory matrix
// standing in for an on-disk array. For two epochs it reads each request's chunks into one buffer,
// gathers every batch from it and runs a toy training step, then checks that each row was seen
// exactly once per epoch.
//
//   training_loop          (no arguments; exits 1 if a row is missed or repeated)

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cs = chunksampler;

int main() {
  constexpr std::int64_t n_obs = 1'000;  // not a multiple of chunk_size, so each epoch ends on a short chunk
  constexpr std::size_t n_features = 4;
  std::vector<double> matrix(static_cast<std::size_t>(n_obs) * n_features);
  // Feature 0 is the row's own index, so a batch can tell which rows it was given.
  for (std::size_t i = 0; i < matrix.size(); ++i)
    matrix[i] = static_cast<double>(i / n_features) + 0.25 * static_cast<double>(i % n_features);

  // Across GPUs, wrap it: cs::DistributedSampler(sampler, cs::dist::from_env()); the loop stays the same.
  cs::RandomSampler sampler({.chunk_size = 16, .preload_nchunks = 8, .batch_size = 32, .seed = 42});
  const auto rows = [](std::int64_t n) { return static_cast<std::size_t>(n) * n_features; };

  // Sized once for the largest request and batch, so no request or batch below allocates.
  std::vector<double> buffer(rows(sampler.chunk_size() * sampler.preload_nchunks()));
  std::vector<double> batch(rows(sampler.batch_size()));
  std::vector<int> seen(static_cast<std::size_t>(n_obs));

  bool ok = true;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::fill(seen.begin(), seen.end(), 0);
    std::int64_t steps = 0;
    double sum = 0.0;
    double first_row = -1.0;  // shows that each sample() call plays a new order
    for (const cs::LoadRequest& request : sampler.sample(n_obs)) {
      // One contiguous copy per chunk: on disk this is the read that chunking makes cheap.
      std::size_t filled = 0;
      for (const cs::Slice& chunk : request.chunks) {
        std::copy(matrix.begin() + static_cast<std::ptrdiff_t>(rows(chunk.start)),
                  matrix.begin() + static_cast<std::ptrdiff_t>(rows(chunk.stop)),
                  buffer.begin() + static_cast<std::ptrdiff_t>(filled));
        filled += rows(chunk.size());
      }
      for (const std::span<const std::int64_t> positions : request.splits) {
        // Positions index the buffer, not the dataset: the shuffle lives inside each request.
        for (std::size_t b = 0; b < positions.size(); ++b)
          std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(rows(positions[b])), n_features,
                      batch.begin() + static_cast<std::ptrdiff_t>(b * n_features));
        // The toy step: accumulate the mean of feature 0 and count the rows it saw.
        for (std::size_t b = 0; b < positions.size(); ++b) {
          const double row_id = batch[b * n_features];
          if (first_row < 0.0) first_row = row_id;
          sum += row_id;
          ++seen[static_cast<std::size_t>(row_id)];
        }
        ++steps;
      }
    }
    const bool once = std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; });
    ok = ok && once && steps == sampler.n_batches(n_obs);
    fmt::print("epoch {}: {} steps (n_batches {}), first row {}, mean of feature 0 = {:.1f} (expect {:.1f}), "
               "every row once: {}\n",
               epoch, steps, sampler.n_batches(n_obs), first_row, sum / static_cast<double>(n_obs),
               static_cast<double>(n_obs - 1) / 2.0, once ? "yes" : "NO");
  }
  return ok ? 0 : 1;
}
