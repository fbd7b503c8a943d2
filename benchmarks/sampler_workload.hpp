// SPDX-License-Identifier: MIT
#pragma once

// Any chunksampler sampler as a benchmark workload: its epoch walked, its first batch, and a
// restart from a checkpoint's text, each from a sampler made afresh.

#include "workloads.hpp"

#include <chunksampler.hpp>

#include <benchmark/benchmark.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace bench {

/// The largest N whose whole epoch is walked: a whole epoch at 10^12 would take minutes.
inline constexpr std::int64_t max_walked_n = 1'000'000'000;

/// Walks one epoch of `sampler` over n, summing every position of every batch; returns the positions.
template <class Sampler>
std::int64_t consume_epoch(Sampler& sampler, std::int64_t n) {
  std::int64_t sum = 0;
  std::int64_t positions = 0;
  for (const chunksampler::LoadRequest& request : sampler.sample(n))
    for (const auto batch : request.splits) {
      positions += static_cast<std::int64_t>(batch.size());
      for (const std::int64_t position : batch) sum += position;
    }
  benchmark::DoNotOptimize(sum);
  return positions;
}

/// Sums the first batch of `sampler`'s epoch over n.
template <class Sampler>
void consume_first_batch(Sampler& sampler, std::int64_t n) {
  std::int64_t sum = 0;
  auto requests = sampler.sample(n);
  const chunksampler::LoadRequest& request = *requests.begin();
  for (const std::int64_t position : request.splits[0]) sum += position;
  benchmark::DoNotOptimize(sum);
}

/// A sampler from `make(n)`, or from `make()` when it does not depend on N.
template <class Make>
auto made(const Make& make, std::int64_t n) {
  if constexpr (std::invocable<const Make&, std::int64_t>) return make(n);
  else return make();
}

/// The workload of the samplers `make` returns (from `make(n)` or `make()`), one made afresh for
/// each epoch, first batch and restart, as a job does: at every N from 0 to 2^62, epochs walked
/// up to `max_walked_n`.
template <class Make>
Workload sampler_workload(std::string name, Make make) {
  return {
      .name = std::move(name),
      .max_epoch_n = max_walked_n,
      .min_n = 0,
      .max_n = chunksampler::detail::max_size,
      .epoch =
          [make](std::int64_t n) {
            auto sampler = made(make, n);
            return consume_epoch(sampler, n);
          },
      .first_batch =
          [make](std::int64_t n) {
            auto sampler = made(make, n);
            consume_first_batch(sampler, n);
          },
      .restore = [make](std::int64_t n) -> std::function<void()> {
        auto sampler = made(make, n);
        { auto played = sampler.sample(n); }  // the epoch the state describes is the one last played
        // The checkpoint as a job keeps it: one line of text, parsed at the restart.
        std::string text = sampler.state(sampler.n_batches(n) / 2).to_string();
        return [make, n, text = std::move(text)] {
          auto restarted = made(make, n);
          restarted.restore(chunksampler::SamplerState::parse(text));
          consume_first_batch(restarted, n);
        };
      },
      .prepare = {},
      .peer = {},
  };
}

}  // namespace bench
