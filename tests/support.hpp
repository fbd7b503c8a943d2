// SPDX-License-Identifier: MIT
#pragma once

// Shared helpers of the sampler tests: owning copies of requests, an epoch walker that maps every
// batch position through its request's chunks to an observation, seeded integers, and a random
// sampler configuration (with a generator of configurations every sampler can serve, and the draws
// it is built from, for tests that draw their own kind of configuration). The statistics of the
// uniformity tests are in statistics.hpp, included here.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/slice.hpp>

#include "statistics.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <pcg_random.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace support {

namespace cs = chunksampler;

/// Every field of `state`, the distributed layout included (what a restore reads). Tests look
/// at the internals through this; users see the accessors.
[[nodiscard]] inline const cs::detail::StateFields& fields(const cs::SamplerState& state) {
  return cs::detail::StateAccess::fields(state);
}

/// `state` with its fields changed by `edit`, checked as `SamplerState::parse` checks text
/// (a field out of range throws `cs::StateFormatError`).
template <class Edit>
[[nodiscard]] cs::SamplerState edited(const cs::SamplerState& state, Edit&& edit) {
  cs::detail::StateFields f = fields(state);
  std::forward<Edit>(edit)(f);
  return cs::detail::StateAccess::make(f);
}

/// The one range of `ranges` (a shard of a one-range mask is one range), failing the test if
/// there are more.
[[nodiscard]] inline cs::Slice only_range(const cs::Ranges& ranges) {
  REQUIRE(ranges.size() == 1);
  return ranges[0];
}

/// A drawn mask of many ranges: the ranges as drawn (closed) inside `[0, n_obs)`, and whether
/// the last is given to the sampler open-ended (`Slice::from`, ending at `n_obs`).
struct DrawnRanges {
  std::vector<cs::Slice> slices;
  std::int64_t n_obs = 0;
  bool open = false;

  /// The mask as the sampler takes it.
  [[nodiscard]] cs::Ranges ranges() const {
    std::vector<cs::Slice> given = slices;
    if (open) given.back() = cs::Slice::from(given.back().start);
    return cs::Ranges(given);
  }
  /// The rows it selects.
  [[nodiscard]] cs::Ranges closed() const { return cs::Ranges(slices); }
  /// For a failing test's report.
  [[nodiscard]] std::string describe() const {
    std::string text = fmt::format("n_obs {}{} ranges", n_obs, open ? " (last open-ended)" : "");
    for (const cs::Slice& s : slices) text += fmt::format(" [{}, {})", s.start, s.stop);
    return text;
  }
};

/// An owning copy of one `LoadRequest`: its chunks and its batches, as yielded.
struct OwnedRequest {
  std::vector<cs::Slice> chunks;
  std::vector<std::vector<std::int64_t>> batches;

  [[nodiscard]] std::int64_t buffer_size() const {
    std::int64_t total = 0;
    for (const cs::Slice& chunk : chunks) total += chunk.size();
    return total;
  }
  /// All positions, batch after batch.
  [[nodiscard]] std::vector<std::int64_t> positions() const {
    std::vector<std::int64_t> all;
    for (const auto& batch : batches) all.insert(all.end(), batch.begin(), batch.end());
    return all;
  }

  friend bool operator==(const OwnedRequest&, const OwnedRequest&) = default;
};

/// Copies `request` through its public interface: the chunk span and the splits' batches.
[[nodiscard]] inline OwnedRequest own(const cs::LoadRequest& request) {
  OwnedRequest owned;
  owned.chunks.assign(request.chunks.begin(), request.chunks.end());
  for (std::span<const std::int64_t> batch : request.splits) owned.batches.emplace_back(batch.begin(), batch.end());
  return owned;
}

/// Every request of a range returned by `sample()`, copied.
template <class Range>
[[nodiscard]] std::vector<OwnedRequest> collect(Range&& range) {
  std::vector<OwnedRequest> requests;
  for (const cs::LoadRequest& request : range) requests.push_back(own(request));
  return requests;
}

/// One epoch of `sampler` over `n_obs` observations (advances the sampler's epoch).
template <class S>
[[nodiscard]] std::vector<OwnedRequest> epoch(S& sampler, std::int64_t n_obs) {
  return collect(sampler.sample(n_obs));
}

/// The observation that buffer row `position` holds when `chunks` are read and concatenated in
/// order; `std::nullopt` when the position lies outside the buffer.
[[nodiscard]] inline std::optional<std::int64_t> observation_at(std::span<const cs::Slice> chunks,
                                                                std::int64_t position) {
  if (position < 0) return std::nullopt;
  std::int64_t offset = 0;
  for (const cs::Slice& chunk : chunks) {
    if (position < offset + chunk.size()) return chunk.start + (position - offset);
    offset += chunk.size();
  }
  return std::nullopt;
}

/// One row a batch trains on.
struct Draw {
  std::int64_t obs;    ///< observation id, or -1 when the position lies outside its request's buffer
  std::int64_t batch;  ///< index of the batch within the epoch
};

/// What one epoch yields, flattened for the invariant checks.
struct EpochRecord {
  std::vector<OwnedRequest> requests;
  std::vector<Draw> draws;                 ///< every (observation, batch) in yield order
  std::vector<std::size_t> batch_lengths;  ///< every batch's length, in yield order
  std::vector<cs::Slice> chunks;           ///< every chunk, in yield order

  [[nodiscard]] std::int64_t n_batches() const { return static_cast<std::int64_t>(batch_lengths.size()); }

  /// How often each observation is drawn.
  [[nodiscard]] std::map<std::int64_t, std::int64_t> counts() const {
    std::map<std::int64_t, std::int64_t> result;
    for (const Draw& d : draws) ++result[d.obs];
    return result;
  }
  /// True when no observation is drawn twice.
  [[nodiscard]] bool no_repeats() const {
    const auto c = counts();
    return std::ranges::all_of(c, [](const auto& kv) { return kv.second == 1; });
  }
  /// True when every draw falls in `range`.
  [[nodiscard]] bool draws_inside(cs::Slice range) const {
    return std::ranges::all_of(draws, [range](const Draw& d) { return range.contains(d.obs); });
  }
  /// True when every observation of `range` is drawn exactly once and nothing else is drawn.
  [[nodiscard]] bool covers_exactly_once(cs::Slice range) const {
    if (static_cast<std::int64_t>(draws.size()) != range.size()) return false;
    return draws_inside(range) && no_repeats();
  }
  /// True when every chunk is non-empty, inside `range` and at most `chunk_size` long.
  [[nodiscard]] bool chunks_valid(cs::Slice range, std::int64_t chunk_size) const {
    return std::ranges::all_of(chunks, [&](const cs::Slice& c) {
      return !c.empty() && c.size() <= chunk_size && range.start <= c.start && c.stop <= range.stop;
    });
  }
  /// True when every chunk lies inside one range of `mask` and inside one cell of the storage
  /// grid (`[j * chunk_size, (j + 1) * chunk_size)`), so it never crosses a range edge or a
  /// storage chunk of `chunk_size` rows.
  [[nodiscard]] bool chunks_on_grid(const cs::Ranges& mask, std::int64_t chunk_size) const {
    return std::ranges::all_of(chunks, [&](const cs::Slice& c) {
      const std::optional<std::size_t> r = mask.range_of(c.start);
      return !c.empty() && r && c.stop <= mask[*r].stop && c.start / chunk_size == (c.stop - 1) / chunk_size;
    });
  }
  /// True when every request but the last reads exactly `request_obs` rows (so it splits into
  /// whole batches).
  [[nodiscard]] bool requests_full(std::int64_t request_obs) const {
    for (std::size_t k = 0; k + 1 < requests.size(); ++k)
      if (requests[k].buffer_size() != request_obs) return false;
    return true;
  }
  /// True when every position of every request is inside its buffer and used once in it.
  [[nodiscard]] bool positions_valid() const {
    return std::ranges::all_of(requests, [](const OwnedRequest& r) {
      std::vector<std::int64_t> p = r.positions();
      std::ranges::sort(p);
      const bool unique = std::ranges::adjacent_find(p) == p.end();
      return unique && (p.empty() || (p.front() >= 0 && p.back() < r.buffer_size()));
    });
  }
  /// True when every batch has `batch_size` rows, but the epoch's last, which may be shorter.
  [[nodiscard]] bool batches_full_but_last(std::int64_t batch_size) const {
    for (std::size_t i = 0; i < batch_lengths.size(); ++i) {
      const auto len = static_cast<std::int64_t>(batch_lengths[i]);
      if (len < 1 || len > batch_size) return false;
      if (i + 1 < batch_lengths.size() && len != batch_size) return false;
    }
    return true;
  }
  /// True when every batch has exactly `batch_size` rows.
  [[nodiscard]] bool batches_all_full(std::int64_t batch_size) const {
    return std::ranges::all_of(batch_lengths,
                               [batch_size](std::size_t len) { return static_cast<std::int64_t>(len) == batch_size; });
  }
};

/// Walks `requests`, mapping every position through its own request's chunks.
[[nodiscard]] inline EpochRecord record(std::vector<OwnedRequest> requests) {
  EpochRecord rec;
  rec.requests = std::move(requests);
  std::int64_t batch_index = 0;
  for (const OwnedRequest& request : rec.requests) {
    rec.chunks.insert(rec.chunks.end(), request.chunks.begin(), request.chunks.end());
    for (const auto& batch : request.batches) {
      rec.batch_lengths.push_back(batch.size());
      for (std::int64_t position : batch)
        rec.draws.push_back({observation_at(request.chunks, position).value_or(-1), batch_index});
      ++batch_index;
    }
  }
  return rec;
}

/// One epoch of `sampler` over `n_obs`, recorded (advances the sampler's epoch).
template <class S>
[[nodiscard]] EpochRecord walk(S& sampler, std::int64_t n_obs) {
  return record(epoch(sampler, n_obs));
}

/// Seeded integers for generating test configurations; identical on every platform.
class ConfigRng {
 public:
  explicit ConfigRng(std::uint64_t seed) : engine_(seed) {}
  /// Uniform in `[lo, hi]` (small ranges; the modulo bias is irrelevant for test configs).
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo + 1);
    return lo + static_cast<std::int64_t>(next() % span);
  }
  bool coin() { return (next() & 1U) != 0; }
  std::uint64_t next() {
    // Two statements: the operands of one expression are unsequenced, so `engine_() << 32 | engine_()`
    // may draw in either order and differ between compilers and optimization levels.
    const std::uint64_t high = engine_();
    const std::uint64_t low = engine_();
    return (high << 32U) | low;
  }
  /// A uniform divisor of `n` (>= 1).
  std::int64_t divisor_of(std::int64_t n) {
    std::vector<std::int64_t> divisors;
    for (std::int64_t d = 1; d <= n; ++d)
      if (n % d == 0) divisors.push_back(d);
    return divisors[static_cast<std::size_t>(between(0, static_cast<std::int64_t>(divisors.size()) - 1))];
  }
  /// A non-empty sub-range of `[0, n_obs)` (`n_obs >= 1`).
  cs::Slice sub_range(std::int64_t n_obs) {
    const std::int64_t start = between(0, n_obs - 1);
    return {start, between(start + 1, n_obs)};
  }

 private:
  pcg32 engine_;
};

/// `ceil(a / b)` for the expected values the tests compute from the specification.
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Batches as the observations they train on, one vector per batch.
using Batches = std::vector<std::vector<std::int64_t>>;

/// Every batch of `requests`, in yield order, as the observations it trains on (each position
/// mapped through its own request's chunks; -1 for a position outside the buffer).
[[nodiscard]] inline Batches observations(const std::vector<OwnedRequest>& requests) {
  Batches batches;
  for (const OwnedRequest& request : requests)
    for (const auto& batch : request.batches) {
      std::vector<std::int64_t>& obs = batches.emplace_back();
      for (const std::int64_t position : batch) obs.push_back(observation_at(request.chunks, position).value_or(-1));
    }
  return batches;
}

/// `parts` laid end to end.
[[nodiscard]] inline Batches concat(const std::vector<Batches>& parts) {
  Batches all;
  for (const Batches& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

/// How many batches `requests` hold.
[[nodiscard]] inline std::int64_t n_batches(const std::vector<OwnedRequest>& requests) {
  std::int64_t n = 0;
  for (const OwnedRequest& request : requests) n += static_cast<std::int64_t>(request.batches.size());
  return n;
}

/// The name of a remainder policy, for messages.
[[nodiscard]] constexpr const char* policy_name(cs::Remainder r) {
  switch (r) {
    case cs::Remainder::drop: return "drop";
    case cs::Remainder::pad: return "pad";
    case cs::Remainder::rotate: return "rotate";
  }
  return "?";
}

/// A sampler configuration: the options of `RandomSampler` (or `SequentialSampler`), the dataset
/// size, and those of a `DistributedSampler` around it.
struct Config {
  std::int64_t chunk = 1;
  std::int64_t preload = 1;
  std::int64_t batch = 1;
  std::int64_t n_obs = 1;
  std::optional<cs::Slice> mask;
  bool drop_last = false;
  bool sequential = false;  ///< a SequentialSampler (ignores replacement and num_samples)
  bool replacement = false;
  std::optional<std::int64_t> num_samples;
  std::uint64_t seed = 0;
  bool enforce = true;  ///< DistributedOptions::enforce_equal_batches
  std::int64_t world = 1;
  cs::ShardMode mode = cs::ShardMode::contiguous;
  cs::Remainder remainder = cs::Remainder::drop;
  std::uint64_t epoch = 0;  ///< the epoch a test starts at, for those that draw it with the configuration

  [[nodiscard]] cs::Slice range() const { return mask.value_or(cs::Slice{0, n_obs}); }
  [[nodiscard]] std::int64_t size() const { return range().size(); }
  [[nodiscard]] cs::RandomOptions options() const {
    return {.chunk_size = chunk,
            .preload_nchunks = preload,
            .batch_size = batch,
            .drop_last = drop_last,
            .mask = mask,
            .seed = seed,
            .replacement = replacement,
            .num_samples = num_samples};
  }
  [[nodiscard]] cs::SequentialOptions sequential_options() const {
    return {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = batch, .drop_last = drop_last, .mask = mask};
  }
  [[nodiscard]] cs::DistributedOptions dist_options() const {
    return {.enforce_equal_batches = enforce, .mode = mode, .remainder = remainder};
  }
  /// Rank `r` of `world_size` ranks: a `DistributedSampler` around the configured `RandomSampler`.
  [[nodiscard]] cs::DistributedSampler<cs::RandomSampler> rank(std::int64_t r, std::int64_t world_size) const {
    return cs::DistributedSampler<cs::RandomSampler>(cs::RandomSampler(options()),
                                                     cs::DistInfo{.rank = r, .world_size = world_size}, dist_options());
  }
  /// Rank `r` of the configured `world`.
  [[nodiscard]] cs::DistributedSampler<cs::RandomSampler> rank(std::int64_t r) const { return rank(r, world); }
  /// Every rank of the configured `world`, in rank order.
  [[nodiscard]] std::vector<cs::DistributedSampler<cs::RandomSampler>> ranks() const {
    std::vector<cs::DistributedSampler<cs::RandomSampler>> all;
    for (std::int64_t r = 0; r < world; ++r) all.push_back(rank(r));
    return all;
  }
  /// Observations per rank in contiguous mode with `Remainder::drop`, from the specification.
  [[nodiscard]] std::int64_t per_rank() const {
    const std::int64_t per = range().size() / world;
    return enforce ? per / batch * batch : per;
  }
  /// Calls `f` with the configured base sampler: a `RandomSampler`, or a `SequentialSampler`.
  template <class F>
  decltype(auto) with_base(F&& f) const {
    if (sequential) return std::forward<F>(f)(cs::SequentialSampler(sequential_options()));
    return std::forward<F>(f)(cs::RandomSampler(options()));
  }
  [[nodiscard]] bool distributed() const {
    return world > 1 || !enforce || mode != cs::ShardMode::contiguous || remainder != cs::Remainder::drop;
  }
  [[nodiscard]] std::string describe() const {
    std::string text = fmt::format(
        "{} chunk {} preload {} batch {} n_obs {} mask {} drop_last {} replacement {} num_samples {} seed {}",
        sequential ? "sequential" : "random", chunk, preload, batch, n_obs,
        mask ? fmt::format("[{}, {})", mask->start, mask->stop) : std::string("none"), drop_last, replacement,
        num_samples ? std::to_string(*num_samples) : std::string("none"), seed);
    if (epoch != 0) text += fmt::format(" epoch {}", epoch);
    if (distributed())
      text += fmt::format(" | world {} mode {} remainder {} enforce {}", world,
                          mode == cs::ShardMode::global ? "global" : "contiguous", policy_name(remainder), enforce);
    return text;
  }
};

// The draws configurations are made of. `servable_config` is one recipe; a test that needs another
// distribution composes its own from these, so each keeps its own stream of configurations.

/// Draws `chunk` in `[1, max_chunk]`, then `preload` in `[1, max_preload]`, then a `batch` that
/// divides a request (`chunk * preload`).
inline void draw_shape(ConfigRng& g, Config& c, std::int64_t max_chunk, std::int64_t max_preload) {
  c.chunk = g.between(1, max_chunk);
  c.preload = g.between(1, max_preload);
  c.batch = g.divisor_of(c.chunk * c.preload);
}

/// A small configuration: `draw_shape`'s shape, then `n_obs` in `[1, max_obs]`, a mask (a
/// sub-range) half the time and `drop_last` half the time; the caller draws the rest.
[[nodiscard]] inline Config small_config(ConfigRng& g, std::int64_t max_chunk, std::int64_t max_preload,
                                         std::int64_t max_obs) {
  Config c;
  draw_shape(g, c, max_chunk, max_preload);
  c.n_obs = g.between(1, max_obs);
  if (g.coin()) c.mask = g.sub_range(c.n_obs);
  c.drop_last = g.coin();
  return c;
}

/// A uniform remainder policy.
[[nodiscard]] inline cs::Remainder draw_remainder(ConfigRng& g) {
  constexpr cs::Remainder remainders[] = {cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate};
  return remainders[g.between(0, 2)];
}

/// A range size in `[1, max]`, but one time in ten in `[1, small]` (with `small` a batch per rank:
/// sizes some policies must refuse).
[[nodiscard]] inline std::int64_t draw_size(ConfigRng& g, std::int64_t small, std::int64_t max) {
  return g.between(0, 9) == 0 ? g.between(1, small) : g.between(1, max);
}

/// Where `place` may put the range.
struct Placement {
  std::int64_t min_offset = 1;   ///< least start of a mask
  std::int64_t max_offset = 30;  ///< greatest start of a mask
  std::int64_t max_after = 30;   ///< most observations after a mask
};

/// Half the time `size` observations from a drawn offset as the mask, with a few more after it;
/// else a dataset of `size` observations without a mask.
inline void place(ConfigRng& g, Config& c, std::int64_t size, const Placement& p = {}) {
  if (g.coin()) {
    const std::int64_t offset = g.between(p.min_offset, p.max_offset);
    c.mask = cs::Slice{offset, offset + size};
    c.n_obs = offset + size + g.between(0, p.max_after);
  } else {
    c.mask.reset();
    c.n_obs = size;
  }
}

/// What `servable_config` may draw.
struct ConfigRanges {
  std::int64_t max_chunk = 8;
  std::int64_t max_preload = 4;
  std::int64_t max_extra_obs = 120;  ///< observations drawn above the least the configuration needs
  std::int64_t max_world = 1;        ///< > 1: a DistributedSampler's world size, mode and remainder
  bool sequential = true;            ///< SequentialSampler may be drawn
  bool sampling = true;              ///< RandomSampler's replacement and num_samples may be drawn
};

/// A random configuration every sampler it describes can serve: the range holds at least two
/// whole batches and two chunks per rank, so every shard of every mode and remainder policy is
/// non-empty, and with replacement holds a chunk.
[[nodiscard]] inline Config servable_config(ConfigRng& g, const ConfigRanges& r) {
  Config c;
  draw_shape(g, c, r.max_chunk, r.max_preload);
  c.sequential = r.sequential && g.between(0, 3) == 0;
  if (r.max_world > 1) {
    c.world = g.between(1, r.max_world);
    c.mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous;
    c.remainder = draw_remainder(g);
    c.enforce = g.between(0, 3) != 0;
  }
  const std::int64_t least = 2 * c.world * std::max(c.batch, c.chunk);
  const std::int64_t size = least + g.between(0, r.max_extra_obs);
  const std::int64_t start = g.coin() ? g.between(0, 40) : 0;
  const std::int64_t after = g.coin() ? g.between(0, 40) : 0;
  c.n_obs = start + size + after;
  if (start != 0 || after != 0 || g.coin()) c.mask = cs::Slice{start, start + size};
  c.drop_last = g.coin();
  if (r.sampling && !c.sequential) {
    c.replacement = g.between(0, 3) == 0;
    if (g.coin()) {
      // At least a whole batch per rank; without replacement at most the range.
      const std::int64_t low = c.world * c.batch;
      c.num_samples = g.between(low, c.replacement ? 3 * size : size);
    }
  }
  c.seed = g.next();
  return c;
}

}  // namespace support
