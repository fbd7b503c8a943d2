// SPDX-License-Identifier: MIT
// cxx_epoch: the C++ loop the Python benchmark (bench_python.py) is held to, at any configuration.
// chunksampler_bench measures one fixed configuration (chunk 256, preload 64); the Python figures
// are also wanted at annbatch's chunk 64, preload 32, so this program times the very loop of its
// consume_epoch (benchmarks/chunksampler_workloads.cpp: every position of every batch summed)
// and its consume_first_batch (construction, planning, the first batch) for any sizes.
//
//   cxx_epoch MODE N REPS CHUNK PRELOAD BATCH WORLD
//
// MODE is contiguous or global; rank 0 of WORLD. Prints one JSON object: the positions of an
// epoch and every repetition's wall time in ns, for the epoch and for the first batch.

#include <chunksampler.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace cs = chunksampler;

namespace {

// Keeps the compiler from dropping a sum nobody reads (Google Benchmark's DoNotOptimize).
template <class T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

double now_ns() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::string json_list(const std::vector<double>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : ", ") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: cxx_epoch contiguous|global N REPS CHUNK PRELOAD BATCH WORLD\n");
    return 2;
  }
  const std::string_view mode_name = argv[1];
  if (mode_name != "contiguous" && mode_name != "global") {
    std::fprintf(stderr, "cxx_epoch: mode must be contiguous or global\n");
    return 2;
  }
  const std::int64_t n = std::strtoll(argv[2], nullptr, 10);
  const int reps = std::atoi(argv[3]);
  const cs::RandomOptions options{.chunk_size = std::strtoll(argv[4], nullptr, 10),
                                  .preload_nchunks = std::strtoll(argv[5], nullptr, 10),
                                  .batch_size = std::strtoll(argv[6], nullptr, 10),
                                  .seed = 42};
  const cs::DistInfo rank0{.rank = 0, .world_size = std::strtoll(argv[7], nullptr, 10)};
  const cs::DistributedOptions dist{.mode = mode_name == "global" ? cs::ShardMode::global : cs::ShardMode::contiguous};
  const auto make = [&] { return cs::DistributedSampler(cs::RandomSampler(options), rank0, dist); };

  std::int64_t positions = 0;
  std::vector<double> epoch_ns;
  std::vector<double> first_ns;
  for (int rep = 0; rep < reps; ++rep) {
    double start = now_ns();
    {
      auto sampler = make();
      std::int64_t sum = 0;
      positions = 0;
      for (const cs::LoadRequest& request : sampler.sample(n))
        for (const auto batch : request.splits) {
          positions += static_cast<std::int64_t>(batch.size());
          for (const std::int64_t position : batch) sum += position;
        }
      keep(sum);
    }
    epoch_ns.push_back(now_ns() - start);

    start = now_ns();
    {
      auto sampler = make();
      std::int64_t sum = 0;
      auto requests = sampler.sample(n);
      const cs::LoadRequest& request = *requests.begin();
      for (const std::int64_t position : request.splits[0]) sum += position;
      keep(sum);
    }
    first_ns.push_back(now_ns() - start);
  }
  std::printf("{\"positions\": %lld, \"epoch_ns\": %s, \"first_ns\": %s}\n", static_cast<long long>(positions),
              json_list(epoch_ns).c_str(), json_list(first_ns).c_str());
  return 0;
}
