// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/request_grid.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/slice.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>

namespace chunksampler::detail {

/// What a chunk sampler needs to lay out one epoch; checked before it gets here.
struct ChunkLayout {
  Slice mask;                    ///< the observations the epoch draws from
  std::int64_t chunk_size;       ///< length of every chunk but the remainder
  std::int64_t preload_nchunks;  ///< chunks per request
  std::int64_t batch_size;       ///< positions per batch
  std::int64_t stream_obs;       ///< observations in the epoch's chunk stream
  std::int64_t used_obs;         ///< positions the epoch's batches hold; above stream_obs, rows repeat (pad)
  bool shuffle;                  ///< random chunk order and positions
  bool replacement;              ///< chunks at random starts instead of a partition of the mask
};

/// One epoch of a chunk sampler (an `EpochPlan`), any request of which is computed in
/// O(request) time from its index alone: chunk `i` of the epoch's stream comes from a uniform
/// keyed permutation (`KeyedPermutation`; or, with replacement, a keyed draw) evaluated at `i`,
/// and request `k`'s positions from an engine keyed by `k`. Memory does not grow with `n_obs`:
/// at most the permutation's table of 2^16 chunks (256 KiB), built at the first request.
///
/// The chunk stream holds `stream_obs / chunk_size` full chunks and, when it does not divide,
/// one remainder chunk last. Without replacement the full chunks partition
/// `[mask.start, mask.start + full * chunk_size)` and the remainder is the mask's tail, so a
/// full chunk always starts on a multiple of `chunk_size` from the mask's start. Request `k`
/// reads chunks `[k * preload_nchunks, (k + 1) * preload_nchunks)` of the stream.
class ChunkPlan : public RequestGrid<ChunkPlan> {
 public:
  ChunkPlan(const ChunkLayout& layout, std::uint64_t chunk_key, std::uint64_t position_key)
      : layout_(layout),
        full_chunks_(layout.stream_obs / layout.chunk_size),
        remainder_(layout.stream_obs % layout.chunk_size),
        // Only a shuffled partition reads the order: the others need no table.
        order_(layout.shuffle && !layout.replacement
                   ? static_cast<std::uint64_t>(std::max<std::int64_t>(full_chunks_, 1))
                   : 1,
               chunk_key),
        chunk_key_(chunk_key),
        position_key_(position_key) {}

  /// Requests: those the stream's used rows need; padding rows go to the last.
  [[nodiscard]] std::int64_t n_requests() const noexcept {
    return ceil_div(std::min(layout_.used_obs, layout_.stream_obs), request_obs());
  }
  [[nodiscard]] std::int64_t max_chunks() const noexcept { return std::min(layout_.preload_nchunks, stream_chunks()); }
  [[nodiscard]] std::int64_t max_positions() const noexcept {
    return std::min(request_obs(), layout_.stream_obs) +
           std::max<std::int64_t>(layout_.used_obs - layout_.stream_obs, 0);
  }
  [[nodiscard]] const ChunkLayout& layout() const noexcept { return layout_; }
  /// Chunks in the epoch's stream: the full ones and the short tail, if any.
  [[nodiscard]] std::int64_t stream_chunks() const noexcept { return full_chunks_ + (remainder_ != 0 ? 1 : 0); }

  /// Chunk `i` of the epoch's stream (`i < stream_chunks()`).
  [[nodiscard]] Slice chunk(std::int64_t i) const {
    const std::int64_t length = i < full_chunks_ ? layout_.chunk_size : remainder_;
    std::int64_t start = 0;
    if (layout_.replacement) {
      Engine engine = make_engine(chunk_key_, static_cast<std::uint64_t>(i));
      start = layout_.mask.start +
              static_cast<std::int64_t>(bounded(engine, static_cast<std::uint64_t>(layout_.mask.size() - length + 1)));
    } else if (i < full_chunks_) {
      const std::int64_t slot = layout_.shuffle ? static_cast<std::int64_t>(order_(static_cast<std::uint64_t>(i))) : i;
      start = layout_.mask.start + slot * layout_.chunk_size;
    } else {
      start = layout_.mask.start + full_chunks_ * layout_.chunk_size;
    }
    return {start, start + length};
  }

  /// Request `k` (`k < n_requests()`). Shuffled, it lists its whole group of
  /// `preload_nchunks` chunks of the stream and a uniform selection of its positions in
  /// uniform order, so the rows an epoch leaves out (`drop_last`, `num_samples`) are random
  /// among the group's, the stream's short tail chunk included. In order, it lists the fewest
  /// chunks that cover its rows, the last cut to fit, and positions 0, 1, ... When the epoch
  /// holds more positions than the stream has rows (padding), the last request repeats rows:
  /// drawn at random from its buffer when shuffled, from its start in order otherwise.
  void fill(std::int64_t k, RequestBuffers& out) const {
    const std::int64_t used = std::min(request_obs(), layout_.used_obs - k * request_obs());
    const std::int64_t wanted = k + 1 == n_requests() ? layout_.used_obs - k * request_obs() : used;
    const std::int64_t first = k * layout_.preload_nchunks;
    const std::int64_t n_chunks = layout_.shuffle
                                      ? std::min(layout_.preload_nchunks, stream_chunks() - first)
                                      : std::min(ceil_div(used, layout_.chunk_size), stream_chunks() - first);
    out.chunks.resize(static_cast<std::size_t>(n_chunks));
    std::int64_t buffer = 0;
    for (std::int64_t j = 0; j < n_chunks; ++j) {
      const Slice c = chunk(first + j);
      out.chunks[static_cast<std::size_t>(j)] = c;
      buffer += c.size();
    }
    if (!layout_.shuffle && buffer > used) {
      out.chunks.back().stop -= buffer - used;
      buffer = used;
    }
    const std::int64_t distinct = std::min(wanted, buffer);
    out.positions.resize(static_cast<std::size_t>(buffer));
    std::iota(out.positions.begin(), out.positions.end(), std::int64_t{0});
    if (!layout_.shuffle) {
      out.positions.resize(static_cast<std::size_t>(wanted));
      for (std::int64_t p = distinct; p < wanted; ++p)
        out.positions[static_cast<std::size_t>(p)] = (p - distinct) % buffer;
      return;
    }
    Engine engine = make_engine(position_key_, static_cast<std::uint64_t>(k));
    partial_shuffle(engine, std::span<std::int64_t>(out.positions), static_cast<std::size_t>(distinct));
    out.positions.resize(static_cast<std::size_t>(wanted));
    if (wanted > distinct) {
      for (std::int64_t p = distinct; p < wanted; ++p)
        out.positions[static_cast<std::size_t>(p)] =
            static_cast<std::int64_t>(bounded(engine, static_cast<std::uint64_t>(buffer)));
      // Spread the repeated rows over the request's batches instead of leaving them at its end.
      partial_shuffle(engine, std::span<std::int64_t>(out.positions), static_cast<std::size_t>(wanted));
    }
  }

 private:
  ChunkLayout layout_;
  std::int64_t full_chunks_;
  std::int64_t remainder_;
  KeyedPermutation order_;
  std::uint64_t chunk_key_;
  std::uint64_t position_key_;
};

}  // namespace chunksampler::detail
