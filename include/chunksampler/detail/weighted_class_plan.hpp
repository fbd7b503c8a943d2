// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/class_mix.hpp>
#include <chunksampler/detail/class_plan.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/request_grid.hpp>
#include <chunksampler/detail/shares.hpp>
#include <chunksampler/plan.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The keys of a weighted class epoch's draws.
struct WeightedClassKeys {
  std::uint64_t chunk_class;  ///< independent: one class per chunk, keyed by chunk index
  std::uint64_t chunk_start;  ///< one start per chunk, keyed by chunk index
  std::uint64_t chunk_order;  ///< stratified: the order of a request's chunk classes, keyed by request index
  std::uint64_t positions;    ///< the order of a request's rows, keyed by request index
  std::uint64_t class_mix;    ///< stratified: the epoch's class counts and their spread (`ClassMix`)
};

/// One epoch of a `WeightedClassSampler` (an `EpochPlan`). The epoch's `used_obs` rows are read
/// as `ceil(used_obs / chunk_size)` chunks, the last cut to the remainder, `preload_nchunks` per
/// request. Each chunk has a class: independently drawn by weight from an engine keyed by the
/// chunk's index, or (stratified) given by the epoch's `ClassMix` and put in a uniformly random
/// order within its request by an engine keyed by the request's index. Each chunk then starts at
/// a uniform valid start of its class (an engine keyed by its index), and request `k`'s rows are
/// shuffled together (an engine keyed by `k`) before they are cut into batches, so a batch is a
/// uniform sample without replacement of its request's rows. Any request is computed in
/// O(request * log runs) from its index alone.
class WeightedClassPlan : public RequestGrid<WeightedClassPlan> {
 public:
  WeightedClassPlan(ClassScope scope, const ClassLayout& layout, const WeightedClassKeys& keys, bool stratified)
      : draws_(std::move(scope), layout, keys.chunk_start),
        keys_(keys),
        n_chunks_(ceil_div(layout.used_obs, layout.chunk_size)) {
    if (!stratified || n_chunks_ == 0) return;
    std::vector<double> weights;
    weights.reserve(draws_.windows().size());
    for (std::size_t w = 0; w < draws_.windows().size(); ++w) weights.push_back(draws_.weight_of(w));
    std::vector<std::uint64_t> shares = share_numerators(weights, 1.0);
    // A weight below half a unit of the scale (2^-53 of the largest weight, coarser above 512
    // classes) would have no share at all: it keeps the least, one unit.
    for (std::uint64_t& s : shares) s = std::max<std::uint64_t>(s, 1);
    mix_ = std::make_shared<const ClassMix>(shares, layout.preload_nchunks, n_chunks_, keys.class_mix);
  }

  [[nodiscard]] std::int64_t n_requests() const noexcept { return ceil_div(layout().used_obs, request_obs()); }
  [[nodiscard]] std::int64_t max_chunks() const noexcept { return std::min(layout().preload_nchunks, n_chunks_); }
  [[nodiscard]] const ClassLayout& layout() const noexcept { return draws_.layout(); }
  [[nodiscard]] std::int64_t max_positions() const noexcept { return std::min(request_obs(), layout().used_obs); }
  /// Chunks the epoch reads.
  [[nodiscard]] std::int64_t n_chunks() const noexcept { return n_chunks_; }
  /// The classes the sampled ranges hold, with their starts and cumulative weights.
  [[nodiscard]] std::span<const ClassWindow> windows() const noexcept { return draws_.windows(); }
  /// Whether each request's classes follow the weights as closely as whole chunks allow.
  [[nodiscard]] bool stratified() const noexcept { return mix_ != nullptr; }

  /// Request `k`: chunks `[k * preload_nchunks, ...)` of the epoch, and all its rows in one
  /// random order, cut into batches.
  void fill(std::int64_t k, RequestBuffers& out) const { fill(k, out, std::numeric_limits<std::int64_t>::max()); }
  /// `fill(k, out)` for a reader of its first `needed` positions only: those are the same, and
  /// the rows' shuffle stops after them (`EpochPlan`'s requirement 5).
  void fill(std::int64_t k, RequestBuffers& out, std::int64_t needed) const {
    const ClassLayout& l = layout();
    const std::int64_t first = k * l.preload_nchunks;
    const auto n = static_cast<std::size_t>(std::min(l.preload_nchunks, n_chunks_ - first));
    out.chunks.resize(n);
    if (mix_) {
      // The request's classes, shuffled, held in the positions' buffer until the rows need it:
      // no allocation per request (it holds at least a row per chunk).
      out.positions.resize(n);
      const std::span<std::int64_t> classes(out.positions);
      mix_->classes_of(k, classes);
      Engine order = make_engine(keys_.chunk_order, static_cast<std::uint64_t>(k));
      partial_shuffle(order, classes, n);
      for (const std::int64_t c : classes) draws_.prefetch(static_cast<std::size_t>(c));
      for (std::size_t j = 0; j < n; ++j)
        out.chunks[j] = draws_.chunk_of(first + static_cast<std::int64_t>(j), static_cast<std::size_t>(classes[j]));
    } else {
      // A few chunks' classes first, their windows fetched together, then their starts.
      constexpr std::size_t at_once = 16;
      std::array<std::size_t, at_once> windows{};
      for (std::size_t from = 0; from < n; from += at_once) {
        const std::size_t m = std::min(at_once, n - from);
        for (std::size_t j = 0; j < m; ++j) {
          windows[j] = draws_.draw_class(keys_.chunk_class, first + static_cast<std::int64_t>(from + j));
          draws_.prefetch(windows[j]);
        }
        for (std::size_t j = 0; j < m; ++j)
          out.chunks[from + j] = draws_.chunk_of(first + static_cast<std::int64_t>(from + j), windows[j]);
      }
    }
    const std::int64_t rows = std::min(request_obs(), l.used_obs - k * request_obs());
    out.positions.resize(static_cast<std::size_t>(rows));
    std::iota(out.positions.begin(), out.positions.end(), std::int64_t{0});
    Engine engine = make_engine(keys_.positions, static_cast<std::uint64_t>(k));
    partial_shuffle(engine, std::span<std::int64_t>(out.positions),
                    static_cast<std::size_t>(std::min(rows, std::max<std::int64_t>(needed, 0))));
  }

 private:
  ClassDraws draws_;
  WeightedClassKeys keys_;
  std::int64_t n_chunks_;
  std::shared_ptr<const ClassMix> mix_;  // stratified only; shared by copies
};

}  // namespace chunksampler::detail
