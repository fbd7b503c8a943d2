// SPDX-License-Identifier: MIT
#pragma once

// The work each sampler is measured on, behind one interface, so that the table compares like
// with like: rank 0 of an 8-rank job, batches of 256, every position of every batch consumed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bench {

inline constexpr std::int64_t world_size = 8;
inline constexpr std::int64_t chunk_size = 256;
inline constexpr std::int64_t preload_nchunks = 64;
inline constexpr std::int64_t batch_size = 256;
inline constexpr std::int64_t request_size = chunk_size * preload_nchunks;  // 16,384 positions

/// Rank 0's positions per epoch with equal batch counts: its share rounded down to whole batches.
[[nodiscard]] constexpr std::int64_t rank_positions(std::int64_t n) noexcept {
  return n / world_size / batch_size * batch_size;
}

struct Workload {
  std::string name;
  /// The largest N whose whole epoch is timed and walked by the memory probe; beyond it only
  /// the first batch and the restore are measured.
  std::int64_t max_epoch_n = 0;
  /// The smallest and the largest N it runs at all.
  std::int64_t min_n = 0;
  std::int64_t max_n = 0;
  /// One epoch of rank 0, every position of every batch consumed; returns the positions.
  std::function<std::int64_t(std::int64_t n)> epoch;
  /// From nothing to the first batch consumed: construction, planning, the first request.
  std::function<void(std::int64_t n)> first_batch;
  /// Takes a checkpoint in the middle of an epoch and returns what the timing repeats:
  /// restore it into a new sampler and consume the next batch. Empty when unsupported.
  std::function<std::function<void()>(std::int64_t n)> restore;
  /// Run before the timed loop and before the memory probe's baseline (say, building an in-memory
  /// dataset), so neither time nor peak memory counts it. Empty when nothing is needed.
  std::function<void(std::int64_t n)> prepare;
  /// The workload the "× libtorch" column divides by (its name); empty: libtorch's sampler.
  std::string peer;
};

/// The shuffle floor: 16,384-position buffers filled and shuffled (pcg32, Lemire's bounded
/// draws, Fisher-Yates), each batch summed, with nothing else.
[[nodiscard]] Workload floor_workload();
/// DistributedSampler(RandomSampler) in both shard modes, DistributedSampler(SequentialSampler), and
/// DistributedSampler(RandomSampler) over half of N in 1, 10^3, 10^5 and 10^6 ranges (both modes
/// from 10^3 ranges on).
[[nodiscard]] std::vector<Workload> chunksampler_workloads();
/// Rank 0 of DistributedSampler, in both shard modes, around ClassSampler, WeightedClassSampler
/// (independent and stratified) over classes in runs of chunk_size rows (10, 10^3 and 10^5
/// classes, and 10^3 of Zipf-distributed sizes), and MixtureSampler over three datasets.
[[nodiscard]] std::vector<Workload> class_workloads();
/// The restart of a job from a checkpoint file in the middle of an epoch (load_state, sample, the
/// first batch): RandomSampler on 1 rank, DistributedSampler(RandomSampler) in contiguous mode,
/// and in global mode restarted from 8 ranks on 6, with the 8 ranks' state and with the 6 ranks'.
[[nodiscard]] std::vector<Workload> checkpoint_workloads();
/// libtorch's torch::data::samplers::DistributedRandomSampler(N, 8, 0) with next(256); only in
/// builds that found libtorch (CHUNKSAMPLER_BENCH_LIBTORCH).
[[nodiscard]] Workload libtorch_workload();
/// libtorch's DataLoader (workers 0 and 2) over an in-memory dataset, driven by chunksampler's
/// adapter (<chunksampler/torch.hpp>) and by DistributedRandomSampler(N, 8, 0); only in builds
/// that found libtorch.
[[nodiscard]] std::vector<Workload> dataloader_workloads();

}  // namespace bench
