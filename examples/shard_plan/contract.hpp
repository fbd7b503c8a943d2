// SPDX-License-Identifier: MIT
// The plan as the semantics contract states it, derived here independently of the library so
// that the check compares two computations rather than reading the library's answer back. Shares
// are cut by observation count along the union of the mask's ranges: the arithmetic is in
// positions of the union, and Mask turns positions into rows.

#pragma once

#include "mask.hpp"
#include "options.hpp"

#include <chunksampler.hpp>

#include <cstdint>
#include <vector>

namespace shard_plan {

// One epoch of the whole job.
struct JobEpoch {
  std::uint64_t epoch = 0;
  cs::Slice window;                 // positions of the union: contiguous, the shards'; global, the shared plan's
  std::int64_t per_rank = 0;        // contiguous drop and rotate: every shard's size
  std::int64_t budget = 0;          // positions of each rank's plan (contiguous) or of the shared plan (global)
  std::int64_t used = 0;            // of them, those in batches (drop_last may drop a short last batch)
  std::int64_t plan_batches = 0;    // global: batches of the shared plan
  std::vector<cs::Slice> left_out;  // rows of the union outside the window: left out by the policy
  // Over all ranks:
  std::int64_t reads = 0;     // positions yielded
  std::int64_t distinct = 0;  // distinct observations read
  std::int64_t repeated = 0;  // reads of an observation already read (padding)
  std::int64_t trimmed = 0;   // observations of the window no batch reads (drop_last)
};

// One rank in one epoch.
struct RankShare {
  std::vector<cs::Slice> shard;  // rows; contiguous: its shard; global: the window it shares with every rank
  cs::BatchRun block;            // global: its batches of the shared plan; contiguous: all of its own plan's
  std::int64_t n_batches = 0;
  std::int64_t reads = 0;
  std::int64_t last_batch = 0;
  std::int64_t repeated = 0;  // contiguous only: in global mode the plan's repeats are the job's
  std::int64_t left_out = 0;  // contiguous only: rows of its shard no batch reads
};

class Contract {
 public:
  explicit Contract(const Options& o);

  [[nodiscard]] const Mask& mask() const noexcept { return mask_; }
  [[nodiscard]] JobEpoch epoch(std::uint64_t e) const;
  [[nodiscard]] RankShare rank(const JobEpoch& job, std::int64_t r) const;

 private:
  void share_global(JobEpoch& job, bool odd) const;
  void share_contiguous(JobEpoch& job, bool odd) const;
  [[nodiscard]] RankShare contiguous_rank(const JobEpoch& job, std::int64_t r) const;

  const Options& o_;
  Mask mask_;
  std::int64_t size_;
  std::int64_t world_;
};

}  // namespace shard_plan
