// SPDX-License-Identifier: MIT
#pragma once

// DistributedSampler's own members are declared here; `epoch`, `set_epoch`, `n_batches`,
// `n_batches_left`, `sample`, `state` and `restore` are those of `EpochDriver`
// (<chunksampler/epoch_driver.hpp>), driving this rank's share of each epoch.

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/batch_runs.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/dist_info.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/epoch_driver.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace chunksampler {

namespace detail {

/// Whether `sampler` draws with replacement (`replacement()`, where it has one): its epoch does
/// not partition its range, so no part of the range is left out to even out the ranks.
template <class S>
[[nodiscard]] constexpr bool draws_with_replacement(const S& sampler) {
  if constexpr (requires {
                  { sampler.replacement() } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(sampler.replacement());
  }
  return false;
}

/// `S`'s name in messages, where it has one.
template <class S>
inline constexpr std::string_view sampler_name_of = [] {
  if constexpr (requires { std::string_view{S::name}; }) return std::string_view{S::name};
  return std::string_view{"the wrapped sampler"};
}();

/// The plan type of the samplers `S` makes.
template <class S>
using plan_of = decltype(std::declval<const S&>().plan(std::int64_t{}, std::uint64_t{}));

}  // namespace detail

/// How `DistributedSampler` splits the data among ranks.
enum class ShardMode {
  /// Rank r reads its own contiguous slice of the range, shuffled on its own stream (annbatch).
  contiguous,
  /// One permutation of all chunks per epoch, shared by every rank through the common seed, is
  /// dealt out in contiguous blocks of batches: each rank sees different data every epoch, and
  /// a state restores on another number of ranks.
  global,
};

/// What happens to the observations that do not divide evenly among ranks and batches.
enum class Remainder {
  /// Left out, the same ones every epoch: the range's tail (annbatch).
  drop,
  /// Nothing left out: every rank gets the same number of full batches by repeating a few rows
  /// (PyTorch's DistributedSampler pads likewise).
  pad,
  /// Left out, as many as `drop`, but from the range's tail in even epochs and its head in odd
  /// ones: every observation is read in any two consecutive epochs.
  rotate,
};

/// Options of `DistributedSampler`.
struct DistributedOptions {
  /// Every rank yields the same number of full batches (the remainder policy says how). Without
  /// it, shares are cut at single observations instead of whole batches: in contiguous mode every
  /// rank reads `size / world_size` rows (drop and rotate leave out fewer than `world_size`, pad
  /// repeats fewer) and the last batch may be short; in global mode nothing is left out or
  /// repeated and ranks may differ by one batch.
  bool enforce_equal_batches = true;
  ShardMode mode = ShardMode::contiguous;  ///< how ranks split the data
  Remainder remainder = Remainder::drop;   ///< what becomes of the uneven rest
};

/// Gives each rank of a data-parallel job its disjoint share of any sampler's epochs.
///
/// Contiguous mode (default): with the wrapped sampler covering `size` observations (the union
/// of its mask's ranges, or all of `n_obs`), every rank gets `per_rank = size / world_size`
/// observations, rounded down to a multiple of `batch_size()` when `enforce_equal_batches`, and
/// rank r reads positions `[r * per_rank, (r + 1) * per_rank)` of the union (for one range
/// `[start, ...)`: `[start + r * per_rank, start + (r + 1) * per_rank)`), a shard that may span
/// several ranges, shuffled on the rank's own stream `rng().spawn(rank)`. Global mode: see
/// `ShardMode::global`.
///
/// The wrapped sampler is copied at construction and never changed by the caller's later edits.
///
/// Its epochs are driven by `EpochDriver` (`sample`, `n_batches`, `state`, `restore`, ...) over
/// this rank's layout: `n_batches` is this rank's (or worker's) count, the same on every rank
/// when `enforce_equal_batches`, and after an elastic restore the state's `batches_done` plus this
/// rank's part of what the old ranks left. Every rank of a synchronous job is at the same point,
/// so any rank's state restores all of them. A state of worker `i` of `k` continues in
/// `sample(n_obs, {i, k})` on the same world size; in global mode a state taken without workers
/// may also come from another world size, or be read by several workers: the batches the old
/// ranks had not read are dealt among the new ranks (drop leaves out fewer than `world_size` of
/// them, pad repeats as many), and a rank's workers split its part.
///
///     cs::RandomSampler base({.chunk_size = 64, .preload_nchunks = 32, .batch_size = 256});
///     cs::DistributedSampler dist(base, cs::dist::from_env());
///     for (const cs::LoadRequest& request : dist.sample(n_obs)) { /* this rank's reads */ }
template <DistributableSampler S>
class DistributedSampler : public EpochDriver<DistributedSampler<S>, detail::plan_of<S>> {
  using Driver = EpochDriver<DistributedSampler<S>, detail::plan_of<S>>;

 public:
  /// The wrapped sampler's type.
  using sampler_type = S;
  using typename Driver::plan_type;
  using typename Driver::range_type;

  /// Wraps a copy of `sampler`; calls `dist_info` exactly once, here. Throws `ConfigError`
  /// unless `world_size >= 1` and `0 <= rank < world_size`.
  template <DistInfoSource F>
  DistributedSampler(const S& sampler, F&& dist_info, DistributedOptions options = {})
      : DistributedSampler(sampler, static_cast<DistInfo>(std::forward<F>(dist_info)()), options) {}

  /// Wraps a copy of `sampler` for the rank and world size in `info`; starts at `sampler`'s epoch
  /// where it has epochs, else at epoch 0.
  DistributedSampler(const S& sampler, DistInfo info, DistributedOptions options = {})
      : sampler_(sampler), info_(info), options_(options) {
    if (info_.world_size < 1 || info_.world_size > detail::max_size)
      detail::throw_config("DistributedSampler: world_size ({}) must be in [1, 2^62]", info_.world_size);
    if (info_.rank < 0 || info_.rank >= info_.world_size)
      detail::throw_config("DistributedSampler: rank ({}) must be in [0, world_size) = [0, {})", info_.rank,
                           info_.world_size);
    if constexpr (HasEpochs<S>) {
      this->set_epoch(sampler_.epoch());
      // The position is this sampler's from here on: the copy keeps its settings only, not an
      // epoch or a pending restore that nothing would read.
      sampler_.set_epoch(0);
    }
  }

  /// This process's rank.
  [[nodiscard]] std::int64_t rank() const noexcept { return info_.rank; }
  /// Processes in the job.
  [[nodiscard]] std::int64_t world_size() const noexcept { return info_.world_size; }
  /// The options given at construction.
  [[nodiscard]] const DistributedOptions& options() const noexcept { return options_; }
  /// The wrapped copy, read-only: the settings of every rank's plans (its mask is the whole job's
  /// range, not this rank's shard). Its own position is reset, at epoch 0 with no pending restore:
  /// this sampler's is the one that counts. To change its weights, call `update_weights` here.
  [[nodiscard]] const S& sampler() const noexcept { return sampler_; }
  /// Changes the wrapped sampler's weights (as `MixtureSampler::update_weights`, keeping its
  /// temperature), where it has them; call it on every rank alike, between epochs. They shape
  /// the epochs of later `sample()` calls; a state restored before the change is checked again
  /// by the next `sample()`, which refuses it if the configuration it was taken under is gone.
  ///
  ///     dist.update_weights({0.2, 0.8});   // every rank, between epochs
  void update_weights(std::vector<double> weights)
    requires requires(S& s) { s.update_weights(std::move(weights)); }
  {
    sampler_.update_weights(std::move(weights));
  }
  /// Changes the wrapped sampler's weights and temperature, as above.
  void update_weights(std::vector<double> weights, double temperature)
    requires requires(S& s) { s.update_weights(std::move(weights), temperature); }
  {
    sampler_.update_weights(std::move(weights), temperature);
  }
  /// The wrapped sampler's batch size: positions per batch, the last of an epoch possibly fewer.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return sampler_.batch_size(); }
  /// The wrapped sampler's chunk size, where it has one.
  [[nodiscard]] std::int64_t chunk_size() const noexcept
    requires requires(const S& s) {
      { s.chunk_size() } -> std::convertible_to<std::int64_t>;
    }
  {
    return sampler_.chunk_size();
  }
  /// The wrapped sampler's chunks per request, where it has them.
  [[nodiscard]] std::int64_t preload_nchunks() const noexcept
    requires requires(const S& s) {
      { s.preload_nchunks() } -> std::convertible_to<std::int64_t>;
    }
  {
    return sampler_.preload_nchunks();
  }
  /// Whether the wrapped sampler's order is random.
  [[nodiscard]] bool shuffle() const noexcept { return sampler_.shuffle(); }
  /// The wrapped sampler's mask: the observations all ranks together cover.
  [[nodiscard]] std::optional<Ranges> mask() const { return sampler_.mask(); }
  /// The random stream this rank draws from: in contiguous mode the wrapped sampler's, spawned
  /// by rank; in global mode the one all ranks share.
  [[nodiscard]] Rng rng() const
    requires requires(const S& s) {
      { s.rng() } -> std::convertible_to<Rng>;
    }
  {
    return Rng(sampler_.rng()).spawn(stream());
  }
  /// A hash of every setting that shapes the job's epochs (not the world size in global mode).
  [[nodiscard]] std::uint64_t fingerprint() const noexcept {
    std::uint64_t h = detail::derive(sampler_.fingerprint(), 0x64697374ULL);  // "dist"
    h = detail::derive(h, static_cast<std::uint64_t>(options_.mode));
    h = detail::derive(h, static_cast<std::uint64_t>(options_.remainder));
    h = detail::derive(h, options_.enforce_equal_batches ? 1U : 0U);
    if (options_.mode == ShardMode::contiguous) h = detail::derive(h, static_cast<std::uint64_t>(info_.world_size));
    return h;
  }

  /// The observations this rank reads in epoch `epoch` (contiguous mode), or that all ranks
  /// read together (global mode); throws if the epoch cannot be served. While a restore is
  /// pending, the restored epoch's: in global mode the window of the plan the state's ranks
  /// were reading, whatever this job's world size.
  [[nodiscard]] Ranges shard(std::int64_t n_obs) const { return shard(n_obs, this->epoch()); }
  [[nodiscard]] Ranges shard(std::int64_t n_obs, std::uint64_t epoch) const {
    return wrapped_shard(n_obs, epoch, plan_world_size(epoch)).mask;
  }

  /// The generation of the order it deals: the wrapped sampler's, which its states record (it
  /// deals that order without a stream of its own).
  static constexpr std::uint32_t order_generation = detail::order_generation_of<S>;

  /// Throws `ConfigError` if this rank's epoch over `n_obs` cannot be served.
  void validate(std::int64_t n_obs) const { (void)lay_out(n_obs, this->epoch(), nullptr, false); }

 private:
  // In global mode every rank reads one plan, on the stream no rank number can name.
  static constexpr std::uint64_t global_stream = ~std::uint64_t{0};

  friend Driver;
  static constexpr std::string_view name = "DistributedSampler";

  // The layout policy of a rank (see EpochDriver): this rank's batches of each epoch.
  [[nodiscard]] std::int64_t readers() const noexcept { return info_.world_size; }

  void check_restore(const SamplerState& state) const {
    const detail::StateFields& f = detail::StateAccess::fields(state);
    if (options_.mode == ShardMode::contiguous && f.world_size != info_.world_size)
      detail::throw_state_mismatch(
          "DistributedSampler: restore: the state is of world_size {}, this job has {}; contiguous shards cannot "
          "change world size (use ShardMode::global for elastic restarts)",
          f.world_size, info_.world_size);
    detail::check_state_of(name, state, fingerprint(), seed(),
                           {detail::sampler_name_of<S>, order_generation,
                            detail::oldest_order_generation_of(sampler_)});
    if (options_.mode == ShardMode::contiguous && (f.plan_world_size != f.world_size || f.runs))
      detail::throw_state_mismatch(
          "DistributedSampler: restore: a contiguous-mode state has no runs and one world size");
    if (f.world_size != info_.world_size && f.num_workers != 1)
      detail::throw_state_mismatch(
          "DistributedSampler: restore: an elastic restart (world_size {} to {}) needs a state taken without "
          "workers (this one is of worker {} of {})",
          f.world_size, info_.world_size, f.worker, f.num_workers);
  }

  // Global mode re-deals what the state's ranks left unread when the world size changed, and
  // when a state taken without workers is read by several: the re-dealt rest of the epoch is a
  // new stream, which this rank's workers split. Otherwise the state's own stream continues,
  // for the worker it is of.
  [[nodiscard]] bool redeals(const detail::StateFields& resume, const WorkerInfo& worker) const noexcept {
    return options_.mode == ShardMode::global &&
           (resume.world_size != info_.world_size || (resume.num_workers == 1 && worker.num_workers != 1));
  }

  // The world size epoch `epoch`'s plan is laid out for: a pending global-mode restore's.
  [[nodiscard]] std::int64_t plan_world_size(std::uint64_t epoch) const noexcept {
    const std::optional<SamplerState>& pending = this->pending();
    return pending && options_.mode == ShardMode::global && pending->epoch() == epoch
               ? detail::StateAccess::fields(*pending).plan_world_size
               : info_.world_size;
  }

  [[nodiscard]] std::uint64_t stream() const noexcept {
    return options_.mode == ShardMode::global ? global_stream : static_cast<std::uint64_t>(info_.rank);
  }
  [[nodiscard]] std::uint64_t seed() const {
    if constexpr (requires(const S& s) { s.rng().seed(); }) return sampler_.rng().seed();
    return 0;
  }
  // What every rank's share is a multiple of when `ranks` ranks split an epoch: a whole batch
  // each with enforce_equal_batches, else one observation each.
  [[nodiscard]] std::int64_t share_multiple(std::int64_t ranks) const {
    if (!options_.enforce_equal_batches) return ranks;
    // Past 2^62 no epoch holds a whole batch per rank, and the product would overflow.
    if (!detail::product_fits(ranks, sampler_.batch_size()))
      detail::throw_config(
          "DistributedSampler: world_size ({}) * batch_size ({}) must be <= 2^62: with enforce_equal_batches every "
          "rank needs one whole batch",
          ranks, sampler_.batch_size());
    return ranks * sampler_.batch_size();
  }

  // The shard the wrapped sampler is restricted to: this rank's (contiguous) or the window all
  // ranks read (global).
  [[nodiscard]] Shard wrapped_shard(std::int64_t n_obs, std::uint64_t epoch, std::int64_t plan_world_size) const {
    const std::int64_t epoch_size = sampler_.epoch_size(n_obs);
    // Shards are cut by observation count over the union of the mask's ranges: a shard's
    // positions [first, first + count) of the union, which may span several ranges.
    const std::optional<Ranges> mask = sampler_.mask();
    const Ranges range = mask ? mask->resolve(n_obs) : Ranges(0, n_obs);
    const std::int64_t size = range.count();
    // No fixed budget: the epoch reads the range once, so the window follows the remainder
    // policy. A sampler that draws with replacement keeps the whole range, whatever its budget.
    const bool whole = epoch_size == size && !detail::draws_with_replacement(sampler_);
    const std::int64_t world = plan_world_size;
    const bool odd = epoch % 2 == 1;
    const auto too_small = [&](std::int64_t have) {
      detail::throw_config("DistributedSampler: {} over world_size ({}) leave {} per rank (batch_size {}, "
                           "enforce_equal_batches {}); every rank needs at least {}",
                           have == size ? fmt::format("{} observations", have) : fmt::format("num_samples ({})", have),
                           world, have / world, sampler_.batch_size(), options_.enforce_equal_batches,
                           options_.enforce_equal_batches ? "one whole batch" : "one observation");
    };
    if (options_.mode == ShardMode::global) {
      const std::int64_t u = share_multiple(world);
      if (!options_.enforce_equal_batches) {
        if (epoch_size < world) too_small(epoch_size);
        return {.mask = range, .stream = global_stream, .budget = epoch_size};
      }
      if (options_.remainder == Remainder::pad) {
        if (!detail::product_fits(detail::ceil_div(epoch_size, u), u))
          detail::throw_config("DistributedSampler: padding {} observations to a multiple of {} exceeds 2^62",
                               epoch_size, u);
        return {.mask = range, .stream = global_stream, .budget = detail::ceil_div(epoch_size, u) * u};
      }
      const std::int64_t kept = detail::round_down(epoch_size, u);
      if (kept < 1) too_small(epoch_size);
      if (!whole) return {.mask = range, .stream = global_stream, .budget = kept};
      const std::int64_t offset = options_.remainder == Remainder::rotate && odd ? size - kept : 0;
      return {.mask = range.sub(offset, kept), .stream = global_stream, .budget = kept};
    }
    const std::int64_t r = info_.rank;
    const std::int64_t u = share_multiple(1);
    if (options_.remainder == Remainder::pad) {
      const std::int64_t rows = size / world;
      const std::int64_t extra = size % world;
      if (rows < 1) too_small(size);
      // A rank's rows rounded up to whole batches may pass 2^62 (2^62 rows on one rank): refused
      // here, so that shard() refuses what sample() does, with a message about the padding.
      const std::int64_t positions = detail::ceil_div(epoch_size, world);
      if (!detail::product_fits(detail::ceil_div(positions, u), u))
        detail::throw_config(
            "DistributedSampler: padding {} observations per rank to whole batches of batch_size ({}) exceeds 2^62",
            positions, u);
      const std::int64_t start = r * rows + std::min(r, extra);
      return {.mask = range.sub(start, rows + (r < extra ? 1 : 0)),
              .stream = static_cast<std::uint64_t>(r),
              .budget = detail::ceil_div(positions, u) * u};
    }
    const std::int64_t per_rank = detail::round_down(size / world, u);
    if (per_rank < 1) too_small(size);
    const std::int64_t offset = options_.remainder == Remainder::rotate && odd ? size - world * per_rank : 0;
    const std::int64_t start = offset + r * per_rank;
    const std::int64_t budget = whole ? per_rank : detail::round_down(epoch_size / world, u);
    if (budget < 1) too_small(epoch_size);
    return {.mask = range.sub(start, per_rank), .stream = static_cast<std::uint64_t>(r), .budget = budget};
  }

  // Rank r's block of `total` batches dealt among `world` ranks, as positions of their
  // concatenation; with pad the block may run past `total` and wraps around. No bound passes
  // INT64_MAX: both are at most 2^62, and world * ceil(total / world) <= total + world - 1.
  [[nodiscard]] BatchRun rank_block(std::int64_t total, std::int64_t world, std::int64_t r) const noexcept {
    if (!options_.enforce_equal_batches) {
      const std::int64_t each = total / world;
      const std::int64_t extra = total % world;
      const std::int64_t start = r * each + std::min(r, extra);
      return {start, start + each + (r < extra ? 1 : 0)};
    }
    const std::int64_t each = options_.remainder == Remainder::pad ? detail::ceil_div(total, world) : total / world;
    return {r * each, (r + 1) * each};
  }

  // The plan of `epoch` and this rank's runs of it; `resume` may change both: `redeal` deals what
  // its ranks left unread among this job's (an elastic restart, or workers after a state of none).
  [[nodiscard]] EpochLayout<plan_type> lay_out(std::int64_t n_obs, std::uint64_t epoch,
                                               const detail::StateFields* resume, bool redeal) const {
    const std::int64_t plan_world_size =
        resume && options_.mode == ShardMode::global ? resume->plan_world_size : info_.world_size;
    plan_type plan = sampler_.with_shard(wrapped_shard(n_obs, epoch, plan_world_size)).plan(n_obs, epoch);
    const std::int64_t n = plan.n_batches();
    if (options_.mode == ShardMode::contiguous)
      return {.plan = std::move(plan),
              .runs = {{0, n}},
              .dealt = std::nullopt,
              .dealt_at = 0,
              .plan_world_size = plan_world_size};

    const bool dealt = resume && resume->runs;
    // The batches the ranks share out: the whole plan, or those a state's ranks were dealt.
    std::vector<BatchRun> pool = dealt ? *resume->runs : std::vector<BatchRun>{{0, n}};
    std::int64_t dealt_at = dealt ? resume->dealt_at : 0;
    if (!pool.empty() && pool.back().end > n)
      detail::throw_state_mismatch("DistributedSampler: restore: the state's runs end at batch {}, the epoch has {}",
                                   pool.back().end, n);
    if (redeal) {
      // The old ranks' unread batches, in their order, are the new ranks' epoch.
      const std::int64_t total = detail::total_batches(pool);
      const std::int64_t read = resume->batches_done - dealt_at;
      // Rank 0's block is the largest: a point past it lies past every old rank's end, refused as
      // on the same world size, where the stream's length refuses it.
      const std::int64_t longest = rank_block(total, resume->world_size, 0).size();
      // The message's dealt_at + longest is below batches_done (<= 2^62): it cannot overflow.
      if (read > longest)
        detail::throw_state_mismatch("restore: the state's batches_done ({}) exceed the {} batches of its stream for "
                                     "this n_obs (its {} ranks had "
                                     "at most {} each after batch {})",
                                     resume->batches_done, dealt_at + longest, resume->world_size, longest, dealt_at);
      std::vector<BatchRun> left;
      // Blocks start in rank order, so ranks from `total` on were dealt nothing: a state of
      // any world size (2^62 in a corrupt file) costs at most one step per batch.
      for (std::int64_t r = 0; r < std::min(resume->world_size, total); ++r) {
        const BatchRun b = rank_block(total, resume->world_size, r);
        const std::int64_t from = b.begin + std::min(read, b.size());
        const std::int64_t to = std::min(b.end, total);
        if (from < to) detail::cut_runs(pool, from, to, left);
      }
      pool = std::move(left);
      dealt_at = resume->batches_done;
    }
    std::vector<BatchRun> runs;
    const std::int64_t total = detail::total_batches(pool);
    if (total > 0) {
      const BatchRun mine = rank_block(total, info_.world_size, info_.rank);
      for (std::int64_t at = mine.begin; at < mine.end;) {
        const std::int64_t offset = at % total;
        const std::int64_t length = std::min(mine.end - at, total - offset);
        detail::cut_runs(pool, offset, offset + length, runs);
        at += length;
      }
    }
    std::optional<std::vector<BatchRun>> dealt_runs;
    if (dealt || redeal) dealt_runs = std::move(pool);
    return {.plan = std::move(plan),
            .runs = std::move(runs),
            .dealt = std::move(dealt_runs),
            .dealt_at = dealt_at,
            .plan_world_size = plan_world_size};
  }

  S sampler_;
  DistInfo info_;
  DistributedOptions options_;
};

}  // namespace chunksampler
