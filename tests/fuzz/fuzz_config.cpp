// SPDX-License-Identifier: MIT

// fuzz_config: any configuration of RandomSampler, SequentialSampler, ClassSampler (small code
// arrays) and MixtureSampler (a few datasets), plain or under DistributedSampler (any world size
// and rank, both shard modes, every remainder policy, with or without equal batches), for any
// worker and epoch. Each step either refuses with a clear std::invalid_argument or keeps the
// contract: validate, n_batches and sample agree on what they refuse; the counts follow the
// README's formulas; contiguous shards are the README's slices, disjoint and equal in batches;
// and every request of a bounded prefix of the epoch (all of it when small) has chunks inside
// the shard and the mask, positions inside the buffer and full batches but the stream's last.

#include "fuzz_support.hpp"

#include <chunksampler.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace fuzz {
namespace {

// Bounds that keep an input well under a millisecond or two: a stream is read only when no
// request it fills exceeds `max_request` positions (filling them is what a walk costs), and a
// walk stops after `max_batches` batches or `max_positions` positions.
constexpr std::int64_t max_request = 4096;
constexpr std::int64_t max_batches = 1000;
constexpr std::int64_t max_positions = 8192;

// Products of two sizes up to 2^62 (world_size * batch_size, say) need more than 64 bits.
__extension__ using int128 = __int128;

/// What the configuration promises, worked out from the options alone (never asked of the
/// library), for the checks of any sampler kind.
struct Facts {
  std::int64_t n_obs = 0;
  cs::Slice range;              ///< the observations the sampler covers: its mask, [0, n_obs), or the datasets
  std::int64_t epoch_rows = 0;  ///< positions an epoch holds before drop_last (README's n)
  std::int64_t chunk_size = 1;
  std::int64_t preload_nchunks = 1;
  std::int64_t batch_size = 1;
  bool drop_last = false;
  bool replacement = false;         ///< draws with replacement: in global mode the window is the whole range
  bool reads_once = false;          ///< no observation twice in an epoch (no replacement)
  bool aligned = false;             ///< every chunk inside one cell of the grid of multiples of chunk_size
  bool pieces = false;              ///< requests filled with rows of grid chunks (RandomSampler, SequentialSampler)
  bool in_order = false;            ///< observations one after another (SequentialSampler)
  bool shards_rows = true;          ///< a shard is rows; false for a mixture, whose shards are fractions
  std::vector<std::int32_t> codes;  ///< ClassSampler: every chunk of one class of weight > 0
  bool class_batches = true;        ///< with codes: every batch of one class (a WeightedClassSampler's mix)
  std::vector<double> class_weights;
  std::vector<std::int64_t> boundaries;  ///< MixtureSampler: a request reads one dataset's grid
  std::vector<double> weights;
};

[[nodiscard]] std::int64_t batches_of(std::int64_t rows, const Facts& f) {
  return f.drop_last ? rows / f.batch_size : rows / f.batch_size + (rows % f.batch_size != 0 ? 1 : 0);
}

[[nodiscard]] std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Dataset d's part for the shard [a, b) of a mixture's [0, total): the fraction with_shard documents,
// on the dataset's grid of m = size / chunk_size whole chunks (chunks [a * m / total, b * m / total)).
[[nodiscard]] cs::Slice mixture_part(const Facts& f, std::size_t d, cs::Slice shard) {
  const int128 total = f.boundaries.back();
  const int128 chunks = (f.boundaries[d + 1] - f.boundaries[d]) / f.chunk_size;
  const auto at = [&](std::int64_t x) {
    return f.boundaries[d] + static_cast<std::int64_t>(x * chunks / total) * f.chunk_size;
  };
  return {at(shard.start), at(shard.stop)};
}

// The walk's expectations for a stream whose chunks lie in `bounds` (a mixture: `shard` designates parts).
[[nodiscard]] Expect expect_for(const Facts& f, cs::Slice bounds, std::optional<cs::Slice> shard, bool full,
                                bool padded) {
  Expect e{.batch_size = f.batch_size,
           .chunk_size = f.chunk_size,
           // Filled requests: also a piece cut at each end and the range's short head and tail.
           .max_chunks = f.pieces ? f.preload_nchunks + 3 : f.preload_nchunks,
           .bounds = bounds,
           .full_batches = full || f.drop_last,
           .distinct_positions = !padded,
           .distinct_observations = f.reads_once && !padded,
           .on_chunk = {},
           .on_batch = {}};
  if (f.aligned)
    e.on_chunk = [size = f.chunk_size](const cs::LoadRequest&, const cs::Slice& chunk) {
      check(chunk.start / size == (chunk.stop - 1) / size, "chunk [{}, {}) crosses a multiple of chunk_size ({})",
            chunk.start, chunk.stop, size);
    };
  if (!f.codes.empty()) {
    const auto weight = [&f](std::int32_t code) {
      return f.class_weights.empty() ? 1.0 : f.class_weights[static_cast<std::size_t>(code)];
    };
    e.on_chunk = [&f, weight](const cs::LoadRequest&, const cs::Slice& chunk) {
      const std::int32_t code = f.codes[static_cast<std::size_t>(chunk.start)];
      check(weight(code) > 0, "a chunk of class {}, whose weight is 0", code);
      for (std::int64_t i = chunk.start; i < chunk.stop; ++i)
        check(f.codes[static_cast<std::size_t>(i)] == code, "chunk [{}, {}) spans two classes", chunk.start,
              chunk.stop);
    };
    if (f.class_batches)
      e.on_batch = [&f](std::span<const std::int64_t> observations) {
        const std::int32_t code = f.codes[static_cast<std::size_t>(observations.front())];
        for (const std::int64_t obs : observations)
          check(f.codes[static_cast<std::size_t>(obs)] == code, "a batch mixes classes {} and {}", code,
                f.codes[static_cast<std::size_t>(obs)]);
      };
  }
  if (!f.boundaries.empty()) {
    const cs::Slice designated = shard.value_or(cs::Slice{0, f.boundaries.back()});
    e.on_chunk = [&f, designated](const cs::LoadRequest& request, const cs::Slice& chunk) {
      const auto dataset_of = [&f](std::int64_t obs) {
        return static_cast<std::size_t>(std::ranges::upper_bound(f.boundaries, obs) - f.boundaries.begin() - 1);
      };
      const std::size_t d = dataset_of(chunk.start);
      check(d == dataset_of(request.chunks.front().start), "a request reads two datasets");
      check(f.weights.empty() || f.weights[d] > 0, "a chunk of dataset {}, whose weight is 0", d);
      const cs::Slice part = mixture_part(f, d, designated);
      check(part.start <= chunk.start && chunk.stop <= part.stop && (chunk.start - part.start) % f.chunk_size == 0,
            "chunk [{}, {}) is not on the grid of dataset {}'s part [{}, {})", chunk.start, chunk.stop, d, part.start,
            part.stop);
    };
  }
  return e;
}

// The observations of a whole walk by the only worker: in order from `bounds.start`, or all of `bounds`.
void check_whole(const Facts& f, const Walk& w, cs::Slice bounds, bool covers) {
  if (f.in_order)
    for (std::size_t i = 0; i < w.observations.size(); ++i)
      check(w.observations[i] == bounds.start + static_cast<std::int64_t>(i),
            "SequentialSampler read {} at position {} of the stream from {}", w.observations[i], i, bounds.start);
  if (covers)
    check(w.positions == bounds.size(), "an epoch read {} distinct observations of the {} it covers", w.positions,
          bounds.size());
}

/// One request, owned: to compare two epochs.
struct Owned {
  std::vector<cs::Slice> chunks;
  std::vector<std::int64_t> positions;
  friend bool operator==(const Owned&, const Owned&) = default;
};
template <class Range>
[[nodiscard]] std::vector<Owned> first_requests(Range&& range, std::size_t count) {
  std::vector<Owned> out;
  for (const cs::LoadRequest& request : range) {
    out.push_back({{request.chunks.begin(), request.chunks.end()},
                   {request.splits.positions().begin(), request.splits.positions().end()}});
    if (out.size() == count) break;
  }
  return out;
}

// Whether reading a stream stays within the time budget: what each request it yields fills (its
// whole request, before the stream cuts out its batches) is small. A huge `preload_nchunks`
// with a small epoch is still walked: then the epoch, not the shape, bounds a request.
template <class Range>
[[nodiscard]] bool small_requests(const Range& range) {
  return range.plan().max_positions() <= max_request;
}

// What a sampler says of an epoch over `f.n_obs` before it plays it: whether `validate()` accepts
// it, and its `n_batches`, whole and of `worker`, each checked to refuse exactly where
// `validate()` does.
struct Counts {
  bool valid = false;
  std::int64_t count = -1;
  std::int64_t worker_count = -1;
};

template <class S>
[[nodiscard]] Counts counts_of(const S& sampler, const Facts& f, const cs::WorkerInfo& worker) {
  Counts c;
  std::string why;
  c.valid = accepted([&] { sampler.validate(f.n_obs); }, &why);
  check(accepted([&] { c.count = sampler.n_batches(f.n_obs); }) == c.valid, "validate and n_batches disagree: {}", why);
  check(accepted([&] { c.worker_count = sampler.n_batches(f.n_obs, worker); }) == (c.valid && valid_worker(worker)),
        "n_batches with worker {} of {} disagrees with validate", worker.id, worker.num_workers);
  return c;
}

// The range `sample(f.n_obs, worker)` returns at epoch `epoch`, none where it refuses; checked to
// refuse exactly where `validate()` did (`valid`) and to move to the next epoch only when it
// does not.
template <class S>
[[nodiscard]] std::optional<typename S::range_type> sampled(S& sampler, const Facts& f, const cs::WorkerInfo& worker,
                                                            bool valid, std::uint64_t epoch) {
  std::optional<typename S::range_type> range;
  const bool served = accepted([&] { range.emplace(sampler.sample(f.n_obs, worker)); });
  check(served == (valid && valid_worker(worker)), "sample and validate disagree");
  if (served) check(sampler.epoch() == epoch + 1, "sample() did not move to the next epoch");
  else check(sampler.epoch() == epoch, "a refused sample() moved the epoch");
  return range;
}

// --- plain --------------------------------------------------------------------------------------

template <class S>
void plain(FuzzedDataProvider& in, S sampler, const Facts& f) {
  const std::uint64_t epoch = epoch_value(in);
  const cs::WorkerInfo worker = worker_value(in);
  context() += fmt::format("; plain, epoch {}, worker {} of {}", epoch, worker.id, worker.num_workers);
  sampler.set_epoch(epoch);
  const auto [valid, count, worker_count] = counts_of(sampler, f, worker);
  check(sampler.epoch() == epoch, "validate or n_batches moved the epoch");
  if (valid) {
    check(count == batches_of(f.epoch_rows, f), "n_batches {} for {} positions, batch_size {}, drop_last {}", count,
          f.epoch_rows, f.batch_size, f.drop_last);
    if (valid_worker(worker) && worker.num_workers <= 8) {
      std::int64_t sum = 0;
      for (std::int64_t id = 0; id < worker.num_workers; ++id)
        sum += sampler.n_batches(f.n_obs, {.id = id, .num_workers = worker.num_workers});
      check(sum == count, "{} workers' n_batches sum to {}, the epoch's is {}", worker.num_workers, sum, count);
    }
  }

  std::optional<typename S::range_type> range = sampled(sampler, f, worker, valid, epoch);
  if (!range) return;
  if (!small_requests(*range)) return;

  const bool one_worker = worker.num_workers == 1;
  const Walk w = walk(*range, expect_for(f, f.range, std::nullopt, false, false), max_batches, max_positions);
  if (w.complete) {
    check(w.batches == worker_count, "the stream yielded {} batches, n_batches says {}", w.batches, worker_count);
    if (one_worker) check_whole(f, w, f.range, f.reads_once && !f.drop_last && f.epoch_rows == f.range.size());
  }
  // The same epoch twice is the same epoch.
  sampler.set_epoch(epoch);
  const auto again = first_requests(sampler.sample(f.n_obs, worker), 2);
  sampler.set_epoch(epoch);
  check(again == first_requests(sampler.sample(f.n_obs, worker), 2), "epoch {} differs when played twice", epoch);
}

// --- distributed --------------------------------------------------------------------------------

// What the README says rank r of `world` gets in contiguous mode: its slice of the range.
[[nodiscard]] cs::Slice contiguous_shard(const Facts& f, const cs::DistributedOptions& o, std::int64_t world,
                                         std::int64_t r, std::uint64_t epoch) {
  const std::int64_t size = f.range.size();
  if (o.remainder == cs::Remainder::pad) {
    const std::int64_t base = size / world;
    const std::int64_t extra = size % world;
    const std::int64_t start = f.range.start + r * base + std::min(r, extra);
    return {start, start + base + (r < extra ? 1 : 0)};
  }
  const std::int64_t unit = o.enforce_equal_batches ? f.batch_size : 1;
  const std::int64_t per_rank = size / world / unit * unit;
  const bool moved = o.remainder == cs::Remainder::rotate && epoch % 2 == 1;
  const std::int64_t start = f.range.start + (moved ? size - world * per_rank : 0) + r * per_rank;
  return {start, start + per_rank};
}

// The window all ranks read in global mode (README's table): drop and rotate cut an epoch that
// reads the range once to whole rounds of batches; anything else keeps the range (a sampler that
// draws with replacement has no part of its range to leave out).
[[nodiscard]] cs::Slice global_window(const Facts& f, const cs::DistributedOptions& o, std::int64_t world,
                                      std::uint64_t epoch) {
  if (!o.enforce_equal_batches || o.remainder == cs::Remainder::pad || f.replacement || f.epoch_rows != f.range.size())
    return f.range;
  const int128 unit = static_cast<int128>(world) * f.batch_size;
  const auto kept = static_cast<std::int64_t>(f.range.size() / unit * unit);
  const bool moved = o.remainder == cs::Remainder::rotate && epoch % 2 == 1;
  const std::int64_t start = f.range.start + (moved ? f.range.size() - kept : 0);
  return {start, start + kept};
}

// Batches rank r yields in contiguous mode (README: n is the rank's share, rounded as the policy says).
[[nodiscard]] std::int64_t contiguous_batches(const Facts& f, const cs::DistributedOptions& o, std::int64_t world) {
  const std::int64_t unit = o.enforce_equal_batches ? f.batch_size : 1;
  const std::int64_t share = o.remainder == cs::Remainder::pad ? ceil_div(ceil_div(f.epoch_rows, world), unit) * unit
                                                               : f.epoch_rows / world / unit * unit;
  return batches_of(share, f);
}

// Batches of the plan all ranks share in global mode: the epoch, cut or padded to whole rounds.
[[nodiscard]] std::int64_t global_plan_batches(const Facts& f, const cs::DistributedOptions& o, std::int64_t world) {
  if (!o.enforce_equal_batches) return batches_of(f.epoch_rows, f);
  const int128 unit = static_cast<int128>(world) * f.batch_size;
  int128 rows = f.epoch_rows / unit * unit;
  if (o.remainder == cs::Remainder::pad) rows = (f.epoch_rows + unit - 1) / unit * unit;
  return batches_of(static_cast<std::int64_t>(rows), f);
}

[[nodiscard]] cs::DistributedOptions options_value(FuzzedDataProvider& in) {
  constexpr cs::Remainder policies[] = {cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate};
  return {.enforce_equal_batches = in.ConsumeIntegralInRange<int>(0, 3) != 0,
          .mode = in.ConsumeBool() ? cs::ShardMode::global : cs::ShardMode::contiguous,
          .remainder = policies[in.ConsumeIntegralInRange<std::size_t>(0, 2)]};
}

[[nodiscard]] cs::DistInfo dist_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: {
      const std::int64_t world = size_value(in, 64);
      return {.rank = in.ConsumeIntegralInRange<std::int64_t>(0, std::max<std::int64_t>(world, 1) - 1),
              .world_size = world};
    }
    case 1: return {.rank = in.ConsumeIntegral<std::int64_t>(), .world_size = in.ConsumeIntegral<std::int64_t>()};
    default: {
      const auto world = in.ConsumeIntegralInRange<std::int64_t>(1, 5);
      return {.rank = in.ConsumeIntegralInRange<std::int64_t>(0, world - 1), .world_size = world};
    }
  }
}

template <class S>
void distributed(FuzzedDataProvider& in, const S& base, const Facts& f) {
  const cs::DistInfo info = dist_value(in);
  const cs::DistributedOptions o = options_value(in);
  const std::uint64_t epoch = epoch_value(in);
  const cs::WorkerInfo worker = worker_value(in);
  const bool global = o.mode == cs::ShardMode::global;
  constexpr std::string_view policy_names[] = {"drop", "pad", "rotate"};
  context() += fmt::format("; rank {} of {}, {}, {}, enforce_equal_batches {}, epoch {}, worker {} of {}", info.rank,
                           info.world_size, global ? "global" : "contiguous",
                           policy_names[static_cast<std::size_t>(o.remainder)], o.enforce_equal_batches, epoch,
                           worker.id, worker.num_workers);

  std::optional<cs::DistributedSampler<S>> made;
  const bool built = accepted([&] { made.emplace(base, info, o); });
  check(built == (info.world_size >= 1 && info.world_size <= max_size && info.rank >= 0 && info.rank < info.world_size),
        "DistributedSampler {} rank {} of {}", built ? "accepted" : "refused", info.rank, info.world_size);
  if (!built) return;
  cs::DistributedSampler<S>& sampler = *made;
  sampler.set_epoch(epoch);

  const auto [valid, count, worker_count] = counts_of(sampler, f, worker);
  cs::Slice shard;
  const bool sharded = accepted([&] { shard = only_range(sampler.shard(f.n_obs, epoch)); });
  check(!valid || sharded, "validate accepts n_obs {} but shard refuses it", f.n_obs);

  if (valid) {
    const bool promised = f.range.size() > 0;
    if (!global) {
      if (promised) {
        const cs::Slice want = contiguous_shard(f, o, info.world_size, info.rank, epoch);
        check(shard == want, "rank {} of {}: shard [{}, {}), the README's [{}, {})", info.rank, info.world_size,
              shard.start, shard.stop, want.start, want.stop);
      }
      check(count == contiguous_batches(f, o, info.world_size), "contiguous rank {}: n_batches {}, expected {}",
            info.rank, count, contiguous_batches(f, o, info.world_size));
    } else {
      if (promised) {
        const cs::Slice want = global_window(f, o, info.world_size, epoch);
        check(shard == want, "global window [{}, {}), the README's [{}, {})", shard.start, shard.stop, want.start,
              want.stop);
      }
      const std::int64_t plan = global_plan_batches(f, o, info.world_size);
      if (o.enforce_equal_batches)
        check(count == plan / info.world_size, "global rank {}: n_batches {} of a plan of {} on {} ranks", info.rank,
              count, plan, info.world_size);
      else
        check(count == plan / info.world_size || count == plan / info.world_size + 1,
              "global rank {}: n_batches {} of a plan of {} on {} ranks", info.rank, count, plan, info.world_size);
    }
    if (valid_worker(worker) && worker.num_workers <= 8) {
      std::int64_t sum = 0;
      for (std::int64_t id = 0; id < worker.num_workers; ++id)
        sum += sampler.n_batches(f.n_obs, {.id = id, .num_workers = worker.num_workers});
      check(sum == count, "{} workers' n_batches sum to {}, the rank's is {}", worker.num_workers, sum, count);
    }

    // A few ranks of the same job: equal batch counts, and disjoint contiguous shards.
    std::vector<std::int64_t> ranks = {0, 1, 2, info.world_size - 1, info.rank};
    std::erase_if(ranks, [&](std::int64_t r) { return r >= info.world_size; });
    std::ranges::sort(ranks);
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::vector<cs::Slice> shards;
    std::int64_t total = 0;
    std::int64_t least = std::numeric_limits<std::int64_t>::max();
    std::int64_t most = 0;
    bool all_valid = true;
    for (const std::int64_t r : ranks) {
      cs::DistributedSampler<S> other(base, cs::DistInfo{.rank = r, .world_size = info.world_size}, o);
      other.set_epoch(epoch);
      std::int64_t c = 0;
      if (!accepted([&] { c = other.n_batches(f.n_obs); })) {
        all_valid = false;  // a ClassSampler's shard may hold no chunk of a sampled class
        continue;
      }
      least = std::min(least, c);
      most = std::max(most, c);
      total += c;
      shards.push_back(only_range(other.shard(f.n_obs, epoch)));
    }
    if (o.enforce_equal_batches || !global)
      check(least == most || !all_valid, "ranks yield {} to {} batches", least, most);
    else check(most - least <= 1, "global ranks yield {} to {} batches, more than one apart", least, most);
    if (global && all_valid && std::ssize(ranks) == info.world_size)
      check(total == (o.enforce_equal_batches
                          ? global_plan_batches(f, o, info.world_size) / info.world_size * info.world_size
                          : global_plan_batches(f, o, info.world_size)),
            "global ranks yield {} batches of the plan's {}", total, global_plan_batches(f, o, info.world_size));
    if (!global && f.shards_rows)
      for (std::size_t i = 0; i < shards.size(); ++i) {
        check(f.range.start <= shards[i].start && shards[i].stop <= f.range.stop, "a shard outside the range");
        for (std::size_t j = i + 1; j < shards.size(); ++j)
          check(shards[i].stop <= shards[j].start || shards[j].stop <= shards[i].start,
                "contiguous shards [{}, {}) and [{}, {}) overlap", shards[i].start, shards[i].stop, shards[j].start,
                shards[j].stop);
      }
  }

  std::optional<typename cs::DistributedSampler<S>::range_type> range = sampled(sampler, f, worker, valid, epoch);
  if (!range) return;
  // (Pad puts all of an epoch's padding into its plan's last request, which can hold up to
  // world_size * batch_size positions more than a request's rows: a known limit of the padded
  // layout, which this bound also keeps out of the walk.)
  if (!small_requests(*range)) return;

  // Pad repeats rows (contiguous always; global when the plan grows to whole rounds).
  const bool padded = o.remainder == cs::Remainder::pad && (!global || o.enforce_equal_batches);
  const bool one_worker = worker.num_workers == 1;
  const cs::Slice bounds = f.shards_rows ? shard : f.range;
  const std::optional<cs::Slice> designated = f.shards_rows ? std::nullopt : std::optional<cs::Slice>(shard);
  Facts g = f;
  g.in_order = f.in_order && !padded && !global;
  const Walk w =
      walk(*range, expect_for(g, bounds, designated, o.enforce_equal_batches, padded), max_batches, max_positions);
  if (w.complete) {
    check(w.batches == worker_count, "the stream yielded {} batches, n_batches says {}", w.batches, worker_count);
    if (one_worker && !global)
      check_whole(g, w, bounds, f.reads_once && !padded && !f.drop_last && f.epoch_rows == f.range.size());
  }
}

// --- the sampler kinds -------------------------------------------------------------------------

template <class S>
void run(FuzzedDataProvider& in, const S& sampler, const Facts& f) {
  if (in.ConsumeBool()) plain(in, sampler, f);
  else distributed(in, sampler, f);
}

[[nodiscard]] std::optional<cs::Slice> mask_value(FuzzedDataProvider& in, std::int64_t n_obs) {
  if (in.ConsumeBool()) return std::nullopt;
  // One in four an open-ended mask, [start, n_obs) whatever n_obs is (annbatch's slice(start, None)).
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) return cs::Slice::from(slice_in(in, n_obs).start);
  return slice_in(in, n_obs);
}

[[nodiscard]] std::optional<std::int64_t> num_samples_value(FuzzedDataProvider& in, std::int64_t rows) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<std::int64_t>(1, std::clamp<std::int64_t>(rows, 1, max_size));
    case 1: return size_value(in, 4096);
    default: return std::nullopt;
  }
}

void chunk_samplers(FuzzedDataProvider& in, bool random) {
  ChunkConfig c{.random = random, .shape = shape_value(in, max_request)};
  c.n_obs = size_value(in, 5000);
  c.mask = mask_value(in, c.n_obs);
  c.drop_last = in.ConsumeBool();
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  c.replacement = random && in.ConsumeBool();
  // The observations the mask designates: an open-ended one (also a stop of Slice::to_end drawn
  // at the edge of the range) ends at n_obs.
  const cs::Slice range = c.mask ? c.mask->resolve(c.n_obs) : cs::Slice{0, c.n_obs};
  if (random) c.num_samples = num_samples_value(in, size_of(range));
  context() = c.text();
  const Facts f{.n_obs = c.n_obs,
                .range = range,
                .epoch_rows = c.num_samples.value_or(size_of(range)),
                .chunk_size = c.shape.chunk_size,
                .preload_nchunks = c.shape.preload_nchunks,
                .batch_size = c.shape.batch_size,
                .drop_last = c.drop_last,
                .replacement = c.replacement,
                .reads_once = !c.replacement,
                .aligned = !c.replacement,
                .pieces = true,
                .in_order = !random};
  with_sampler(c, [&](const auto& sampler) { run(in, sampler, f); });
}

[[nodiscard]] double weight_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: return 0.0;
    case 1: return std::numeric_limits<double>::quiet_NaN();
    case 2: return std::numeric_limits<double>::infinity();
    case 3: return -1.0;
    case 4: return in.ConsumeFloatingPoint<double>();
    case 5: return std::numeric_limits<double>::max();
    case 6: return std::numeric_limits<double>::denorm_min();
    default: return static_cast<double>(in.ConsumeIntegralInRange<int>(1, 8));
  }
}

void class_sampler(FuzzedDataProvider& in) {
  const Shape s = shape_value(in, 512);
  std::vector<std::int32_t> codes;
  const auto n_codes = in.ConsumeIntegralInRange<std::int64_t>(1, 400);
  while (std::ssize(codes) < n_codes) {
    const std::int32_t code =
        in.ConsumeIntegralInRange<int>(0, 15) == 0 ? -1 : in.ConsumeIntegralInRange<std::int32_t>(0, 3);
    const auto length = in.ConsumeIntegralInRange<std::int64_t>(1, 80);
    for (std::int64_t i = 0; i < length && std::ssize(codes) < n_codes; ++i) codes.push_back(code);
  }
  std::vector<double> weights;
  if (in.ConsumeBool()) weights.resize(in.ConsumeIntegralInRange<std::size_t>(1, 5));
  for (double& w : weights) w = weight_value(in);
  const std::int64_t n_obs = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? size_value(in, 400) : n_codes;
  const std::optional<cs::Slice> mask = mask_value(in, n_codes);
  const std::int64_t num_samples =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(1, 3000) : size_value(in, 3000);
  const bool drop_last = in.ConsumeBool();
  const auto seed = in.ConsumeIntegral<std::uint64_t>();
  // Read last, so that inputs written before WeightedClassSampler still decode as they did.
  const bool weighted = in.ConsumeBool();
  const cs::Composition composition = in.ConsumeBool() ? cs::Composition::stratified : cs::Composition::independent;
  context() =
      fmt::format("{} over {} codes ({} first), chunk_size {}, preload_nchunks {}, batch_size {}, n_obs {}, "
                  "mask {}, num_samples {}, drop_last {}, seed {}, {} class weights{}",
                  weighted ? "WeightedClassSampler" : "ClassSampler", codes.size(), codes.front(), s.chunk_size,
                  s.preload_nchunks, s.batch_size, n_obs, text_of(mask), num_samples, drop_last, seed, weights.size(),
                  !weighted                                    ? ""
                  : composition == cs::Composition::stratified ? ", stratified"
                                                               : ", independent");
  Facts f{.n_obs = n_obs,
          .range = mask ? mask->resolve(n_obs) : cs::Slice{0, n_obs},
          .epoch_rows = num_samples,
          .chunk_size = s.chunk_size,
          .preload_nchunks = s.preload_nchunks,
          .batch_size = s.batch_size,
          .drop_last = drop_last,
          .replacement = true,
          .codes = codes,
          .class_batches = !weighted,
          .class_weights = weights};
  with_class_sampler(
      codes,
      [&] {
        return cs::ClassOptions{.chunk_size = s.chunk_size,
                                .preload_nchunks = s.preload_nchunks,
                                .batch_size = s.batch_size,
                                .drop_last = drop_last,
                                .mask = mask,
                                .seed = seed,
                                .num_samples = num_samples,
                                .class_weights = weights};
      },
      weighted ? std::optional(composition) : std::nullopt, [&](const auto& sampler) { run(in, sampler, f); });
}

void mixture_sampler(FuzzedDataProvider& in) {
  const Shape s = shape_value(in, 1024);
  std::vector<std::int64_t> sizes(in.ConsumeIntegralInRange<std::size_t>(0, 4));
  for (std::int64_t& size : sizes) size = size_value(in, 600);
  std::vector<double> weights;
  if (in.ConsumeBool()) weights.resize(in.ConsumeIntegralInRange<std::size_t>(0, 4));
  for (double& w : weights) w = weight_value(in);
  const double temperature = in.ConsumeBool() ? 1.0 : weight_value(in);
  const bool drop_last = in.ConsumeBool();
  const auto seed = in.ConsumeIntegral<std::uint64_t>();
  std::int64_t total = 0;
  for (const std::int64_t size : sizes) total = size >= 0 && size <= max_size - total ? total + size : max_size;
  const std::optional<std::int64_t> num_samples = num_samples_value(in, 2 * std::min(total, max_size / 2));
  const std::int64_t n_obs =
      in.ConsumeBool() ? total + in.ConsumeIntegralInRange<std::int64_t>(0, 3) : size_value(in, 3000);
  context() =
      fmt::format("MixtureSampler over {} datasets ({} rows), chunk_size {}, preload_nchunks {}, batch_size {}, "
                  "n_obs {}, num_samples {}, {} weights, temperature {}, drop_last {}, seed {}",
                  sizes.size(), total, s.chunk_size, s.preload_nchunks, s.batch_size, n_obs, text_of(num_samples),
                  weights.size(), temperature, drop_last, seed);
  const auto sampler = made([&] {
    return cs::MixtureSampler(sizes, cs::MixtureOptions{.chunk_size = s.chunk_size,
                                                        .preload_nchunks = s.preload_nchunks,
                                                        .batch_size = s.batch_size,
                                                        .drop_last = drop_last,
                                                        .seed = seed,
                                                        .num_samples = num_samples,
                                                        .weights = weights,
                                                        .temperature = temperature});
  });
  if (!sampler) return;
  Facts f{.n_obs = n_obs,
          .range = {0, sampler->boundaries().back()},
          .epoch_rows = num_samples.value_or(sampler->boundaries().back()),
          .chunk_size = s.chunk_size,
          .preload_nchunks = s.preload_nchunks,
          .batch_size = s.batch_size,
          .drop_last = drop_last,
          .shards_rows = false,
          .boundaries = sampler->boundaries(),
          .weights = weights};
  run(in, *sampler, f);
}

}  // namespace
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::by_kind(data, size, fuzz::chunk_samplers, fuzz::class_sampler, fuzz::mixture_sampler);
  return 0;
}
