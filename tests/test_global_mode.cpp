// SPDX-License-Identifier: MIT
// DistributedSampler in ShardMode::global: one plan per epoch over the window all ranks share,
// dealt in contiguous blocks of batches. Over random configurations and every remainder policy:
// the window each policy promises, disjoint ranks and exact coverage (drop/rotate), every
// observation plus the promised repeats (pad), equal full batches (enforce) or counts within one
// (without), chunks of the window's partition, one shared chunk permutation (the ranks' batches
// concatenate to the plan's; a request is listed by two ranks only at a block boundary), and
// data that changes from epoch to epoch. Worked example: 107 observations on 3 ranks.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/random_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_global_mode {

namespace {

namespace cs = chunksampler;
using Dist = cs::DistributedSampler<cs::RandomSampler>;
using support::Batches;
using support::Config;
using ChunkKey = std::vector<std::pair<std::int64_t, std::int64_t>>;

constexpr std::uint64_t global_stream = ~std::uint64_t{0};

[[nodiscard]] std::int64_t round_down(std::int64_t a, std::int64_t b) { return a / b * b; }
[[nodiscard]] std::int64_t round_up(std::int64_t a, std::int64_t b) { return support::ceil_div(a, b) * b; }

// The rows all ranks read together per batch.
[[nodiscard]] std::int64_t unit(const Config& c) { return c.world * c.batch; }

// Whether the job can be served: from the specification of each policy.
[[nodiscard]] bool servable(const Config& c) {
  if (!c.enforce) return c.size() >= c.world;
  return c.remainder == cs::Remainder::pad || c.size() >= unit(c);
}

// The observations all ranks read together in `epoch`, and the positions the plan holds.
[[nodiscard]] cs::Slice expected_window(const Config& c, std::uint64_t epoch) {
  const cs::Slice r = c.range();
  if (!c.enforce || c.remainder == cs::Remainder::pad) return r;
  const std::int64_t kept = round_down(c.size(), unit(c));
  if (c.remainder == cs::Remainder::rotate && epoch % 2 == 1) return {r.stop - kept, r.stop};
  return {r.start, r.start + kept};
}

[[nodiscard]] std::int64_t budget(const Config& c) {
  if (!c.enforce) return c.size();
  if (c.remainder == cs::Remainder::pad) return round_up(c.size(), unit(c));
  return round_down(c.size(), unit(c));
}

Config random_config(support::ConfigRng& g) {
  Config c;
  c.mode = cs::ShardMode::global;
  support::draw_shape(g, c, 8, 4);
  c.world = g.between(1, 8);
  c.drop_last = g.coin();
  c.enforce = g.between(0, 3) != 0;
  c.remainder = support::draw_remainder(g);
  c.seed = g.next();
  // Mostly servable sizes, a few too small for the world.
  const std::int64_t size = support::draw_size(g, unit(c), 5 * unit(c) + 40);
  support::place(g, c, size, {.min_offset = 0});
  return c;
}

[[nodiscard]] ChunkKey key_of(const std::vector<cs::Slice>& chunks) {
  ChunkKey key;
  for (const cs::Slice& c : chunks) key.emplace_back(c.start, c.stop);
  return key;
}

// The epoch's plan over `window` on the stream every rank shares, as the specification lays it
// out (`rng().spawn(~0)`), computed directly from the wrapped sampler.
struct Reference {
  Batches batches;
  std::set<std::pair<std::int64_t, std::int64_t>> chunks;
  std::int64_t max_request_batches = 0;
};

[[nodiscard]] Reference reference(const Config& c, std::uint64_t epoch) {
  const auto plan = cs::RandomSampler(c.options())
                        .with_shard({.mask = expected_window(c, epoch), .stream = global_stream, .budget = budget(c)})
                        .plan(c.n_obs, epoch);
  Reference ref;
  cs::RequestBuffers buffers;
  for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
    plan.fill(k, buffers);
    for (const cs::Slice& chunk : buffers.chunks) ref.chunks.emplace(chunk.start, chunk.stop);
    const cs::Splits splits(buffers.positions, plan.batch_size());
    for (const std::span<const std::int64_t> batch : splits) {
      std::vector<std::int64_t>& obs = ref.batches.emplace_back();
      for (const std::int64_t p : batch) obs.push_back(support::observation_at(buffers.chunks, p).value_or(-1));
    }
    ref.max_request_batches = std::max(ref.max_request_batches, plan.request_begin(k + 1) - plan.request_begin(k));
  }
  return ref;
}

// The chunks that partition `window` on the storage grid: the cells of `chunk` rows from row 0,
// cut to the window (a short head and tail where it starts or ends off the grid).
[[nodiscard]] std::set<std::pair<std::int64_t, std::int64_t>> partition(cs::Slice window, std::int64_t chunk) {
  std::set<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t s = window.start; s < window.stop; s = (s / chunk + 1) * chunk)
    out.emplace(s, std::min((s / chunk + 1) * chunk, window.stop));
  return out;
}

// `pieces` with neighbours inside one grid cell joined: a chunk read in two pieces by two
// requests becomes one again.
[[nodiscard]] std::set<std::pair<std::int64_t, std::int64_t>> joined(
    const std::set<std::pair<std::int64_t, std::int64_t>>& pieces, std::int64_t chunk) {
  std::set<std::pair<std::int64_t, std::int64_t>> out;
  std::optional<std::pair<std::int64_t, std::int64_t>> open;
  for (const auto& p : pieces) {
    if (open && open->second == p.first && open->first / chunk == p.first / chunk) {
      open->second = p.second;
      continue;
    }
    if (open) out.insert(*open);
    open = p;
  }
  if (open) out.insert(*open);
  return out;
}

[[nodiscard]] std::set<std::int64_t> observation_set(const Batches& batches) {
  std::set<std::int64_t> out;
  for (const auto& b : batches) out.insert(b.begin(), b.end());
  return out;
}

}  // namespace

TEST_CASE("Global mode over random configurations: windows, coverage, equal batches, one shared plan",
          "[distributed][global]") {
  support::ConfigRng g(20260311);
  int served = 0;
  int shared_requests_seen = 0;
  int nontrivial = 0;
  int changed_next = 0;
  int changed_even = 0;
  int padded = 0;
  for (int trial = 0; trial < 260; ++trial) {
    const Config c = random_config(g);
    INFO(c.describe());
    std::vector<Dist> ranks = c.ranks();

    if (!servable(c)) {
      for (Dist& d : ranks) {
        CHECK_THROWS_AS(d.n_batches(c.n_obs), std::invalid_argument);
        CHECK_THROWS_AS(d.sample(c.n_obs), std::invalid_argument);
        CHECK(d.epoch() == 0);
      }
      continue;
    }
    ++served;
    const cs::Slice range = c.range();
    std::vector<std::set<std::int64_t>> rank0_sets;
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
      INFO("epoch " << epoch);
      const cs::Slice window = expected_window(c, epoch);
      const Reference ref = reference(c, epoch);
      const auto total = static_cast<std::int64_t>(ref.batches.size());

      std::vector<std::vector<support::OwnedRequest>> requests;
      std::vector<Batches> batches;
      for (std::int64_t r = 0; r < c.world; ++r) {
        Dist& d = ranks[static_cast<std::size_t>(r)];
        CHECK(d.epoch() == epoch);
        CHECK(d.shard(c.n_obs) == window);
        CHECK(d.rng() == cs::Rng(c.seed).spawn(global_stream));
        const std::int64_t announced = d.n_batches(c.n_obs);
        requests.push_back(support::epoch(d, c.n_obs));
        batches.push_back(support::observations(requests.back()));
        CHECK(static_cast<std::int64_t>(batches.back().size()) == announced);
      }

      // Batch counts: equal and full with enforce_equal_batches, within one of each other without.
      std::int64_t fewest = total;
      std::int64_t most = 0;
      for (std::int64_t r = 0; r < c.world; ++r) {
        INFO("rank " << r);
        const Batches& mine = batches[static_cast<std::size_t>(r)];
        const auto n = static_cast<std::int64_t>(mine.size());
        fewest = std::min(fewest, n);
        most = std::max(most, n);
        if (c.enforce) {
          CHECK(n == budget(c) / unit(c));
          CHECK(
              std::ranges::all_of(mine, [&](const auto& b) { return static_cast<std::int64_t>(b.size()) == c.batch; }));
        }
      }
      if (!c.enforce) {
        const std::int64_t expected_total = c.drop_last ? c.size() / c.batch : support::ceil_div(c.size(), c.batch);
        CHECK(total == expected_total);
        CHECK(most - fewest <= 1);
      }

      // One plan: the ranks' batches, rank after rank, are the shared plan's batches in order.
      CHECK(support::concat(batches) == ref.batches);

      // Coverage of what each policy promises.
      std::map<std::int64_t, std::int64_t> counts;
      std::int64_t draws = 0;
      for (const Batches& b : batches)
        for (const auto& batch : b)
          for (const std::int64_t obs : batch) {
            ++counts[obs];
            ++draws;
          }
      const bool all_inside = std::ranges::all_of(counts, [&](const auto& kv) { return window.contains(kv.first); });
      CHECK(all_inside);
      if (c.enforce && c.remainder == cs::Remainder::pad) {
        CHECK(static_cast<std::int64_t>(counts.size()) == range.size());  // every observation of the mask
        CHECK(draws == round_up(c.size(), unit(c)));
        CHECK(draws - range.size() == round_up(c.size(), unit(c)) - c.size());  // the repeats
        if (draws > range.size()) ++padded;
      } else if (c.enforce || !c.drop_last) {
        // drop/rotate: the window exactly once; without enforce: the whole range exactly once.
        CHECK(static_cast<std::int64_t>(counts.size()) == window.size());
        CHECK(draws == window.size());
      } else {
        CHECK(static_cast<std::int64_t>(counts.size()) == draws);  // drop_last: fewer, none twice
        CHECK(draws == round_down(c.size(), c.batch));
      }

      // Chunks: pieces of the window's grid cells (a cell read by two requests in two pieces);
      // together the plan's chunk set.
      const auto cells = partition(window, c.chunk);
      std::map<ChunkKey, std::vector<std::int64_t>> listed_by;  // request -> ranks listing it
      std::map<std::pair<std::int64_t, std::int64_t>, ChunkKey> request_of_chunk;
      bool chunks_ok = true;
      bool one_request_per_chunk = true;
      bool listed_once_per_rank = true;
      for (std::int64_t r = 0; r < c.world; ++r) {
        std::set<ChunkKey> mine;
        for (const support::OwnedRequest& request : requests[static_cast<std::size_t>(r)]) {
          const ChunkKey key = key_of(request.chunks);
          listed_once_per_rank = listed_once_per_rank && mine.insert(key).second;
          listed_by[key].push_back(r);
          for (const cs::Slice& chunk : request.chunks) {
            chunks_ok = chunks_ok && !chunk.empty() && chunk.size() <= c.chunk && window.start <= chunk.start &&
                        chunk.stop <= window.stop && chunk.start / c.chunk == (chunk.stop - 1) / c.chunk;
            const auto [it, fresh] = request_of_chunk.emplace(std::pair{chunk.start, chunk.stop}, key);
            one_request_per_chunk = one_request_per_chunk && (fresh || it->second == key);
          }
        }
      }
      CHECK(chunks_ok);
      CHECK(one_request_per_chunk);
      CHECK(listed_once_per_rank);
      std::set<std::pair<std::int64_t, std::int64_t>> union_of_chunks;
      for (const auto& kv : request_of_chunk) union_of_chunks.insert(kv.first);
      CHECK(union_of_chunks == ref.chunks);
      if (c.enforce || !c.drop_last) CHECK(joined(union_of_chunks, c.chunk) == cells);

      // A request two ranks list straddles their block boundary: neighbours only, at most W - 1
      // extra listings in all, and never three ranks while a block holds >= a request's batches - 1.
      std::int64_t extra = 0;
      std::int64_t most_listings = 0;
      bool neighbours = true;
      for (const auto& [key, rs] : listed_by) {
        extra += static_cast<std::int64_t>(rs.size()) - 1;
        most_listings = std::max(most_listings, static_cast<std::int64_t>(rs.size()));
        for (std::size_t i = 1; i < rs.size(); ++i) neighbours = neighbours && rs[i] == rs[i - 1] + 1;
      }
      if (most_listings > 1) ++shared_requests_seen;
      CHECK(neighbours);
      CHECK(extra <= c.world - 1);
      if (ref.max_request_batches <= fewest + 1) CHECK(most_listings <= 2);

      rank0_sets.push_back(observation_set(batches.front()));
    }
    // Data changes across epochs: for rank 0 with a few chunks of its own among several.
    const std::int64_t full_chunks = round_down(c.size(), unit(c)) / c.chunk;
    if (c.world >= 2 && full_chunks >= 2 * c.world) {
      ++nontrivial;
      if (rank0_sets[0] != rank0_sets[1]) ++changed_next;
      if (rank0_sets[0] != rank0_sets[2]) ++changed_even;
    }
  }
  INFO("served " << served << " shared " << shared_requests_seen << " nontrivial " << nontrivial << " changed "
                 << changed_next << "/" << changed_even << " padded " << padded);
  CHECK(served > 200);
  CHECK(shared_requests_seen > 20);
  CHECK(padded > 20);
  CHECK(nontrivial > 40);
  // A chance repeat of rank 0's set is at most 1/6 per configuration; a frozen order repeats always.
  CHECK(changed_next * 10 >= nontrivial * 8);
  CHECK(changed_even * 10 >= nontrivial * 8);
}

TEST_CASE("Global mode: a rank reads different, scattered chunks every epoch", "[distributed][global]") {
  // 100 chunks of 10, 4 ranks of 25 chunks each: a repeated or contiguous set is (much) less
  // likely than 1e-20 for a working permutation.
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 5, .batch_size = 10, .seed = 3});
  const cs::DistributedOptions options{.mode = cs::ShardMode::global};
  for (std::int64_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    Dist d(base, cs::DistInfo{.rank = r, .world_size = 4}, options);
    std::vector<std::set<std::int64_t>> sets;
    for (int e = 0; e < 3; ++e) {
      const Batches b = support::observations(support::epoch(d, 1000));
      CHECK(b.size() == 25);
      sets.push_back(observation_set(b));
      CHECK(sets.back().size() == 250);
      // Not a contiguous shard as contiguous mode would give.
      CHECK(*sets.back().rbegin() - *sets.back().begin() > 250);
    }
    CHECK(sets[0] != sets[1]);
    CHECK(sets[1] != sets[2]);
    CHECK(sets[0] != sets[2]);
  }
}

TEST_CASE("Global mode worked example: 107 observations, 3 ranks, chunk 10, batch 10", "[distributed][global]") {
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 17});
  struct Expected {
    cs::Remainder remainder;
    bool enforce;
    cs::Slice window0;
    cs::Slice window1;
    std::vector<std::int64_t> batches;  // per rank
    std::int64_t draws;
  };
  const std::vector<Expected> cases = {
      {cs::Remainder::drop, true, {0, 90}, {0, 90}, {3, 3, 3}, 90},
      {cs::Remainder::rotate, true, {0, 90}, {17, 107}, {3, 3, 3}, 90},
      {cs::Remainder::pad, true, {0, 107}, {0, 107}, {4, 4, 4}, 120},
      {cs::Remainder::drop, false, {0, 107}, {0, 107}, {4, 4, 3}, 107},
  };
  for (const Expected& e : cases) {
    INFO(support::policy_name(e.remainder) << " enforce " << e.enforce);
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
      INFO("epoch " << epoch);
      const cs::Slice window = epoch == 0 ? e.window0 : e.window1;
      std::map<std::int64_t, std::int64_t> counts;
      std::int64_t draws = 0;
      for (std::int64_t r = 0; r < 3; ++r) {
        Dist d(base, cs::DistInfo{.rank = r, .world_size = 3},
               {.enforce_equal_batches = e.enforce, .mode = cs::ShardMode::global, .remainder = e.remainder});
        d.set_epoch(epoch);
        CHECK(d.shard(107) == window);
        CHECK(d.n_batches(107) == e.batches[static_cast<std::size_t>(r)]);
        const Batches b = support::observations(support::epoch(d, 107));
        CHECK(static_cast<std::int64_t>(b.size()) == e.batches[static_cast<std::size_t>(r)]);
        for (const auto& batch : b)
          for (const std::int64_t obs : batch) {
            ++counts[obs];
            ++draws;
          }
      }
      CHECK(draws == e.draws);
      CHECK(static_cast<std::int64_t>(counts.size()) == window.size());
      CHECK(counts.begin()->first == window.start);
      CHECK(counts.rbegin()->first == window.stop - 1);
    }
  }
}

TEST_CASE("Global mode with replacement keeps the whole range, whatever the budget", "[distributed][global]") {
  // 95 observations, 2 ranks, batches of 20: 80 positions in whole batches. Without replacement
  // drop reads the window [0, 80); with replacement the budget is 80 draws from all of [0, 95),
  // also when num_samples equals the range's size (its default) and so looks like "no budget".
  const cs::RandomSampler with(
      {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 20, .seed = 8, .replacement = true});
  const cs::RandomSampler without({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 20, .seed = 8});
  for (const cs::Remainder remainder : {cs::Remainder::drop, cs::Remainder::rotate}) {
    INFO(support::policy_name(remainder));
    const cs::DistributedOptions options{.mode = cs::ShardMode::global, .remainder = remainder};
    CHECK(Dist(without, cs::DistInfo{.rank = 0, .world_size = 2}, options).shard(95) == cs::Slice{0, 80});
    std::int64_t tail_draws = 0;
    for (std::int64_t r = 0; r < 2; ++r) {
      Dist d(with, cs::DistInfo{.rank = r, .world_size = 2}, options);
      for (std::uint64_t epoch = 0; epoch < 20; ++epoch) {
        INFO("rank " << r << " epoch " << epoch);
        CHECK(d.shard(95) == cs::Slice{0, 95});
        CHECK(d.n_batches(95) == 2);
        const support::EpochRecord rec = support::walk(d, 95);
        CHECK(rec.draws.size() == 40);
        CHECK(rec.chunks_valid({0, 95}, 10));
        tail_draws += std::ranges::count_if(rec.draws, [](const support::Draw& x) { return x.obs >= 80; });
      }
    }
    // 1,600 draws as chunks of 10 starting uniformly in [0, 85]: about 12% (195) land in
    // [80, 95), none if the window were cut to [0, 80).
    CHECK(tail_draws > 100);
  }
}

}  // namespace test_global_mode
