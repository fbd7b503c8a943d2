// SPDX-License-Identifier: MIT
// Remainder policies of DistributedSampler in contiguous mode, over random configurations and
// four epochs: drop leaves out the range's tail every epoch; rotate leaves out the tail in even
// epochs and the head in odd ones (as many as drop), so any two consecutive epochs read
// everything; pad leaves out nothing and gives every rank ceil(ceil(S/W)/B) full batches by
// repeating rows of its own shard's last request. Every policy keeps equal batch counts on every
// rank and epoch; drop/rotate never read an observation on two ranks. Worked example: 107
// observations on 3 ranks with chunk 10 and batch 10.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_remainder {

namespace {

namespace cs = chunksampler;
using Dist = cs::DistributedSampler<cs::RandomSampler>;
using support::ceil_div;
using support::Config;

[[nodiscard]] bool pads(const Config& c) { return c.remainder == cs::Remainder::pad; }
[[nodiscard]] bool servable(const Config& c) { return pads(c) ? c.size() >= c.world : c.per_rank() >= 1; }
// The rounding unit of a rank's share: whole batches with enforce_equal_batches.
[[nodiscard]] std::int64_t unit(const Config& c) { return c.enforce ? c.batch : 1; }
// Rows each rank's epoch holds: its shard (drop/rotate), or padded up (pad).
[[nodiscard]] std::int64_t budget(const Config& c) {
  return pads(c) ? ceil_div(ceil_div(c.size(), c.world), unit(c)) * unit(c) : c.per_rank();
}
[[nodiscard]] std::int64_t n_batches(const Config& c) { return ceil_div(budget(c), c.batch); }
// drop/rotate: rank r's shard; rotate moves the grid to the range's end in odd epochs.
[[nodiscard]] cs::Slice expected_shard(const Config& c, std::int64_t r, std::uint64_t epoch) {
  const std::int64_t offset =
      c.remainder == cs::Remainder::rotate && epoch % 2 == 1 ? c.size() - c.world * c.per_rank() : 0;
  const std::int64_t start = c.range().start + offset + r * c.per_rank();
  return {start, start + c.per_rank()};
}

Config random_config(support::ConfigRng& g) {
  Config c;
  support::draw_shape(g, c, 8, 4);
  c.world = g.between(1, 8);
  c.enforce = g.between(0, 3) != 0;
  c.drop_last = c.enforce && g.coin();  // with enforce the budget is whole batches: drop_last changes nothing
  c.remainder = support::draw_remainder(g);
  c.seed = g.next();
  const std::int64_t size = support::draw_size(g, c.world * c.batch, 4 * c.world * c.batch + 30);
  support::place(g, c, size);
  return c;
}

[[nodiscard]] std::set<std::int64_t> range_set(cs::Slice s) {
  std::set<std::int64_t> out;
  for (std::int64_t i = s.start; i < s.stop; ++i) out.insert(i);
  return out;
}

}  // namespace

TEST_CASE("Remainder policies in contiguous mode over random configurations and four epochs",
          "[distributed][remainder]") {
  support::ConfigRng g(1337);
  std::map<cs::Remainder, int> served;
  int left_out_some = 0;
  int repeats_seen = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const Config c = random_config(g);
    INFO(c.describe());
    std::vector<Dist> ranks = c.ranks();
    if (!servable(c)) {
      for (Dist& d : ranks) {
        CHECK_THROWS_AS(d.shard(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.n_batches(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.sample(c.n_obs), std::invalid_argument);
      }
      continue;
    }
    ++served[c.remainder];
    const cs::Slice range = c.range();
    const std::set<std::int64_t> everything = range_set(range);
    std::set<std::int64_t> drop_left_out;  // what drop leaves out: the tail
    for (std::int64_t i = range.start + c.world * c.per_rank(); i < range.stop; ++i) drop_left_out.insert(i);

    std::set<std::int64_t> batch_counts;
    std::vector<std::set<std::int64_t>> read_by_epoch;
    for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
      INFO("epoch " << epoch);
      std::map<std::int64_t, std::int64_t> counts;  // over all ranks
      std::vector<cs::Slice> shards;
      for (std::int64_t r = 0; r < c.world; ++r) {
        INFO("rank " << r);
        Dist& d = ranks[static_cast<std::size_t>(r)];
        REQUIRE(d.epoch() == epoch);
        const cs::Slice shard = support::only_range(d.shard(c.n_obs));
        shards.push_back(shard);
        if (!pads(c)) CHECK(shard == expected_shard(c, r, epoch));
        const std::int64_t announced = d.n_batches(c.n_obs);
        const support::EpochRecord rec = support::walk(d, c.n_obs);
        CHECK(rec.n_batches() == announced);
        CHECK(rec.n_batches() == n_batches(c));
        batch_counts.insert(rec.n_batches());
        if (c.enforce) {
          CHECK(rec.batches_all_full(c.batch));
        } else {
          CHECK(rec.batches_full_but_last(c.batch));
        }
        CHECK(rec.chunks_valid(shard, c.chunk));
        CHECK(rec.draws_inside(shard));  // pad: the repeats too come from the rank's own shard
        CHECK(static_cast<std::int64_t>(rec.draws.size()) == budget(c));
        const auto mine = rec.counts();
        if (pads(c)) {
          // Every row of the shard, and the missing rows as repeats of the rank's last request.
          CHECK(static_cast<std::int64_t>(mine.size()) == shard.size());
          CHECK(budget(c) - shard.size() >= 0);
          std::set<std::int64_t> last_request;
          for (const cs::Slice& chunk : rec.requests.back().chunks)
            for (std::int64_t i = chunk.start; i < chunk.stop; ++i) last_request.insert(i);
          bool repeats_in_last = true;
          for (const auto& [obs, n] : mine)
            if (n > 1) repeats_in_last = repeats_in_last && last_request.contains(obs);
          CHECK(repeats_in_last);
          if (budget(c) > shard.size()) ++repeats_seen;
        } else {
          CHECK(rec.covers_exactly_once(shard));
        }
        for (const auto& [obs, n] : mine) counts[obs] += n;
      }
      // Equal batch counts on every rank and every epoch.
      CHECK(batch_counts.size() == 1);

      std::set<std::int64_t> read;
      for (const auto& kv : counts) read.insert(kv.first);
      std::set<std::int64_t> left_out;
      std::ranges::set_difference(everything, read, std::inserter(left_out, left_out.end()));
      if (pads(c)) {
        CHECK(left_out.empty());
        // Balanced shards tile the range in rank order, sizes floor or ceil of S / W.
        CHECK(shards.front().start == range.start);
        CHECK(shards.back().stop == range.stop);
        for (std::size_t r = 0; r < shards.size(); ++r) {
          CHECK((shards[r].size() == c.size() / c.world || shards[r].size() == ceil_div(c.size(), c.world)));
          if (r > 0) CHECK(shards[r].start == shards[r - 1].stop);
        }
      } else {
        // No observation on two ranks.
        CHECK(std::ranges::all_of(counts, [](const auto& kv) { return kv.second == 1; }));
        CHECK(left_out.size() == drop_left_out.size());  // rotate leaves out as many as drop
        if (c.remainder == cs::Remainder::drop || epoch % 2 == 0) {
          CHECK(left_out == drop_left_out);  // the tail
        } else {
          CHECK(left_out == range_set({range.start, range.start + static_cast<std::int64_t>(drop_left_out.size())}));
        }
      }
      if (!left_out.empty()) ++left_out_some;
      read_by_epoch.push_back(read);
    }
    if (c.remainder == cs::Remainder::rotate)
      for (std::size_t e = 0; e + 1 < read_by_epoch.size(); ++e) {
        INFO("epochs " << e << " and " << e + 1);
        std::set<std::int64_t> both = read_by_epoch[e];
        both.insert(read_by_epoch[e + 1].begin(), read_by_epoch[e + 1].end());
        CHECK(both == everything);
      }
  }
  INFO("left out in " << left_out_some << " epochs, repeats in " << repeats_seen << " rank epochs");
  CHECK(served[cs::Remainder::drop] > 50);
  CHECK(served[cs::Remainder::pad] > 50);
  CHECK(served[cs::Remainder::rotate] > 50);
  CHECK(left_out_some > 150);
  CHECK(repeats_seen > 150);
}

TEST_CASE("Remainder worked example: 107 observations, 3 ranks, chunk 10, preload 1, batch 10",
          "[distributed][remainder]") {
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 5});
  struct Expected {
    cs::Remainder remainder;
    std::vector<cs::Slice> even;  // shards in epochs 0, 2
    std::vector<cs::Slice> odd;   // shards in epochs 1, 3
    std::int64_t batches;
  };
  const std::vector<Expected> cases = {
      {cs::Remainder::drop, {{0, 30}, {30, 60}, {60, 90}}, {{0, 30}, {30, 60}, {60, 90}}, 3},
      {cs::Remainder::rotate, {{0, 30}, {30, 60}, {60, 90}}, {{17, 47}, {47, 77}, {77, 107}}, 3},
      {cs::Remainder::pad, {{0, 36}, {36, 72}, {72, 107}}, {{0, 36}, {36, 72}, {72, 107}}, 4},
  };
  for (const Expected& e : cases) {
    INFO(support::policy_name(e.remainder));
    for (std::int64_t r = 0; r < 3; ++r) {
      INFO("rank " << r);
      Dist d(base, cs::DistInfo{.rank = r, .world_size = 3}, {.remainder = e.remainder});
      for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
        INFO("epoch " << epoch);
        const cs::Slice shard = (epoch % 2 == 0 ? e.even : e.odd)[static_cast<std::size_t>(r)];
        CHECK(d.shard(107) == shard);
        CHECK(d.shard(107, epoch) == shard);
        CHECK(d.n_batches(107) == e.batches);
        const support::EpochRecord rec = support::walk(d, 107);
        CHECK(rec.n_batches() == e.batches);
        CHECK(rec.batches_all_full(10));
        CHECK(rec.draws_inside(shard));
        CHECK(static_cast<std::int64_t>(rec.counts().size()) == shard.size());  // every row of the shard
        CHECK(static_cast<std::int64_t>(rec.draws.size()) == 10 * e.batches);   // pad: 4 or 5 repeats
      }
    }
  }
}

}  // namespace test_remainder
