// SPDX-License-Identifier: MIT
// chaos: kills a real data-parallel job at random and checks that, resumed from its last complete
// checkpoint, it trains every observation its epochs promise exactly once (issue 19).
//
// Each round draws a job from its seed (shard mode, remainder policy, observations, request shape,
// epochs, checkpoint interval) and 1 to 3 kills, then launches the job under mpirun: 4 ranks of
// chaos_rank, each logging the batches it trains, rank 0 checkpointing with cs::save_state. A
// launch's planned victim SIGKILLs itself at a drawn step and phase (before or after logging a
// batch, after the step, around a save, or after a timed delay); mpirun ends the rest, and the job
// is launched again from the checkpoint left behind: on 4 ranks, in global mode (drop, rotate)
// also on 3 or 5. Once a launch completes, the round's logs and checkpoints are checked against
// the uninterrupted job, computed here (check.hpp says how). Every line names the seed that chose
// it, so a failing round can be replayed alone. From build/dev/examples/chaos:
//
//   ./chaos --rounds 10 --seed 2 --require-elastic   # what ctest runs (chaos.mpirun), 35 s on 2 cores
//   ./chaos --replay 0x3e4e98c3ee83c1e8              # one round again, by the seed it printed
//   scripts/chaos.sh --rounds 200                    # a longer soak, from the source tree
//
// As root, OpenMPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the
// environment. A timed kill lands wherever the clock says, so its round replays the same plan
// but maybe not the same point. Exit status: 0 every round passed, 1 one failed, 2 bad arguments.

#include "chaos/check.hpp"
#include "chaos/job.hpp"
#include "chaos/launch.hpp"
#include "common/cli.hpp"
#include "common/parse.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>
#include <chunksampler/detail/random.hpp>

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace cs = chunksampler;
namespace fs = std::filesystem;
using chaos::Phase;
using examples::bad_argument;
using examples::BadArgument;

struct Options {
  std::int64_t rounds = 10;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> replay;
  std::string work = "chaos-work";
  std::string mpirun = "mpirun";
  std::string rank_program;
  std::int64_t timeout_s = 60;
  std::int64_t slow_saves_ms = 0;
  bool require_elastic = false;
  chaos::Break broken = chaos::Break::none;
};

inline constexpr examples::Choice<chaos::Break> breaks[] = {{"none", chaos::Break::none},
                                                            {"twice", chaos::Break::twice},
                                                            {"lose", chaos::Break::lose}};

// A seed as printed (0x followed by hex digits) or in decimal.
std::uint64_t parse_seed(std::string_view what, std::string_view text) {
  if (!text.starts_with("0x") && !text.starts_with("0X")) return examples::parse_integer<std::uint64_t>(what, text);
  const std::string_view digits = text.substr(2);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (error != std::errc{} || end != digits.data() + digits.size() || digits.empty())
    bad_argument("{}: {:?} is not a seed (0x and at most 16 hex digits, or decimal)", what, text);
  return value;
}

std::optional<Options> parse_options(int argc, const char* const* argv) {
  Options o;
  examples::CommandLine cli("chaos",
                            "Kills a training job under mpirun at random points and checks that, resumed from\n"
                            "its checkpoints, it trains every observation its epochs promise exactly once.",
                            "exit status: 0 every round passed, 1 one failed, 2 bad arguments.");
  cli.integer("--rounds", o.rounds, "rounds to play, each a job killed 1-3 times", std::int64_t{1});
  cli.parsed("--seed", o.seed, parse_seed, "round i plays the seed derived from S and i", "SEED", "1");
  cli.parsed("--replay", o.replay, parse_seed, "play one round with this round seed (as printed)", "SEED", "");
  CLI::App& app = cli.app();
  app.add_option("--work", o.work, "keep each round's logs and checkpoints under DIR")
      ->type_name("DIR")
      ->default_str(o.work);
  app.add_option("--mpirun", o.mpirun, "OpenMPI's launcher")->type_name("PROGRAM")->default_str(o.mpirun);
  app.add_option("--rank-program", o.rank_program, "the job's program (default: chaos_rank beside this one)")
      ->type_name("PATH");
  cli.integer("--timeout", o.timeout_s,
              "seconds in which no rank logs a batch and no checkpoint is saved\nafter which a launch has hung",
              std::int64_t{1});
  cli.integer("--slow-saves", o.slow_saves_ms,
              "rank 0 waits MS before each save, as on a disk whose flushes take\nthat long under load: slower "
              "launches, which are not hangs",
              std::int64_t{0}, std::int64_t{600'000})
      ->type_name("MS");
  app.add_flag("--require-elastic", o.require_elastic,
               "fail unless some restart re-dealt a partly trained epoch on 3 ranks and\nsome on 5");
  cli.choice("--break", o.broken, breaks,
             "check a deliberately broken history, which must fail: a killed launch's\n"
             "last committed batch trained twice on every rank, or lost");
  if (!cli.parse(argc, argv)) return std::nullopt;
  if (o.rank_program.empty())
    o.rank_program = (fs::read_symlink("/proc/self/exe").parent_path() / "chaos_rank").string();
  return o;
}

// ---------------------------------------------------------------------------------------------
// What a round's seed chooses. Every draw comes from the round's pcg32 stream, in a fixed order,
// so a seed names one plan on every machine.

class Draws {
 public:
  explicit Draws(std::uint64_t seed) : engine_(cs::detail::make_engine(seed, 0)) {}
  std::int64_t below(std::int64_t bound) {
    return static_cast<std::int64_t>(cs::detail::bounded(engine_, static_cast<std::uint64_t>(bound)));
  }
  std::int64_t between(std::int64_t low, std::int64_t high) { return low + below(high - low + 1); }
  template <class T, std::size_t N>
  T pick(const std::array<T, N>& values) {
    return values[static_cast<std::size_t>(below(static_cast<std::int64_t>(N)))];
  }

 private:
  cs::detail::Engine engine_;
};

chaos::Job draw_job(Draws& draw) {
  chaos::Job job;
  job.mode = draw.pick(std::array{cs::ShardMode::contiguous, cs::ShardMode::global});
  job.remainder = draw.pick(std::array{cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate});
  job.chunk_size = draw.pick(std::array<std::int64_t, 4>{8, 16, 24, 32});
  job.preload = draw.between(1, 4);
  // Batches of 8 to 32 that divide a request, so every request splits into whole batches; an epoch
  // then has 12 or more batches per rank, enough for checkpoints (and kills) inside it.
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 8; b <= 32; ++b)
    if (job.chunk_size * job.preload % b == 0) sizes.push_back(b);
  job.batch_size = sizes[static_cast<std::size_t>(draw.below(std::ssize(sizes)))];
  job.n_obs = draw.between(2000, 6000);  // rarely a multiple of anything: every policy has a remainder
  job.epochs = static_cast<std::uint64_t>(draw.between(2, 3));
  job.every = draw.between(2, 15);
  job.seed = static_cast<std::uint64_t>(draw.below(1'000'000));
  return job;
}

// The library re-deals an epoch exactly on another world size in global mode with drop or rotate
// (pad repeats some batches then, so its restarts keep 4 ranks).
bool elastic(const chaos::Job& job) { return job.mode == cs::ShardMode::global && job.remainder != cs::Remainder::pad; }

// Steps a launch on `world` ranks from `start` trains if nothing stops it; the kill's step is
// drawn below it, so that a kill lands unless its timer outlasts the job.
std::int64_t steps_left(const chaos::Job& job, std::int64_t world, const std::optional<cs::SamplerState>& start) {
  std::int64_t steps = 0;
  std::uint64_t next = 0;
  if (start) {
    chaos::Sampler sampler = chaos::make_sampler(job, {.rank = 0, .world_size = world});
    sampler.restore(*start);
    steps += sampler.n_batches_left(job.n_obs);
    next = start->epoch() + 1;
  }
  for (std::uint64_t e = next; e < job.epochs; ++e) {
    chaos::Sampler sampler = chaos::make_sampler(job, {.rank = 0, .world_size = world});
    sampler.set_epoch(e);
    steps += sampler.n_batches(job.n_obs);
  }
  return steps;
}

std::optional<chaos::Kill> draw_kill(Draws& draw, std::int64_t world, std::int64_t steps) {
  const Phase phase = draw.pick(std::array{Phase::before_log, Phase::after_log, Phase::after_step, Phase::before_save,
                                           Phase::after_save, Phase::timed});
  const std::int64_t rank = chaos::saves(phase) ? 0 : draw.below(world);
  const std::int64_t step = steps > 0 ? draw.below(steps) : 0;
  const std::int64_t delay_us = phase == Phase::timed ? draw.below(5000) : 0;
  if (steps == 0) return std::nullopt;  // nothing left to train: the launch only finds the job done
  return chaos::Kill{.rank = rank, .step = step, .phase = phase, .delay_us = delay_us};
}

std::string describe(const chaos::Job& job) {
  return fmt::format("{} {}, {} observations, chunk {} x {}, batch {}, {} epochs, checkpoint every {} batches, "
                     "job seed {}",
                     examples::mode_name(job.mode), examples::remainder_name(job.remainder), job.n_obs, job.chunk_size,
                     job.preload, job.batch_size, job.epochs, job.every, job.seed);
}

std::string describe(const std::optional<chaos::Kill>& kill) {
  if (!kill) return "no kill";
  switch (kill->phase) {
    case Phase::timed:
      return fmt::format("kill rank {} {} us after step {} begins (timed: replays the plan, maybe not the point)",
                         kill->rank, kill->delay_us, kill->step);
    case Phase::before_save:
    case Phase::after_save:
      return fmt::format("kill rank 0 at its first checkpoint from step {} on ({})", kill->step,
                         chaos::phase_name(kill->phase));
    default: return fmt::format("kill rank {} at step {} ({})", kill->rank, kill->step, chaos::phase_name(kill->phase));
  }
}

std::string describe(const std::optional<cs::SamplerState>& state) {
  if (!state) return "the start";
  return fmt::format("checkpoint epoch {} batch {}", state->epoch(), state->batches_done());
}

// The last lines of a launch's output, to show why it failed.
std::string tail(const fs::path& file, std::size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(std::move(line));
  std::string text;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    text += fmt::format("    | {}\n", all[i]);
  return text;
}

// ---------------------------------------------------------------------------------------------
// A round, and the totals of all rounds.

struct Totals {
  std::int64_t rounds = 0;
  std::int64_t failed = 0;
  std::int64_t launches = 0;
  std::int64_t kills = 0;
  std::int64_t kills_missed = 0;                  // planned, but the job ended first
  std::map<std::int64_t, std::int64_t> restarts;  // world size -> relaunches on it
  std::map<std::int64_t, std::int64_t> redeals;   // world size -> elastic restarts into a partly trained epoch
  std::int64_t observations = 0;
  std::int64_t lost = 0;
  std::int64_t repeated = 0;
  std::int64_t left_out = 0;
  std::int64_t replayed = 0;
  std::int64_t temporary_files = 0;  // left by kills inside save_state
};

// Plays round `index` (seed `seed`): launches until one completes, then checks them all.
bool play_round(const Options& o, std::int64_t index, std::uint64_t seed, Totals& totals) {
  const std::string name = fmt::format("round {} seed {:#018x}", index, seed);
  Draws draw(seed);
  const chaos::Job job = draw_job(draw);
  const std::int64_t kills = draw.between(1, 3);
  fmt::print("{}: {}\n", name, describe(job));
  const fs::path dir = fs::path(o.work) / fmt::format("round-{}-{:016x}", index, seed);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path checkpoint = dir / "job.ckpt";

  std::vector<chaos::Launch> launches;
  std::optional<cs::SamplerState> state;  // the checkpoint on disk
  bool ok = true;
  for (std::int64_t j = 0;; ++j) {
    chaos::Launch& launch = launches.emplace_back();
    launch.world_size = j == 0 ? 4 : elastic(job) ? draw.between(3, 5) : 4;
    launch.start = state;
    if (j < kills) launch.kill = draw_kill(draw, launch.world_size, steps_left(job, launch.world_size, state));
    fmt::print("{}: launch {} on {} ranks from {}; {}\n", name, j, launch.world_size, describe(state),
               describe(launch.kill));
    std::fflush(stdout);
    if (j > 0) ++totals.restarts[launch.world_size];
    ++totals.launches;

    const fs::path launch_dir = dir / fmt::format("launch-{}", j);
    fs::create_directories(launch_dir);
    std::vector<std::string> argv{o.mpirun, "--oversubscribe", "-np", fmt::to_string(launch.world_size),
                                  o.rank_program};
    for (std::string& arg : chaos::job_arguments(job)) argv.push_back(std::move(arg));
    for (const std::string_view arg : {"--checkpoint", checkpoint.c_str(), "--log", launch_dir.c_str()})
      argv.emplace_back(arg);
    if (o.slow_saves_ms > 0) argv.insert(argv.end(), {"--save-delay-ms", fmt::to_string(o.slow_saves_ms)});
    if (launch.kill) {
      const chaos::Kill& k = *launch.kill;
      argv.insert(argv.end(),
                  {"--kill-rank", fmt::to_string(k.rank), "--kill-step", fmt::to_string(k.step), "--kill-phase",
                   std::string(chaos::phase_name(k.phase)), "--kill-delay-us", fmt::to_string(k.delay_us)});
    }
    const fs::path output = launch_dir / "mpirun.out";
    // The launch's progress: a batch logged by any rank, or a checkpoint saved. A launch is hung
    // when neither happens for --timeout seconds, not when it is merely slow (a loaded disk).
    const auto progress = [&launch_dir, &checkpoint, world = launch.world_size] {
      std::string seen;
      std::error_code error;
      for (std::int64_t r = 0; r < world; ++r) {
        const std::uintmax_t size = fs::file_size(chaos::log_path(launch_dir, r), error);
        seen += fmt::format("{} ", error ? 0 : size);
      }
      const fs::file_time_type saved = fs::last_write_time(checkpoint, error);
      seen += error ? std::string("-") : fmt::to_string(saved.time_since_epoch().count());
      return seen;
    };
    const chaos::Exit exit = chaos::run_with_timeout(argv, output, std::chrono::seconds(o.timeout_s), progress);
    launch.completed = exit.success();

    // What the launch left: logs, a kill marker, the checkpoint (kept beside the logs).
    try {
      for (std::int64_t r = 0; r < launch.world_size; ++r)
        launch.logs.push_back(chaos::read_log(chaos::log_path(launch_dir, r)));
      for (std::int64_t r = 0; r < launch.world_size; ++r)
        if (const fs::path marker = chaos::kill_marker_path(launch_dir, r); fs::exists(marker)) {
          if (launch.killed_rank) throw std::runtime_error("two ranks wrote kill markers");
          launch.killed_rank = r;
          std::ifstream in(marker);
          std::getline(in, launch.kill_marker);
        }
      if (fs::exists(checkpoint)) {
        fs::copy_file(checkpoint, launch_dir / "checkpoint", fs::copy_options::overwrite_existing);
        // The checkpoint must read back whole whatever the kill hit: a torn one throws here.
        state = cs::load_state(checkpoint);
      }
    } catch (const std::exception& e) {
      fmt::print("{}: FAIL: launch {} left what cannot be read: {}\n", name, j, e.what());
      ok = false;
    }
    launch.end = state;

    const std::string took = fmt::format("{:.1f} s", exit.seconds);
    if (exit.timed_out) {
      fmt::print("{}: FAIL: launch {} hung: {}\n{}", name, j, exit.describe(), tail(output, 20));
      // What each process waited for (a rank in fsync, in MPI_Allreduce's sched_yield, ...) and
      // how far each rank's log got, to tell a stalled disk from a deadlock.
      for (const chaos::ProcessState& process : exit.processes) {
        std::string who = process.name;
        for (const std::optional<chaos::RankLog>& log : launch.logs)
          if (log && log->pid == process.pid) {
            const std::string last =
                log->batches.empty()
                    ? std::string("none")
                    : fmt::format("epoch {} batch {}", log->batches.back().at.epoch, log->batches.back().at.index);
            who = fmt::format("rank {} (last logged: {})", log->rank, last);
          }
        fmt::print("    pid {} {}: {}\n", process.pid, who, process.describe());
      }
      ok = false;
    } else if (launch.completed && launch.killed_rank) {
      fmt::print("{}: FAIL: launch {} completed, yet rank {} says it was killed\n", name, j, *launch.killed_rank);
      ok = false;
    } else if (launch.completed) {
      fmt::print("  -> completed{} [{}]\n",
                 launch.kill ? ": the kill did not land before the job's end (not counted as a kill)" : "", took);
      if (launch.kill) ++totals.kills_missed;
    } else if (launch.killed_rank) {
      ++totals.kills;
      fmt::print("  -> rank {} {}; {} left [{}]\n", *launch.killed_rank, launch.kill_marker, describe(state), took);
    } else {
      fmt::print("{}: FAIL: launch {} failed without a kill ({}); its output:\n{}", name, j, exit.describe(),
                 tail(output, 20));
      ok = false;
    }
    std::fflush(stdout);
    if (!ok || launch.completed) break;
  }
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("job.ckpt.tmp-")) ++totals.temporary_files;

  if (ok) {
    const chaos::RoundReport report = chaos::check_round(job, launches, o.broken);
    for (const std::string& line : report.epochs) fmt::print("  {}\n", line);
    for (const std::string& failure : report.failures.shown()) fmt::print("{}: FAIL: {}\n", name, failure);
    if (report.failures.failures() > std::ssize(report.failures.shown()))
      fmt::print("{}: FAIL: ... {} failures in all\n", name, report.failures.failures());
    ok = report.failures.passed();
    totals.observations += report.observations;
    totals.lost += report.lost;
    totals.repeated += report.repeated;
    totals.left_out += report.left_out_batches;
    totals.replayed += report.replayed_batches;
    for (const chaos::Redeal& redeal : report.redeals)
      if (redeal.unread > 0) ++totals.redeals[redeal.to];
    fmt::print("{}: {}: {} launches, {} observations checked, lost {}, repeated {}, {} batches replayed after "
               "kills\n",
               name, ok ? "PASS" : "FAIL", launches.size(), report.observations, report.lost, report.repeated,
               report.replayed_batches);
  }
  if (!ok) fmt::print("{}: replay with: chaos --replay {:#018x} (logs in {})\n", name, seed, dir.string());
  std::fflush(stdout);
  return ok;
}

int run(const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  Totals totals;
  const std::int64_t rounds = o.replay ? 1 : o.rounds;
  for (std::int64_t i = 0; i < rounds; ++i) {
    // Round seeds are independent of how many rounds run: round i of seed S is the same in a
    // short run and in a soak.
    const std::uint64_t seed = o.replay ? *o.replay : cs::detail::derive(o.seed, static_cast<std::uint64_t>(i));
    ++totals.rounds;
    if (!play_round(o, i, seed, totals)) ++totals.failed;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto on = [&](const std::map<std::int64_t, std::int64_t>& counts, std::int64_t w) {
    const auto found = counts.find(w);
    return found == counts.end() ? std::int64_t{0} : found->second;
  };
  fmt::print("chaos: {} rounds (seed {}), {} launches, {} kills ({} more planned past the job's end), restarts on "
             "3/4/5 ranks: {}/{}/{} (into a partly trained epoch on another world size: {}/{}/{}), {} observations "
             "checked: lost {}, repeated {}; {} batches left out by elastic re-deals as documented, {} replayed after "
             "kills; {} temporary files left by kills inside a save; {:.1f} s\n",
             totals.rounds, o.replay ? fmt::format("{:#018x}, replayed", *o.replay) : fmt::format("{:#x}", o.seed),
             totals.launches, totals.kills, totals.kills_missed, on(totals.restarts, 3), on(totals.restarts, 4),
             on(totals.restarts, 5), on(totals.redeals, 3), on(totals.redeals, 4), on(totals.redeals, 5),
             totals.observations, totals.lost, totals.repeated, totals.left_out, totals.replayed,
             totals.temporary_files, seconds);
  bool ok = totals.failed == 0;
  if (o.require_elastic && (on(totals.redeals, 3) == 0 || on(totals.redeals, 5) == 0)) {
    fmt::print("chaos: FAIL: --require-elastic: no restart re-dealt a partly trained epoch on {} ranks; choose "
               "another --seed or more --rounds\n",
               on(totals.redeals, 3) == 0 ? 3 : 5);
    ok = false;
  }
  fmt::print("{}\n", ok ? "PASS" : fmt::format("FAIL ({} of {} rounds)", totals.failed, totals.rounds));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<Options> parsed = parse_options(argc, argv);
    return parsed ? run(*parsed) : 0;
  } catch (const BadArgument& e) {
    examples::print_error("chaos", e.what());
    return 2;
  } catch (const std::exception& e) {
    examples::print_error("chaos", e.what());
    return 1;
  }
}
