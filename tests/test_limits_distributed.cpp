// SPDX-License-Identifier: MIT
// DistributedSampler near the limits (issue 7): world sizes up to 2^62 over n_obs = 2^62 in every
// shard mode and remainder policy, each rank's share against the README's table computed in
// 128-bit arithmetic, world_size * batch_size and padding past 2^62 refused, global mode's deal,
// elastic restarts (also inside epoch 2^64 - 1, and from a state that claims 2^62 ranks), and
// states near the end of a rank's 2^60 batches. Only the first or last requests of a huge epoch
// are read.
#include <chunksampler.hpp>

#include "limits_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace test_limits_distributed {

namespace {

namespace cs = chunksampler;
using namespace support::limits;
using Catch::Contains;
using support::OwnedRequest;

// What one rank of a DistributedSampler over [range.start, range.start + S) is promised by the
// README's table, computed in 128 bits: its shard (contiguous) or the window all ranks read
// (global), its batches, or the words of the message that refuses the configuration.
struct Share {
  std::optional<std::string> refusal = std::nullopt;
  cs::Slice shard = {};
  int128 batches = 0;
  int128 first_batch = 0;  ///< of the plan, the rank's first
};

struct Grid {
  cs::ShardMode mode;
  cs::Remainder remainder;
  bool enforce;
  cs::Slice range;
  std::int64_t world;
  std::int64_t batch;
};

Share expected_share(const Grid& g, std::int64_t r, std::uint64_t epoch) {
  const int128 size = g.range.size();
  const int128 w = g.world;
  const int128 b = g.batch;
  const bool odd = epoch % 2 == 1;
  const std::string too_small = "world_size (" + std::to_string(g.world) + ")";
  const auto slice = [&](int128 start, int128 length) {
    return cs::Slice{narrow(g.range.start + start), narrow(g.range.start + start + length)};
  };
  const auto refused = [](std::string words) { return Share{.refusal = std::move(words)}; };
  if (g.mode == cs::ShardMode::global) {
    if (!g.enforce) {
      if (size < w) return refused(too_small);
      const int128 total = ceil128(size, b);
      return {.shard = g.range,
              .batches = total / w + (r < total % w ? 1 : 0),
              .first_batch = r * (total / w) + std::min<int128>(r, total % w)};
    }
    const int128 unit = w * b;
    if (unit > two62)
      return refused(fmt::format("world_size ({}) * batch_size ({}) must be <= 2^62", g.world, g.batch));
    if (g.remainder == cs::Remainder::pad) {
      const int128 budget = ceil128(size, unit) * unit;
      if (budget > two62) return refused("padding");
      return {.shard = g.range, .batches = budget / unit, .first_batch = r * (budget / unit)};
    }
    const int128 kept = size / unit * unit;
    if (kept < 1) return refused(too_small);
    const int128 offset = g.remainder == cs::Remainder::rotate && odd ? size - kept : 0;
    return {.shard = slice(offset, kept), .batches = kept / unit, .first_batch = r * (kept / unit)};
  }
  if (g.remainder == cs::Remainder::pad) {
    const int128 base = size / w;
    const int128 extra = size % w;
    if (base < 1) return refused(too_small);
    const int128 rows = ceil128(size, w);
    const int128 budget = g.enforce ? ceil128(rows, b) * b : rows;
    if (budget > two62) return refused("padding");
    return {.shard = slice(r * base + std::min<int128>(r, extra), base + (r < extra ? 1 : 0)),
            .batches = ceil128(budget, b)};
  }
  const int128 per_rank = g.enforce ? size / w / b * b : size / w;
  if (per_rank < 1) return refused(too_small);
  const int128 offset = g.remainder == cs::Remainder::rotate && odd ? size - w * per_rank : 0;
  return {.shard = slice(offset + r * per_rank, per_rank), .batches = ceil128(per_rank, b)};
}

template <class S>
void check_share(const S& base, const Grid& g, std::int64_t r, bool sequential) {
  const cs::DistributedOptions options{.enforce_equal_batches = g.enforce, .mode = g.mode, .remainder = g.remainder};
  cs::DistributedSampler dist(base, cs::DistInfo{.rank = r, .world_size = g.world}, options);
  for (const std::uint64_t epoch : {std::uint64_t{0}, std::uint64_t{1}}) {
    CAPTURE(r, epoch);
    dist.set_epoch(epoch);
    const Share want = expected_share(g, r, epoch);
    if (want.refusal) {
      REQUIRE_INVALID(dist.shard(two62), Contains(*want.refusal));
      REQUIRE_INVALID(dist.validate(two62), Contains(*want.refusal));
      REQUIRE_INVALID(dist.n_batches(two62), Contains(*want.refusal));
      REQUIRE_INVALID(dist.sample(two62), Contains(*want.refusal));
      REQUIRE(dist.epoch() == epoch);
      continue;
    }
    REQUIRE(dist.shard(two62) == want.shard);
    REQUIRE(dist.n_batches(two62) == narrow(want.batches));
    // The rank's first request lies in its shard (or the window); in order, it starts where the
    // rank's first batch does.
    const std::vector<OwnedRequest> first = first_requests(dist.sample(two62), 1);
    REQUIRE(first.size() == (want.batches > 0 ? 1U : 0U));
    if (first.empty()) continue;
    for (const cs::Slice& c : first[0].chunks)
      REQUIRE((want.shard.start <= c.start && c.stop <= want.shard.stop && !c.empty()));
    if (!sequential) continue;
    // One chunk of one batch per request: the rank's first batch is read by that request, or by
    // the plan's last when it lies in the padding.
    const int128 request = std::min(want.first_batch, ceil128(want.shard.size(), g.batch) - 1);
    REQUIRE(first[0].chunks.front().start == narrow(want.shard.start + request * g.batch));
  }
}

}  // namespace

TEST_CASE("DistributedSampler at 2^62: world sizes up to 2^62, every mode and policy", "[limits]") {
  const cs::ShardMode mode = GENERATE(cs::ShardMode::contiguous, cs::ShardMode::global);
  const cs::Remainder remainder = GENERATE(cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate);
  const bool enforce = GENERATE(true, false);
  const bool sequential = GENERATE(false, true);
  CAPTURE(mode == cs::ShardMode::global, support::policy_name(remainder), enforce, sequential);
  for (const cs::Slice range : {cs::Slice{0, two62}, cs::Slice{1, two62}}) {
    for (const std::int64_t world :
         {std::int64_t{1}, std::int64_t{3}, std::int64_t{1} << 20, (std::int64_t{1} << 20) + 1, two61 + 1, two62}) {
      for (const std::int64_t batch : {std::int64_t{1}, std::int64_t{3}, std::int64_t{1024}}) {
        CAPTURE(range.start, world, batch);
        const Grid g{
            .mode = mode, .remainder = remainder, .enforce = enforce, .range = range, .world = world, .batch = batch};
        const std::optional<cs::Slice> mask = range.start == 0 ? std::nullopt : std::optional<cs::Slice>(range);
        for (const std::int64_t r : std::set<std::int64_t>{0, world / 2, world - 1}) {
          if (sequential)
            check_share(cs::SequentialSampler(
                            {.chunk_size = batch, .preload_nchunks = 1, .batch_size = batch, .mask = mask}),
                        g, r, true);
          else
            check_share(cs::RandomSampler(
                            {.chunk_size = batch, .preload_nchunks = 2, .batch_size = batch, .mask = mask, .seed = 4}),
                        g, r, false);
        }
      }
    }
  }
}

TEST_CASE("DistributedSampler refuses world sizes above 2^62 and world_size * batch_size above 2^62", "[limits]") {
  const cs::RandomSampler base({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1});
  REQUIRE_INVALID(cs::DistributedSampler(base, cs::DistInfo{.rank = 0, .world_size = two62 + 1}),
                  Contains("world_size (4611686018427387905) must be in [1, 2^62]"));
  REQUIRE_INVALID(cs::DistributedSampler(base, cs::DistInfo{.rank = 0, .world_size = INT64_MAX}),
                  Contains("world_size (9223372036854775807)"));
  REQUIRE_NOTHROW(cs::DistributedSampler(base, cs::DistInfo{.rank = two62 - 1, .world_size = two62}));

  // 2^20 ranks of a batch of 2^42 + 1 rows: the job's unit does not fit, whatever n_obs.
  const std::int64_t b = (std::int64_t{1} << 42) + 1;
  const cs::RandomSampler wide({.chunk_size = b, .preload_nchunks = 1, .batch_size = b});
  const cs::DistributedSampler global(wide, cs::DistInfo{.rank = 5, .world_size = std::int64_t{1} << 20},
                                      {.mode = cs::ShardMode::global});
  REQUIRE_INVALID(global.n_batches(two62),
                  Contains("world_size (1048576) * batch_size (4398046511105) must be <= 2^62"));
  REQUIRE_INVALID(global.n_batches(1000), Contains("world_size (1048576) * batch_size (4398046511105)"));
  // One batch less fits exactly: every rank reads one batch of 2^42 rows, the whole range.
  const cs::RandomSampler fits({.chunk_size = b - 1, .preload_nchunks = 1, .batch_size = b - 1});
  const cs::DistributedSampler exact(fits, cs::DistInfo{.rank = (1 << 20) - 1, .world_size = std::int64_t{1} << 20},
                                     {.mode = cs::ShardMode::global});
  REQUIRE(exact.n_batches(two62) == 1);
  REQUIRE(exact.shard(two62) == cs::Slice{0, two62});
  REQUIRE_INVALID(exact.n_batches(two62 - 1), Contains("world_size (1048576)") && Contains("one whole batch"));
}

TEST_CASE("global mode at 2^62: each rank's first batch is the uninterrupted plan's", "[limits]") {
  // With batch_size 1 and a world that divides 2^62, the window is all 2^62 rows for any world
  // size, so one rank of a one-rank job, resumed at batch r * 2^62 / world, reads rank r's first batch.
  const cs::RandomSampler base({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 21});
  const cs::DistributedOptions global{.mode = cs::ShardMode::global};
  const auto reference = [&](std::int64_t batch) {
    cs::DistributedSampler alone(base, cs::DistInfo{.rank = 0, .world_size = 1}, global);
    skip_to(alone, batch);
    return first_requests(alone.sample(two62), 1).at(0);
  };
  for (const std::int64_t world : {std::int64_t{4}, std::int64_t{1} << 20, two62}) {
    const std::int64_t each = two62 / world;
    for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, world - 1}) {
      CAPTURE(world, r);
      cs::DistributedSampler dist(base, cs::DistInfo{.rank = r, .world_size = world}, global);
      REQUIRE(dist.n_batches(two62) == each);
      const std::vector<OwnedRequest> first = first_requests(dist.sample(two62), 2);
      REQUIRE(first.size() == static_cast<std::size_t>(std::min<std::int64_t>(each, 2)));
      REQUIRE(first[0] == reference(r * each));
      // The rank's last batch is the one before the next rank's first.
      dist.set_epoch(0);
      skip_to(dist, each - 1);
      const std::vector<OwnedRequest> last = first_requests(dist.sample(two62), 2);
      REQUIRE(last.size() == 1);
      REQUIRE(last[0] == reference(r * each + each - 1));
    }
  }
}

TEST_CASE("elastic restarts at 2^62: 4 ranks to 3, and 2^16 ranks to 3", "[limits]") {
  const cs::RandomSampler base({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 21});
  const cs::DistributedOptions global{.mode = cs::ShardMode::global};
  const auto reference = [&](int128 batch) {
    cs::DistributedSampler alone(base, cs::DistInfo{.rank = 0, .world_size = 1}, global);
    skip_to(alone, narrow(batch));
    return first_requests(alone.sample(two62), 1).at(0);
  };
  for (const std::int64_t old_world : {std::int64_t{4}, std::int64_t{1} << 16}) {
    // Every old rank had read half its block of 2^62 / old_world batches.
    const int128 block = two62 / old_world;
    const int128 read = block / 2;
    cs::DistributedSampler old_rank(base, cs::DistInfo{.rank = 0, .world_size = old_world}, global);
    (void)old_rank.sample(two62);
    const cs::SamplerState state = old_rank.state(narrow(read));
    // The unread halves, in rank order, are dealt to 3 ranks: 2^61 batches, each rank a third.
    const int128 left = old_world * (block - read);
    REQUIRE(left == two61);
    const int128 each = left / 3;
    for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}}) {
      CAPTURE(old_world, r);
      cs::DistributedSampler rank(base, cs::DistInfo{.rank = r, .world_size = 3}, global);
      rank.restore(state);
      auto range = rank.sample(two62);
      REQUIRE(range.n_batches() == narrow(each));
      // The rank's first batch, position r * each of the unread batches: the `at`-th unread batch
      // of old rank `j`, which is plan batch j * block + read + at.
      const int128 position = r * each;
      const int128 j = position / (block - read);
      const int128 at = position % (block - read);
      REQUIRE(first_requests(range, 1).at(0) == reference(j * block + read + at));
      // A state of the new job records the dealt runs and where they were dealt.
      const cs::SamplerState again = rank.state(narrow(read + 5));
      REQUIRE(support::fields(again).dealt_at == narrow(read));
      REQUIRE(support::fields(again).runs.has_value());
      REQUIRE(support::fields(again).runs->size() == static_cast<std::size_t>(old_world));
      REQUIRE(support::fields(again).runs->front() == cs::BatchRun{narrow(read), narrow(block)});
      REQUIRE(support::fields(again).runs->back() == cs::BatchRun{narrow((old_world - 1) * block + read), two62});
    }
  }
}

TEST_CASE("an elastic restore of a state that claims up to 2^62 ranks looks at no more ranks than batches",
          "[limits]") {
  // A corrupt checkpoint may claim any world size. Old ranks from the epoch's batch count on were
  // dealt nothing, so the restore ends at once instead of stepping through 2^62 ranks.
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 10, .seed = 4});
  for (const auto policy : {cs::Remainder::drop, cs::Remainder::pad}) {
    for (const bool equal : {true, false}) {
      const cs::DistributedOptions o{.enforce_equal_batches = equal,
                                     .mode = cs::ShardMode::global,
                                     .remainder = policy};
      cs::DistributedSampler old_rank(base, cs::DistInfo{.rank = 0, .world_size = 4}, o);
      (void)old_rank.sample(1000);
      cs::SamplerState state = old_rank.state(0);
      for (const std::int64_t claimed : {two62, two62 - 1, std::int64_t{1} << 40}) {
        state = support::edited(state, [&](cs::detail::StateFields& f) { f.world_size = claimed; });
        // The plan's 100 batches in blocks of 100 / claimed: none with drop and equal batches,
        // else one each for the first 100 ranks (pad rounds up, unequal blocks give the rest
        // out one by one), all unread and dealt to 2 ranks.
        const std::int64_t each = policy == cs::Remainder::drop && equal ? 0 : 50;
        for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}}) {
          CAPTURE(policy, equal, claimed, r);
          cs::DistributedSampler rank(base, cs::DistInfo{.rank = r, .world_size = 2}, o);
          rank.restore(state);
          REQUIRE(rank.sample(1000).n_batches() == each);
        }
      }
    }
  }
}

TEST_CASE("contiguous shards at 2^62: a state near the end of a rank's 2^60 batches", "[limits]") {
  const cs::RandomSampler base({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 8});
  const std::int64_t per_rank = two62 / 4;
  // Rank 3 reads [3 * 2^60, 2^62) on the stream spawned by its rank, as with_shard documents.
  const auto plan = base.with_shard({.mask = {3 * per_rank, two62}, .stream = 3, .budget = per_rank}).plan(two62, 0);
  cs::DistributedSampler rank(base, cs::DistInfo{.rank = 3, .world_size = 4});
  REQUIRE(rank.shard(two62) == cs::Slice{3 * per_rank, two62});
  REQUIRE(rank.n_batches(two62) == per_rank);
  REQUIRE(first_requests(rank.sample(two62), 1).at(0) == filled(plan, 0));

  rank.set_epoch(0);
  skip_to(rank, per_rank - 1);
  const std::vector<OwnedRequest> last = first_requests(rank.sample(two62), 2);
  REQUIRE(last.size() == 1);
  REQUIRE(last[0] == filled(plan, per_rank - 1));

  rank.set_epoch(0);
  skip_to(rank, per_rank + 1);
  REQUIRE_INVALID(rank.sample(two62),
                  Contains("state's batches_done (1152921504606846977) exceed the 1152921504606846976"));
  // The refused state is still pending: n_batches refuses it too, as sample() does.
  REQUIRE_INVALID(rank.n_batches(two62),
                  Contains("state's batches_done (1152921504606846977) exceed the 1152921504606846976"));

  // Worker 2 of 3 reads requests 2, 5, ...: (2^60 - 3) / 3 + 1 of them; its last is request
  // 2 + 3 * ((2^60 - 3) / 3).
  const cs::WorkerInfo worker{.id = 2, .num_workers = 3};
  const std::int64_t mine = narrow((int128{per_rank} - 3) / 3 + 1);
  rank.set_epoch(0);
  REQUIRE(rank.n_batches(two62, worker) == mine);
  (void)rank.sample(two62, worker);
  const cs::SamplerState state = rank.state(mine - 1);
  REQUIRE(state.worker() == 2);
  cs::DistributedSampler resumed(base, cs::DistInfo{.rank = 3, .world_size = 4});
  resumed.restore(state);
  const std::vector<OwnedRequest> worker_last = first_requests(resumed.sample(two62, worker), 2);
  REQUIRE(worker_last.size() == 1);
  REQUIRE(worker_last[0] == filled(plan, 2 + 3 * ((per_rank - 3) / 3)));
}

TEST_CASE("rotate and pad at 2^62 on 3 ranks, in epochs 2^64 - 2 and 2^64 - 1", "[limits]") {
  const cs::SequentialSampler base({.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1});
  // 2^62 = 3 * 1537228672809129301 + 1: one row left out, the head's in odd epochs.
  const std::int64_t per_rank = 1537228672809129301;
  cs::DistributedSampler rotate(base, cs::DistInfo{.rank = 2, .world_size = 3}, {.remainder = cs::Remainder::rotate});
  REQUIRE(rotate.shard(two62, last_epoch - 1) == cs::Slice{2 * per_rank, 3 * per_rank});
  REQUIRE(rotate.shard(two62, last_epoch) == cs::Slice{1 + 2 * per_rank, two62});
  rotate.set_epoch(last_epoch);
  REQUIRE(first_requests(rotate.sample(two62), 1).at(0).chunks ==
          std::vector<cs::Slice>{{1 + 2 * per_rank, 2 + 2 * per_rank}});
  // After epoch 2^64 - 1 the counter wraps to epoch 0, an even epoch.
  REQUIRE(rotate.epoch() == 0);
  REQUIRE(rotate.shard(two62) == cs::Slice{2 * per_rank, 3 * per_rank});

  // pad: rank 0 holds the extra row; every rank reads per_rank + 1 batches, rank 1 repeating one.
  for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}}) {
    cs::DistributedSampler pad(base, cs::DistInfo{.rank = r, .world_size = 3}, {.remainder = cs::Remainder::pad});
    REQUIRE(pad.shard(two62) == (r == 0 ? cs::Slice{0, per_rank + 1} : cs::Slice{per_rank + 1, 2 * per_rank + 1}));
    REQUIRE(pad.n_batches(two62) == per_rank + 1);
    skip_to(pad, per_rank);
    const std::vector<OwnedRequest> last = first_requests(pad.sample(two62), 2);
    REQUIRE(last.size() == 1);
    // rank 0's last row is its own; rank 1 repeats the first row of its last request's buffer
    REQUIRE(last[0].chunks == std::vector<cs::Slice>{r == 0 ? cs::Slice{per_rank, per_rank + 1}
                                                            : cs::Slice{2 * per_rank, 2 * per_rank + 1}});
    REQUIRE(last[0].batches == std::vector<std::vector<std::int64_t>>{{0}});
  }
}

TEST_CASE("padding that would pass 2^62 is refused, naming the padding", "[limits]") {
  // 2^62 rows padded to a multiple of 3 would be 2^62 + 2.
  const cs::RandomSampler threes({.chunk_size = 3, .preload_nchunks = 1, .batch_size = 3});
  const cs::DistributedSampler contiguous(threes, cs::DistInfo{.rank = 0, .world_size = 1},
                                          {.remainder = cs::Remainder::pad});
  REQUIRE_INVALID(contiguous.n_batches(two62), Contains("padding") && Contains("4611686018427387904") &&
                                                   Contains("batch_size (3)") && Contains("2^62"));
  const cs::DistributedSampler global(threes, cs::DistInfo{.rank = 0, .world_size = 1},
                                      {.mode = cs::ShardMode::global, .remainder = cs::Remainder::pad});
  REQUIRE_INVALID(global.n_batches(two62), Contains("padding 4611686018427387904 observations") && Contains("2^62"));
  // One row less pads to 2^62 - 1 + 0: 2^62 - 1 is a multiple of 3.
  REQUIRE(contiguous.n_batches(two62 - 1) == (two62 - 1) / 3);
  REQUIRE(global.n_batches(two62 - 1) == (two62 - 1) / 3);
  // Two ranks halve the rows first: 2^61 + 1 is a multiple of 3, so nothing is refused.
  const cs::DistributedSampler two(threes, cs::DistInfo{.rank = 1, .world_size = 2}, {.remainder = cs::Remainder::pad});
  REQUIRE(two.n_batches(two62) == (two61 + 1) / 3);
}

TEST_CASE("an elastic restart inside epoch 2^64 - 1 keeps its dealt runs across the wrap", "[limits]") {
  // The state of the current epoch carries the dealt runs only while that epoch is the one just
  // played, which at 2^64 - 1 means the next epoch counter has wrapped to 0.
  const cs::RandomSampler base({.chunk_size = 4, .preload_nchunks = 2, .batch_size = 4, .seed = 6});
  const cs::DistributedOptions global{.mode = cs::ShardMode::global};
  constexpr std::int64_t n_obs = 1000;
  cs::DistributedSampler four(base, cs::DistInfo{.rank = 0, .world_size = 4}, global);
  four.set_epoch(last_epoch);
  (void)four.sample(n_obs);
  const cs::SamplerState at_10 = four.state(10);
  REQUIRE(at_10.epoch() == last_epoch);

  cs::DistributedSampler three(base, cs::DistInfo{.rank = 1, .world_size = 3}, global);
  three.restore(at_10);
  const std::vector<OwnedRequest> rest = support::epoch(three, n_obs);
  REQUIRE(three.epoch() == 0);
  const cs::SamplerState at_15 = three.state(15);
  REQUIRE(at_15.epoch() == last_epoch);
  REQUIRE(support::fields(at_15).dealt_at == 10);
  REQUIRE(support::fields(at_15).runs.has_value());
  // A second restart on 3 ranks continues the first, batch for batch.
  cs::DistributedSampler again(base, cs::DistInfo{.rank = 1, .world_size = 3}, global);
  again.restore(cs::SamplerState::parse(at_15.to_string()));
  const support::Batches all = support::observations(rest);
  REQUIRE(support::observations(support::epoch(again, n_obs)) == support::Batches(all.begin() + 5, all.end()));
}

TEST_CASE("a rank's 2^62 batches, every mode and policy: states at the end and dealt runs at 2^62", "[limits]") {
  // Batches of one row over 2^62 rows on one rank: every mode and policy, with and without
  // replacement, makes a plan of 2^62 batches. The counts a state adds up stay at most 2^62: a
  // global-mode state whose dealt_at and dealt runs together claim more (2^62 + 2^62 overflows
  // int64) is refused on every path, not wrapped to a negative count.
  const cs::ShardMode mode = GENERATE(cs::ShardMode::contiguous, cs::ShardMode::global);
  const cs::Remainder remainder = GENERATE(cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate);
  const bool enforce = GENERATE(true, false);
  const bool replacement = GENERATE(false, true);
  CAPTURE(mode == cs::ShardMode::global, support::policy_name(remainder), enforce, replacement);
  const cs::RandomSampler base(
      {.chunk_size = 1, .preload_nchunks = 1, .batch_size = 1, .seed = 21, .replacement = replacement});
  const cs::DistributedOptions options{.enforce_equal_batches = enforce, .mode = mode, .remainder = remainder};
  const cs::DistributedSampler fresh(base, cs::DistInfo{.rank = 0, .world_size = 1}, options);
  REQUIRE(fresh.n_batches(two62) == two62);

  // At the end of the epoch: 2^62 batches done, none left.
  cs::DistributedSampler end = fresh;
  skip_to(end, two62);
  REQUIRE(end.n_batches(two62) == two62);
  REQUIRE(end.n_batches_left(two62) == 0);
  REQUIRE(first_requests(end.sample(two62), 1).empty());
  REQUIRE(end.epoch() == 1);
  if (mode == cs::ShardMode::contiguous) return;

  // A state (elastic restart) that was dealt the plan's second half after batch 2^61: 2^62 in all.
  const auto dealt = [&](std::int64_t dealt_at, cs::BatchRun runs) {
    cs::DistributedSampler d = fresh;
    cs::SamplerState state = d.state(0);
    state = support::edited(state, [&](cs::detail::StateFields& f) {
      f.n_obs = two62;
      f.batches_done = dealt_at;
      f.dealt_at = dealt_at;
      f.runs = std::vector<cs::BatchRun>{runs};
    });
    d.restore(cs::SamplerState::parse(state.to_string()));
    return d;
  };
  cs::DistributedSampler half = dealt(two61, {two61, two62});
  REQUIRE(half.n_batches(two62) == two62);
  REQUIRE(half.n_batches_left(two62) == two61);
  REQUIRE(first_requests(half.sample(two62), 1).size() == 1);

  // Dealt all 2^62 batches after batch 2^62: 2^63 batches, refused, the restore still pending.
  cs::DistributedSampler corrupt = dealt(two62, {0, two62});
  const std::string sum = "(4611686018427387904 + 4611686018427387904) must be <= 2^62";
  REQUIRE_THROWS_AS(corrupt.n_batches(two62), cs::StateMismatchError);
  REQUIRE_THROWS_WITH(corrupt.n_batches(two62), Contains("dealt_at") && Contains(sum));
  REQUIRE_THROWS_WITH(corrupt.n_batches_left(two62), Contains(sum));
  REQUIRE_THROWS_WITH(corrupt.sample(two62), Contains(sum));
  REQUIRE(corrupt.epoch() == 0);
  // One batch less of either is still more than 2^62 in all: refused, not counted as 2^63 - 2.
  cs::DistributedSampler over = dealt(two62 - 1, {1, two62});
  REQUIRE_THROWS_WITH(over.n_batches(two62), Contains("(4611686018427387903 + 4611686018427387903) must be <= 2^62"));
}

}  // namespace test_limits_distributed
