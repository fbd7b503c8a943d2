// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/slice.hpp>

#include <concepts>
#include <cstdint>
#include <vector>

namespace chunksampler {

/// The storage a plan fills with one request: reused from request to request.
struct RequestBuffers {
  std::vector<Slice> chunks;            ///< the request's chunks, in buffer order
  std::vector<std::int64_t> positions;  ///< all its batches' positions, batch after batch
};

/// A run of consecutive batches `[begin, end)` of an epoch's plan.
struct BatchRun {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  [[nodiscard]] constexpr std::int64_t size() const noexcept { return end - begin; }
  friend constexpr bool operator==(const BatchRun&, const BatchRun&) noexcept = default;
};

/// One epoch of a sampler laid out as a sequence of batches `[0, n_batches())` grouped into
/// requests, any of which can be computed on its own: the shape that lets every sampler resume
/// in O(1), split its requests among workers, and be dealt across ranks.
///
/// Semantic requirements:
///  1. Request `k` holds batches `[request_begin(k), request_begin(k + 1))`, with
///     `request_begin(0) == 0` and `request_begin(n_requests()) == n_batches()`; every request
///     but the last holds the same number of batches.
///  2. `request_of(i)` is the request holding batch `i`.
///  3. `fill(k, out)` writes request `k`'s chunks and its batches' positions (`batch_size()` each,
///     the epoch's last batch possibly fewer), depending on nothing but the plan and `k`.
///  4. `max_chunks()` and `max_positions()` bound what `fill` writes (they size the buffers once).
///  5. Optionally `fill(k, out, needed)`: `fill(k, out)` for a reader of positions `[0, needed)`
///     alone, which must be the same as `fill(k, out)` gives; the rest may differ. `Epoch` calls
///     it where a plan has it, with the end of the batches it hands out.
template <class P>
concept EpochPlan = std::copy_constructible<P> && requires(const P& plan, std::int64_t i, RequestBuffers& out) {
  { plan.n_batches() } -> std::same_as<std::int64_t>;
  { plan.n_requests() } -> std::same_as<std::int64_t>;
  { plan.batch_size() } -> std::same_as<std::int64_t>;
  { plan.request_of(i) } -> std::same_as<std::int64_t>;
  { plan.request_begin(i) } -> std::same_as<std::int64_t>;
  { plan.max_chunks() } -> std::same_as<std::int64_t>;
  { plan.max_positions() } -> std::same_as<std::int64_t>;
  plan.fill(i, out);
};

}  // namespace chunksampler
