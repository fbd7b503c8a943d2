// SPDX-License-Identifier: MIT
// chunksampler_bench: chunksampler's samplers side by side with libtorch's DistributedRandomSampler
// and the shuffle floor, timed with Google Benchmark in one run and printed as one Markdown table.
//
//   chunksampler_bench                      # N = 10^6 ... 10^9, and 10^12 for chunksampler alone
//   chunksampler_bench --sizes 100000 --once   # CI: every benchmark once, on a tiny N
//   chunksampler_bench --sizes 1e8,1e9 --benchmark_filter='ranges'   # some rows: those whose name matches
//   chunksampler_bench --json bench.json    # also every row's numbers as JSON (docs/tools/plots.py plots them)
//
// Progress goes to stderr, the table to stdout. Google Benchmark's flags pass through. The peak
// memory of each (sampler, N) is measured in a fresh process of this program (--probe), so one
// measurement's allocations never hide another's.

#include "workloads.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace {

std::vector<bench::Workload> all_workloads() {
  std::vector<bench::Workload> workloads{bench::floor_workload()};
  for (bench::Workload& w : bench::chunksampler_workloads()) workloads.push_back(std::move(w));
  for (bench::Workload& w : bench::class_workloads()) workloads.push_back(std::move(w));
  for (bench::Workload& w : bench::checkpoint_workloads()) workloads.push_back(std::move(w));
#ifdef CHUNKSAMPLER_BENCH_LIBTORCH
  workloads.push_back(bench::libtorch_workload());
  for (bench::Workload& w : bench::dataloader_workloads()) workloads.push_back(std::move(w));
#endif
  return workloads;
}

// "1e9", "1000000" or "10^6".
std::int64_t parse_size(std::string_view text) {
  const auto fail = [&] { return std::invalid_argument(fmt::format("--sizes: {:?} is not a size such as 1e6", text)); };
  std::int64_t mantissa = 0;
  std::size_t exponent_at = text.find_first_of("e^");
  const std::string_view digits = text.substr(0, exponent_at);
  if (std::from_chars(digits.data(), digits.data() + digits.size(), mantissa).ptr != digits.data() + digits.size())
    throw fail();
  if (exponent_at == std::string_view::npos) return mantissa;
  if (text[exponent_at] == '^') {
    if (mantissa != 10) throw fail();
    mantissa = 1;
  }
  const std::string_view power = text.substr(exponent_at + 1);
  int exponent = 0;
  if (std::from_chars(power.data(), power.data() + power.size(), exponent).ptr != power.data() + power.size() ||
      exponent < 0 || exponent > 18)
    throw fail();
  for (int i = 0; i < exponent; ++i) mantissa *= 10;
  return mantissa;
}

std::string size_name(std::int64_t n) {
  int exponent = 0;
  std::int64_t rest = n;
  while (rest >= 10 && rest % 10 == 0) rest /= 10, ++exponent;
  return rest == 1 && exponent >= 3 ? fmt::format("10^{}", exponent) : fmt::format("{}", n);
}

// Wall-clock seconds `f()` takes.
template <class F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  std::forward<F>(f)();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// kB fields of /proc/self/status: VmRSS (resident now) and VmHWM (the peak).
std::int64_t status_kb(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::stoll(line.substr(field.size() + 1));
  throw std::runtime_error(fmt::format("/proc/self/status has no {}", field));
}

// In a fresh process: the peak resident memory one workload adds to the process, in bytes.
int probe(const bench::Workload& w, std::int64_t n) {
  if (w.prepare) w.prepare(n);
  // The peak so far is the preparation's (a class sampler's table of runs is built from a larger
  // one): give what it freed back to the system, so that the workload cannot reuse it unseen, and
  // reset the peak (Linux 4.0 on), so that VmHWM is the workload's own. Where it cannot be reset,
  // the peak counts the preparation too.
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  std::ofstream("/proc/self/clear_refs") << "5";
  const std::int64_t empty = status_kb("VmRSS");
  if (n <= w.max_epoch_n) {
    w.epoch(n);
  } else {
    if (w.first_batch) w.first_batch(n);
    if (w.restore) w.restore(n)();
  }
  fmt::print("{}\n", (status_kb("VmHWM") - empty) * 1024);
  return 0;
}

std::optional<std::int64_t> probe_in_child(std::size_t workload, std::int64_t n) {
  std::array<char, 4096> exe{};
  const ssize_t length = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (length <= 0) return std::nullopt;
  const std::string command =
      fmt::format("'{}' --probe {} {}", std::string_view(exe.data(), static_cast<std::size_t>(length)), workload, n);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return std::nullopt;
  std::array<char, 64> line{};
  if (std::fgets(line.data(), static_cast<int>(line.size()), pipe.get()) == nullptr) return std::nullopt;
  return std::stoll(line.data());
}

// What the table needs of every (measurement, workload, N), in nanoseconds.
struct Key {
  std::string what;
  std::size_t workload;
  std::int64_t n;
  auto operator<=>(const Key&) const = default;
};

// Every repetition's time per iteration; the table shows their median.
struct Measured {
  std::vector<double> ms;      // real time per iteration
  std::vector<double> ratios;  // epoch: each repetition's ns per position over the floor's, run beside it
  double positions = 0;        // epoch: positions per iteration

  [[nodiscard]] std::optional<double> median_ratio() const {
    if (ratios.empty()) return std::nullopt;
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t mid = sorted.size() / 2;
    return sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }

  [[nodiscard]] double median_ns() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t mid = sorted.size() / 2;
    const double median = sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    return median * 1e6;
  }
};

class Collector : public benchmark::ConsoleReporter {
 public:
  Collector(std::map<Key, Measured>& results, std::map<std::string, Key>& keys)
      : ConsoleReporter(OO_Tabular), results_(results), keys_(keys) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      const auto key = keys_.find(run.run_name.function_name);
      if (key == keys_.end()) continue;
      Measured& m = results_[key->second];
      m.ms.push_back(run.GetAdjustedRealTime());
      const auto counter = [&run](const char* name) -> std::optional<double> {
        const auto c = run.counters.find(name);
        return c == run.counters.end() ? std::nullopt : std::optional(c->second.value);
      };
      if (const auto p = counter("positions")) m.positions = *p;
      const auto floor_ns = counter("floor_ns_per_position");
      if (floor_ns && *floor_ns > 0 && m.positions > 0)
        m.ratios.push_back(run.GetAdjustedRealTime() * 1e6 / m.positions / *floor_ns);
    }
  }

 private:
  std::map<Key, Measured>& results_;
  std::map<std::string, Key>& keys_;
};

std::string duration(double ns) {
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.0f} µs", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.1f} s", ns / 1e9);
}

std::string bytes(std::int64_t b) {
  if (b < 1024 * 1024) return fmt::format("{:.0f} KiB", static_cast<double>(b) / 1024);
  if (b < std::int64_t{1} << 30) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// What the table and the JSON call the build: the bench preset is Release; the dev preset's
// smoke run is a Debug build, whose numbers mean nothing.
#ifdef NDEBUG
constexpr std::string_view build_kind = "Release";
#else
constexpr std::string_view build_kind = "Debug";
#endif

// A JSON value of an optional number: the number, or null for a cell the table shows as "–".
std::string json_number(std::optional<double> v) { return v ? fmt::format("{:.6g}", *v) : std::string("null"); }

}  // namespace

int main(int argc, char** argv) {
  const std::vector<bench::Workload> workloads = all_workloads();
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "--probe") {
    const std::size_t w = static_cast<std::size_t>(std::stoul(std::string(args[1])));
    return probe(workloads.at(w), std::stoll(std::string(args[2])));
  }

  // The repetitions of all benchmarks run in a random order, so that the machine's drift over the
  // run (another process, the CPU's clock) falls on the sampler and its floor alike, not on
  // whichever ran in a bad minute: the ratios are what the table is for.
  std::vector<char*> arguments(argv, argv + argc);
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  if (std::none_of(args.begin(), args.end(),
                   [](std::string_view a) { return a.starts_with("--benchmark_enable_random_interleaving"); }))
    arguments.insert(arguments.begin() + 1, interleave.data());
  argc = static_cast<int>(arguments.size());
  argv = arguments.data();
  benchmark::Initialize(&argc, argv);
  std::vector<std::int64_t> sizes{1'000'000, 10'000'000, 100'000'000, 1'000'000'000, 1'000'000'000'000};
  bool once = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    try {
      if (arg == "--once") {
        once = true;
      } else if (arg == "--json" && i + 1 < argc) {
        json_path = argv[++i];
      } else if (arg == "--sizes" && i + 1 < argc) {
        sizes.clear();
        std::string_view list = argv[++i];
        for (std::size_t comma; !list.empty(); list.remove_prefix(std::min(comma + 1, list.size()))) {
          comma = std::min(list.find(','), list.size());
          sizes.push_back(parse_size(list.substr(0, comma)));
        }
      } else {
        throw std::invalid_argument(
            fmt::format("{}: unknown option; use --sizes N,N,..., --once and --json PATH", arg));
      }
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "chunksampler_bench: {}\n", e.what());
      return 2;
    }
  }

  std::map<std::string, Key> keys;
  const auto add = [&](std::string what, std::size_t w, std::int64_t n, auto body) {
    const std::string name = fmt::format("{}/{}/{}", what, workloads[w].name, size_name(n));
    const bool manual = what == "epoch";
    keys.emplace(name, Key{std::move(what), w, n});
    // A failure (say, memory a peer cannot have) leaves a hole in the table, not a dead run.
    const auto guarded = [body](benchmark::State& state) {
      try {
        body(state);
      } catch (const std::exception& e) {
        state.SkipWithError(e.what());
      }
    };
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(name.c_str(), guarded);
    b->Unit(benchmark::kMillisecond);
    if (manual) b->UseManualTime();  // the workload's epochs alone, not the floor's beside them
    else b->UseRealTime();
    // Our 2-core machines are noisy: the median of 5 repetitions, of 15 where an epoch takes
    // milliseconds (its cost varies most: 11% to 21% between repetitions at 10^6), and of one
    // where it takes libtorch seconds. A first batch or a restore takes microseconds: each of its
    // 5 repetitions times thousands.
    if (once) b->Iterations(1);
    else if (workloads[w].name.find("DistributedRandomSampler") != std::string::npos && n >= 100'000'000)
      b->Repetitions(1);
    else b->Repetitions(manual && n <= 10'000'000 ? 15 : 5);
  };
  for (const std::int64_t n : sizes)
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      const bench::Workload& work = workloads[w];
      if (n < work.min_n || n > work.max_n) continue;
      if (n <= work.max_epoch_n)
        add("epoch", w, n,
            [&work, &floor = workloads[0], paired = w != 0 && n <= workloads[0].max_n, n](benchmark::State& state) {
              if (work.prepare) work.prepare(n);
              std::int64_t positions = 0;
              std::int64_t floor_positions = 0;
              double floor_seconds = 0;
              std::int64_t epochs = 0;
              // Each epoch beside one of the floor, in turn first and second, so that both see the
              // machine of the same moment: each repetition's ratio is one pair's, and the table shows
              // their median.
              for (auto _ : state) {
                const bool floor_first = epochs++ % 2 == 0;
                if (paired && floor_first) floor_seconds += seconds([&] { floor_positions = floor.epoch(n); });
                state.SetIterationTime(seconds([&] { positions = work.epoch(n); }));
                if (paired && !floor_first) floor_seconds += seconds([&] { floor_positions = floor.epoch(n); });
              }
              state.counters["positions"] = static_cast<double>(positions);
              if (paired && floor_positions > 0)
                state.counters["floor_ns_per_position"] =
                    floor_seconds * 1e9 / static_cast<double>(epochs) / static_cast<double>(floor_positions);
            });
      if (work.first_batch)
        add("first", w, n, [&work, n](benchmark::State& state) {
          if (work.prepare) work.prepare(n);
          for (auto _ : state) work.first_batch(n);
        });
      if (work.restore)
        add("restore", w, n, [&work, n](benchmark::State& state) {
          if (work.prepare) work.prepare(n);
          const std::function<void()> restore = work.restore(n);
          for (auto _ : state) restore();
        });
    }

  std::map<Key, Measured> results;
  Collector collector(results, keys);
  collector.SetOutputStream(&std::cerr);
  collector.SetErrorStream(&std::cerr);
  benchmark::RunSpecifiedBenchmarks(&collector);

  // Every benchmark registered must have reported: an error leaves a hole, and the exit status says
  // so. Under --benchmark_filter only the benchmarks run are expected, and only their workloads'
  // memory is probed.
  const bool filtered =
      std::any_of(args.begin(), args.end(), [](std::string_view a) { return a.starts_with("--benchmark_filter"); });
  const auto timed = [&](std::size_t w, std::int64_t n) {
    return std::any_of(results.begin(), results.end(),
                       [&](const auto& result) { return result.first.workload == w && result.first.n == n; });
  };
  std::vector<std::string> missing;
  for (const auto& [name, key] : keys)
    if (!filtered && !results.contains(key)) missing.push_back(name);
  std::map<Key, std::int64_t> memory;
  for (const std::int64_t n : sizes)
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      if (n < workloads[w].min_n || n > workloads[w].max_n || (filtered && !timed(w, n))) continue;
      fmt::print(stderr, "peak memory: {} at N = {}\n", workloads[w].name, size_name(n));
      if (const auto peak = probe_in_child(w, n)) memory[{"memory", w, n}] = *peak;
      else missing.push_back(fmt::format("peak memory of {} at N = {}", workloads[w].name, size_name(n)));
    }

  // The table: one row per (N, sampler); ratios against the floor and libtorch of the same N.
  const auto find = [&](std::string_view what, std::size_t w, std::int64_t n) -> const Measured* {
    const auto it = results.find({std::string(what), w, n});
    return it == results.end() ? nullptr : &it->second;
  };
  const auto per_position = [&](std::size_t w, std::int64_t n) -> std::optional<double> {
    const Measured* m = find("epoch", w, n);
    if (m == nullptr || m->positions <= 0) return std::nullopt;
    return m->median_ns() / m->positions;
  };
  // Over the floor: the median of the pairs' ratios, where the epochs ran beside the floor's.
  const auto over_floor = [&](std::size_t w, std::int64_t n) -> std::optional<double> {
    const Measured* m = find("epoch", w, n);
    if (m != nullptr && m->median_ratio()) return m->median_ratio();
    const std::optional<double> ns = per_position(w, n);
    const std::optional<double> floor = per_position(0, n);
    return ns && floor ? std::optional(*ns / *floor) : std::nullopt;
  };
  const auto libtorch = std::find_if(workloads.begin(), workloads.end(),
                                     [](const bench::Workload& w) { return w.name.starts_with("libtorch"); });
  const auto libtorch_index = static_cast<std::size_t>(libtorch - workloads.begin());

  fmt::print("Rank 0 of 8, batches of 256 (chunk 256, preload 64: 16,384-position requests); {}, {} cores; "
             "GCC {}, {}.\n\n",
             cpu_model(), sysconf(_SC_NPROCESSORS_ONLN), __VERSION__, build_kind);
  fmt::print("| sampler | N | ns per position | × floor | × libtorch | first batch | restore + next batch | "
             "peak memory |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const auto cell = [](std::optional<double> v, auto format) { return v ? format(*v) : std::string("–"); };
  // The same rows as JSON, in nanoseconds and bytes, with the machine that measured them.
  std::vector<std::string> json_rows;
  for (const std::int64_t n : sizes)
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      const std::optional<double> ns = per_position(w, n);
      const std::optional<double> floor = per_position(0, n);
      const auto named_peer = std::find_if(workloads.begin(), workloads.end(),
                                           [&](const bench::Workload& p) { return p.name == workloads[w].peer; });
      const std::optional<double> peer = named_peer != workloads.end()
                                             ? per_position(static_cast<std::size_t>(named_peer - workloads.begin()), n)
                                         : libtorch == workloads.end() ? std::nullopt
                                                                       : per_position(libtorch_index, n);
      const Measured* first = find("first", w, n);
      const Measured* restore = find("restore", w, n);
      const auto mem = memory.find({"memory", w, n});
      if (!ns && first == nullptr && restore == nullptr) continue;
      json_rows.push_back(fmt::format(
          R"({{"sampler": "{}", "n": {}, "ns_per_position": {}, "floor_ns_per_position": {}, "floor_ratio": {}, )"
          R"("first_batch_ns": {}, "restore_ns": {}, "peak_memory_bytes": {}}})",
          workloads[w].name, n, json_number(ns), json_number(floor), json_number(over_floor(w, n)),
          json_number(first ? std::optional(first->median_ns()) : std::nullopt),
          json_number(restore ? std::optional(restore->median_ns()) : std::nullopt),
          json_number(mem == memory.end() ? std::nullopt : std::optional(static_cast<double>(mem->second)))));
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} |\n", workloads[w].name, size_name(n),
                 cell(ns, [](double v) { return fmt::format("{:.2f}", v); }),
                 cell(over_floor(w, n), [](double v) { return fmt::format("{:.2f}", v); }),
                 cell(ns && peer ? std::optional(*ns / *peer) : std::nullopt,
                      [](double v) { return fmt::format("{:.4f}", v); }),
                 first ? duration(first->median_ns()) : "–", restore ? duration(restore->median_ns()) : "–",
                 mem == memory.end() ? "–" : bytes(mem->second));
    }
  fmt::print("\nRestore + next batch: from a state's text in memory (SamplerState::parse, restore), and for the "
             "\"checkpoint file\" rows from the file on disk, in the page cache (cs::load_state(path, sampler)), each "
             "to the first batch of the resumed epoch.\n");
  if (!json_path.empty()) {
    std::ofstream json(json_path);
    json << fmt::format(R"({{"benchmark": "chunksampler_bench", "cpu": "{}", "cores": {}, "compiler": "GCC {}", )"
                        R"("build": "{}", "rows": [)"
                        "\n  {}\n]}}\n",
                        cpu_model(), sysconf(_SC_NPROCESSORS_ONLN), __VERSION__, build_kind,
                        fmt::join(json_rows, ",\n  "));
    if (!json) {
      fmt::print(stderr, "chunksampler_bench: --json: cannot write {}\n", json_path);
      return 1;
    }
  }
  for (const std::string& name : missing) fmt::print(stderr, "chunksampler_bench: no result for {}\n", name);
  return missing.empty() ? 0 : 1;
}
