// SPDX-License-Identifier: MIT
// chaos_rank: one rank of the job the chaos driver (chaos.cpp) kills and relaunches. It trains
// with a DistributedSampler as a synchronous data-parallel job does: per batch it logs the
// observations (one write(2), before the step, so the log survives a SIGKILL), then all ranks
// meet in an MPI_Allreduce (the gradient step), and after every --every-th batch of an epoch and
// at its end rank 0 saves the sampler's state with cs::save_state. At start, every rank restores
// the sampler from --checkpoint when the file exists (cs::load_state) and goes on from there.
//
// Because the log line is written before the allreduce, once rank 0 has passed the allreduce of
// batch b every rank's log holds batch b: a checkpoint never claims a batch some rank did not log.
//
// --kill-rank R --kill-step T --kill-phase P makes rank R SIGKILL itself (no cleanup, as the
// OOM killer would) at step T of this launch (steps count the batches this launch trained, from
// 0); it first writes DIR/killed-rank-R.txt saying where. `timed` arms a thread at step T that
// kills the rank --kill-delay-us later, wherever it is then (mid-write, mid-save): that kill is
// reproducible only up to timing. The driver runs it; by hand, from build/dev/examples/chaos:
//
//   mpirun -np 4 ./chaos_rank --mode global --checkpoint job.ckpt --log run1 --kill-rank 2 --kill-step 40
//   ls run1                         # rank-0.log ... rank-3.log, killed-rank-2.txt
//   mpirun -np 3 ./chaos_rank --mode global --checkpoint job.ckpt --log run2   # resumes on 3 ranks
//
// --save-delay-ms M makes rank 0 wait M ms before each save, as on a disk whose flushes take that
// long under load (ctest chaos.slow_saves: a slow launch is not a hung one).
//
// (as root: mpirun --allow-run-as-root). Exit status: 0 the job finished, 1 it failed, 2 a bad
// argument.

#include "chaos/job.hpp"
#include "common/cli.hpp"
#include "common/mpi_job.hpp"
#include "common/parse.hpp"
#include "common/training.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>
#include <chunksampler/mpi.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace {

namespace cs = chunksampler;
using examples::bad_argument;
using examples::BadArgument;

struct Options {
  chaos::Job job;
  std::string checkpoint;
  std::string log_dir;
  std::optional<std::int64_t> kill_rank;
  std::int64_t kill_step = 0;
  chaos::Phase kill_phase = chaos::Phase::before_log;
  std::int64_t kill_delay_us = 0;
  std::int64_t save_delay_ms = 0;
};

std::optional<Options> parse_options(int argc, const char* const* argv, bool speaks) {
  Options o;
  chaos::Job& job = o.job;
  examples::CommandLine cli("chaos_rank",
                            "One rank of a training job that checkpoints its sampler and may be told to die;\n"
                            "the chaos driver launches it under mpirun.",
                            "exit status: 0 the job finished, 1 it failed, 2 bad arguments.");
  cli.size("--n-obs", job.n_obs, "observations in the data set", std::int64_t{1}, std::int64_t{100'000'000});
  cli.request_shape(job.chunk_size, job.preload, job.batch_size);
  cli.seed(job.seed, "the job's seed");
  cli.integer("--epochs", job.epochs, "play epochs until epoch() reaches E");
  cli.mode(job.mode);
  cli.remainder(job.remainder);
  cli.integer("--every", job.every, "rank 0 checkpoints after every K-th batch of an epoch and at its end",
              std::int64_t{1});
  CLI::App& app = cli.app();
  app.add_option("--checkpoint", o.checkpoint, "the checkpoint: restored from when it exists, saved by rank 0")
      ->type_name("FILE")
      ->required();
  app.add_option("--log", o.log_dir, "write this launch's logs to DIR/rank-<r>.log")->type_name("DIR")->required();
  CLI::Option* rank = cli.integer("--kill-rank", o.kill_rank, "the rank that kills itself", std::int64_t{0});
  cli.integer("--kill-step", o.kill_step, "... at this step of the launch", std::int64_t{0})->needs(rank);
  cli.choice("--kill-phase", o.kill_phase, chaos::phases, "... at this point of the step")->needs(rank);
  cli.integer("--kill-delay-us", o.kill_delay_us, "timed: microseconds after step T begins", std::int64_t{0})
      ->needs(rank);
  cli.integer("--save-delay-ms", o.save_delay_ms,
              "rank 0 waits this long before each save, as on a disk whose flushes are slow", std::int64_t{0});
  if (!cli.parse(argc, argv, speaks)) return std::nullopt;
  if (o.kill_rank && chaos::saves(o.kill_phase) && *o.kill_rank != 0)
    bad_argument("--kill-phase {}: only rank 0 saves checkpoints (--kill-rank is {})", phase_name(o.kill_phase),
                 *o.kill_rank);
  return o;
}

// A file written with write(2) alone: no user-space buffer for a SIGKILL to lose.
class RawFile {
 public:
  explicit RawFile(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) {
    if (fd_ < 0)
      throw std::system_error(errno, std::generic_category(), fmt::format("cannot create {}", path.string()));
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;
  ~RawFile() { ::close(fd_); }

  // One line in one call where the kernel allows, so that a kill tears at most the line being written.
  void write(std::string_view bytes) const {
    while (!bytes.empty()) {
      const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) throw std::system_error(errno, std::generic_category(), "cannot write a log");
      bytes.remove_prefix(static_cast<std::size_t>(written));
    }
  }

 private:
  int fd_;
};

// Says where the rank dies, then dies as the OOM killer kills: SIGKILL, no destructor, no flush.
[[noreturn]] void die(const std::filesystem::path& marker, const std::string& where) {
  RawFile(marker).write(where + "\n");
  ::kill(::getpid(), SIGKILL);
  std::abort();  // unreachable: SIGKILL cannot be caught
}

// The planned death of this rank, if it is the one.
class Killer {
 public:
  Killer(const Options& o, std::int64_t rank)
      : armed_(o.kill_rank == rank),
        step_(o.kill_step),
        phase_(o.kill_phase),
        delay_(o.kill_delay_us),
        marker_(chaos::kill_marker_path(o.log_dir, rank)) {}
  Killer(const Killer&) = delete;
  Killer& operator=(const Killer&) = delete;
  ~Killer() { disarm(); }

  // Called at every point of every step: dies if this is the planned one. The save phases come
  // at the first checkpoint from the planned step on, so they land on any step the driver draws.
  void at(std::int64_t step, chaos::Phase phase, chaos::Position where) {
    current_step_.store(step, std::memory_order_relaxed);
    if (!armed_) return;
    if (phase_ == chaos::Phase::timed && phase == chaos::Phase::before_log && step == step_) arm_timer();
    const bool due = chaos::saves(phase) ? step >= step_ : step == step_;
    if (phase == phase_ && due)
      die(marker_, fmt::format("killed step={} phase={} epoch={} batch={}", step, chaos::phase_name(phase), where.epoch,
                               where.index));
  }

  // The job ended before a timed kill went off: it never will.
  void disarm() {
    {
      const std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
    if (timer_.joinable()) timer_.join();
  }

 private:
  void arm_timer() {
    timer_ = std::thread([this] {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, std::chrono::microseconds(delay_), [this] { return stopped_; })) return;
      die(marker_, fmt::format("killed step={} phase=timed delay_us={} (armed at step {})",
                               current_step_.load(std::memory_order_relaxed), delay_, step_));
    });
  }

  bool armed_;
  std::int64_t step_;
  chaos::Phase phase_;
  std::int64_t delay_;
  std::filesystem::path marker_;
  std::atomic<std::int64_t> current_step_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::thread timer_;
};

// The gradient step: every rank waits for every other, and they check that they stand at the
// same batch of the same epoch (a rank that ran ahead would otherwise hang the job, not fail it).
void step_together(chaos::Position at, std::int64_t rank) {
  const auto epoch = static_cast<std::int64_t>(at.epoch);
  const std::array<std::int64_t, 4> mine{epoch, -epoch, at.index, -at.index};
  std::array<std::int64_t, 4> all{};
  MPI_Allreduce(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (all[0] != -all[1] || all[2] != -all[3])
    throw std::runtime_error(fmt::format("rank {} is at epoch {} batch {}, others between epochs {}-{} batches {}-{}",
                                         rank, at.epoch, at.index, -all[1], all[0], -all[3], all[2]));
}

int train(const Options& o) {
  const cs::DistInfo info = cs::dist::from_mpi()();
  const chaos::Job& job = o.job;
  chaos::Sampler sampler = chaos::make_sampler(job, info);
  std::int64_t done = 0;  // batches of the current epoch, counted from its start (before a restart too)
  std::optional<chaos::Position> resumed;
  if (std::filesystem::exists(o.checkpoint)) {
    const cs::SamplerState state = cs::load_state(o.checkpoint, sampler);
    done = state.batches_done();
    resumed = chaos::Position{state.epoch(), done};
  }
  std::filesystem::create_directories(o.log_dir);
  const RawFile log(chaos::log_path(o.log_dir, info.rank));
  log.write(
      fmt::format("{} rank={} world_size={} pid={}\n", chaos::log_header, info.rank, info.world_size, ::getpid()));
  Killer killer(o, info.rank);
  std::int64_t step = 0;  // batches this launch trained
  std::vector<std::int64_t> rows;
  std::string line;
  for (; sampler.epoch() < job.epochs; done = 0) {
    const std::uint64_t epoch = sampler.epoch();
    auto requests = sampler.sample(job.n_obs);
    const std::int64_t epoch_batches = done + requests.n_batches();
    for (const cs::LoadRequest& request : requests) {
      examples::fill_buffer(request.chunks, rows);
      for (const std::span<const std::int64_t> positions : request.splits) {
        const chaos::Position at{epoch, done};
        killer.at(step, chaos::Phase::before_log, at);
        line = fmt::format("{} {}", epoch, done);
        for (const std::int64_t position : positions)
          fmt::format_to(std::back_inserter(line), " {}", rows[static_cast<std::size_t>(position)]);
        line += '\n';
        log.write(line);
        killer.at(step, chaos::Phase::after_log, at);
        step_together(at, info.rank);
        ++done;
        killer.at(step, chaos::Phase::after_step, at);
        if (info.rank == 0 && (done % job.every == 0 || done == epoch_batches)) {
          killer.at(step, chaos::Phase::before_save, at);
          if (o.save_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.save_delay_ms));
          cs::save_state(o.checkpoint, sampler.state(done));
          killer.at(step, chaos::Phase::after_save, at);
        }
        ++step;
      }
    }
  }
  killer.disarm();
  if (info.rank == 0)
    fmt::print("chaos_rank: {} ranks trained {} batches each, from {}, to the end of epoch {}\n", info.world_size, step,
               resumed ? fmt::format("the checkpoint at epoch {} batch {}", resumed->epoch, resumed->index)
                       : std::string("the start"),
               job.epochs - 1);
  return 0;
}

int main_of(int argc, const char* const* argv, bool speaks) {
  try {
    const std::optional<Options> parsed = parse_options(argc, argv, speaks);
    return parsed ? train(*parsed) : 0;
  } catch (const BadArgument& e) {
    if (speaks) examples::print_error("chaos_rank", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A bad argument is the same on every rank: all exit with 2, and rank 0 says why. Any other
  // error ends the whole job (mpi_main), so that no rank waits for a dead one.
  return examples::mpi_main(argc, argv, "chaos_rank", [&](int rank, int) { return main_of(argc, argv, rank == 0); });
}
