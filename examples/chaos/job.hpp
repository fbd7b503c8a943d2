// SPDX-License-Identifier: MIT
// What the chaos driver and its MPI ranks (chaos_rank) agree on: the job's settings and the one
// way they become a sampler and a command line, the points where a rank can be told to die, and
// the format of the log in which every rank records what it trained on.
//
// A rank's log (DIR/rank-<r>.log) is written with one write(2) per line, so a SIGKILL leaves
// every line written before it intact and at most the line being written torn:
//
//   chaos-log/1 rank=2 world_size=4 pid=4711
//   0 17 4012 4013 977 ...        epoch, batch index counted from the epoch's start, observations

#pragma once

#include "common/parse.hpp"

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chaos {

namespace cs = chunksampler;

/// One training job: the data, the sampler's settings and how often rank 0 checkpoints.
struct Job {
  std::int64_t n_obs = 3000;
  std::int64_t chunk_size = 16;
  std::int64_t preload = 4;
  std::int64_t batch_size = 16;
  std::uint64_t seed = 0;
  std::uint64_t epochs = 2;  ///< the job plays epochs 0 .. epochs - 1
  cs::ShardMode mode = cs::ShardMode::contiguous;
  cs::Remainder remainder = cs::Remainder::drop;
  std::int64_t every = 10;  ///< a checkpoint after every `every`-th batch of an epoch, and at its end
};

using Sampler = cs::DistributedSampler<cs::RandomSampler>;

/// The sampler every rank of the job wraps.
inline cs::RandomSampler base_sampler(const Job& job) {
  return cs::RandomSampler(
      {.chunk_size = job.chunk_size, .preload_nchunks = job.preload, .batch_size = job.batch_size, .seed = job.seed});
}

/// The sampler rank `info.rank` of the job trains with; the driver builds the same one to compute
/// what an uninterrupted job reads.
inline Sampler make_sampler(const Job& job, cs::DistInfo info) {
  return Sampler(base_sampler(job), info, {.mode = job.mode, .remainder = job.remainder});
}

/// The job's settings as chaos_rank's options.
inline std::vector<std::string> job_arguments(const Job& job) {
  return {"--n-obs",      fmt::to_string(job.n_obs),
          "--chunk-size", fmt::to_string(job.chunk_size),
          "--preload",    fmt::to_string(job.preload),
          "--batch-size", fmt::to_string(job.batch_size),
          "--seed",       fmt::to_string(job.seed),
          "--epochs",     fmt::to_string(job.epochs),
          "--mode",       std::string(examples::mode_name(job.mode)),
          "--remainder",  std::string(examples::remainder_name(job.remainder)),
          "--every",      fmt::to_string(job.every)};
}

/// Where in a training step a rank dies. Steps count the batches this launch trained, from 0.
enum class Phase {
  before_log,   ///< at step t, before logging its batch: the batch was never trained
  after_log,    ///< after logging batch t, before the allreduce: logged, the step never finished
  after_step,   ///< after the allreduce of step t, before any checkpoint of that step
  before_save,  ///< rank 0, at the first checkpoint from step t on, just before saving it
  after_save,   ///< rank 0, just after saving the first checkpoint from step t on
  timed,        ///< a thread armed at step t kills the rank `delay_us` later, wherever it is
};

inline constexpr examples::Choice<Phase> phases[] = {
    {"before-log", Phase::before_log},   {"after-log", Phase::after_log},   {"after-step", Phase::after_step},
    {"before-save", Phase::before_save}, {"after-save", Phase::after_save}, {"timed", Phase::timed}};

inline std::string_view phase_name(Phase phase) { return examples::name_of(phases, phase); }

/// Only rank 0 saves checkpoints, so only rank 0 can die around a save.
[[nodiscard]] constexpr bool saves(Phase phase) noexcept {
  return phase == Phase::before_save || phase == Phase::after_save;
}

/// A planned death: rank `rank` kills itself with SIGKILL at `step` in `phase`.
struct Kill {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  Phase phase = Phase::before_log;
  std::int64_t delay_us = 0;  ///< timed: how long after step `step` began
};

/// A point of the job: batch `index` of epoch `epoch`, counted from the epoch's start.
struct Position {
  std::uint64_t epoch = 0;
  std::int64_t index = 0;
  friend auto operator<=>(const Position&, const Position&) = default;
};

inline constexpr std::string_view log_header = "chaos-log/1";

inline std::filesystem::path log_path(const std::filesystem::path& dir, std::int64_t rank) {
  return dir / fmt::format("rank-{}.log", rank);
}

/// The file a rank writes just before it kills itself, saying where it died.
inline std::filesystem::path kill_marker_path(const std::filesystem::path& dir, std::int64_t rank) {
  return dir / fmt::format("killed-rank-{}.txt", rank);
}

using Batch = std::vector<std::int64_t>;  // the observations one batch trains on, in the batch's order

struct LoggedBatch {
  Position at;
  Batch observations;
};

/// One rank's log of one launch.
struct RankLog {
  std::int64_t rank = 0;
  std::int64_t world_size = 0;
  std::int64_t pid = 0;
  std::vector<LoggedBatch> batches;
  bool torn = false;  ///< the last line was cut short (by a SIGKILL mid-write) and is left out
};

namespace detail {

inline std::int64_t header_field(std::string_view header, std::string_view name, const std::string& file) {
  const std::string key = fmt::format(" {}=", name);
  const std::size_t at = header.find(key);
  if (at == std::string_view::npos)
    throw std::runtime_error(fmt::format("{}: the header {:?} has no {}", file, header, key));
  std::string_view rest = header.substr(at + key.size());
  rest = rest.substr(0, std::min(rest.find(' '), rest.size()));
  return examples::parse_integer<std::int64_t>(fmt::format("{}: {}", file, name), rest);
}

}  // namespace detail

/// Reads a rank's log. A missing file is a rank that died before it wrote anything: nullopt.
/// A last line without its newline was torn by a kill and is left out (`torn`).
inline std::optional<RankLog> read_log(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string file = path.string();
  RankLog log;
  std::string_view rest = text;
  const auto next_line = [&](std::string_view& line) {
    const std::size_t end = rest.find('\n');
    if (end == std::string_view::npos) {
      log.torn = log.torn || !rest.empty();
      return false;
    }
    line = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    return true;
  };
  std::string_view line;
  if (!next_line(line)) return log;  // killed before its header was whole
  if (!line.starts_with(log_header)) throw std::runtime_error(fmt::format("{}: not a chaos log: {:?}", file, line));
  log.rank = detail::header_field(line, "rank", file);
  log.world_size = detail::header_field(line, "world_size", file);
  log.pid = detail::header_field(line, "pid", file);
  while (next_line(line)) {
    LoggedBatch& batch = log.batches.emplace_back();
    std::size_t field = 0;
    while (!line.empty()) {
      const std::size_t end = std::min(line.find(' '), line.size());
      const std::string_view word = line.substr(0, end);
      line.remove_prefix(std::min(end + 1, line.size()));
      const std::string what = fmt::format("{}: line {}", file, log.batches.size() + 1);
      if (field == 0) batch.at.epoch = examples::parse_integer<std::uint64_t>(what, word);
      else if (field == 1) batch.at.index = examples::parse_integer<std::int64_t>(what, word);
      else batch.observations.push_back(examples::parse_integer<std::int64_t>(what, word));
      ++field;
    }
    if (field < 3) throw std::runtime_error(fmt::format("{}: line {} holds no batch", file, log.batches.size() + 1));
  }
  return log;
}

}  // namespace chaos
