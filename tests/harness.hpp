// SPDX-License-Identifier: MIT
#pragma once

// The resume and worker checks every sampler's tests run, on any sampler `make()` returns fresh:
// exact resume at any batch through a state's text, and workers that split a stream exactly.

#include <chunksampler/errors.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/worker_info.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace support {

using Requests = std::vector<OwnedRequest>;

// What an uninterrupted stream yields after its first `skip` batches: the requests it finished
// vanish, and the one it was in keeps its chunks and its batches from the next one on.
inline std::vector<OwnedRequest> after(std::vector<OwnedRequest> requests, std::int64_t skip) {
  std::vector<OwnedRequest> rest;
  for (OwnedRequest& request : requests) {
    const auto n = static_cast<std::int64_t>(request.batches.size());
    if (skip >= n) {
      skip -= n;
      continue;
    }
    request.batches.erase(request.batches.begin(), request.batches.begin() + skip);
    skip = 0;
    rest.push_back(std::move(request));
  }
  return rest;
}

inline Batches tail(const Batches& batches, std::int64_t from) { return {batches.begin() + from, batches.end()}; }

// Every batch of a small stream (and its end), else its ends and a few random batches.
inline std::vector<std::int64_t> resume_points(std::int64_t n, ConfigRng& g) {
  std::vector<std::int64_t> points;
  if (n <= 40) {
    for (std::int64_t b = 0; b <= n; ++b) points.push_back(b);
    return points;
  }
  points = {0, 1, n - 1, n};
  for (int i = 0; i < 8; ++i) points.push_back(g.between(0, n));
  return points;
}

struct Tally {
  int streams = 0;      // (sampler, worker) streams checked
  int points = 0;       // states restored and compared
  int mid_request = 0;  // of which inside a request, not at its boundary
};

// Worker `worker`'s stream of epoch `epoch` for samplers made by `make()` (each a fresh, equal
// sampler): a state taken after every resume point of the played stream, round-tripped through
// text and restored into a fresh sampler, yields exactly the rest of the stream, request for
// request, and that sampler then plays the next epoch from its start. A sampler restored once
// gives states that resume as well.
template <class Make>
void check_resume(const Make& make, std::int64_t n_obs, std::uint64_t epoch, cs::WorkerInfo worker, ConfigRng& g,
                  Tally& tally) {
  INFO("epoch " << epoch << ", worker " << worker.id << " of " << worker.num_workers);
  auto played = make();
  played.set_epoch(epoch);
  REQUIRE(played.epoch() == epoch);
  const std::int64_t expected_batches = played.n_batches(n_obs, worker);
  auto played_range = played.sample(n_obs, worker);
  // The epoch knows its position: it begins at the epoch's start.
  CHECK(played_range.batches_before() == 0);
  CHECK(played_range.epoch() == epoch);
  const std::vector<OwnedRequest> whole = collect(played_range);
  const Batches batches = observations(whole);
  const auto n = static_cast<std::int64_t>(batches.size());
  REQUIRE(n == expected_batches);
  REQUIRE(played.epoch() == epoch + 1);
  {
    // Between epochs the next sample() begins the next epoch afresh, tied to no worker or n_obs.
    auto start = make();
    start.set_epoch(epoch + 1);
    CHECK(played.next_state() == start.state(0));
    CHECK(!played.next_state().n_obs());
  }
  CHECK_THROWS_AS(played_range.state(n + 1), cs::ConfigError);
  CHECK_THROWS_AS(played_range.state(-1), cs::ConfigError);

  auto next = make();
  next.set_epoch(epoch + 1);
  const std::vector<OwnedRequest> following = collect(next.sample(n_obs, worker));

  // Batch indices at which a request of the stream starts.
  std::set<std::int64_t> boundaries;
  std::int64_t at = 0;
  for (const OwnedRequest& request : whole) {
    boundaries.insert(at);
    at += static_cast<std::int64_t>(request.batches.size());
  }
  boundaries.insert(at);

  ++tally.streams;
  for (const std::int64_t b : resume_points(n, g)) {
    INFO("resumed after " << b << " of " << n << " batches");
    const cs::SamplerState state = played.state(b);
    // The range's own state is the sampler's: an adapter counts only the batches it hands on.
    CHECK(played_range.state(b) == state);
    CHECK(state.epoch() == epoch);
    CHECK(state.batches_done() == b);
    CHECK(state.worker() == worker.id);
    CHECK(state.num_workers() == worker.num_workers);
    const std::string text = state.to_string();
    INFO(text);
    const cs::SamplerState parsed = cs::SamplerState::parse(text);
    REQUIRE(parsed == state);

    auto fresh = make();
    fresh.restore(parsed);
    CHECK(fresh.next_state() == parsed);
    auto rest_range = fresh.sample(n_obs, worker);
    // A resumed epoch begins at the restored point, and its states count from the epoch's start.
    CHECK(rest_range.batches_before() == b);
    CHECK(rest_range.n_batches() == n - b);
    CHECK(rest_range.state(0) == state);
    if (b < n) CHECK(rest_range.state(n - b) == played.state(n));
    CHECK_THROWS_AS(rest_range.state(n - b + 1), cs::ConfigError);
    const std::vector<OwnedRequest> rest = collect(rest_range);
    REQUIRE(observations(rest) == tail(batches, b));
    REQUIRE(rest == after(whole, b));
    // The resumed epoch is over: the next one plays from its start.
    REQUIRE(fresh.epoch() == epoch + 1);
    REQUIRE(collect(fresh.sample(n_obs, worker)) == following);
    ++tally.points;
    if (!boundaries.contains(b)) ++tally.mid_request;
  }

  // Double restore: a sampler that resumed at b1 and has read part of the rest describes any
  // point b2 of the epoch as well as the sampler that played it all.
  const std::int64_t b1 = g.between(0, n);
  const std::int64_t b2 = g.between(0, n);
  INFO("restored at " << b1 << ", state taken at " << b2 << " of " << n);
  auto first = make();
  first.restore(cs::SamplerState::parse(played.state(b1).to_string()));
  {
    auto range = first.sample(n_obs, worker);
    auto it = range.begin();
    for (std::int64_t read = g.between(0, 3); read > 0 && it != range.end(); --read) ++it;
    const cs::SamplerState again = first.state(b2);
    CHECK(again == played.state(b2));
    auto second = make();
    second.restore(cs::SamplerState::parse(again.to_string()));
    REQUIRE(observations(collect(second.sample(n_obs, worker))) == tail(batches, b2));
    REQUIRE(collect(second.sample(n_obs, worker)) == following);
  }
  // A state restored and never played is still pending: taken again, it names the same epoch.
  // (With workers the test case "a restored worker sampler states its worker's point" checks it.)
  if (worker.num_workers == 1) {
    auto idle = make();
    idle.restore(played.state(b1));
    CHECK(idle.epoch() == epoch);
    CHECK(idle.state(b1) == played.state(b1));
    auto again = make();
    again.restore(cs::SamplerState::parse(idle.state(b2).to_string()));
    REQUIRE(observations(collect(again.sample(n_obs, worker))) == tail(batches, b2));
  }
}

// The worker-split invariants for one rank's stream, with `k` workers. `make` returns a fresh
// sampler ready to play the stream (as each worker process holds its own copy); `whole_epoch`
// says the stream is a whole epoch, which n_batches(n_obs, WorkerInfo) counts.
template <class Make>
void check_workers(const Make& make, std::int64_t n_obs, std::int64_t k, bool whole_epoch = true) {
  INFO(k << " workers");
  auto rank = make();
  const std::uint64_t epoch = rank.epoch();
  const Requests whole = collect(rank.sample(n_obs));

  std::vector<Requests> shares;
  for (std::int64_t i = 0; i < k; ++i) {
    INFO("worker " << i);
    const cs::WorkerInfo worker{.id = i, .num_workers = k};
    auto s = make();
    const std::int64_t announced = s.n_batches(n_obs, worker);
    CHECK(s.n_batches(n_obs, worker) == announced);
    auto range = s.sample(n_obs, worker);
    const std::int64_t in_range = range.n_batches();
    shares.push_back(collect(range));
    CHECK(n_batches(shares.back()) == in_range);
    if (whole_epoch) CHECK(n_batches(shares.back()) == announced);
    CHECK(s.epoch() == epoch + 1);
    // Deterministic: the same share from another copy, and from this one at the same epoch.
    auto twin = make();
    CHECK(collect(twin.sample(n_obs, worker)) == shares.back());
    if (whole_epoch) {
      s.set_epoch(epoch);
      CHECK(collect(s.sample(n_obs, worker)) == shares.back());
    }
  }

  // Worker i holds the rank's pieces i, i + k, ...: together the rank's epoch, each piece once.
  std::size_t pieces = 0;
  bool interleaved = true;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    pieces += shares[i].size();
    for (std::size_t j = 0; j < shares[i].size(); ++j) {
      const std::size_t at = i + j * static_cast<std::size_t>(k);
      interleaved = interleaved && at < whole.size() && shares[i][j] == whole[at];
    }
  }
  CHECK(pieces == whole.size());
  CHECK(interleaved);

  // The same multiset of batches, batch for batch.
  std::vector<Batches> per_worker;
  for (const Requests& share : shares) per_worker.push_back(observations(share));
  Batches from_workers = concat(per_worker);
  Batches from_rank = observations(whole);
  std::ranges::sort(from_workers);
  std::ranges::sort(from_rank);
  CHECK(from_workers == from_rank);

  // Disjoint: when the rank reads no observation twice, no two workers share one.
  std::map<std::int64_t, std::int64_t> owner;
  bool rank_repeats = false;
  bool shared = false;
  for (std::size_t i = 0; i < shares.size(); ++i)
    for (const auto& batch : per_worker[i])
      for (const std::int64_t obs : batch) {
        const auto [it, fresh] = owner.emplace(obs, static_cast<std::int64_t>(i));
        if (!fresh) {
          rank_repeats = true;
          shared = shared || it->second != static_cast<std::int64_t>(i);
        }
      }
  std::set<std::int64_t> distinct;
  for (const auto& batch : from_rank) distinct.insert(batch.begin(), batch.end());
  std::size_t draws = 0;
  for (const auto& batch : from_rank) draws += batch.size();
  if (distinct.size() == draws) {
    CHECK_FALSE(rank_repeats);
    CHECK_FALSE(shared);
  }
}

}  // namespace support
