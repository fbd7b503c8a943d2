// SPDX-License-Identifier: MIT
// What the planner knows of the job as it goes: the plan (options, samplers, contract), how much
// of it is walked, and what the walk measured. The report and the picture read them.

#pragma once

#include "bits.hpp"
#include "contract.hpp"
#include "library.hpp"
#include "options.hpp"
#include "walk.hpp"

#include <chunksampler.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace shard_plan {

// Long tables hide their middle ranks, whose numbers equal their neighbours'.
inline constexpr std::int64_t max_listed_ranks = 64;
inline constexpr std::int64_t listed_at_each_end = 8;
// The epochs listed one by one (global mode) and the ranks listed in each.
inline constexpr std::int64_t max_listed_epochs = 4;
inline constexpr std::int64_t max_epoch_lines_ranks = 8;

// The job: its options and samplers, and the contract's shares in even and odd epochs (shards
// depend only on the epoch's parity).
struct Job {
  Job(const Options& options, const Library& samplers)
      : o(options),
        library(samplers),
        contract(options),
        mask(contract.mask()),
        world(options.world_size),
        b(options.batch_size),
        epochs(static_cast<std::uint64_t>(options.epochs)),
        even(contract.epoch(0)),
        odd(contract.epoch(1)),
        policy_left(mask.count() - even.window.size()) {}

  const Options& o;
  const Library& library;
  Contract contract;
  const Mask& mask;  // the sampled rows (the contract's)
  std::int64_t world;
  std::int64_t b;
  std::uint64_t epochs;
  JobEpoch even;
  JobEpoch odd;
  std::int64_t policy_left;  // the policy leaves out, per epoch

  [[nodiscard]] const JobEpoch& of(std::uint64_t e) const noexcept { return e % 2 == 0 ? even : odd; }
};

// How much is walked: whole epochs when that is quick, else a prefix of the first few.
struct WalkExtent {
  std::int64_t max_reads = 0;          // the most a rank reads in an epoch
  std::int64_t request_rows = 0;       // rows of a full request
  bool walkable = false;               // requests small enough to materialize
  bool whole = false;                  // every rank's whole epochs
  std::optional<std::int64_t> prefix;  // else observations walked per rank and epoch
  std::uint64_t walked_epochs = 0;
  std::vector<std::int64_t> walked_ranks;
  bool promise_walked = false;  // the policy's promise is checked on the observations read
};

// What the walk measured.
struct Walked {
  std::map<std::pair<std::uint64_t, std::int64_t>, RankWalk> kept;  // what the tables and epoch lines show
  std::vector<Gaps> left_seen;                                      // per walked epoch, whole walks only
  std::int64_t total_requests = 0;
  std::int64_t total_batches = 0;
  std::int64_t total_reads = 0;
  std::int64_t total_chunks = 0;        // grid chunks read, over every walked rank and epoch
  std::int64_t total_pieces = 0;        // the pieces their requests list them in
  std::int64_t total_off_grid = 0;      // chunks off the storage grid (the contract: none)
  std::int64_t total_batch_chunks = 0;  // the chunks of its request each batch draws rows from, summed
  std::int64_t min_batch_chunks = -1;   // the fewest one batch drew from (-1 before the first batch)
  std::int64_t max_request_chunks = 0;  // the most chunks (pieces) one request listed

  // The kept walk of rank r in epoch e, if any.
  [[nodiscard]] const RankWalk* find(std::uint64_t e, std::int64_t r) const {
    const auto it = kept.find({e, r});
    return it != kept.end() ? &it->second : nullptr;
  }
  // The same, when it walked the whole epoch.
  [[nodiscard]] const RankWalk* measured(std::uint64_t e, std::int64_t r) const {
    const RankWalk* w = find(e, r);
    return w != nullptr && w->whole ? w : nullptr;
  }
};

}  // namespace shard_plan
