// SPDX-License-Identifier: MIT

#include "report.hpp"

#include "text.hpp"

#include "common/arith.hpp"
#include "common/parse.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace shard_plan {

namespace {

// Global mode: one plan per epoch, over what, and how its batches are dealt.
void print_global_plan(const Job& job) {
  const Options& o = job.o;
  const JobEpoch& even = job.even;
  const std::int64_t size = job.mask.count();
  std::string over;
  if (!o.enforce) over = fmt::format("all {} (enforce_equal_batches off: nothing left out or padded)", size);
  else if (o.pad())
    over = fmt::format("all {}, padded to {} = a multiple of {} ranks x batch {}", size, even.budget, job.world, job.b);
  else if (job.policy_left == 0)
    over = fmt::format("all {} = a multiple of {} ranks x batch {}", size, job.world, job.b);
  else
    over = fmt::format("{} of {} = a multiple of {} ranks x batch {}; {} left out{}", even.window.size(), size,
                       job.world, job.b, job.policy_left,
                       o.rotate() ? ", the tail in even epochs and the head in odd ones" : ", the same every epoch");
  fmt::print("  plan      one {} plan per epoch, shared by all ranks, over {}\n",
             job.library.shuffled() ? "shuffled" : "sequential", over);
  fmt::print("            {} dealt in contiguous blocks{}{}\n", batches(even.plan_batches),
             o.enforce ? fmt::format(" of {} per rank", job.contract.rank(even, 0).n_batches)
                       : std::string(" differing by at most one"),
             even.repeated > 0 ? fmt::format("; {} positions repeat rows of the plan's last request", even.repeated)
                               : std::string{});
}

// Contiguous mode: the shards' size per rank.
void print_contiguous_share(const Job& job) {
  const Options& o = job.o;
  const JobEpoch& even = job.even;
  const std::int64_t size = job.mask.count();
  const std::int64_t world = job.world;
  if (o.pad()) {
    const std::int64_t small = size / world;
    fmt::print("  per rank  {} / {} = {}{}: shards of {}{} observations; every rank's epoch holds {} positions{} "
               "({}), the missing ones repeating rows of its last request\n",
               size, world, small, size % world != 0 ? fmt::format(" rem {}", size % world) : "",
               size % world != 0 ? fmt::format("{} or ", small + 1) : std::string{}, small, even.budget,
               even.used != even.budget ? fmt::format(", {} after drop_last", even.used) : std::string{},
               batches(examples::ceil_div(even.used, job.b)));
    return;
  }
  fmt::print("  per rank  {} / {} = {}{} observations (enforce_equal_batches {})\n", size, world, size / world,
             o.enforce ? fmt::format(", rounded down to a multiple of {} = {}", job.b, even.per_rank) : std::string{},
             o.enforce ? "on" : "off");
  if (o.rotate() && job.odd.window != even.window)
    fmt::print("  rotate    odd epochs shift every shard by {}: the left-out tail becomes the head\n",
               job.odd.window.start - even.window.start);
}

// The configuration and how the policy shares it out.
void print_configuration(const Job& job) {
  const Options& o = job.o;
  fmt::print("{} over {} ranks, {} mode, remainder {}, {}\n", job.library.sampler_name(), job.world,
             examples::mode_name(o.mode), examples::remainder_name(o.remainder), counted(o.epochs, "epoch", "epochs"));
  fmt::print("  sampler   chunk_size {}, preload_nchunks {} ({} rows per request), batch_size {}, drop_last {}, "
             "seed {}\n",
             o.chunk_size, o.preload, o.chunk_size * o.preload, job.b, o.drop_last ? "on" : "off", o.seed);
  if (o.split) {
    const cs::SplitReport& split = *o.split;
    fmt::print("  split     {} selects {} by {}\n", *o.codes, keys_text(o.select), fmt::join(o.split_columns, ", "));
    fmt::print("            {}, {}; {} (shorter than chunk_size {}) hold {}: short_share {:.4g}{}\n",
               counted(split.runs, "run", "runs"), counted(split.rows, "row", "rows"),
               counted(split.short_runs, "short run", "short runs"), o.chunk_size,
               counted(split.short_rows, "row", "rows"), split.short_share,
               o.max_short_share ? fmt::format(" <= max_short_share {}", *o.max_short_share) : std::string{});
  }
  const std::span<const cs::Slice> ranges = job.mask.ranges();
  if (ranges.size() == 1)
    fmt::print("  range     {} = {}\n", slice_text(ranges[0]),
               o.mask ? fmt::format("{} of the {} observations (the mask)", job.mask.count(), o.n_obs)
                      : fmt::format("all {} observations (no mask)", o.n_obs));
  else
    fmt::print("  ranges    {} = {} of the {} observations (the mask){}\n", ranges_text(ranges, 4), job.mask.count(),
               o.n_obs, o.global() ? "" : "; shards are cut by count along their union");
  if (o.global()) print_global_plan(job);
  else print_contiguous_share(job);
  fmt::print("\n");
}

// Global mode: each rank's block of the shared plan. Returns whether a listed rank shows the
// contract's numbers (its epoch was not walked whole).
bool print_global_table(const Job& job, const Walked& walked, std::uint64_t e) {
  const JobEpoch& epoch = job.of(e);
  bool shows_contract = false;
  std::vector<std::array<std::string, 6>> rows;
  rows.push_back({"rank", "plan batches", "batches", "last batch", "read", "chunks"});
  std::int64_t sum_batches = 0;
  std::int64_t sum_reads = 0;
  // -1 once a rank's count is unknown. Not std::optional: GCC 12 at -O2 takes a copy of one for
  // uninitialized (-Wmaybe-uninitialized), which stopped the Release build.
  std::int64_t sum_chunks = 0;
  for (std::int64_t r = 0; r < job.world; ++r) {
    const RankShare want = job.contract.rank(epoch, r);
    const RankWalk* w = walked.measured(e, r);
    const bool listed = listed_rank(r, job.world, max_listed_ranks, listed_at_each_end);
    shows_contract = shows_contract || (w == nullptr && listed);
    const std::int64_t n = w ? w->batches : want.n_batches;
    const std::int64_t read = w ? w->reads : want.reads;
    // Which grid chunks a rank reads depends on the shuffled order: known only once walked.
    const std::int64_t chunks = w ? w->chunks : -1;
    sum_batches += n;
    sum_reads += read;
    sum_chunks = chunks >= 0 && sum_chunks >= 0 ? sum_chunks + chunks : -1;
    if (listed)
      rows.push_back({fmt::format("{}", r), run_text(want.block), fmt::format("{}", n),
                      n == 0 ? "-" : fmt::format("{}", w ? w->last_batch : want.last_batch), fmt::format("{}", read),
                      chunks >= 0 ? fmt::format("{}", chunks) : "-"});
    else if (r == listed_at_each_end)
      rows.push_back({"...", fmt::format("({} more ranks)", job.world - 2 * listed_at_each_end), "", "", "", ""});
  }
  rows.push_back({"total", "", fmt::format("{}", sum_batches), "", fmt::format("{}", sum_reads),
                  sum_chunks >= 0 ? fmt::format("{}", sum_chunks) : "-"});
  print_table(rows);
  return shows_contract;
}

// One contiguous rank's row: its shard, batches, reads, and what it leaves out or repeats.
struct ShardRow {
  std::vector<cs::Slice> shard;
  std::int64_t observations = 0;
  std::int64_t batches = 0;
  std::int64_t last_batch = 0;
  std::int64_t read = 0;
  std::int64_t left = 0;
  std::int64_t repeated = 0;
};

ShardRow shard_row(const Job& job, const Walked& walked, std::uint64_t e, std::int64_t r, bool listed) {
  const RankShare want = job.contract.rank(job.of(e), r);
  const RankWalk* w = walked.measured(e, r);
  ShardRow row;
  if (listed) {
    const cs::Ranges shard = job.library.shard(r, e);
    row.shard.assign(shard.begin(), shard.end());
  } else {
    row.shard = want.shard;
  }
  row.observations = rows_in(row.shard);
  row.batches = w ? w->batches : want.n_batches;
  row.last_batch = w ? w->last_batch : want.last_batch;
  row.read = w ? w->reads : want.reads;
  row.repeated = w ? w->repeated : want.repeated;
  row.left = row.observations - (row.read - row.repeated);
  return row;
}

// Contiguous mode: each rank's shard, and what the epoch leaves out. Returns whether a listed
// rank shows the contract's numbers.
bool print_contiguous_table(const Job& job, const Walked& walked, std::uint64_t e) {
  const JobEpoch& epoch = job.of(e);
  bool shows_contract = false;
  std::vector<std::array<std::string, 8>> rows;
  rows.push_back({"rank", "shard", "observations", "batches", "last batch", "read", "left out", "repeated"});
  std::int64_t sum_obs = 0;
  std::int64_t sum_batches = 0;
  std::int64_t sum_reads = 0;
  std::int64_t sum_left = 0;
  std::int64_t sum_repeated = 0;
  for (std::int64_t r = 0; r < job.world; ++r) {
    const bool listed = listed_rank(r, job.world, max_listed_ranks, listed_at_each_end);
    shows_contract = shows_contract || (walked.measured(e, r) == nullptr && listed);
    const ShardRow row = shard_row(job, walked, e, r, listed);
    sum_obs += row.observations;
    sum_batches += row.batches;
    sum_reads += row.read;
    sum_left += row.left;
    sum_repeated += row.repeated;
    if (listed)
      rows.push_back({fmt::format("{}", r), ranges_text(row.shard), fmt::format("{}", row.observations),
                      fmt::format("{}", row.batches), row.batches == 0 ? "-" : fmt::format("{}", row.last_batch),
                      fmt::format("{}", row.read), fmt::format("{}", row.left), fmt::format("{}", row.repeated)});
    else if (r == listed_at_each_end)
      rows.push_back(
          {"...", fmt::format("({} more ranks)", job.world - 2 * listed_at_each_end), "", "", "", "", "", ""});
  }
  rows.push_back({"total", "", fmt::format("{}", sum_obs), fmt::format("{}", sum_batches), "",
                  fmt::format("{}", sum_reads), fmt::format("{}", sum_left), fmt::format("{}", sum_repeated)});
  print_table(rows);
  if (epoch.left_out.empty())
    fmt::print("left out  nothing: the shards cover the {}\n",
               job.mask.ranges().size() == 1 ? "range" : "mask's ranges");
  else
    fmt::print("left out  {} in no rank's shard: {}\n", observations(job.mask.count() - epoch.window.size()),
               slices_summary(epoch.left_out));
  return shows_contract;
}

// The tables: the contiguous shards (per parity when they rotate), or the global blocks.
void print_tables(const Job& job, const Walked& walked) {
  const Options& o = job.o;
  std::vector<std::uint64_t> table_epochs{0};
  if (!o.global() && o.rotate() && job.epochs >= 2 && job.odd.window != job.even.window) table_epochs.push_back(1);
  bool shows_contract = false;
  for (const std::uint64_t e : table_epochs) {
    if (table_epochs.size() > 1) fmt::print("{} epochs ({})\n", e == 0 ? "even" : "odd", parity_list(e, job.epochs));
    if (o.global()) {
      shows_contract = print_global_table(job, walked, e) || shows_contract;
      continue;
    }
    shows_contract = print_contiguous_table(job, walked, e) || shows_contract;
    if (e + 1 < table_epochs.size()) fmt::print("\n");
  }
  if (shows_contract)
    fmt::print("          (epochs too large to walk whole: the table shows the contract's numbers)\n");
  if (o.mask)
    fmt::print("outside   {} of n_obs outside the mask, never sampled\n", observations(o.n_obs - job.mask.count()));
  if (!o.global() && job.even.trimmed + job.odd.trimmed > 0)
    fmt::print("drop_last leaves out the rows of each rank's short last batch, chosen anew every epoch\n");
}

// Each listed epoch: the chunks each rank read, as the walk saw its requests (grid chunks, the
// pieces the requests list them in, those off the storage grid); in global mode also what the
// epoch leaves out and the chunks in reading order.
void print_epoch_lines(const Job& job, const Walked& walked) {
  fmt::print("\n");
  for (std::uint64_t e = 0; e < std::min<std::uint64_t>(job.epochs, max_listed_epochs); ++e) {
    const JobEpoch& epoch = job.of(e);
    if (job.o.global()) {
      std::string left = epoch.left_out.empty()
                             ? std::string("nothing")
                             : fmt::format("{}: {}", observations(job.policy_left), slices_summary(epoch.left_out));
      if (epoch.trimmed > 0) left += fmt::format(", and {} of the window (drop_last)", epoch.trimmed);
      fmt::print("epoch {}   left out {}{}\n", e, left,
                 epoch.repeated > 0 ? fmt::format("; {} positions repeat a row", epoch.repeated) : std::string{});
    } else {
      fmt::print("epoch {}\n", e);
    }
    for (std::int64_t r = 0; r < job.world; ++r) {
      if (!listed_rank(r, job.world, max_epoch_lines_ranks, max_epoch_lines_ranks / 2)) {
        if (r == max_epoch_lines_ranks / 2) fmt::print("  ...\n");
        continue;
      }
      const RankWalk* w = walked.find(e, r);
      if (w == nullptr) continue;
      fmt::print("  rank {:<{}}  {} {}{} from {} ({}, {} off the grid){}\n", r,
                 fmt::formatted_size("{}", job.world - 1), w->whole ? "reads" : "begins with", observations(w->reads),
                 w->repeated > 0 ? fmt::format(" ({} repeated)", w->repeated) : std::string{},
                 counted(w->chunks, "chunk", "chunks"), counted(w->pieces, "piece", "pieces"), w->off_grid,
                 job.o.global() ? ": " + slices_text(w->order, w->order_runs) : std::string{});
    }
  }
}

// How much was walked.
void print_walk_extent(const Job& job, const WalkExtent& x, const Walked& walked) {
  fmt::print("\n");
  if (!x.walkable)
    fmt::print("check     requests of {} rows are too large to walk (limit {}): checked the shard arithmetic only\n",
               x.request_rows, max_walked_request);
  else if (x.prefix)
    fmt::print("check     epochs too large to walk quickly ({} observations per rank): checked the shard arithmetic "
               "of every rank and walked only the first {} of {}{} ({}, {}, {} in all)\n",
               x.max_reads, observations(*x.prefix),
               x.walked_epochs == job.epochs ? std::string("each epoch")
                                             : fmt::format("epochs 0-{}", x.walked_epochs - 1),
               std::ssize(x.walked_ranks) == job.world ? std::string(" on every rank")
                                                       : fmt::format(" on {} of the ranks", x.walked_ranks.size()),
               counted(walked.total_requests, "request", "requests"), batches(walked.total_batches),
               observations(walked.total_reads));
  else
    fmt::print("check     walked every rank's whole epoch{}: {}, {}, {}\n",
               job.epochs > 1 ? fmt::format(", {} epochs", job.epochs) : std::string{},
               counted(walked.total_requests, "request", "requests"), batches(walked.total_batches),
               observations(walked.total_reads));
  if (x.walkable && walked.total_batches > 0) {
    // What a loader tunes with preload_nchunks: the mix of chunks in a batch against the buffer's memory.
    const std::int64_t buffer_bytes = x.request_rows * job.o.row_bytes;  // at most 2^24 * 2^36
    fmt::print("batches   each draws its rows from {:.1f} chunks of its request on average (min {}; a request "
               "lists up to {}); a request's buffer holds {} rows: {} at {} bytes a row (--row-bytes)\n",
               static_cast<double>(walked.total_batch_chunks) / static_cast<double>(walked.total_batches),
               walked.min_batch_chunks, walked.max_request_chunks, x.request_rows, byte_size(buffer_bytes),
               job.o.row_bytes);
  }
  if (x.walkable)
    fmt::print("grid      {} read in {}, {} off the storage grid of chunk_size {}\n",
               counted(walked.total_chunks, "chunk", "chunks"), counted(walked.total_pieces, "piece", "pieces"),
               walked.total_off_grid, job.o.chunk_size);
}

// The clause of the PASS line that states the policy's promise, if it has one to state.
std::optional<std::string> promise_clause(const Job& job, const WalkExtent& x) {
  const std::uint64_t epochs = job.epochs;
  const std::int64_t left = job.policy_left;
  const std::string trimmed_note =
      job.even.trimmed > 0 ? fmt::format(" (drop_last leaves out {} more per epoch)", job.even.trimmed) : std::string{};
  switch (job.o.remainder) {
    case cs::Remainder::drop:
      if (left == 0) return std::nullopt;
      return x.promise_walked && epochs >= 2
                 ? fmt::format("drop: the same {} left out in all {} epochs", observations(left), epochs)
                 : fmt::format("drop: the shards leave out the same {} every epoch{}", observations(left),
                               trimmed_note);
    case cs::Remainder::rotate:
      if (left == 0) return std::nullopt;
      if (x.promise_walked && epochs >= 2)
        return fmt::format("rotate: every observation read in any two consecutive epochs (of {})", epochs);
      if (epochs >= 2)
        return fmt::format("rotate: the shards of any two consecutive epochs cover the range{}", trimmed_note);
      return "rotate: --epochs 2 checks that every observation is read in two consecutive epochs";
    case cs::Remainder::pad:
      return x.promise_walked
                 ? fmt::format("pad: nothing left out, {} positions per epoch repeat a row of {}", job.even.repeated,
                               job.o.global() ? "the plan's last request" : "the rank's last request")
                 : fmt::format("pad: the shards cover the range{}", trimmed_note);
  }
  return std::nullopt;
}

}  // namespace

void print_report(const Job& job, const WalkExtent& extent, const Walked& walked) {
  print_configuration(job);
  print_tables(job, walked);
  if (extent.walkable || job.o.global()) print_epoch_lines(job, walked);
  print_walk_extent(job, extent, walked);
}

int print_verdict(const Job& job, const WalkExtent& extent, const Walked& walked, const examples::Failures& checks) {
  const Options& o = job.o;
  if (!checks.passed()) {
    const auto shown = static_cast<std::int64_t>(checks.shown().size());
    fmt::print("FAIL      {} invariant violations{}\n", checks.failures(),
               checks.failures() > shown ? fmt::format(", the first {}:", shown) : std::string(":"));
    for (const std::string& failure : checks.shown()) fmt::print("          {}\n", failure);
    return 1;
  }
  // What was shown to hold, one clause per check.
  std::vector<std::string> held;
  held.push_back(o.global() ? "windows and batch blocks as the contract computes them"
                            : fmt::format("shards disjoint, inside the {}, as the contract computes them",
                                          job.mask.ranges().size() == 1 ? "range" : "mask's ranges"));
  if (extent.walkable) {
    held.push_back(fmt::format("every {} observation inside its {}{}", extent.prefix ? "walked" : "yielded",
                               o.global() ? "epoch's window" : "rank's shard", o.pad() ? "" : ", read once per epoch"));
    held.push_back(fmt::format("all {} on the storage grid{}", counted(walked.total_chunks, "chunk", "chunks"),
                               job.mask.ranges().size() == 1 ? "" : ", none across two ranges"));
  }
  held.push_back(o.enforce
                     ? fmt::format("{} on every rank = n_batches", batches(job.contract.rank(job.even, 0).n_batches))
                     : std::string("every rank's batches = n_batches"));
  if (const std::optional<std::string> promise = promise_clause(job, extent)) held.push_back(*promise);
  fmt::print("PASS      {}\n", fmt::join(held, "; "));
  return 0;
}

}  // namespace shard_plan
