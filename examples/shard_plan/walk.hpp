// SPDX-License-Identifier: MIT
// Walking a rank's epoch through the library's sampler, as a loader would, and checking every
// chunk, batch and position it yields.

#pragma once

#include "bits.hpp"
#include "mask.hpp"
#include "options.hpp"
#include "picture.hpp"

#include "common/failures.hpp"

#include <chunksampler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace shard_plan {

// Whole epochs are walked while that stays a matter of seconds (in row-equivalents: a row costs 1,
// a chunk 8 and a request 32); beyond, each rank walks a prefix of its first few epochs.
inline constexpr double walk_budget = 100'000'000;
inline constexpr std::int64_t prefix_total = 1'000'000;  // observations per epoch over all ranks
inline constexpr std::int64_t prefix_per_rank = 1'000'000;
inline constexpr std::int64_t prefix_epochs = 4;
// A whole walk tracks the union's observations bit by bit, in a few bitmaps of this many bits.
inline constexpr std::int64_t max_bitmap = std::int64_t{1} << 28;
// A request's positions are one allocation in the sampler's range: refuse to materialize huge ones.
inline constexpr std::int64_t max_walked_request = std::int64_t{1} << 24;

// The observations one epoch has read, over all ranks, by their positions in the union of the
// mask's ranges: a bitmap when the epoch is walked whole, a list sorted at the end when only
// prefixes are.
class EpochReads {
 public:
  void reset(std::int64_t positions, bool bitmap) {
    bitmap_ = bitmap;
    if (bitmap) read_.assign(positions);
    list_.clear();
  }
  [[nodiscard]] bool bitmap() const noexcept { return bitmap_; }
  // Records one read of the union's position `k`; returns false when it repeats one of this epoch
  // (known at once with the bitmap; with the list, `list_repeats` counts them at the end).
  bool mark(std::int64_t k) {
    if (!bitmap_) {
      list_.push_back(k);
      return true;
    }
    return !read_.set(k);
  }
  [[nodiscard]] std::int64_t list_repeats() {
    std::sort(list_.begin(), list_.end());
    return static_cast<std::int64_t>(list_.end() - std::unique(list_.begin(), list_.end()));
  }
  [[nodiscard]] const Bits& read() const noexcept { return read_; }

 private:
  bool bitmap_ = true;
  Bits read_;
  std::vector<std::int64_t> list_;
};

// What walking one rank's epoch (or a prefix of it) measured.
struct RankWalk {
  std::int64_t requests = 0;  // LoadRequests yielded
  std::int64_t batches = 0;
  std::int64_t reads = 0;
  std::int64_t last_batch = 0;
  std::int64_t repeated = 0;
  std::int64_t chunks = 0;              // grid chunks read (one read in two pieces counts once)
  std::int64_t pieces = 0;              // the pieces the requests list them in
  std::int64_t off_grid = 0;            // chunks off the storage grid (the contract: none), see record_chunks
  std::int64_t misplaced_repeats = 0;   // repeats outside the rank's final request
  std::int64_t batch_chunks = 0;        // the chunks of its request each batch draws rows from, summed
  std::int64_t min_batch_chunks = 0;    // the fewest one batch drew from (0 before the first batch)
  std::int64_t max_request_chunks = 0;  // the most chunks (pieces) one request listed
  bool whole = true;
  std::vector<cs::Slice> final_chunks;  // the chunks of its final request
  std::vector<cs::Slice> order;         // its chunks in reading order, merged where adjacent (the first few)
  std::int64_t order_runs = 0;          // merged runs in all
};

// A walk and what the rank's sampler said around it.
struct WalkedRank {
  RankWalk walk;
  std::int64_t n_batches = 0;     // n_batches() before the walk
  std::uint64_t epoch_after = 0;  // epoch() after it
};

struct WalkSetup {
  const Options& o;
  const Mask& mask;
  std::uint64_t epoch;
  std::optional<std::int64_t> prefix;  // observations to walk, else the whole epoch
  // Global mode, a block that starts after the plan's first batch: its first request may begin
  // with the second piece of a chunk the plan's previous request began.
  bool mid_plan = false;
};

// Where a walk records what it sees.
struct WalkSinks {
  EpochReads& reads;  // every rank's reads of the epoch
  Row* row;           // the picture's row of this (epoch, rank), when it is drawn
  const Bins& bins;
  examples::Failures& checks;
};

// Checks one rank's requests, one after another, against its shard (or the shared window): the
// rows `bounds`, sorted disjoint ranges inside the mask's.
class RankWalker {
 public:
  RankWalker(const WalkSetup& setup, std::int64_t rank, std::span<const cs::Slice> bounds, const WalkSinks& sinks);
  // Takes the next request; returns false when the walked prefix is complete.
  bool take(const cs::LoadRequest& request);
  [[nodiscard]] RankWalk result() && { return std::move(w_); }

 private:
  void check_rows(const cs::LoadRequest& request);
  void record_chunks(const cs::LoadRequest& request);
  void check_chunks(const cs::LoadRequest& request);
  void read_batch(const cs::LoadRequest& request, std::span<const std::int64_t> batch);

  const Options& o_;
  const WalkSetup& setup_;
  std::int64_t rank_;
  std::span<const cs::Slice> bounds_;
  const WalkSinks& sinks_;
  RankWalk w_;
  std::vector<std::int64_t> offsets_;
  std::vector<std::int64_t> positions_;  // where each chunk of the request starts in the union; -1 if outside bounds
  std::vector<std::int64_t> drawn_;      // per chunk of the request, the last batch that drew a row from it
  std::optional<cs::Slice> previous_first_;
  std::optional<std::int64_t> short_request_;  // the rows of the last request, when fewer than a full one
  std::int64_t repeats_in_request_ = 0;
  std::int64_t last_stop_ = 0;
  std::int64_t chunk_start_ = 0;  // where the chunk the last piece belongs to starts
  bool chunk_off_grid_ = false;   // whether that chunk is counted off the grid
  bool after_short_batch_ = false;
};

// Walks one rank's epoch and checks every chunk, batch and position against its shard (or the
// shared window); records reads in `sinks.reads` and, when drawn, in `sinks.row`.
template <class Dist>
RankWalk walk_rank(Dist& dist, const WalkSetup& setup, std::span<const cs::Slice> bounds, const WalkSinks& sinks) {
  RankWalker walker(setup, dist.rank(), bounds, sinks);
  for (const cs::LoadRequest& request : dist.sample(setup.o.n_obs))
    if (!walker.take(request)) break;
  return std::move(walker).result();
}

}  // namespace shard_plan
