// SPDX-License-Identifier: MIT

#include "walk.hpp"

#include "common/parse.hpp"

#include <iterator>

namespace shard_plan {

namespace {

// The chunk ranges an epoch line lists per rank.
constexpr std::size_t kept_order = 6;

}  // namespace

RankWalker::RankWalker(const WalkSetup& setup, std::int64_t rank, cs::Slice bounds, const WalkSinks& sinks)
    : o_(setup.o), setup_(setup), rank_(rank), bounds_(bounds), sinks_(sinks) {
  offsets_.reserve(static_cast<std::size_t>(o_.preload) + 5);
}

bool RankWalker::take(const cs::LoadRequest& request) {
  ++w_.requests;
  const auto n_chunks = static_cast<std::int64_t>(request.chunks.size());
  // Up to preload_nchunks grid chunks, two of them cut where the request's rows begin and end,
  // and the shard's short head and tail chunks.
  if (n_chunks < 1 || n_chunks > o_.preload + 4) {
    sinks_.checks.fail("epoch {} rank {}: request {} has {} chunks, outside [1, preload {} + 4]", setup_.epoch, rank_,
                       w_.requests - 1, n_chunks, o_.preload);
    if (n_chunks < 1) return true;
  }
  // A global block may begin or end inside a request: its pieces list the same chunks.
  if (!previous_first_ || *previous_first_ != request.chunks.front()) record_chunks(request);
  check_chunks(request);
  for (const std::span<const std::int64_t> batch : request.splits) read_batch(request, batch);
  if (setup_.prefix && w_.reads >= *setup_.prefix) {
    w_.whole = false;
    return false;
  }
  return true;
}

// The first piece of a request: its chunks count once, in reading order.
void RankWalker::record_chunks(const cs::LoadRequest& request) {
  previous_first_ = request.chunks.front();
  w_.misplaced_repeats += repeats_in_request_;
  repeats_in_request_ = 0;
  w_.final_chunks.assign(request.chunks.begin(), request.chunks.end());
  for (const cs::Slice& chunk : request.chunks) {
    // A grid chunk read in two pieces, by two requests, counts once.
    const bool continues = w_.chunks > 0 && last_stop_ == chunk.start && chunk.start % o_.chunk_size != 0;
    if (!continues) ++w_.chunks;
    if (sinks_.row != nullptr) sinks_.bins.add(sinks_.row->loaded, chunk);
    if (w_.order_runs > 0 && last_stop_ == chunk.start) {
      if (w_.order_runs == std::ssize(w_.order)) w_.order.back().stop = chunk.stop;
    } else {
      if (w_.order.size() < kept_order) w_.order.push_back(chunk);
      ++w_.order_runs;
    }
    last_stop_ = chunk.stop;
  }
}

// Every chunk inside the bounds and one cell of the storage grid; `offsets_` becomes where each
// begins in the request's buffer.
void RankWalker::check_chunks(const cs::LoadRequest& request) {
  offsets_.assign(1, 0);
  for (const cs::Slice& chunk : request.chunks) {
    if (!chunk.empty() && chunk.start / o_.chunk_size != (chunk.stop - 1) / o_.chunk_size) {
      ++w_.off_grid;
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) crosses the storage grid of chunk_size {}", setup_.epoch,
                         rank_, chunk.start, chunk.stop, o_.chunk_size);
    }
    if (chunk.empty() || chunk.size() > o_.chunk_size || chunk.start < bounds_.start || chunk.stop > bounds_.stop)
      sinks_.checks.fail("epoch {} rank {}: chunk [{}, {}) is empty, longer than chunk_size {} or outside {} [{}, {})",
                         setup_.epoch, rank_, chunk.start, chunk.stop, o_.chunk_size,
                         o_.global() ? "the window" : "its shard", bounds_.start, bounds_.stop);
    offsets_.push_back(offsets_.back() + chunk.size());
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
  ++w_.batches;
  for (const std::int64_t position : batch) {
    if (position < 0 || position >= buffer) {
      checks.fail("epoch {} rank {}: position {} is outside the request's buffer of {} rows", epoch, rank_, position,
                  buffer);
      continue;
    }
    const auto chunk = std::upper_bound(offsets_.begin() + 1, offsets_.end(), position) - (offsets_.begin() + 1);
    const cs::Slice& source = request.chunks[static_cast<std::size_t>(chunk)];
    const std::int64_t obs = source.start + (position - offsets_[static_cast<std::size_t>(chunk)]);
    ++w_.reads;
    if (!bounds_.contains(obs)) {
      checks.fail("epoch {} rank {}: observation {} is outside {} [{}, {})", epoch, rank_, obs,
                  o_.global() ? "the window" : "its shard", bounds_.start, bounds_.stop);
      continue;
    }
    if (sinks_.row != nullptr) ++sinks_.row->read[sinks_.bins.of(obs)];
    if (!sinks_.reads.mark(obs)) {
      ++w_.repeated;
      ++repeats_in_request_;
      if (sinks_.row != nullptr) ++sinks_.row->repeated[sinks_.bins.of(obs)];
      if (!o_.pad())
        checks.fail("epoch {} rank {}: observation {} is read twice in one epoch ({} ranks must be disjoint)", epoch,
                    rank_, obs, examples::remainder_name(o_.remainder));
    }
  }
}

}  // namespace shard_plan
