// SPDX-License-Identifier: MIT
// chunksampler's samplers as benchmark workloads, and the shuffle floor they are held to.

#include "sampler_workload.hpp"
#include "workloads.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

namespace cs = chunksampler;

namespace bench {
namespace {

constexpr std::uint64_t seed = 42;

cs::DistInfo rank0() { return {.rank = 0, .world_size = world_size}; }

// `count` ranges holding half of [0, n) between them, as a split of data grouped on disk: range i
// holds half of the stretch [i * n / count, (i + 1) * n / count) from a pseudo-random offset, so
// nearly every range starts and ends off the storage grid (a short head and tail chunk each).
cs::Ranges half_in_ranges(std::int64_t n, std::int64_t count) {
  std::vector<cs::Slice> ranges;
  ranges.reserve(static_cast<std::size_t>(count));
  std::uint64_t offsets = seed;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t begin = i * (n / count);
    const std::int64_t half = n / count / 2;
    offsets = cs::detail::mix64(offsets + 1);
    const auto offset = static_cast<std::int64_t>(offsets % static_cast<std::uint64_t>(half));
    ranges.push_back({begin + offset, begin + offset + half});
  }
  return cs::Ranges(ranges);
}

// A checkpoint saved by cs::save_state into a directory of its own under the system's temporary
// directory, removed with it.
class CheckpointFile {
 public:
  explicit CheckpointFile(const cs::SamplerState& state) {
    static int made = 0;
    do dir_ = std::filesystem::temp_directory_path() / fmt::format("chunksampler-bench-{}-{}", ::getpid(), made++);
    while (!std::filesystem::create_directory(dir_));
    cs::save_state(path(), state);
  }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;
  ~CheckpointFile() {
    std::error_code ignored;  // a destructor must not throw; a leftover file in /tmp is harmless
    std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] std::filesystem::path path() const { return dir_ / "job.state"; }

 private:
  std::filesystem::path dir_;
};

// A restarted job's way back: `checkpoint(n)` is the state a job saved in the middle of an epoch
// over n, put on disk before the timing; the timing repeats what the restarted job does, from
// the file to its first batch: cs::load_state(path, sampler) into the sampler `make()` builds,
// sample(n), the first request's first batch. (The file is in the page cache after the first
// repetition: this is the library's cost, not the disk's.)
template <class Checkpoint, class Make>
Workload from_checkpoint_file(std::string name, Checkpoint checkpoint, Make make) {
  return {
      .name = std::move(name),
      .max_epoch_n = 0,
      .min_n = 0,
      .max_n = cs::detail::max_size,
      .epoch = {},
      .first_batch = {},
      .restore = [checkpoint, make](std::int64_t n) -> std::function<void()> {
        auto file = std::make_shared<const CheckpointFile>(checkpoint(n));
        return [file, make, n] {
          auto restarted = make();
          benchmark::DoNotOptimize(cs::load_state(file->path(), restarted));
          consume_first_batch(restarted, n);
        };
      },
      .prepare = {},
      .peer = {},
  };
}

// The state of `sampler` after half the batches of its epoch over n (of the batches left, after
// a restore).
template <class Sampler>
cs::SamplerState halfway(Sampler& sampler, std::int64_t n, std::int64_t done_before = 0) {
  const std::int64_t left = sampler.n_batches_left(n);
  { auto played = sampler.sample(n); }  // the epoch the state describes is the one last played
  return sampler.state(done_before + left / 2);
}

// DistributedSampler(RandomSampler) over `half_in_ranges(n, count)`, from N = 100 * count up. The
// mask is the user's input, made once before the timing (`prepare`), as a job makes its split
// once: the rows time what the samplers do with it.
Workload masked_workload(std::string name, std::int64_t count, cs::ShardMode mode = cs::ShardMode::contiguous) {
  auto masks = std::make_shared<std::map<std::int64_t, cs::Ranges>>();
  Workload w = sampler_workload(std::move(name), [count, mode, masks](std::int64_t n) {
    auto made = masks->find(n);
    if (made == masks->end()) made = masks->try_emplace(n, half_in_ranges(n, count)).first;
    const cs::RandomOptions options{.chunk_size = chunk_size,
                                    .preload_nchunks = preload_nchunks,
                                    .batch_size = batch_size,
                                    .mask = made->second,
                                    .seed = seed};
    return cs::DistributedSampler(cs::RandomSampler(options), rank0(), {.mode = mode});
  });
  w.min_n = 100 * count;  // ranges of 50 rows and more
  w.prepare = [count, masks](std::int64_t n) { masks->try_emplace(n, half_in_ranges(n, count)); };
  return w;
}

}  // namespace

std::vector<Workload> chunksampler_workloads() {
  const cs::RandomSampler random(
      {.chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size, .seed = seed});
  const cs::SequentialSampler sequential(
      {.chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size});
  return {
      sampler_workload("chunksampler contiguous", [random] { return cs::DistributedSampler(random, rank0()); }),
      sampler_workload("chunksampler global",
                       [random] { return cs::DistributedSampler(random, rank0(), {.mode = cs::ShardMode::global}); }),
      sampler_workload("chunksampler sequential", [sequential] { return cs::DistributedSampler(sequential, rank0()); }),
      // A split of half the data: one range, and the same number of rows in 10^3 and 10^5 ranges
      // (each with a short head and tail chunk), so the rows compare what the ranges cost.
      masked_workload("contiguous: half in 1 range", 1),
      masked_workload("contiguous: half in 10^3 ranges", 1'000),
      masked_workload("contiguous: half in 10^5 ranges", 100'000),
      masked_workload("contiguous: half in 10^6 ranges", 1'000'000),
      masked_workload("global: half in 10^3 ranges", 1'000, cs::ShardMode::global),
      masked_workload("global: half in 10^5 ranges", 100'000, cs::ShardMode::global),
      masked_workload("global: half in 10^6 ranges", 1'000'000, cs::ShardMode::global),
  };
}

std::vector<Workload> checkpoint_workloads() {
  // Every sampler is built from the options, none copied from another: GCC 12 at -O2 takes the
  // empty std::optional<SamplerState> in a copied sampler's cursor for an uninitialized one.
  const cs::RandomOptions options{
      .chunk_size = chunk_size, .preload_nchunks = preload_nchunks, .batch_size = batch_size, .seed = seed};
  const auto random = [options] { return cs::RandomSampler(options); };
  const auto contiguous = [options] { return cs::DistributedSampler(cs::RandomSampler(options), rank0()); };
  // An elastic restart: the job ran on 8 ranks and comes back on 6.
  const cs::DistributedOptions global{.mode = cs::ShardMode::global};
  const auto rank0_of_8 = [options, global] {
    return cs::DistributedSampler(cs::RandomSampler(options), rank0(), global);
  };
  const auto rank0_of_6 = [options, global] {
    return cs::DistributedSampler(cs::RandomSampler(options), cs::DistInfo{.rank = 0, .world_size = 6}, global);
  };
  const auto halfway_of = [](const auto& make) {
    return [make](std::int64_t n) {
      auto sampler = make();
      return halfway(sampler, n);
    };
  };
  return {
      from_checkpoint_file("checkpoint file: RandomSampler, 1 rank", halfway_of(random), random),
      from_checkpoint_file("checkpoint file: contiguous", halfway_of(contiguous), contiguous),
      // The 8 ranks' state: the restore re-deals the batches they left among the 6.
      from_checkpoint_file("checkpoint file: global, 8 -> 6 ranks", halfway_of(rank0_of_8), rank0_of_6),
      // A state the 6 ranks took halfway through what they were dealt: it names the 8 runs.
      from_checkpoint_file(
          "checkpoint file: global, re-dealt 8 -> 6",
          [rank0_of_8, rank0_of_6](std::int64_t n) {
            auto old = rank0_of_8();
            const cs::SamplerState dealt = halfway(old, n);
            auto restarted = rank0_of_6();
            restarted.restore(dealt);
            return halfway(restarted, n, dealt.batches_done());
          },
          rank0_of_6),
  };
}

Workload floor_workload() {
  return {
      .name = "shuffle floor",
      .max_epoch_n = max_walked_n,
      .min_n = 0,
      .max_n = max_walked_n,
      .epoch =
          [](std::int64_t n) {
            const std::int64_t positions = rank_positions(n);
            std::vector<std::int64_t> buffer(static_cast<std::size_t>(request_size));
            cs::detail::Engine engine(seed);
            std::int64_t sum = 0;
            for (std::int64_t done = 0; done < positions; done += request_size) {
              const auto size = static_cast<std::size_t>(std::min(request_size, positions - done));
              const std::span<std::int64_t> request(buffer.data(), size);
              std::iota(request.begin(), request.end(), std::int64_t{0});
              // The library's own Fisher-Yates (pcg32, Lemire's bounded draws): the same machine
              // code the samplers run, so that the ratio is their work beyond the shuffle and not
              // the luck of two copies of one loop placed differently.
              cs::detail::partial_shuffle(engine, request, size);
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
