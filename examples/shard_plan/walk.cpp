// SPDX-License-Identifier: MIT

#include "walk.hpp"

#include "text.hpp"

#include "common/parse.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace shard_plan {

namespace {

// The chunk ranges an epoch line lists per rank.
constexpr std::size_t kept_order = 6;

}  // namespace

RankWalker::RankWalker(const WalkSetup& setup, std::int64_t rank, std::span<const cs::Slice> bounds,
                       const WalkSinks& sinks)
    : o_(setup.o), setup_(setup), rank_(rank), bounds_(bounds), sinks_(sinks) {
  offsets_.reserve(static_cast<std::size_t>(o_.preload) + 5);
  positions_.reserve(static_cast<std::size_t>(o_.preload) + 4);
  drawn_.reserve(static_cast<std::size_t>(o_.preload) + 4);
}

bool RankWalker::take(const cs::LoadRequest& request) {
  ++w_.requests;
  if (request.chunks.empty()) {
    sinks_.checks.fail("epoch {} rank {}: request {} lists no chunk", setup_.epoch, rank_, w_.requests - 1);
    return true;
  }
  // A global block may begin or end inside a request: its pieces list the same chunks.
  if (!previous_first_ || *previous_first_ != request.chunks.front()) {
    check_rows(request);
    record_chunks(request);
  }
  check_chunks(request);
  for (const std::span<const std::int64_t> batch : request.splits) read_batch(request, batch);
  if (setup_.prefix && w_.reads >= *setup_.prefix) {
    w_.whole = false;
    return false;
  }
  return true;
}

// Every request lists chunk_size * preload_nchunks rows, however many chunks that takes (short
// ones at the edges of many ranges), but the last, which may list fewer.
void RankWalker::check_rows(const cs::LoadRequest& request) {
  const std::int64_t full = o_.chunk_size * o_.preload;
  if (short_request_)
    sinks_.checks.fail("epoch {} rank {}: a request of {} rows, fewer than chunk_size * preload_nchunks = {}, is not "
                       "the last",
                       setup_.epoch, rank_, *short_request_, full);
  const std::int64_t rows = request.buffer_size();
  if (rows > full)
    sinks_.checks.fail("epoch {} rank {}: request {} lists {} rows, more than chunk_size * preload_nchunks = {}",
                       setup_.epoch, rank_, w_.requests - 1, rows, full);
  short_request_ = rows < full ? std::optional(rows) : std::nullopt;
}

// The first piece of a request: its chunks count once, in reading order, and each against the
// storage grid. A chunk is the cell [k * chunk_size, (k + 1) * chunk_size) cut to the piece of
// the bounds it lies in, read whole or in two pieces where it straddles two requests (the second
// piece first in its request, where the first one stopped). It is off the grid when it starts
// neither on a multiple of chunk_size nor where a piece of the bounds starts, or when it crosses
// a multiple of chunk_size.
void RankWalker::record_chunks(const cs::LoadRequest& request) {
  previous_first_ = request.chunks.front();
  w_.misplaced_repeats += repeats_in_request_;
  repeats_in_request_ = 0;
  w_.final_chunks.assign(request.chunks.begin(), request.chunks.end());
  const std::int64_t c = o_.chunk_size;
  for (std::size_t i = 0; i < request.chunks.size(); ++i) {
    const cs::Slice& piece = request.chunks[i];
    ++w_.pieces;
    const bool on_cell = piece.start % c == 0 || starts_piece(bounds_, piece.start);
    const bool continues = i == 0 && w_.pieces > 1 && last_stop_ == piece.start && !on_cell;
    if (!continues) {
      ++w_.chunks;
      chunk_start_ = piece.start;
      // What began before the walk saw it: a block that starts inside the shared plan.
      const bool inherited = i == 0 && w_.pieces == 1 && setup_.mid_plan;
      chunk_off_grid_ = !on_cell && !inherited;
      if (chunk_off_grid_) {
        ++w_.off_grid;
        sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) starts off the storage grid of chunk_size {}, at no "
                           "edge of {}",
                           setup_.epoch, rank_, piece.start, piece.stop, c, o_.global() ? "the window" : "its shard");
      }
    }
    if (!piece.empty() && !chunk_off_grid_ && chunk_start_ / c != (piece.stop - 1) / c) {
      chunk_off_grid_ = true;
      ++w_.off_grid;
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) crosses the storage grid of chunk_size {}", setup_.epoch,
                         rank_, chunk_start_, piece.stop, c);
    }
    if (sinks_.row != nullptr) sinks_.bins.add(sinks_.row->loaded, piece);
    if (w_.order_runs > 0 && last_stop_ == piece.start) {
      if (w_.order_runs == std::ssize(w_.order)) w_.order.back().stop = piece.stop;
    } else {
      if (w_.order.size() < kept_order) w_.order.push_back(piece);
      ++w_.order_runs;
    }
    last_stop_ = piece.stop;
  }
}

// Every chunk non-empty, at most chunk_size long, inside one range of the mask and one piece of
// the bounds; `offsets_` becomes where each begins in the request's buffer, `positions_` where
// it begins in the union (-1 for one outside the bounds, whose reads are not counted as reads
// of the union).
void RankWalker::check_chunks(const cs::LoadRequest& request) {
  offsets_.assign(1, 0);
  positions_.clear();
  drawn_.assign(request.chunks.size(), -1);
  w_.max_request_chunks = std::max(w_.max_request_chunks, std::ssize(request.chunks));
  for (const cs::Slice& chunk : request.chunks) {
    offsets_.push_back(offsets_.back() + chunk.size());
    positions_.push_back(-1);
    const std::string_view bounds = o_.global() ? "the window" : "its shard";
    if (chunk.empty() || chunk.size() > o_.chunk_size) {
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) is empty or longer than chunk_size {}", setup_.epoch, rank_,
                         chunk.start, chunk.stop, o_.chunk_size);
      continue;
    }
    if (!setup_.mask.holds(chunk)) {
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) crosses a boundary of the mask's ranges or lies outside "
                         "them",
                         setup_.epoch, rank_, chunk.start, chunk.stop);
      continue;
    }
    if (!inside_one(bounds_, chunk)) {
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) is not inside one range of {} ({})", setup_.epoch, rank_,
                         chunk.start, chunk.stop, bounds, slices_summary(bounds_));
      continue;
    }
    positions_.back() = *setup_.mask.position_of(chunk.start);
  }
}

void RankWalker::read_batch(const cs::LoadRequest& request, std::span<const std::int64_t> batch) {
  const std::uint64_t epoch = setup_.epoch;
  examples::Failures& checks = sinks_.checks;
  const std::int64_t buffer = offsets_.back();
  const auto size = static_cast<std::int64_t>(batch.size());
  if (after_short_batch_) checks.fail("epoch {} rank {}: batch {} follows a short batch", epoch, rank_, w_.batches);
  if (size < 1 || size > o_.batch_size)
    checks.fail("epoch {} rank {}: batch {} has {} positions, outside [1, batch_size {}]", epoch, rank_, w_.batches,
                size, o_.batch_size);
  after_short_batch_ = size < o_.batch_size;
  w_.last_batch = size;
  const std::int64_t this_batch = w_.batches++;
  std::int64_t drawn = 0;  // the request's chunks this batch draws rows from
  for (const std::int64_t position : batch) {
    if (position < 0 || position >= buffer) {
      checks.fail("epoch {} rank {}: position {} is outside the request's buffer of {} rows", epoch, rank_, position,
                  buffer);
      continue;
    }
    const auto chunk = static_cast<std::size_t>(std::upper_bound(offsets_.begin() + 1, offsets_.end(), position) -
                                                (offsets_.begin() + 1));
    ++w_.reads;
    if (drawn_[chunk] != this_batch) {
      drawn_[chunk] = this_batch;
      ++drawn;
    }
    // A chunk outside the bounds failed its check: its rows are not the union's to mark.
    if (positions_[chunk] < 0) continue;
    const std::int64_t within = position - offsets_[chunk];
    const std::int64_t obs = request.chunks[chunk].start + within;
    if (sinks_.row != nullptr) ++sinks_.row->read[sinks_.bins.of(obs)];
    if (!sinks_.reads.mark(positions_[chunk] + within)) {
      ++w_.repeated;
      ++repeats_in_request_;
      if (sinks_.row != nullptr) ++sinks_.row->repeated[sinks_.bins.of(obs)];
      if (!o_.pad())
        checks.fail("epoch {} rank {}: observation {} is read twice in one epoch ({} ranks must be disjoint)", epoch,
                    rank_, obs, examples::remainder_name(o_.remainder));
    }
  }
  w_.batch_chunks += drawn;
  w_.min_batch_chunks = this_batch == 0 ? drawn : std::min(w_.min_batch_chunks, drawn);
}

}  // namespace shard_plan
