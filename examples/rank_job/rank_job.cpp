// SPDX-License-Identifier: MIT
// rank_job: one rank of a real data-parallel job. Every process a launcher starts runs it: it
// walks its epochs of a DistributedSampler the way a training loop does, and then the job is
// checked across ranks: the shards are disjoint, cover what the shard mode and remainder policy
// promise, and give every rank the same number of full batches.
//
// It is built twice from this file:
//   rank_job_mpi  rank and world size from MPI (cs::dist::from_mpi); the ranks gather the
//                 observations they trained on to rank 0, which checks the job.
//   rank_job      rank and world size from the launcher's environment (cs::dist::from_env, as
//                 under torchrun); the ranks cannot talk, so each writes its reads to --out DIR,
//                 and `rank_job --check DIR` checks the job afterwards.
//
//   mpirun -np 4 rank_job_mpi --mode global --remainder rotate --epochs 3
//   torchrun --standalone --nproc_per_node=3 --no_python rank_job --out reads && rank_job --check reads
//   mpirun -np 4 rank_job_mpi --mode global --stop-after 50 --checkpoint job.state --out part1
//   mpirun -np 3 rank_job_mpi --mode global --resume job.state --after part1   # elastic restart
//
// Exit status: 0 when the job keeps every promise, 1 when it breaks one, 2 on a bad argument.

#include <chunksampler.hpp>
#ifdef CHUNKSAMPLER_RANK_JOB_MPI
#include <chunksampler/mpi.hpp>
#include <mpi.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

constexpr std::string_view usage = R"(usage: rank_job [options]
  --n-obs N          observations in the data set (10000)
  --chunk-size C     observations per chunk (16)
  --preload P        chunks per request (4)
  --batch-size B     observations per batch (32)
  --seed S           the job's seed (0)
  --epochs E         play epochs until epoch() reaches E (2)
  --mode M           contiguous | global (contiguous)
  --remainder R      drop | pad | rotate (drop)
  --stop-after K     stop after batch K of the first epoch played, as if killed there;
                     rank 0 writes the state to --checkpoint FILE first
  --checkpoint FILE  where --stop-after writes the sampler state
  --resume FILE      restore the sampler state from FILE, then go on (on any number of ranks
                     in global mode)
  --out DIR          write this run's reads to DIR/rank-<r>.txt
  --after DIR        an earlier run of the same job (its --out): checked together with this one
  --check DIR...     run nothing: check the job whose runs wrote these directories, in order
)";

// A larger job is still a fine test of the library, but not of this checker's bookkeeping.
constexpr std::int64_t max_checked_obs = 100'000'000;

struct Options {
  std::int64_t n_obs = 10'000;
  std::int64_t chunk_size = 16;
  std::int64_t preload = 4;
  std::int64_t batch_size = 32;
  std::uint64_t seed = 0;
  std::uint64_t epochs = 2;
  cs::ShardMode mode = cs::ShardMode::contiguous;
  cs::Remainder remainder = cs::Remainder::drop;
  std::optional<std::int64_t> stop_after;
  std::string checkpoint;
  std::string resume;
  std::string out;
  std::vector<std::string> after;
  std::vector<std::string> check;
};

struct BadArgument : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class Int>
Int parse_integer(std::string_view option, std::string_view text) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size())
    throw BadArgument(fmt::format("{} {:?}: not an integer", option, text));
  return value;
}

Options parse_options(std::span<char* const> args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view option = args[i];
    if (option == "--help") throw BadArgument(std::string(usage));
    if (option == "--check") {
      while (i + 1 < args.size() && !std::string_view(args[i + 1]).starts_with("--")) o.check.emplace_back(args[++i]);
      if (o.check.empty()) throw BadArgument("--check: needs the directories the runs wrote");
      continue;
    }
    if (i + 1 >= args.size()) throw BadArgument(fmt::format("{}: needs a value (see --help)", option));
    const std::string_view value = args[++i];
    if (option == "--n-obs") o.n_obs = parse_integer<std::int64_t>(option, value);
    else if (option == "--chunk-size") o.chunk_size = parse_integer<std::int64_t>(option, value);
    else if (option == "--preload") o.preload = parse_integer<std::int64_t>(option, value);
    else if (option == "--batch-size") o.batch_size = parse_integer<std::int64_t>(option, value);
    else if (option == "--seed") o.seed = parse_integer<std::uint64_t>(option, value);
    else if (option == "--epochs") o.epochs = parse_integer<std::uint64_t>(option, value);
    else if (option == "--stop-after") o.stop_after = parse_integer<std::int64_t>(option, value);
    else if (option == "--checkpoint") o.checkpoint = value;
    else if (option == "--resume") o.resume = value;
    else if (option == "--out") o.out = value;
    else if (option == "--after") o.after.emplace_back(value);
    else if (option == "--mode") {
      if (value != "contiguous" && value != "global")
        throw BadArgument(fmt::format("--mode {:?}: must be contiguous or global", value));
      o.mode = value == "global" ? cs::ShardMode::global : cs::ShardMode::contiguous;
    } else if (option == "--remainder") {
      if (value == "drop") o.remainder = cs::Remainder::drop;
      else if (value == "pad") o.remainder = cs::Remainder::pad;
      else if (value == "rotate") o.remainder = cs::Remainder::rotate;
      else throw BadArgument(fmt::format("--remainder {:?}: must be drop, pad or rotate", value));
    } else {
      throw BadArgument(fmt::format("{}: unknown option (see --help)", option));
    }
  }
  if (o.n_obs < 1 || o.n_obs > max_checked_obs)
    throw BadArgument(fmt::format("--n-obs {}: must be in [1, {}] for the check", o.n_obs, max_checked_obs));
  if (o.stop_after && *o.stop_after < 0)
    throw BadArgument(fmt::format("--stop-after {}: must be >= 0", *o.stop_after));
  if (o.stop_after.has_value() != !o.checkpoint.empty())
    throw BadArgument("--stop-after and --checkpoint go together: the stop writes the checkpoint");
  return o;
}

std::string_view mode_name(cs::ShardMode mode) { return mode == cs::ShardMode::global ? "global" : "contiguous"; }
std::string_view remainder_name(cs::Remainder remainder) {
  switch (remainder) {
    case cs::Remainder::drop: return "drop";
    case cs::Remainder::pad: return "pad";
    case cs::Remainder::rotate: return "rotate";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// A rank's training loop, and what it read.

using Batch = std::vector<std::int64_t>;  // the observations one batch trains on

struct RankReads {
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
  std::map<std::uint64_t, std::vector<Batch>> epochs;  // every epoch this run played, its batches in order
};

using Run = std::vector<RankReads>;  // one launch of the job: its ranks' reads, by rank

std::string read_line(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  if (!in || !std::getline(in, line)) throw std::runtime_error(fmt::format("cannot read {}", path));
  return line;
}

RankReads train(const Options& o, cs::DistInfo info) {
  const cs::RandomSampler base(
      {.chunk_size = o.chunk_size, .preload_nchunks = o.preload, .batch_size = o.batch_size, .seed = o.seed});
  cs::DistributedSampler sampler(base, info, {.mode = o.mode, .remainder = o.remainder});
  RankReads reads{.rank = info.rank, .world_size = info.world_size, .epochs = {}};
  std::int64_t done = 0;  // batches of the current epoch, counted from its start (before a restart too)
  if (!o.resume.empty()) {
    const cs::SamplerState state = cs::SamplerState::parse(read_line(o.resume));
    sampler.restore(state);
    done = state.batches_done;
  }
  std::vector<std::int64_t> rows;  // the buffer a loader would fill: here just the observation ids
  for (bool first = true; sampler.epoch() < o.epochs; first = false, done = 0) {
    std::vector<Batch>& batches = reads.epochs[sampler.epoch()];
    for (const cs::LoadRequest& request : sampler.sample(o.n_obs)) {
      rows.clear();
      for (const cs::Slice chunk : request.chunks)
        for (std::int64_t obs = chunk.start; obs < chunk.stop; ++obs) rows.push_back(obs);
      for (auto batch : request.splits) {
        if (first && o.stop_after == done) {
          if (info.rank == 0) std::ofstream{o.checkpoint} << sampler.state(done).to_string() << '\n';
          return reads;
        }
        Batch& trained = batches.emplace_back();
        for (const std::int64_t position : batch) trained.push_back(rows[static_cast<std::size_t>(position)]);
        ++done;
      }
    }
    if (first && o.stop_after)
      throw BadArgument(fmt::format("--stop-after {}: the epoch ended after {} batches", *o.stop_after, done));
  }
  return reads;
}

// ---------------------------------------------------------------------------------------------
// Reads on disk: DIR/rank-<r>.txt holds a header line, then one line per batch, "<epoch>: ids".

constexpr std::string_view reads_header = "chunksampler-reads/1";

void write_reads(const std::string& dir, const RankReads& reads) {
  std::filesystem::create_directories(dir);
  const std::string path = fmt::format("{}/rank-{}.txt", dir, reads.rank);
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) throw std::runtime_error(fmt::format("cannot write {}", path));
  fmt::print(file, "{} rank={} world_size={}\n", reads_header, reads.rank, reads.world_size);
  for (const auto& [epoch, batches] : reads.epochs) {
    if (batches.empty()) fmt::print(file, "{}:\n", epoch);  // an epoch with no batch is still played
    for (const Batch& batch : batches) fmt::print(file, "{}: {}\n", epoch, fmt::join(batch, " "));
  }
  if (std::fclose(file) != 0) throw std::runtime_error(fmt::format("cannot write {}", path));
}

RankReads parse_reads(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  RankReads reads;
  const auto bad = [&](std::string_view why) {
    return std::runtime_error(fmt::format("{}: {}: {:?}", path, why, line));
  };
  if (!std::getline(in, line) || !line.starts_with(reads_header)) throw bad("not a reads file");
  const auto field = [&](std::string_view name) {
    const std::size_t at = line.find(name);
    if (at == std::string::npos) throw bad(fmt::format("no {}", name));
    const std::string_view rest = std::string_view(line).substr(at + name.size());
    return parse_integer<std::int64_t>(name, rest.substr(0, std::min(rest.find(' '), rest.size())));
  };
  reads.rank = field(" rank=");
  reads.world_size = field(" world_size=");
  while (std::getline(in, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) throw bad("no epoch");
    std::vector<Batch>& batches = reads.epochs[parse_integer<std::uint64_t>("epoch", line.substr(0, colon))];
    std::string_view rest = std::string_view(line).substr(colon + 1);
    if (rest.empty()) continue;
    Batch& batch = batches.emplace_back();
    while (!rest.empty()) {
      rest.remove_prefix(1);  // the space before each id
      const std::size_t end = std::min(rest.find(' '), rest.size());
      batch.push_back(parse_integer<std::int64_t>("observation", rest.substr(0, end)));
      rest.remove_prefix(end);
    }
  }
  return reads;
}

Run load_run(const std::string& dir) {
  Run run;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("rank-")) run.push_back(parse_reads(entry.path().string()));
  std::sort(run.begin(), run.end(), [](const RankReads& a, const RankReads& b) { return a.rank < b.rank; });
  if (run.empty()) throw std::runtime_error(fmt::format("{}: no rank-<r>.txt files", dir));
  return run;
}

// ---------------------------------------------------------------------------------------------
// The check. What each policy promises is computed here from the README's formulas, not asked of
// the library, so the check compares the real job with the contract.

struct Report {
  bool ok = true;
  template <class... Args>
  void fail(fmt::format_string<Args...> format, Args&&... args) {
    ok = false;
    fmt::print("  FAIL: {}\n", fmt::format(format, std::forward<Args>(args)...));
  }
};

std::int64_t round_down(std::int64_t n, std::int64_t to) { return n / to * to; }
std::int64_t ceil_div(std::int64_t n, std::int64_t by) { return (n + by - 1) / by; }

// One epoch as planned on `world_size` ranks (with equal batches, as the job uses them).
struct EpochPromise {
  std::int64_t batches_per_rank = 0;
  cs::Slice window;  // drop and rotate: the observations read; pad: all of them
};

EpochPromise promise_of(const Options& o, std::int64_t world_size, std::uint64_t epoch) {
  const std::int64_t n = o.n_obs;
  const std::int64_t b = o.batch_size;
  if (o.remainder == cs::Remainder::pad) {
    const std::int64_t per_rank = o.mode == cs::ShardMode::contiguous ? ceil_div(ceil_div(n, world_size), b)
                                                                      : ceil_div(n, world_size * b);
    return {per_rank, {0, n}};
  }
  const std::int64_t read = o.mode == cs::ShardMode::contiguous ? world_size * round_down(n / world_size, b)
                                                                : round_down(n, world_size * b);
  const bool at_end = o.remainder == cs::Remainder::rotate && epoch % 2 == 1;
  return {read / (world_size * b), at_end ? cs::Slice{n - read, n} : cs::Slice{0, read}};
}

// What the job did in one epoch, over all its runs.
struct EpochReads {
  std::vector<int> count;             // reads per observation
  std::int64_t left_out_batches = 0;  // dealt to nobody when an elastic restart changed the ranks
  bool complete = false;
};

EpochReads check_epoch(const Options& o, std::uint64_t epoch, const std::vector<const Run*>& runs, Report& report) {
  EpochReads reads{std::vector<int>(static_cast<std::size_t>(o.n_obs), 0)};
  const std::int64_t plan_world = runs.front()->front().world_size;
  const EpochPromise promise = promise_of(o, plan_world, epoch);
  std::int64_t unread = promise.batches_per_rank * plan_world;  // batches of the plan nobody has read yet
  std::int64_t previous_world = plan_world;
  for (const Run* run : runs) {
    const std::int64_t world = run->front().world_size;
    if (world != previous_world) {
      if (o.mode == cs::ShardMode::contiguous || o.remainder == cs::Remainder::pad)
        report.fail("epoch {}: a restart from {} to {} ranks; only global drop and rotate re-deal an epoch "
                    "in this check", epoch, previous_world, world);
      reads.left_out_batches += unread % world;  // the rest is dealt evenly; fewer than `world` are not
      unread -= unread % world;
      previous_world = world;
    }
    const std::int64_t per_rank = static_cast<std::int64_t>(run->front().epochs.at(epoch).size());
    for (const RankReads& rank : *run) {
      const std::vector<Batch>& batches = rank.epochs.at(epoch);
      if (static_cast<std::int64_t>(batches.size()) != per_rank)
        report.fail("epoch {}: rank {} of {} read {} batches, rank 0 read {}", epoch, rank.rank, world,
                    batches.size(), per_rank);
      for (const Batch& batch : batches) {
        if (static_cast<std::int64_t>(batch.size()) != o.batch_size)
          report.fail("epoch {}: rank {} read a batch of {}, not {}", epoch, rank.rank, batch.size(), o.batch_size);
        for (const std::int64_t obs : batch) {
          if (obs < 0 || obs >= o.n_obs) {
            report.fail("epoch {}: rank {} read observation {}, outside [0, {})", epoch, rank.rank, obs, o.n_obs);
            continue;
          }
          ++reads.count[static_cast<std::size_t>(obs)];
        }
      }
    }
    unread -= per_rank * world;
  }
  if (unread < 0) report.fail("epoch {}: {} batches more than the plan's", epoch, -unread);
  if (unread > 0 && !o.stop_after) report.fail("epoch {}: {} batches of the plan never read", epoch, unread);
  reads.complete = unread == 0;

  // How often each observation may and must be read.
  std::int64_t distinct = 0;
  std::int64_t total = 0;
  std::int64_t outside = 0;
  std::int64_t twice = 0;
  std::int64_t foreign_repeats = 0;  // pad, contiguous: a repeat of a row some other rank read
  for (std::size_t i = 0; i < reads.count.size(); ++i) {
    const int c = reads.count[i];
    distinct += c > 0 ? 1 : 0;
    total += c;
    if (c > 0 && !promise.window.contains(static_cast<std::int64_t>(i))) ++outside;
    if (c > 1) ++twice;
  }
  if (o.remainder == cs::Remainder::pad && o.mode == cs::ShardMode::contiguous) {
    // Repeats come from the rank's own last request: every observation belongs to one rank.
    std::vector<std::int64_t> owner(reads.count.size(), -1);
    for (const Run* run : runs)
      for (const RankReads& rank : *run)
        for (const Batch& batch : rank.epochs.at(epoch))
          for (const std::int64_t obs : batch) {
            if (obs < 0 || obs >= o.n_obs) continue;
            std::int64_t& who = owner[static_cast<std::size_t>(obs)];
            if (who >= 0 && who != rank.rank) ++foreign_repeats;
            who = rank.rank;
          }
  }
  const std::int64_t b = o.batch_size;
  const std::int64_t world = runs.back()->front().world_size;
  const std::string window = fmt::format("[{}, {})", promise.window.start, promise.window.stop);
  if (outside > 0) report.fail("epoch {}: {} observations read outside {}", epoch, outside, window);
  if (o.remainder == cs::Remainder::pad) {
    if (foreign_repeats > 0) report.fail("epoch {}: {} reads of another rank's rows", epoch, foreign_repeats);
    if (reads.complete && distinct != o.n_obs)
      report.fail("epoch {}: {} observations never read (pad leaves none out)", epoch, o.n_obs - distinct);
    if (reads.complete)
      fmt::print("epoch {}: all {} observations read by {} ranks, {} positions repeat a row; {} full batches per "
                 "rank\n", epoch, o.n_obs, world, total - o.n_obs, promise.batches_per_rank);
  } else {
    if (twice > 0) report.fail("epoch {}: {} observations read more than once", epoch, twice);
    const std::int64_t expected = promise.window.size() - reads.left_out_batches * b;
    if (reads.complete && distinct != expected)
      report.fail("epoch {}: {} observations read, the promise is {}", epoch, distinct, expected);
    if (reads.complete && runs.size() == 1)
      fmt::print("epoch {}: {} observations of {} read once each by {} ranks; {} left out, outside the window {}\n",
                 epoch, distinct, o.n_obs, world, o.n_obs - distinct, window);
    else if (reads.complete)
      fmt::print("epoch {}: {} observations of {} read once each by {} runs ({} ranks at the end); {} left out: "
                 "{} outside the window {} and {} batches the restart could not deal evenly\n",
                 epoch, distinct, o.n_obs, runs.size(), world, o.n_obs - distinct, o.n_obs - promise.window.size(),
                 window, reads.left_out_batches);
  }
  if (unread > 0 && twice == 0)
    fmt::print("epoch {}: stopped after {} of the plan's {} batches; no observation read twice\n", epoch,
               promise.batches_per_rank * plan_world - unread, promise.batches_per_rank * plan_world);
  else if (runs.size() == 1 && static_cast<std::int64_t>(runs.front()->front().epochs.at(epoch).size()) !=
                                   promise.batches_per_rank)
    report.fail("epoch {}: {} batches per rank, the promise is {}", epoch, runs.front()->front().epochs.at(epoch).size(),
                promise.batches_per_rank);
  return reads;
}

bool check_job(const Options& o, const std::vector<Run>& runs) {
  Report report;
  fmt::print("checking {} run{} of a {} job: {} observations, chunk {}, preload {}, batch {}, remainder {}\n",
             runs.size(), runs.size() > 1 ? "s" : "", mode_name(o.mode), o.n_obs, o.chunk_size, o.preload,
             o.batch_size, remainder_name(o.remainder));
  std::map<std::uint64_t, std::vector<const Run*>> epochs;  // epoch -> the runs that played it, in order
  const auto key = [](const auto& entry) { return entry.first; };
  for (const Run& run : runs) {
    const std::int64_t world = run.front().world_size;
    for (std::size_t r = 0; r < run.size(); ++r)
      if (run[r].rank != static_cast<std::int64_t>(r) || run[r].world_size != world ||
          !std::ranges::equal(run[r].epochs, run.front().epochs, {}, key, key))
        report.fail("a run's ranks are not 0..{} of one job with the same epochs", world - 1);
    if (static_cast<std::int64_t>(run.size()) != world)
      report.fail("a run of {} ranks holds the reads of {}", world, run.size());
    for (const auto& [epoch, batches] : run.front().epochs) epochs[epoch].push_back(&run);
  }
  if (!report.ok) return false;
  std::optional<EpochReads> previous;
  std::uint64_t previous_epoch = 0;
  for (const auto& [epoch, epoch_runs] : epochs) {
    EpochReads reads = check_epoch(o, epoch, epoch_runs, report);
    // rotate's promise spans two epochs: together they read everything.
    if (o.remainder == cs::Remainder::rotate && previous && previous_epoch + 1 == epoch && previous->complete &&
        reads.complete && previous->left_out_batches == 0 && reads.left_out_batches == 0) {
      std::int64_t never = 0;
      for (std::size_t i = 0; i < reads.count.size(); ++i) never += reads.count[i] + previous->count[i] == 0 ? 1 : 0;
      if (never > 0) report.fail("epochs {} and {}: {} observations read in neither", previous_epoch, epoch, never);
    }
    previous = std::move(reads);
    previous_epoch = epoch;
  }
  fmt::print("{}\n", report.ok ? "PASS" : "FAIL");
  return report.ok;
}

// ---------------------------------------------------------------------------------------------
// The two ways a rank learns where it is.

#ifdef CHUNKSAMPLER_RANK_JOB_MPI

// Every rank's reads, flattened: [epochs, (epoch, batches, (size, ids...)...)...].
std::vector<std::int64_t> flatten(const RankReads& reads) {
  std::vector<std::int64_t> flat{static_cast<std::int64_t>(reads.epochs.size())};
  for (const auto& [epoch, batches] : reads.epochs) {
    flat.push_back(static_cast<std::int64_t>(epoch));
    flat.push_back(static_cast<std::int64_t>(batches.size()));
    for (const Batch& batch : batches) {
      flat.push_back(static_cast<std::int64_t>(batch.size()));
      flat.insert(flat.end(), batch.begin(), batch.end());
    }
  }
  return flat;
}

RankReads unflatten(std::span<const std::int64_t> flat, std::int64_t rank, std::int64_t world_size) {
  RankReads reads{.rank = rank, .world_size = world_size, .epochs = {}};
  std::size_t at = 0;
  const auto next = [&] { return flat[at++]; };
  for (std::int64_t e = next(); e > 0; --e) {
    std::vector<Batch>& batches = reads.epochs[static_cast<std::uint64_t>(next())];
    for (std::int64_t n = next(); n > 0; --n) {
      const auto size = static_cast<std::size_t>(next());
      batches.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                           flat.begin() + static_cast<std::ptrdiff_t>(at + size));
      at += size;
    }
  }
  return reads;
}

// Gathers every rank's reads to rank 0 (the others get an empty run).
Run gather(const RankReads& mine) {
  const std::vector<std::int64_t> flat = flatten(mine);
  const auto world = static_cast<std::size_t>(mine.world_size);
  if (flat.size() > static_cast<std::size_t>(INT32_MAX)) throw std::runtime_error("too many reads to gather");
  const int size = static_cast<int>(flat.size());
  std::vector<int> sizes(world);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(world, 0);
  std::int64_t total = 0;
  for (std::size_t r = 0; r < world; ++r) {
    if (total + sizes[r] > INT32_MAX) throw std::runtime_error("too many reads to gather");
    offsets[r] = static_cast<int>(total);
    total += sizes[r];
  }
  std::vector<std::int64_t> all(mine.rank == 0 ? static_cast<std::size_t>(total) : 0);
  MPI_Gatherv(flat.data(), size, MPI_INT64_T, all.data(), sizes.data(), offsets.data(), MPI_INT64_T, 0,
              MPI_COMM_WORLD);
  Run run;
  if (mine.rank != 0) return run;
  for (std::size_t r = 0; r < world; ++r)
    run.push_back(unflatten(std::span(all).subspan(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(sizes[r])),
                            static_cast<std::int64_t>(r), mine.world_size));
  return run;
}

int run_job(const Options& o) {
  const cs::DistInfo info = cs::dist::from_mpi()();
  const RankReads mine = train(o, info);
  Run run = gather(mine);
  int ok = 1;
  if (info.rank == 0) {
    if (!o.out.empty())
      for (const RankReads& reads : run) write_reads(o.out, reads);
    std::vector<Run> runs;
    for (const std::string& dir : o.after) runs.push_back(load_run(dir));
    runs.push_back(std::move(run));
    ok = check_job(o, runs) ? 1 : 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok != 0 ? 0 : 1;
}

#else

int run_job(const Options& o) {
  if (o.out.empty()) throw BadArgument("--out DIR: ranks started without MPI write their reads there for --check");
  write_reads(o.out, train(o, cs::dist::from_env()()));
  return 0;
}

#endif

int main_of(std::span<char* const> args, bool speaks) {
  try {
    const Options o = parse_options(args);
    if (!o.check.empty()) {
      std::vector<Run> runs;
      for (const std::string& dir : o.check) runs.push_back(load_run(dir));
      return check_job(o, runs) ? 0 : 1;
    }
    return run_job(o);
  } catch (const BadArgument& e) {
    if (speaks) fmt::print(stderr, "rank_job: {}\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::span<char* const> args(argv + 1, static_cast<std::size_t>(argc - 1));
#ifdef CHUNKSAMPLER_RANK_JOB_MPI
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  try {
    status = main_of(args, rank == 0);  // a bad argument is the same on every rank: all exit with 2
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank_job: rank {}: {}\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may wait in a collective
  }
  MPI_Finalize();
  return status;
#else
  try {
    return main_of(args, true);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank_job: {}\n", e.what());
    return 1;
  }
#endif
}
