// SPDX-License-Identifier: MIT

#include "planner.hpp"

#include "drawing.hpp"
#include "job.hpp"
#include "report.hpp"
#include "text.hpp"

#include "common/failures.hpp"
#include "common/parse.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <ranges>
#include <span>
#include <utility>
#include <vector>

namespace shard_plan {

namespace {

// Every rank is planned and checked; a bound keeps that from running for minutes.
constexpr std::int64_t max_world_size = std::int64_t{1} << 20;
constexpr std::int64_t max_shown_failures = 20;

// What walking costs: each rank's reads and, at most, the two requests it shares with neighbours,
// with their chunks and requests, plus setting the rank's sampler up.
double walk_cost(const Options& o, std::int64_t request_rows, std::int64_t per_rank, std::uint64_t n_epochs,
                 std::int64_t ranks) {
  const double rows = static_cast<double>(per_rank) + 2.0 * static_cast<double>(request_rows);
  const double chunks = rows / static_cast<double>(o.chunk_size) + 2.0 * static_cast<double>(o.preload);
  const double requests = rows / static_cast<double>(o.chunk_size * o.preload) + 2.0;
  return static_cast<double>(n_epochs) * static_cast<double>(ranks) * (rows + 8 * chunks + 32 * requests + 1000);
}

WalkExtent walk_extent(const Job& job) {
  const Options& o = job.o;
  WalkExtent x;
  for (const JobEpoch* epoch : {&job.even, &job.odd})
    for (const std::int64_t r : {std::int64_t{0}, job.world - 1})
      x.max_reads = std::max(x.max_reads, job.contract.rank(*epoch, r).reads);
  x.request_rows = std::min(o.chunk_size * o.preload, job.even.window.size());
  x.walkable = x.request_rows <= max_walked_request;
  x.whole = x.walkable && job.mask.count() <= max_bitmap &&
            walk_cost(o, x.request_rows, x.max_reads, job.epochs, job.world) <= walk_budget;
  x.walked_epochs = job.epochs;
  if (x.whole) {
    for (std::int64_t r = 0; r < job.world; ++r) x.walked_ranks.push_back(r);
  } else if (x.walkable) {
    x.walked_epochs = std::min<std::uint64_t>(job.epochs, prefix_epochs);
    x.prefix = std::clamp<std::int64_t>(prefix_total / job.world, 1, prefix_per_rank);
    const bool all = walk_cost(o, x.request_rows, *x.prefix, x.walked_epochs, job.world) <= walk_budget;
    for (std::int64_t r = 0; r < job.world; ++r)
      if (all || listed_rank(r, job.world, 2 * listed_at_each_end, listed_at_each_end)) x.walked_ranks.push_back(r);
  } else {
    x.walked_epochs = 0;
  }
  x.promise_walked = x.whole && job.even.trimmed == 0 && job.odd.trimmed == 0;
  return x;
}

// ---------------------------------------------------------------------------------------------
// The library's shards and batch counts against the contract.

// Rank r's shard and batches in epoch e; returns its shard's ranges.
std::vector<cs::Slice> check_share(const Job& job, std::uint64_t e, std::int64_t r,
                                   std::optional<std::int64_t>& first_batches, examples::Failures& checks) {
  const Options& o = job.o;
  const RankShare want = job.contract.rank(job.of(e), r);
  const auto [ranges, n_batches] = job.library.share(r, e);
  const std::span<const cs::Slice> shard = ranges.slices();
  if (!std::ranges::equal(shard, want.shard)) {
    const auto mismatch = std::ranges::mismatch(shard, want.shard);
    checks.fail("epoch {} rank {}: the library's {} {} differs from the contract's {} (first at range {})", e, r,
                o.global() ? "window" : "shard", slices_summary(shard), slices_summary(want.shard),
                mismatch.in1 - shard.begin());
  }
  for (const cs::Slice& piece : shard)
    if (piece.empty() || !job.mask.holds(piece))
      checks.fail("epoch {} rank {}: the range {} of its {} is empty or not inside one range of the mask", e, r,
                  slice_text(piece), o.global() ? "window" : "shard");
  if (n_batches != want.n_batches)
    checks.fail("epoch {} rank {}: n_batches {} differs from the contract's {}", e, r, n_batches, want.n_batches);
  if (!first_batches) first_batches = n_batches;
  if (o.enforce && n_batches != *first_batches)
    checks.fail("epoch {} rank {}: n_batches {} differs from rank 0's {} (enforce_equal_batches)", e, r, n_batches,
                *first_batches);
  if (!o.enforce && std::abs(n_batches - *first_batches) > 1)
    checks.fail("epoch {} rank {}: n_batches {} differs from rank 0's {} by more than one", e, r, n_batches,
                *first_batches);
  return {shard.begin(), shard.end()};
}

// Every rank of every checked epoch (shards depend only on the epoch's parity, so two epochs
// cover them all); returns each epoch's shards' ranges (global mode: its window's).
std::vector<std::vector<cs::Slice>> check_shards(const Job& job, const WalkExtent& x, examples::Failures& checks) {
  const std::uint64_t checked_epochs = std::max<std::uint64_t>(x.walked_epochs, std::min<std::uint64_t>(job.epochs, 2));
  std::vector<std::vector<cs::Slice>> covered(static_cast<std::size_t>(checked_epochs));
  for (std::uint64_t e = 0; e < checked_epochs; ++e) {
    auto& shards = covered[static_cast<std::size_t>(e)];
    std::optional<std::int64_t> first_batches;
    for (std::int64_t r = 0; r < job.world; ++r) {
      const std::vector<cs::Slice> shard = check_share(job, e, r, first_batches, checks);
      if (!job.o.global() || r == 0) shards.insert(shards.end(), shard.begin(), shard.end());
    }
    std::sort(shards.begin(), shards.end(), [](cs::Slice a, cs::Slice b) { return a.start < b.start; });
    for (std::size_t i = 1; i < shards.size(); ++i)
      if (shards[i].start < shards[i - 1].stop)
        checks.fail("epoch {}: shards {} and {} overlap", e, slice_text(shards[i - 1]), slice_text(shards[i]));
  }
  return covered;
}

std::vector<cs::Slice> merged(std::vector<cs::Slice> slices) {
  std::sort(slices.begin(), slices.end(), [](cs::Slice x, cs::Slice y) { return x.start < y.start; });
  std::vector<cs::Slice> out;
  for (const cs::Slice& s : slices)
    if (!out.empty() && s.start <= out.back().stop) out.back().stop = std::max(out.back().stop, s.stop);
    else out.push_back(s);
  return out;
}

// The policy's promise on the shards alone (the walk checks it on the observations).
void check_shard_promise(const Job& job, const std::vector<std::vector<cs::Slice>>& covered,
                         examples::Failures& checks) {
  const Options& o = job.o;
  const std::vector<cs::Slice> whole_range(job.mask.ranges().begin(), job.mask.ranges().end());
  for (std::uint64_t e = 0; e < covered.size(); ++e) {
    const auto& now = covered[static_cast<std::size_t>(e)];
    if (o.remainder == cs::Remainder::drop && merged(now) != merged(covered[0]))
      checks.fail("epoch {}: drop, yet the shards cover {}, not epoch 0's {}", e, slices_summary(merged(now)),
                  slices_summary(merged(covered[0])));
    if (o.pad() && merged(now) != whole_range)
      checks.fail("epoch {}: pad, yet the shards cover {}, not the mask's {}", e, slices_summary(merged(now)),
                  slices_summary(whole_range));
    if (o.rotate() && e >= 1) {
      std::vector<cs::Slice> both = now;
      const auto& before = covered[static_cast<std::size_t>(e - 1)];
      both.insert(both.end(), before.begin(), before.end());
      if (merged(both) != whole_range)
        checks.fail("epochs {}-{}: rotate, yet their shards cover only {} of the mask's {}", e - 1, e,
                    slices_summary(merged(both)), slices_summary(whole_range));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The walk: every walked rank's epoch, one epoch after another, all ranks' reads in one record.

// What one epoch's walk gathers across its ranks.
struct EpochWalk {
  std::optional<std::int64_t> first_batches;
  std::vector<std::pair<std::int64_t, std::vector<cs::Slice>>> repeating;  // ranks with repeats, their last request
  std::vector<cs::Slice> last_rank_final;
  std::int64_t repeats = 0;
};

class EpochWalker {
 public:
  EpochWalker(const Job& job, const WalkExtent& extent, Picture* picture, examples::Failures& checks)
      : job_(job),
        o_(job.o),
        x_(extent),
        picture_(picture),
        checks_(checks),
        no_bins_(Bins::over(job.mask.hull(), 1)) {}

  Walked walk() && {
    for (std::uint64_t e = 0; e < x_.walked_epochs; ++e) walk_epoch(e);
    return std::move(walked_);
  }

 private:
  void walk_epoch(std::uint64_t e);
  void walk_rank_epoch(std::uint64_t e, std::int64_t r, EpochWalk& epoch);
  void check_whole_walk(std::uint64_t e, std::int64_t r, const RankShare& want, const WalkedRank& walked,
                        EpochWalk& epoch);
  void check_whole_epoch(std::uint64_t e, const EpochWalk& epoch);
  void check_promise(std::uint64_t e, const Bits& read, std::int64_t distinct);
  void draw_left_out(std::uint64_t e, const Bits& read);

  const Job& job_;
  const Options& o_;
  const WalkExtent& x_;
  Picture* picture_;
  examples::Failures& checks_;
  const Bins no_bins_;
  Walked walked_;
  EpochReads reads_;
  Bits first_read_;     // epoch 0's reads: with drop, every epoch leaves out the same observations
  Bits previous_read_;  // the last epoch's: with rotate, any two consecutive epochs read everything
};

void EpochWalker::walk_epoch(std::uint64_t e) {
  reads_.reset(job_.mask.count(), x_.whole);
  EpochWalk epoch;
  for (const std::int64_t r : x_.walked_ranks) walk_rank_epoch(e, r, epoch);
  if (x_.whole) {
    check_whole_epoch(e, epoch);
    return;
  }
  const std::int64_t twice = reads_.list_repeats();
  if (!o_.pad() && twice > 0)
    checks_.fail("epoch {}: {} observations of the walked prefixes are read more than once", e, twice);
}

void EpochWalker::walk_rank_epoch(std::uint64_t e, std::int64_t r, EpochWalk& epoch) {
  const RankShare want = job_.contract.rank(job_.of(e), r);
  // Contiguous rows come from the shards when only prefixes are walked; global ones from what is walked.
  Row* row = picture_ != nullptr && (x_.whole || o_.global()) ? picture_->row(e, r) : nullptr;
  const WalkSetup setup{
      .o = o_, .mask = job_.mask, .epoch = e, .prefix = x_.prefix, .mid_plan = o_.global() && want.block.begin > 0};
  const WalkSinks sinks{reads_, row, picture_ != nullptr ? picture_->bins : no_bins_, checks_};
  WalkedRank walked = job_.library.walk(r, setup, want.shard, sinks);
  RankWalk& w = walked.walk;
  if (walked.epoch_after != e + 1)
    checks_.fail("epoch {} rank {}: after sample() the sampler's epoch is {}, not {}", e, r, walked.epoch_after, e + 1);
  walked_.total_requests += w.requests;
  walked_.total_batches += w.batches;
  walked_.total_reads += w.reads;
  walked_.total_chunks += w.chunks;
  walked_.total_pieces += w.pieces;
  walked_.total_off_grid += w.off_grid;
  walked_.total_batch_chunks += w.batch_chunks;
  walked_.max_request_chunks = std::max(walked_.max_request_chunks, w.max_request_chunks);
  if (w.batches > 0)
    walked_.min_batch_chunks =
        walked_.min_batch_chunks < 0 ? w.min_batch_chunks : std::min(walked_.min_batch_chunks, w.min_batch_chunks);
  epoch.repeats += w.repeated;
  if (r == job_.world - 1) epoch.last_rank_final = w.final_chunks;
  if (w.whole) check_whole_walk(e, r, want, walked, epoch);
  w.final_chunks.clear();
  if (e < static_cast<std::uint64_t>(max_listed_epochs) &&
      (listed_rank(r, job_.world, max_listed_ranks, listed_at_each_end) ||
       listed_rank(r, job_.world, max_epoch_lines_ranks, max_epoch_lines_ranks / 2)))
    walked_.kept.emplace(std::pair{e, r}, std::move(w));
}

// A rank's whole epoch against the contract.
void EpochWalker::check_whole_walk(std::uint64_t e, std::int64_t r, const RankShare& want, const WalkedRank& walked,
                                   EpochWalk& epoch) {
  const RankWalk& w = walked.walk;
  if (w.batches != walked.n_batches)
    checks_.fail("epoch {} rank {}: yielded {} batches, n_batches says {}", e, r, w.batches, walked.n_batches);
  if (w.reads != want.reads)
    checks_.fail("epoch {} rank {}: read {} observations, the contract says {}", e, r, w.reads, want.reads);
  if (w.batches > 0 && w.last_batch != want.last_batch)
    checks_.fail("epoch {} rank {}: the last batch has {} positions, the contract says {}", e, r, w.last_batch,
                 want.last_batch);
  if (x_.whole && !o_.global() && w.repeated != want.repeated)
    checks_.fail("epoch {} rank {}: repeated {} observations, the contract says {}", e, r, w.repeated, want.repeated);
  if (w.misplaced_repeats > 0)
    checks_.fail("epoch {} rank {}: {} repeats outside its last request", e, r, w.misplaced_repeats);
  if (w.repeated > 0) epoch.repeating.emplace_back(r, w.final_chunks);
  if (!epoch.first_batches) epoch.first_batches = w.batches;
  if (o_.enforce && w.batches != *epoch.first_batches)
    checks_.fail("epoch {} rank {}: yielded {} batches, rank {} yielded {}", e, r, w.batches, x_.walked_ranks.front(),
                 *epoch.first_batches);
}

// The whole epoch, over all ranks.
void EpochWalker::check_whole_epoch(std::uint64_t e, const EpochWalk& epoch) {
  const JobEpoch& job = job_.of(e);
  const Bits& read = reads_.read();
  const std::int64_t distinct = read.count();
  walked_.left_seen.push_back(clear_runs(read, job_.mask, 4));
  if (distinct != job.distinct)
    checks_.fail("epoch {}: {} distinct observations read, the contract says {}", e, distinct, job.distinct);
  if (epoch.repeats != job.repeated)
    checks_.fail("epoch {}: {} reads repeat an observation, the contract says {}", e, epoch.repeats, job.repeated);
  // Global padding repeats rows of the plan's last request, the one the last rank ends on.
  if (o_.global())
    for (const auto& [r, chunks] : epoch.repeating)
      if (chunks != epoch.last_rank_final)
        checks_.fail("epoch {} rank {}: repeats rows outside the plan's last request", e, r);
  if (x_.promise_walked) check_promise(e, read, distinct);
  if (picture_ != nullptr) draw_left_out(e, read);
}

void EpochWalker::check_promise(std::uint64_t e, const Bits& read, std::int64_t distinct) {
  if (e == 0) first_read_ = read;
  if (o_.remainder == cs::Remainder::drop && read != first_read_)
    checks_.fail("epoch {}: drop, yet the observations left out differ from epoch 0's", e);
  if (o_.rotate() && e >= 1 && !read.covers_with(previous_read_))
    checks_.fail("epochs {}-{}: rotate, yet some observations are read in neither", e - 1, e);
  if (o_.pad() && distinct != job_.mask.count())
    checks_.fail("epoch {}: pad, yet {} observations are left out", e, job_.mask.count() - distinct);
  previous_read_ = read;
}

// The picture's left-out bins of a drawn epoch: what no rank read.
void EpochWalker::draw_left_out(std::uint64_t e, const Bits& read) {
  const auto at = std::find(picture_->epochs.begin(), picture_->epochs.end(), e);
  if (at == picture_->epochs.end()) return;
  auto& left = picture_->left_out[static_cast<std::size_t>(at - picture_->epochs.begin())];
  const Bins& bins = picture_->bins;
  for (const cs::Slice& range : job_.mask.ranges()) {
    const std::int64_t first = *job_.mask.position_of(range.start);
    for (std::size_t bin = bins.of(range.start); bin <= bins.of(range.stop - 1); ++bin) {
      const cs::Slice s = bins.span(bin);
      const cs::Slice rows{std::max(s.start, range.start), std::min(s.stop, range.stop)};
      const std::int64_t k = first + (rows.start - range.start);
      left[bin] += rows.size() - read.count(k, k + rows.size());
    }
  }
}

}  // namespace

int plan(const Options& o, const Library& library) {
  // The library validates n_obs, the mask and the share per rank first: its message is the error.
  (void)library.n_batches(0, 0);
  (void)library.n_batches(0, 1);
  if (o.world_size > max_world_size)
    examples::bad_argument("--world-size ({}) must be <= {}: the planner checks every rank", o.world_size,
                           max_world_size);

  const Job job(o, library);
  examples::Failures checks(max_shown_failures);
  const WalkExtent extent = walk_extent(job);
  // The picture's rows, filled by the walk (or from the shards when it cannot see whole epochs).
  std::optional<Picture> picture;
  if (o.svg) picture = make_picture(job);
  check_shard_promise(job, check_shards(job, extent, checks), checks);
  const Walked walked = EpochWalker(job, extent, picture ? &*picture : nullptr, checks).walk();

  print_report(job, extent, walked);
  if (picture) draw_picture(job, extent, walked, *picture);
  return print_verdict(job, extent, walked, checks);
}

}  // namespace shard_plan
