// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/worker_info.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace chunksampler::detail {

/// Where a sampler stands between epochs: the epoch the next `sample()` plays, the one it
/// played last and over how many observations (for `state`), and a restored point the next
/// `sample()` resumes from.
class EpochCursor {
 public:
  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  void set(std::uint64_t epoch) noexcept {
    next_ = epoch;
    current_.reset();
    resume_.reset();
    n_obs_.reset();
    // The start of an epoch no sample() has begun is no worker's: a state taken now names none.
    worker_ = {};
  }
  /// The epoch `state()` speaks of: the one being played, else the next.
  [[nodiscard]] std::uint64_t current() const noexcept { return current_.value_or(next_); }
  /// The size that epoch is tied to: the restored state's while one is pending, else the one the
  /// played epoch was sampled over; `std::nullopt` for an epoch no `sample()` has begun.
  [[nodiscard]] std::optional<std::int64_t> n_obs() const noexcept { return resume_ ? resume_->n_obs() : n_obs_; }
  [[nodiscard]] const WorkerInfo& worker() const noexcept { return worker_; }
  /// Strongly exception-safe: the state is copied (its runs allocate) before anything changes.
  void restore(const SamplerState& state) {
    std::optional<SamplerState> resume = state;
    static_assert(std::is_nothrow_move_assignable_v<std::optional<SamplerState>>);
    next_ = state.epoch();
    current_.reset();
    n_obs_.reset();
    resume_ = std::move(resume);
    worker_ = {.id = state.worker(), .num_workers = state.num_workers()};
  }
  /// The batches the next epoch's stream over `n_obs` skips: a restored state's, else 0. Throws
  /// if that state is of another worker or another dataset size. A state at the start of an
  /// epoch no `sample()` had begun (`n_obs=any`, 0 batches done) is no worker's point: any
  /// worker, as any size, begins it.
  [[nodiscard]] std::int64_t resume_point(const WorkerInfo& worker, std::int64_t n_obs) const {
    if (!resume_ || !resume_->n_obs()) return 0;
    if (resume_->num_workers() != worker.num_workers || resume_->worker() != worker.id)
      throw_state_mismatch("restore: the state is of worker {} of {}, but sample() was called for worker {} of {}",
                           resume_->worker(), resume_->num_workers(), worker.id, worker.num_workers);
    if (resume_->n_obs() && *resume_->n_obs() != n_obs)
      throw_state_mismatch(
          "restore: the state was taken in an epoch over n_obs = {} observations, but sample() was called with "
          "n_obs = {}; a state resumes only the epoch it was taken in (for a dataset that changed size, start the "
          "epoch afresh with set_epoch)",
          *resume_->n_obs(), n_obs);
    return resume_->batches_done();
  }
  /// The restored state the next epoch continues, if any.
  [[nodiscard]] const std::optional<SamplerState>& pending() const noexcept { return resume_; }
  /// Marks the start of the next epoch, read by `worker` over `n_obs` observations.
  void start(const WorkerInfo& worker, std::int64_t n_obs) noexcept {
    resume_.reset();
    current_ = next_++;
    worker_ = worker;
    n_obs_ = n_obs;
  }

 private:
  std::uint64_t next_ = 0;
  std::optional<std::uint64_t> current_;
  std::optional<std::int64_t> n_obs_;
  std::optional<SamplerState> resume_;
  WorkerInfo worker_;
};

/// Throws `ConfigError` unless a state at `batches_done` can be taken in an epoch tied to
/// `n_obs`: a count in `[0, 2^62]`, and a point inside an epoch needs the size that epoch was
/// sampled over.
inline void check_state_point(std::string_view sampler, std::optional<std::int64_t> n_obs, std::int64_t batches_done) {
  if (batches_done < 0 || batches_done > max_size)
    throw_config("{}: state: batches_done ({}) must be in [0, 2^62]", sampler, batches_done);
  if (!n_obs && batches_done != 0)
    throw_config(
        "{}: state: batches_done ({}) must be 0 before sample() has begun the epoch: a point inside an epoch is "
        "tied to the n_obs it was sampled over",
        sampler, batches_done);
}

/// Throws unless `state` was taken from a sampler of this configuration and seed.
inline void check_state_of(std::string_view sampler, const SamplerState& state, std::uint64_t fingerprint,
                           std::uint64_t seed) {
  if (state.fingerprint() != fingerprint)
    throw_state_mismatch("{}: restore: the state's fingerprint ({:016x}) is not this configuration's ({:016x})",
                         sampler, state.fingerprint(), fingerprint);
  if (state.seed() != seed)
    throw_state_mismatch("{}: restore: the state's seed ({}) is not this sampler's ({})", sampler, state.seed(), seed);
}

/// Throws unless `skip` batches fit in a stream of `total`.
inline void check_skip(std::int64_t skip, std::int64_t total) {
  if (skip > total)
    throw_state_mismatch("restore: the state's batches_done ({}) exceed the {} batches of its stream for this n_obs",
                         skip, total);
}

}  // namespace chunksampler::detail
