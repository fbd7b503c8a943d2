// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/stream.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/worker_info.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
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
  }
  /// The epoch `state()` speaks of: the one being played, else the next.
  [[nodiscard]] std::uint64_t current() const noexcept { return current_.value_or(next_); }
  /// The size that epoch is tied to: the restored state's while one is pending, else the one the
  /// played epoch was sampled over; `std::nullopt` for an epoch no `sample()` has begun.
  [[nodiscard]] std::optional<std::int64_t> n_obs() const noexcept { return resume_ ? resume_->n_obs : n_obs_; }
  [[nodiscard]] const WorkerInfo& worker() const noexcept { return worker_; }
  void restore(const SamplerState& state) {
    next_ = state.epoch;
    current_.reset();
    n_obs_.reset();
    resume_ = state;
    worker_ = {.id = state.worker, .num_workers = state.num_workers};
  }
  /// The batches the next epoch's stream over `n_obs` skips: a restored state's, else 0. Throws
  /// if that state is of another worker or another dataset size.
  [[nodiscard]] std::int64_t resume_point(const WorkerInfo& worker, std::int64_t n_obs) const {
    if (!resume_) return 0;
    if (resume_->num_workers != worker.num_workers || resume_->worker != worker.id)
      throw_invalid("restore: the state is of worker {} of {}, but sample() was called for worker {} of {}",
                    resume_->worker, resume_->num_workers, worker.id, worker.num_workers);
    if (resume_->n_obs && *resume_->n_obs != n_obs)
      throw_invalid(
          "restore: the state was taken in an epoch over n_obs = {} observations, but sample() was called with "
          "n_obs = {}; a state resumes only the epoch it was taken in (for a dataset that changed size, start the "
          "epoch afresh with set_epoch)",
          *resume_->n_obs, n_obs);
    return resume_->batches_done;
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

/// Throws unless a state at `batches_done` can be taken in an epoch tied to `n_obs`: a point
/// inside an epoch needs the size that epoch was sampled over.
inline void check_state_point(std::string_view sampler, std::optional<std::int64_t> n_obs, std::int64_t batches_done) {
  if (!n_obs && batches_done != 0)
    throw_invalid(
        "{}: state: batches_done ({}) must be 0 before sample() has begun the epoch: a point inside an epoch is "
        "tied to the n_obs it was sampled over",
        sampler, batches_done);
}

/// Throws unless `state` was taken from a sampler of this configuration and seed.
inline void check_state_of(std::string_view sampler, const SamplerState& state, std::uint64_t fingerprint,
                           std::uint64_t seed) {
  if (state.fingerprint != fingerprint)
    throw_invalid("{}: restore: the state's fingerprint ({:016x}) is not this configuration's ({:016x})", sampler,
                  state.fingerprint, fingerprint);
  if (state.seed != seed)
    throw_invalid("{}: restore: the state's seed ({}) is not this sampler's ({})", sampler, state.seed, seed);
}

/// Throws unless `skip` batches fit in a stream of `total`.
inline void check_skip(std::int64_t skip, std::int64_t total) {
  if (skip > total)
    throw_invalid("restore: the state's batches ({}) exceed the {} batches of its stream for this n_obs", skip, total);
}

/// What every sampler that lays its epochs out as an `EpochPlan` does alike: epochs, counting,
/// sampling (a worker's share, from a restored point), `state` and `restore`. `Derived` provides
/// `name`, `plan(n_obs, epoch)` returning a `Plan` (validating first) and `fingerprint()`.
template <class Derived, EpochPlan Plan>
class PlannedSampler {
 public:
  /// The range `sample()` returns.
  using range_type = StreamRange<Plan>;

  /// The random stream every draw comes from.
  [[nodiscard]] const Rng& rng() const noexcept { return rng_; }
  /// The epoch the next `sample()` plays.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return cursor_.next(); }
  /// Pins the next `sample()` to epoch `epoch` (from its start); later calls go on from there.
  void set_epoch(std::uint64_t epoch) noexcept { cursor_.set(epoch); }

  /// Batches one epoch over `n_obs` observations yields (a worker's share, with a `WorkerInfo`),
  /// counted from the epoch's start: while a restore is pending, the restored epoch's, which the
  /// next `sample()` yields less the state's `batches_done`. Throws where `sample()` would.
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, const WorkerInfo& worker = {}) const {
    return prepare(n_obs, worker).share_batches();
  }
  /// Synonym of `n_batches`, as annbatch's `n_iters`.
  [[nodiscard]] std::int64_t n_iters(std::int64_t n_obs, const WorkerInfo& worker = {}) const {
    return n_batches(n_obs, worker);
  }
  /// Batches the next `sample(n_obs, worker)` yields: `n_batches` less a pending restore's
  /// `batches_done`. Throws where `sample()` would.
  [[nodiscard]] std::int64_t n_batches_left(std::int64_t n_obs, const WorkerInfo& worker = {}) const {
    return prepare(n_obs, worker).n_batches();
  }

  /// The requests of epoch `epoch()` over `n_obs` observations (worker `worker`'s share of
  /// them: requests `id, id + num_workers, ...`), from a restored point if one is pending; then
  /// moves to the next epoch. Validates first: throws before anything is yielded.
  [[nodiscard]] range_type sample(std::int64_t n_obs, const WorkerInfo& worker = {}) {
    range_type range = prepare(n_obs, worker);
    cursor_.start(worker, n_obs);
    return range;
  }

  /// The point after the first `batches_done` batches of the current epoch (the one the last
  /// `sample()` played, counted from its start, or the next if none has since
  /// `set_epoch`/`restore`); of the worker's share when sampled with a `WorkerInfo`.
  [[nodiscard]] SamplerState state(std::int64_t batches_done) const {
    check_state_point(Derived::name, cursor_.n_obs(), batches_done);
    const SamplerState result{.fingerprint = self().fingerprint(),
                              .seed = rng_.seed(),
                              .epoch = cursor_.current(),
                              .n_obs = cursor_.n_obs(),
                              .batches_done = batches_done,
                              .world_size = 1,
                              .plan_world_size = 1,
                              .num_workers = cursor_.worker().num_workers,
                              .worker = cursor_.worker().id,
                              .runs = std::nullopt,
                              .dealt_at = 0};
    result.check();
    return result;
  }

  /// Makes the next `sample()` continue exactly after `state`: its remaining batches equal those
  /// of the uninterrupted epoch. Throws `std::invalid_argument` for a state of another
  /// configuration or seed, or of a distributed sampler.
  void restore(const SamplerState& state) {
    state.check();
    check_state_of(Derived::name, state, self().fingerprint(), rng_.seed());
    if (state.world_size != 1 || state.plan_world_size != 1 || state.runs)
      throw_invalid("{}: restore: the state is of a distributed sampler (world_size {}); restore it into one",
                    Derived::name, state.world_size);
    cursor_.restore(state);
  }

 protected:
  explicit PlannedSampler(std::uint64_t seed) : rng_(seed) {}

  Rng rng_;
  EpochCursor cursor_;

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  // The range the next sample(n_obs, worker) returns, checked, without moving the cursor.
  [[nodiscard]] range_type prepare(std::int64_t n_obs, const WorkerInfo& worker) const {
    check_worker(worker);
    Plan epoch_plan = self().plan(n_obs, cursor_.next());
    const std::int64_t total = epoch_plan.n_batches();
    const std::int64_t skip = cursor_.resume_point(worker, n_obs);
    range_type range(std::move(epoch_plan), {{0, total}}, {worker.id, worker.num_workers}, skip);
    check_skip(skip, range.share_batches());
    return range;
  }
};

}  // namespace chunksampler::detail
