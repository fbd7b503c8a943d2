// SPDX-License-Identifier: MIT
#pragma once

// The arithmetic-limits tests' helpers (test_limits*.cpp): sizes near 2^62 and the last epoch,
// 128-bit expected values, a plan's request as a range yields it, the first requests of a huge
// epoch, a sampler moved to any batch through a state, and REQUIRE_INVALID.

#include <chunksampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace support::limits {

__extension__ using int128 = __int128;

inline constexpr std::int64_t two62 = cs::detail::max_size;
inline constexpr std::int64_t two61 = two62 / 2;
inline constexpr std::uint64_t last_epoch = ~std::uint64_t{0};

constexpr int128 ceil128(int128 a, int128 b) { return (a + b - 1) / b; }

// An expected value computed in 128 bits, which the library must be able to return.
inline std::int64_t narrow(int128 value) {
  REQUIRE(value >= 0);
  REQUIRE(value <= int128{INT64_MAX});
  return static_cast<std::int64_t>(value);
}

// Request `k` of `plan` as a range yields it whole: its chunks, and its positions cut into batches.
template <class Plan>
OwnedRequest filled(const Plan& plan, std::int64_t k) {
  cs::RequestBuffers buffers;
  plan.fill(k, buffers);
  OwnedRequest request;
  request.chunks = buffers.chunks;
  const auto b = static_cast<std::size_t>(plan.batch_size());
  for (std::size_t at = 0; at < buffers.positions.size(); at += b) {
    const std::size_t stop = std::min(at + b, buffers.positions.size());
    request.batches.emplace_back(buffers.positions.begin() + static_cast<std::ptrdiff_t>(at),
                                 buffers.positions.begin() + static_cast<std::ptrdiff_t>(stop));
  }
  return request;
}

// The first `count` requests `range` yields (fewer if it ends first), copied; the range computes
// none after them, so a huge epoch costs only what is read.
template <class Range>
std::vector<OwnedRequest> first_requests(Range&& range, std::size_t count) {
  std::vector<OwnedRequest> requests;
  auto it = range.begin();
  while (it != range.end()) {
    requests.push_back(support::own(*it));
    if (requests.size() == count) break;
    ++it;
  }
  return requests;
}

// `sampler` moved to just after `batches_done` batches of its next epoch over `n_obs` (through a
// state: the one at its start, moved to that point).
template <class S>
void skip_to(S& sampler, std::int64_t batches_done, std::int64_t n_obs = two62) {
  cs::SamplerState state = sampler.state(0);
  state = support::edited(state, [&](cs::detail::StateFields& f) { f.n_obs = n_obs; });
  state = support::edited(state, [&](cs::detail::StateFields& f) { f.batches_done = batches_done; });
  sampler.restore(cs::SamplerState::parse(state.to_string()));
}

}  // namespace support::limits

// Checks the exception's type and its message; `expr` is evaluated once per check.
#define REQUIRE_INVALID(expr, matcher)              \
  do {                                              \
    REQUIRE_THROWS_AS(expr, std::invalid_argument); \
    REQUIRE_THROWS_WITH(expr, matcher);             \
  } while (false)
