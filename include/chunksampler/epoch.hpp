// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler {

/// What `sample()` returns: one epoch's load requests (a rank's, a worker's share of them, or
/// the rest of them after a restore), as a single-pass input range of `const LoadRequest&`.
///
///     cs::Epoch epoch = sampler.sample(n_obs);          // checked here: throws before any request
///     std::int64_t steps = epoch.n_batches();           // batches it yields in all
///     for (const cs::LoadRequest& request : epoch) {    // begin() once, as for any input range
///       for (std::span<const std::int64_t> batch : request.splits) { /* train */ }
///     }
///
/// It knows where it stands in its epoch: `batches_before()` are the epoch's batches read before
/// its first (a restored point's), `yielded()` the batches of the requests it has yielded so far,
/// `state()` the point after them and `state(k)` the point after `k` of its own batches, so a
/// loader that hands on fewer than it has taken (a request partly trained) counts only those:
///
///     std::int64_t handed = 0;
///     for (const cs::LoadRequest& request : epoch)
///       for (auto batch : request.splits) { train(batch); ++handed; save(epoch.state(handed)); }
///
/// It owns its plan and buffers, so it outlives the sampler that made it and is unaffected by
/// later calls on that sampler; it can be moved, not copied (iterators point into it). A
/// yielded `const LoadRequest&` and its spans stay valid until the iterator advances; no
/// request allocates after the first (the buffers are sized once, in `begin()`).
///
/// How it is cut: the batches of `runs` (in order) of an `EpochPlan`, split at request
/// boundaries, one `LoadRequest` per piece; a piece lists its request's chunks and only its own
/// batches. With workers, worker `i` of `k` takes pieces `i, i + k, ...`. A restored point's
/// batches are passed over in O(runs + log n), not O(skip).
template <EpochPlan Plan>
class Epoch {
 public:
  class iterator {
   public:
    using value_type = LoadRequest;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    /// A past-the-end iterator (as `std::default_sentinel_t` is the range's end).
    iterator() = default;
    explicit iterator(Epoch* range) noexcept : range_(range) {}

    [[nodiscard]] const LoadRequest& operator*() const noexcept { return range_->current_; }
    [[nodiscard]] const LoadRequest* operator->() const noexcept { return &range_->current_; }
    iterator& operator++() {
      range_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    [[nodiscard]] friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.at_end(); }

   private:
    // A default-constructed iterator has no range and is past the end.
    [[nodiscard]] bool at_end() const noexcept { return range_ == nullptr || range_->run_ >= range_->runs_.size(); }
    Epoch* range_ = nullptr;
  };

  /// Batches `runs` of `plan`, the share of `worker`, less its first `skip` batches, in the
  /// epoch a state with `stamp`'s fields names (its `dealt_at`: the epoch's batches read before
  /// `runs` were dealt). The samplers make it: `skip` <= the share's batches, and `dealt_at` plus
  /// the share's batches <= 2^62.
  Epoch(Plan plan, std::vector<BatchRun> runs, WorkerInfo worker, std::int64_t skip, detail::StateFields stamp)
      : plan_(std::move(plan)), runs_(std::move(runs)), worker_(worker), skip_(skip), stamp_(std::move(stamp)) {}

  Epoch(Epoch&&) noexcept = default;
  Epoch& operator=(Epoch&&) noexcept = default;
  // Iterators point at their range: a copy would not be theirs, so forbid it as input views do.
  Epoch(const Epoch&) = delete;
  Epoch& operator=(const Epoch&) = delete;
  ~Epoch() = default;

  /// Starts the stream: sizes the buffers and loads the first request. Call once, as for any
  /// input range.
  [[nodiscard]] iterator begin() {
    if (!started_) {
      started_ = true;
      buffers_.chunks.reserve(static_cast<std::size_t>(plan_.max_chunks()));
      buffers_.positions.reserve(static_cast<std::size_t>(plan_.max_positions()));
      seek(skip_);
      load();
    }
    return iterator(this);
  }
  /// The end: compares equal to an iterator past the last request.
  [[nodiscard]] static std::default_sentinel_t end() noexcept { return {}; }

  /// Batches this stream yields in all (after the skip).
  [[nodiscard]] std::int64_t n_batches() const noexcept { return share_batches() - skip_; }
  /// Batches of the requests yielded so far: the request the iterator points at included, 0
  /// before `begin()`, `n_batches()` once the iterator has reached the end.
  [[nodiscard]] std::int64_t yielded() const noexcept { return yielded_; }
  /// The epoch's batches read before this stream's first, counted from the epoch's start: 0 for
  /// an epoch begun afresh, a restored state's `batches_done` for one resumed.
  [[nodiscard]] std::int64_t batches_before() const noexcept { return stamp_.dealt_at + skip_; }
  /// The epoch this stream plays.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return stamp_.epoch; }
  /// The point after the first `yielded` batches of this stream (of its epoch's
  /// `batches_before() + yielded`): what a checkpoint taken there records. Throws `ConfigError`
  /// unless `0 <= yielded <= n_batches()`.
  [[nodiscard]] SamplerState state(std::int64_t yielded) const {
    if (yielded < 0 || yielded > n_batches())
      detail::throw_config("Epoch: state: yielded ({}) must be in [0, n_batches()] = [0, {}]", yielded, n_batches());
    detail::StateFields fields = stamp_;
    fields.batches_done = batches_before() + yielded;
    return detail::StateAccess::make(fields);
  }
  /// The point after the batches of the requests yielded so far: `state(yielded())`.
  [[nodiscard]] SamplerState state() const { return state(yielded_); }
  /// The plan of the whole epoch (all ranks' batches in global mode) this range reads from.
  [[nodiscard]] const Plan& plan() const noexcept { return plan_; }

  /// Batches the worker's share of the stream holds, before any skip.
  [[nodiscard]] std::int64_t share_batches() const noexcept {
    std::int64_t total = 0;
    std::int64_t pieces_before = 0;
    for (const BatchRun& run : runs_) {
      total += share_in_run(run, pieces_before, piece_count(run));
      pieces_before += piece_count(run);
    }
    return total;
  }

 private:
  // Pieces of a run: one per request it touches.
  [[nodiscard]] std::int64_t piece_count(const BatchRun& run) const noexcept {
    return run.size() == 0 ? 0 : plan_.request_of(run.end - 1) - plan_.request_of(run.begin) + 1;
  }
  // Batches of piece j of a run.
  [[nodiscard]] std::int64_t piece_batches(const BatchRun& run, std::int64_t j) const noexcept {
    const std::int64_t k = plan_.request_of(run.begin) + j;
    return std::min(run.end, plan_.request_begin(k + 1)) - std::max(run.begin, plan_.request_begin(k));
  }
  // The run's pieces that belong to this worker: j = first, first + count, ... (< n).
  [[nodiscard]] std::int64_t first_piece(std::int64_t pieces_before) const noexcept {
    const std::int64_t r = pieces_before % worker_.num_workers;
    return r <= worker_.id ? worker_.id - r : worker_.id - r + worker_.num_workers;
  }
  // Batches in the worker's first t pieces of a run. Pieces are whole requests but for the
  // run's first and last and the plan's last request, so this is O(1) from the full size.
  [[nodiscard]] std::int64_t share_before(const BatchRun& run, std::int64_t pieces_before,
                                          std::int64_t t) const noexcept {
    if (t <= 0) return 0;
    const std::int64_t n = piece_count(run);
    const std::int64_t first = first_piece(pieces_before);
    const std::int64_t full = plan_.request_begin(1) - plan_.request_begin(0);
    std::int64_t total = t * full;
    const std::int64_t last_mine = first + (t - 1) * worker_.num_workers;
    // Correct the pieces that may not be full: j = 0, j = n - 1, and the plan's last request.
    std::int64_t irregular[3] = {0, n - 1, plan_.n_requests() - 1 - plan_.request_of(run.begin)};
    std::sort(std::begin(irregular), std::end(irregular));
    for (std::size_t i = 0; i < 3; ++i) {
      const std::int64_t j = irregular[i];
      if (i > 0 && j == irregular[i - 1]) continue;
      if (j < first || j > last_mine || j >= n || (j - first) % worker_.num_workers != 0) continue;
      total += piece_batches(run, j) - full;
    }
    return total;
  }
  [[nodiscard]] std::int64_t share_in_run(const BatchRun& run, std::int64_t pieces_before,
                                          std::int64_t n) const noexcept {
    const std::int64_t first = first_piece(pieces_before);
    const std::int64_t mine = first < n ? (n - 1 - first) / worker_.num_workers + 1 : 0;
    return share_before(run, pieces_before, mine);
  }

  // Positions the cursor at batch `skip` of the worker's share.
  void seek(std::int64_t skip) {
    std::int64_t pieces_before = 0;
    for (run_ = 0; run_ < runs_.size(); ++run_) {
      const BatchRun& run = runs_[run_];
      const std::int64_t n = piece_count(run);
      const std::int64_t in_run = share_in_run(run, pieces_before, n);
      if (skip < in_run) {
        // The worker's piece t holding batch `skip`: the last t with share_before(t) <= skip.
        std::int64_t lo = 0;
        std::int64_t hi = (n - 1 - first_piece(pieces_before)) / worker_.num_workers;
        while (lo < hi) {
          const std::int64_t mid = lo + (hi - lo + 1) / 2;
          if (share_before(run, pieces_before, mid) <= skip) lo = mid;
          else hi = mid - 1;
        }
        piece_ = first_piece(pieces_before) + lo * worker_.num_workers;
        skip_in_piece_ = skip - share_before(run, pieces_before, lo);
        return;
      }
      skip -= in_run;
      pieces_before += n;
    }
  }

  void advance() {
    skip_in_piece_ = 0;
    piece_ += worker_.num_workers;
    load();
  }

  // Moves to the worker's next piece at or after (run_, piece_) and fills it.
  void load() {
    while (run_ < runs_.size()) {
      const std::int64_t n = piece_count(runs_[run_]);
      if (piece_ < n) break;
      piece_ -= n;
      ++run_;
    }
    if (run_ >= runs_.size()) return;
    const BatchRun& run = runs_[run_];
    const std::int64_t k = plan_.request_of(run.begin) + piece_;
    const std::int64_t request_begin = plan_.request_begin(k);
    const std::int64_t from = std::max(run.begin, request_begin) - request_begin + skip_in_piece_;
    const std::int64_t to = std::min(run.end, plan_.request_begin(k + 1)) - request_begin;
    // A plan that can stop shuffling after the positions read is told how many are.
    if constexpr (requires { plan_.fill(k, buffers_, to * plan_.batch_size()); })
      plan_.fill(k, buffers_, to * plan_.batch_size());
    else plan_.fill(k, buffers_);
    const auto size = static_cast<std::int64_t>(buffers_.positions.size());
    const std::int64_t b = plan_.batch_size();
    const std::span<const std::int64_t> positions(buffers_.positions);
    current_.chunks = std::span<const Slice>(buffers_.chunks);
    current_.splits = Splits(positions.subspan(static_cast<std::size_t>(from * b),
                                               static_cast<std::size_t>(std::min(to * b, size) - from * b)),
                             b);
    yielded_ += static_cast<std::int64_t>(current_.splits.size());
  }

  Plan plan_;
  std::vector<BatchRun> runs_;
  WorkerInfo worker_;
  std::int64_t skip_;
  bool started_ = false;
  std::size_t run_ = 0;             // the run being read
  std::int64_t piece_ = 0;          // the piece of that run being read
  std::int64_t skip_in_piece_ = 0;  // batches of the first piece already consumed
  std::int64_t yielded_ = 0;        // batches of the requests loaded so far
  RequestBuffers buffers_;
  LoadRequest current_;
  detail::StateFields stamp_;  // a state's fields in this epoch, but batches_done; last: read only for states
};

}  // namespace chunksampler
