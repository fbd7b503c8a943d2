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

#include "common/cli.hpp"
#include "common/parse.hpp"
#include "common/promise.hpp"
#include "common/training.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>
#ifdef CHUNKSAMPLER_RANK_JOB_MPI
#include "common/mpi_job.hpp"

#include <chunksampler/mpi.hpp>
#include <mpi.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

using examples::bad_argument;
using examples::BadArgument;
using examples::mode_name;
using examples::parse_integer;
using examples::remainder_name;

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

// The options of `argv`, or nothing when --help was printed (by a rank that `speaks`).
std::optional<Options> parse_options(int argc, const char* const* argv, bool speaks) {
  Options o;
  examples::CommandLine cli("rank_job",
                            "One rank of a real data-parallel job: it walks its epochs of a "
                            "DistributedSampler, then the job is\nchecked across ranks.",
                            "exit status: 0 the job keeps every promise, 1 it breaks one, 2 bad arguments.");
  cli.size("--n-obs", o.n_obs, "observations in the data set", std::int64_t{1}, max_checked_obs);
  cli.request_shape(o.chunk_size, o.preload, o.batch_size);
  cli.seed(o.seed, "the job's seed");
  cli.integer("--epochs", o.epochs, "play epochs until epoch() reaches E");
  cli.mode(o.mode);
  cli.remainder(o.remainder);
  CLI::App& app = cli.app();
  CLI::Option* stop = cli.integer("--stop-after", o.stop_after,
                                  "stop after batch K of the first epoch played, as if killed there;\n"
                                  "rank 0 writes the state to --checkpoint FILE first",
                                  std::int64_t{0});
  CLI::Option* checkpoint =
      app.add_option("--checkpoint", o.checkpoint, "where --stop-after writes the sampler state")->type_name("FILE");
  // The stop writes the checkpoint: one goes with the other.
  stop->needs(checkpoint);
  checkpoint->needs(stop);
  app.add_option("--resume", o.resume,
                 "restore the sampler state from FILE, then go on (on any number of\nranks in global mode)")
      ->type_name("FILE");
  app.add_option("--out", o.out, "write this run's reads to DIR/rank-<r>.txt")->type_name("DIR");
  app.add_option("--after", o.after, "an earlier run of the same job (its --out): checked together with\nthis one")
      ->type_name("DIR")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--check", o.check, "run nothing: check the job whose runs wrote these directories, in\norder")
      ->type_name("DIR")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (!cli.parse(argc, argv, speaks)) return std::nullopt;
  return o;
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

RankReads train(const Options& o, cs::DistInfo info) {
  const cs::RandomSampler base(
      {.chunk_size = o.chunk_size, .preload_nchunks = o.preload, .batch_size = o.batch_size, .seed = o.seed});
  cs::DistributedSampler sampler(base, info, {.mode = o.mode, .remainder = o.remainder});
  RankReads reads{.rank = info.rank, .world_size = info.world_size, .epochs = {}};
  std::int64_t done = 0;  // batches of the current epoch, counted from its start (before a restart too)
  if (!o.resume.empty()) done = cs::load_state(o.resume, sampler).batches_done();
  std::vector<std::int64_t> rows;  // the buffer a loader would fill: here just the observation ids
  for (bool first = true; sampler.epoch() < o.epochs; first = false, done = 0) {
    std::vector<Batch>& batches = reads.epochs[sampler.epoch()];
    for (const cs::LoadRequest& request : sampler.sample(o.n_obs)) {
      examples::fill_buffer(request.chunks, rows);
      for (auto batch : request.splits) {
        if (first && o.stop_after == done) {
          if (info.rank == 0) cs::save_state(o.checkpoint, sampler.state(done));
          return reads;
        }
        batches.push_back(examples::batch_rows(rows, batch));
        ++done;
      }
    }
    if (first && o.stop_after) bad_argument("--stop-after {}: the epoch ended after {} batches", *o.stop_after, done);
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
    const std::string key = fmt::format(" {}=", name);
    const std::size_t at = line.find(key);
    if (at == std::string::npos) throw bad(fmt::format("no {}", key));
    const std::string_view rest = std::string_view(line).substr(at + key.size());
    return parse_integer<std::int64_t>(name, rest.substr(0, std::min(rest.find(' '), rest.size())));
  };
  reads.rank = field("rank");
  reads.world_size = field("world_size");
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
// The check. What each policy promises is computed here from the documented formulas (docs/concepts/shard-modes.md),
// not asked of the library, so the check compares the real job with the contract.

struct Report {
  bool ok = true;
  template <class... Args>
  void fail(fmt::format_string<Args...> format, Args&&... args) {
    ok = false;
    fmt::print("  FAIL: {}\n", fmt::format(format, std::forward<Args>(args)...));
  }
};

// What the job did in one epoch, over all its runs.
struct EpochReads {
  std::vector<int> count;             // reads per observation
  std::int64_t left_out_batches = 0;  // dealt to nobody when an elastic restart changed the ranks
  bool complete = false;
};

EpochReads check_epoch(const Options& o, std::uint64_t epoch, const std::vector<const Run*>& runs, Report& report) {
  EpochReads reads{std::vector<int>(static_cast<std::size_t>(o.n_obs), 0)};
  const std::int64_t plan_world = runs.front()->front().world_size;
  const examples::EpochPromise promise =
      examples::promise_of(o.mode, o.remainder, o.n_obs, o.batch_size, plan_world, epoch);
  std::int64_t unread = promise.batches_per_rank * plan_world;  // batches of the plan nobody has read yet
  std::int64_t previous_world = plan_world;
  for (const Run* run : runs) {
    const std::int64_t world = run->front().world_size;
    if (world != previous_world) {
      if (o.mode == cs::ShardMode::contiguous || o.remainder == cs::Remainder::pad)
        report.fail("epoch {}: a restart from {} to {} ranks; only global drop and rotate re-deal an epoch "
                    "in this check",
                    epoch, previous_world, world);
      reads.left_out_batches += unread % world;  // the rest is dealt evenly; fewer than `world` are not
      unread -= unread % world;
      previous_world = world;
    }
    const std::int64_t per_rank = static_cast<std::int64_t>(run->front().epochs.at(epoch).size());
    for (const RankReads& rank : *run) {
      const std::vector<Batch>& batches = rank.epochs.at(epoch);
      if (static_cast<std::int64_t>(batches.size()) != per_rank)
        report.fail("epoch {}: rank {} of {} read {} batches, rank 0 read {}", epoch, rank.rank, world, batches.size(),
                    per_rank);
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
                 "rank\n",
                 epoch, o.n_obs, world, total - o.n_obs, promise.batches_per_rank);
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
  else if (runs.size() == 1 &&
           static_cast<std::int64_t>(runs.front()->front().epochs.at(epoch).size()) != promise.batches_per_rank)
    report.fail("epoch {}: {} batches per rank, the promise is {}", epoch,
                runs.front()->front().epochs.at(epoch).size(), promise.batches_per_rank);
  return reads;
}

bool check_job(const Options& o, const std::vector<Run>& runs) {
  Report report;
  fmt::print("checking {} run{} of a {} job: {} observations, chunk {}, preload {}, batch {}, remainder {}\n",
             runs.size(), runs.size() > 1 ? "s" : "", mode_name(o.mode), o.n_obs, o.chunk_size, o.preload, o.batch_size,
             remainder_name(o.remainder));
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
  const examples::PerRank<std::int64_t> all =
      examples::gather_to_root(flatten(mine), static_cast<int>(mine.rank), static_cast<int>(mine.world_size));
  Run run;
  if (mine.rank != 0) return run;
  for (std::size_t r = 0; r < all.counts.size(); ++r)
    run.push_back(unflatten(all.of(r), static_cast<std::int64_t>(r), mine.world_size));
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
  if (o.out.empty()) bad_argument("--out DIR: ranks started without MPI write their reads there for --check");
  write_reads(o.out, train(o, cs::dist::from_env()()));
  return 0;
}

#endif

int main_of(int argc, const char* const* argv, bool speaks) {
  try {
    const std::optional<Options> parsed = parse_options(argc, argv, speaks);
    if (!parsed) return 0;
    const Options& o = *parsed;
    if (!o.check.empty()) {
      std::vector<Run> runs;
      for (const std::string& dir : o.check) runs.push_back(load_run(dir));
      return check_job(o, runs) ? 0 : 1;
    }
    return run_job(o);
  } catch (const BadArgument& e) {
    if (speaks) examples::print_error("rank_job", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
#ifdef CHUNKSAMPLER_RANK_JOB_MPI
  // A bad argument is the same on every rank: all exit with 2, and rank 0 says why.
  return examples::mpi_main(argc, argv, "rank_job", [&](int rank, int) { return main_of(argc, argv, rank == 0); });
#else
  try {
    return main_of(argc, argv, true);
  } catch (const std::exception& e) {
    examples::print_error("rank_job", e.what());
    return 1;
  }
#endif
}
