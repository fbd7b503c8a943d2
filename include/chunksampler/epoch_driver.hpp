// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/worker_info.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The generation of the order `S` reads (its `order_generation`), which its states record: 1
/// for a sampler that declares none (a user's), so that declaring 2 later refuses its old states.
template <class S>
inline constexpr std::uint32_t order_generation_of = [] {
  if constexpr (requires { std::uint32_t{S::order_generation}; }) return std::uint32_t{S::order_generation};
  return std::uint32_t{1};
}();

/// The oldest generation whose states `sampler` restores: where a new generation left this
/// configuration's orders as they were, its states of the generations before restore too. A
/// sampler says so with `oldest_order_generation()`; else only its own generation's.
template <class S>
[[nodiscard]] std::uint32_t oldest_order_generation_of(const S& sampler) {
  if constexpr (requires { std::uint32_t{sampler.oldest_order_generation()}; })
    return sampler.oldest_order_generation();
  else return order_generation_of<S>;
}

}  // namespace chunksampler::detail

namespace chunksampler {

/// What last moved an `EpochDriver`, as `phase()` says it.
enum class EpochPhase {
  fresh,    ///< made, or `set_epoch`: the next `sample()` plays `epoch()` from its start
  pending,  ///< `restore`: the next `sample()` continues the restored point
  played,   ///< `sample()` has begun epoch `epoch() - 1`: `state(k)` names a point in it
};

/// One epoch as a layout policy lays it out for one reader: the plan, the reader's batches of
/// it, and what a state taken in it records about the deal.
template <EpochPlan Plan>
struct EpochLayout {
  Plan plan;
  std::vector<BatchRun> runs;                  ///< the reader's batches of the plan, in order
  std::optional<std::vector<BatchRun>> dealt;  ///< global mode: the batches the ranks were dealt (nullopt: all)
  std::int64_t dealt_at = 0;                   ///< the epoch's batches read when they were dealt
  std::int64_t plan_world_size = 1;            ///< the ranks the plan was laid out for
};

/// The one place that drives epochs: where a sampler stands (the epoch the next `sample()`
/// plays, a restored point it continues, the epoch it played last) and the members that move or
/// read that position: `epoch`, `phase`, `set_epoch`, `n_batches`, `n_batches_left`, `sample`,
/// `state`, `restore` and `resume`. Every sampler (through `SamplerBase`) and `DistributedSampler` derive from it
/// (CRTP); each `Epoch` it returns carries its position, so that a loader or an adapter counts
/// only the batches it hands on.
///
///     cs::RandomSampler sampler({.chunk_size = 64, .preload_nchunks = 8, .batch_size = 128});
///     sampler.set_epoch(3);                                  // as PyTorch's set_epoch
///     cs::Epoch epoch = sampler.sample(n_obs);               // epoch 3, checked here
///     for (const cs::LoadRequest& request : epoch) { /* train */ }
///     cs::SamplerState state = epoch.state(epoch.n_batches());  // the point after its batches
///
/// `Derived` is the layout policy: what one reader (a sampler, a rank, a worker) reads of an
/// epoch. It provides, to this driver only (a friend):
///
///     static constexpr std::string_view name;                  // in messages
///     static constexpr std::uint32_t order_generation;         // of the order it reads (1 if none)
///     std::uint64_t fingerprint() const;  std::uint64_t seed() const;
///     std::int64_t readers() const;       // the world size a state records (1 for a sampler)
///     void check_restore(const SamplerState&) const;            // throws for a foreign state
///     bool redeals(const StateFields& resume, const WorkerInfo&) const;
///     EpochLayout<Plan> lay_out(std::int64_t n_obs, std::uint64_t epoch, const StateFields* resume,
///                           bool redeal) const;                 // validates first
///
/// `redeals` is true where a restored state's unread batches are dealt out again (an elastic
/// restart) instead of its stream continuing at its own point.
template <class Derived, EpochPlan Plan>
class EpochDriver {
 public:
  /// The plan of one epoch.
  using plan_type = Plan;
  /// The range `sample()` returns.
  using range_type = Epoch<Plan>;

  /// The epoch the next `sample()` plays.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return next_; }
  /// What last moved this driver: made or `set_epoch` (`fresh`), `restore` (`pending`) or
  /// `sample()` (`played`). With the `Epoch` the last `sample()` returned, which counts what it
  /// has yielded, it is the whole of where a sampler stands.
  [[nodiscard]] EpochPhase phase() const noexcept {
    if (pending_) return EpochPhase::pending;
    return played_ ? EpochPhase::played : EpochPhase::fresh;
  }
  /// Pins the next `sample()` to epoch `epoch` (from its start); later calls go on from there.
  void set_epoch(std::uint64_t epoch) noexcept {
    next_ = epoch;
    pending_.reset();
    played_.reset();
  }

  /// Batches one epoch over `n_obs` observations yields (a worker's share, with a `WorkerInfo`),
  /// counted from the epoch's start: while a restore is pending, the restored epoch's, which the
  /// next `sample()` yields less the state's `batches_done`. Throws where `sample()` would.
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, const WorkerInfo& worker = {}) const {
    const range_type range = prepare(n_obs, worker);
    return range.batches_before() + range.n_batches();
  }
  /// Batches the next `sample(n_obs, worker)` yields: `n_batches` less a pending restore's
  /// `batches_done`. Throws where `sample()` would.
  [[nodiscard]] std::int64_t n_batches_left(std::int64_t n_obs, const WorkerInfo& worker = {}) const {
    return prepare(n_obs, worker).n_batches();
  }

  /// The requests of epoch `epoch()` over `n_obs` observations (worker `worker`'s share of
  /// them: requests `id, id + num_workers, ...`), from a restored point if one is pending; then
  /// moves to the next epoch. Validates first: throws before anything is yielded. The range
  /// knows its position: `range.state(k)` is the point after `k` of its batches.
  [[nodiscard]] range_type sample(std::int64_t n_obs, const WorkerInfo& worker = {}) {
    range_type range = prepare(n_obs, worker);
    std::optional<detail::StateFields> played = detail::StateAccess::fields(range.state(0));
    static_assert(std::is_nothrow_move_assignable_v<std::optional<detail::StateFields>>);
    played_ = std::move(played);
    pending_.reset();
    ++next_;
    return range;
  }

  /// The point after the first `batches_done` batches of the current epoch (the one the last
  /// `sample()` played, counted from its start, or the next if none has since
  /// `set_epoch`/`restore`); of the worker's share when sampled with a `WorkerInfo`.
  [[nodiscard]] SamplerState state(std::int64_t batches_done) const {
    if (batches_done < 0 || batches_done > detail::max_size)
      detail::throw_config("{}: state: batches_done ({}) must be in [0, 2^62]", Derived::name, batches_done);
    detail::StateFields f = position();
    if (!f.n_obs && batches_done != 0)
      detail::throw_config(
          "{}: state: batches_done ({}) must be 0 before sample() has begun the epoch: a point inside an epoch is "
          "tied to the n_obs it was sampled over",
          Derived::name, batches_done);
    if (played_ && batches_done < f.dealt_at)
      detail::throw_config(
          "{}: state: batches_done ({}) counts from the epoch's start and cannot be below the {} batches read before "
          "the restart",
          Derived::name, batches_done, f.dealt_at);
    f.batches_done = batches_done;
    return detail::StateAccess::make(f);
  }

  /// The point the next `sample()` begins at: a pending restore's, else the start of epoch
  /// `epoch()`, which no worker and no `n_obs` is tied to. What a checkpoint taken between two
  /// epochs records, so that its restore plays the next epoch, not the finished one's empty rest.
  [[nodiscard]] SamplerState next_state() const {
    if (pending_) return state(pending_->batches_done());
    return detail::StateAccess::make(start_of(next_));
  }

  /// Makes the next `sample()` continue exactly after `state`: its remaining batches equal those
  /// of the uninterrupted epoch. Throws `StateMismatchError` for a state this sampler cannot
  /// continue (another configuration or seed, a sampler of another kind); the next `sample()`
  /// throws it for another `n_obs` or worker than the state's. Strongly exception-safe.
  void restore(const SamplerState& state) {
    self().check_restore(state);
    std::optional<SamplerState> pending = state;
    static_assert(std::is_nothrow_move_assignable_v<std::optional<SamplerState>>);
    pending_ = std::move(pending);
    played_.reset();
    next_ = state.epoch();
  }

  /// As `restore`, the way a loader resumes: a state taken at its epoch's end (no batch of that
  /// epoch left for the state's `n_obs` and worker) moves to the start of the next epoch instead,
  /// so the next `sample()` plays epoch `state.epoch() + 1`, not the finished epoch's empty rest.
  /// Throws what `restore` throws, and here what the next `sample()` would throw for the state's
  /// `n_obs` and worker (`batches_done` past its epoch's end). Strongly exception-safe.
  ///
  ///     loader_sampler.resume(cs::load_state(path));  // mid-epoch: its rest; at its end: the next
  void resume(const SamplerState& state) {
    const EpochDriver before = *this;
    restore(state);
    if (!state.n_obs()) return;
    try {
      const WorkerInfo worker{.id = state.worker(), .num_workers = state.num_workers()};
      if (n_batches_left(*state.n_obs(), worker) == 0) set_epoch(state.epoch() + 1);
    } catch (...) {
      static_cast<EpochDriver&>(*this) = before;
      throw;
    }
  }

 protected:
  EpochDriver() = default;

  /// The restored state the next `sample()` continues, if any.
  [[nodiscard]] const std::optional<SamplerState>& pending() const noexcept { return pending_; }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  // The fields of a state taken now, but batches_done: a pending restore's point (the next
  // sample() plays that deal, so a checkpoint taken before it must name it), else the epoch
  // played last, else the start of the next, which no worker and no n_obs is tied to.
  [[nodiscard]] detail::StateFields position() const {
    if (pending_) {
      detail::StateFields f = detail::StateAccess::fields(*pending_);
      f.fingerprint = self().fingerprint();
      f.order_generation = detail::order_generation_of<Derived>;
      f.seed = self().seed();
      return f;
    }
    if (played_) return *played_;
    return start_of(next_);
  }

  // The start of `epoch`, begun by no sample() yet.
  [[nodiscard]] detail::StateFields start_of(std::uint64_t epoch) const {
    return {.fingerprint = self().fingerprint(),
            .order_generation = detail::order_generation_of<Derived>,
            .seed = self().seed(),
            .epoch = epoch,
            .n_obs = std::nullopt,
            .batches_done = 0,
            .world_size = self().readers(),
            .plan_world_size = self().readers(),
            .num_workers = 1,
            .worker = 0,
            .runs = std::nullopt,
            .dealt_at = 0};
  }

  // The batches a restored state's stream skips over `n_obs` for `worker`: its batches_done, or
  // 0 without one. Throws if that state is of another worker or another dataset size. A state
  // at the start of an epoch no sample() had begun (n_obs=any, 0 batches done) is no worker's
  // point: any worker, as any size, begins it.
  [[nodiscard]] std::int64_t resume_point(const WorkerInfo& worker, std::int64_t n_obs) const {
    if (!pending_ || !pending_->n_obs()) return 0;
    if (pending_->num_workers() != worker.num_workers || pending_->worker() != worker.id)
      detail::throw_state_mismatch(
          "restore: the state is of worker {} of {}, but sample() was called for worker {} of {}", pending_->worker(),
          pending_->num_workers(), worker.id, worker.num_workers);
    if (*pending_->n_obs() != n_obs)
      detail::throw_state_mismatch(
          "restore: the state was taken in an epoch over n_obs = {} observations, but sample() was called with "
          "n_obs = {}; a state resumes only the epoch it was taken in (for a dataset that changed size, start the "
          "epoch afresh with set_epoch)",
          *pending_->n_obs(), n_obs);
    return pending_->batches_done();
  }

  // The range the next sample(n_obs, worker) returns, checked, without moving: sample(),
  // n_batches() and n_batches_left() agree by construction.
  [[nodiscard]] range_type prepare(std::int64_t n_obs, const WorkerInfo& worker) const {
    detail::check_worker(worker);
    const detail::StateFields* resume = pending_ ? &detail::StateAccess::fields(*pending_) : nullptr;
    // The configuration may have changed since restore() (a mixture's update_weights).
    if (pending_) self().check_restore(*pending_);
    const bool redeal = resume && self().redeals(*resume, worker);
    // Refuses a state of another n_obs on every path, and of another worker unless re-dealt (a
    // re-dealt state is always of the whole reader).
    const std::int64_t point = resume_point(redeal ? WorkerInfo{} : worker, n_obs);
    EpochLayout<Plan> l = self().lay_out(n_obs, next_, resume, redeal);
    // Counts run from the epoch's start; the stream skips what was read since its runs were dealt.
    const std::int64_t skip = redeal ? 0 : point - (resume ? resume->dealt_at : 0);
    detail::StateFields stamp{.fingerprint = self().fingerprint(),
                              .order_generation = detail::order_generation_of<Derived>,
                              .seed = self().seed(),
                              .epoch = next_,
                              .n_obs = n_obs,
                              .batches_done = 0,
                              .world_size = self().readers(),
                              .plan_world_size = l.plan_world_size,
                              .num_workers = worker.num_workers,
                              .worker = worker.id,
                              .runs = std::move(l.dealt),
                              .dealt_at = l.dealt_at};
    range_type range(std::move(l.plan), std::move(l.runs), worker, skip, std::move(stamp));
    const std::int64_t share = range.share_batches();
    if (skip > share)
      detail::throw_state_mismatch(
          "restore: the state's batches_done ({}) exceed the {} batches of its stream for this n_obs", skip, share);
    // Each term is at most 2^62 (a state's dealt_at, batches of the plan), but a corrupt state
    // may name more batches in all than an epoch holds, up to 2^63: refused, not overflowed.
    if (l.dealt_at > detail::max_size - share)
      detail::throw_state_mismatch(
          "{}: restore: the state's dealt_at plus the batches dealt after it ({} + {}) must be <= 2^62", Derived::name,
          l.dealt_at, share);
    return range;
  }

  std::uint64_t next_ = 0;
  std::optional<SamplerState> pending_;
  std::optional<detail::StateFields> played_;
};

}  // namespace chunksampler

namespace chunksampler::detail {

/// The order a sampler reads: the sampler that draws it (`name`), its `order_generation`, and
/// the oldest generation whose orders this configuration reads alike (`oldest`, at most
/// `generation`).
struct OrderGeneration {
  std::string_view sampler;
  std::uint32_t generation;
  std::uint32_t oldest;
};

/// Throws unless `state` was taken from a sampler of this configuration and seed, in the
/// generation of the order it reads. The configuration is checked first: a state of another
/// kind of sampler is refused for its fingerprint, whatever its generation.
inline void check_state_of(std::string_view sampler, const SamplerState& state, std::uint64_t fingerprint,
                           std::uint64_t seed, OrderGeneration order) {
  if (state.fingerprint() != fingerprint)
    throw_state_mismatch("{}: restore: the state's fingerprint ({:016x}) is not this configuration's ({:016x})",
                         sampler, state.fingerprint(), fingerprint);
  if (state.order_generation() > order.generation || state.order_generation() < order.oldest)
    throw_state_mismatch(
        "{}: restore: the state was written by generation {} of {}'s order; this version draws generation {}{}: "
        "take a new state",
        sampler, state.order_generation(), order.sampler, order.generation,
        order.oldest < order.generation
            ? fmt::format(" (and reads generation {} on, for this configuration)", order.oldest)
            : std::string());
  if (state.seed() != seed)
    throw_state_mismatch("{}: restore: the state's seed ({}) is not this sampler's ({})", sampler, state.seed(), seed);
}

}  // namespace chunksampler::detail
