// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/request_grid.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/slice.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

namespace chunksampler::detail {

/// What a chunk sampler needs to lay out one epoch; checked before it gets here.
struct ChunkLayout {
  Ranges mask;                   ///< the (closed) observations the epoch draws from
  std::int64_t chunk_size;       ///< length of a full chunk: one cell of the storage grid
  std::int64_t preload_nchunks;  ///< chunks per request
  std::int64_t batch_size;       ///< positions per batch
  std::int64_t stream_obs;       ///< observations in the epoch's chunk stream
  std::int64_t used_obs;         ///< positions the epoch's batches hold; above stream_obs, rows repeat (pad)
  bool shuffle;                  ///< random chunk order and positions
  bool replacement;              ///< chunks at random starts instead of a partition of the mask
  bool grid_starts;              ///< with replacement: starts drawn among the grid chunks' starts
};

/// One epoch of a chunk sampler (an `EpochPlan`), any request of which is computed in
/// O(request x log ranges) time from its index alone, memory O(ranges) and never O(n_obs).
///
/// Without replacement the epoch reads the chunks of the mask's storage grid
/// (`Ranges::Grid`: cells `[j * chunk_size, (j + 1) * chunk_size)` cut to the ranges, so every
/// full chunk sits on the grid and short ones touch a range edge) in a uniform keyed order
/// (`KeyedPermutation` over all of them, short ones included; row order when not shuffled).
/// Their rows, one after the other, are the epoch's stream, and request `k` reads the stream's
/// rows `[k * request_obs, (k + 1) * request_obs)`: every request but the last is full, so it
/// splits into whole batches however many short chunks it holds, and a chunk that straddles
/// two requests is read in two pieces, one in each. Where stream row `x` lies is found through
/// the short chunks' places in the order (all others have `chunk_size` rows), computed at the
/// first request: O(short chunks) inverse lookups of the permutation and a sort.
///
/// With replacement chunk `i` of the stream is `chunk_size` consecutive observations of the
/// union (the last cut to the budget) from a keyed draw: a uniform start among those that fit,
/// or, with `grid_starts`, the start of a uniform grid chunk (wrapping past the union's end).
/// A chunk that spans ranges is read as one piece per range, so no piece crosses a range edge.
class ChunkPlan : public RequestGrid<ChunkPlan> {
 public:
  ChunkPlan(const ChunkLayout& layout, std::uint64_t chunk_key, std::uint64_t position_key)
      : layout_(layout),
        n_obs_(layout.mask.count()),
        chunk_key_(chunk_key),
        position_key_(position_key),
        index_(std::make_shared<Index>()) {}

  /// Requests: those the stream's used rows need; padding rows go to the last.
  [[nodiscard]] std::int64_t n_requests() const noexcept {
    return ceil_div(std::min(layout_.used_obs, layout_.stream_obs), request_obs());
  }
  /// At most the pieces a request holds: each has a row; without replacement at most
  /// `preload_nchunks` full chunks, two pieces cut at its ends and the ranges' short chunks;
  /// with replacement each chunk one piece per range it touches (with `grid_starts`, per cell).
  [[nodiscard]] std::int64_t max_chunks() const noexcept {
    const std::int64_t rows = std::min(request_obs(), layout_.stream_obs);
    const auto ranges = static_cast<std::int64_t>(layout_.mask.size());
    if (!layout_.replacement) return std::min(rows, layout_.preload_nchunks + 2 + 2 * ranges);
    const std::int64_t chunks = std::min(layout_.preload_nchunks, ceil_div(layout_.stream_obs, layout_.chunk_size));
    const std::int64_t pieces = std::min(layout_.chunk_size, 2 * ranges + 2);
    return product_fits(chunks, pieces) ? std::min(rows, chunks * pieces) : rows;
  }
  [[nodiscard]] std::int64_t max_positions() const noexcept {
    return std::min(request_obs(), layout_.stream_obs) +
           std::max<std::int64_t>(layout_.used_obs - layout_.stream_obs, 0);
  }
  [[nodiscard]] const ChunkLayout& layout() const noexcept { return layout_; }

  /// Chunks in the epoch's stream: the mask's grid chunks, or with replacement the drawn ones.
  [[nodiscard]] std::int64_t stream_chunks() const {
    return layout_.replacement ? ceil_div(layout_.stream_obs, layout_.chunk_size) : built().grid->n_chunks();
  }
  /// Appends the rows of stream chunk `i` (`i < stream_chunks()`) to `out`: its grid chunk, or
  /// with replacement one piece per range the drawn chunk touches.
  void pieces(std::int64_t i, std::vector<Slice>& out) const {
    const Index& index = built();
    if (layout_.replacement) drawn_chunk(index, i, out);
    else out.push_back(chunk_at(index, i));
  }
  /// Stream chunk `i` when it is one piece (always without replacement; with replacement when
  /// it lies in one range), else its first piece.
  [[nodiscard]] Slice chunk(std::int64_t i) const {
    std::vector<Slice> out;
    pieces(i, out);
    return out.front();
  }

  /// Request `k` (`k < n_requests()`). Shuffled, it lists the pieces of its whole share of the
  /// stream and a uniform selection of its positions in uniform order, so the rows an epoch
  /// leaves out (`drop_last`, `num_samples`) are random among the share's. In order, it lists
  /// the pieces of the rows it uses and positions 0, 1, ... When the epoch holds more positions
  /// than the stream has rows (padding), the last request repeats rows: drawn at random from
  /// its buffer when shuffled, from its start in order otherwise.
  void fill(std::int64_t k, RequestBuffers& out) const { fill(k, out, std::numeric_limits<std::int64_t>::max()); }
  /// `fill(k, out)` for a reader of its first `needed` positions only: those are the same, and
  /// the shuffle stops after them (a forward Fisher-Yates has placed its first `i` positions
  /// after `i` draws), so a rank whose share ends inside a request draws for its part alone.
  void fill(std::int64_t k, RequestBuffers& out, std::int64_t needed) const {
    const Index& index = built();
    const std::int64_t begin = k * request_obs();
    const std::int64_t used = std::min(request_obs(), layout_.used_obs - begin);
    const std::int64_t wanted = k + 1 == n_requests() ? layout_.used_obs - begin : used;
    out.chunks.clear();
    if (layout_.replacement) {
      const std::int64_t first = k * layout_.preload_nchunks;
      const std::int64_t n_chunks =
          std::min(layout_.preload_nchunks, ceil_div(layout_.stream_obs, layout_.chunk_size) - first);
      for (std::int64_t j = 0; j < n_chunks; ++j) drawn_chunk(index, first + j, out.chunks);
    } else {
      // Padding positions past the stream's rows repeat rows of the buffer; they add none.
      const std::int64_t end = std::min(begin + (layout_.shuffle ? request_obs() : used), layout_.stream_obs);
      stream_pieces(index, begin, end, out.chunks);
    }
    std::int64_t buffer = 0;
    for (const Slice& c : out.chunks) buffer += c.size();
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
    // Padding draws continue the stream and reshuffle every position: those need all the draws.
    const std::int64_t draws = wanted > distinct ? distinct : std::min(distinct, needed);
    partial_shuffle(engine, std::span<std::int64_t>(out.positions), static_cast<std::size_t>(draws));
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
  // A short chunk of the grid at its place in the epoch's order.
  struct Short {
    std::int64_t place;   // index in the order
    std::int64_t before;  // stream rows before it
    std::int64_t rows;    // its length (< chunk_size)
  };

  // What the first request builds and every copy of the plan shares: the grid and the order;
  // and where the short chunks fall in it, built by the first request that does not start at
  // the stream's first row (the one a fresh epoch begins with never needs it).
  struct Index {
    std::once_flag once;
    std::optional<Ranges::Grid> grid;
    std::optional<KeyedPermutation> order;
    std::once_flag shorts_once;
    std::vector<Short> shorts;  // by place
  };

  [[nodiscard]] const Index& built() const {
    std::call_once(index_->once, [this] { build(*index_); });
    return *index_;
  }

  [[nodiscard]] const std::vector<Short>& shorts(const Index& index) const {
    std::call_once(index_->shorts_once, [this] { place_shorts(*index_); });
    return index.shorts;
  }

  void build(Index& index) const {
    index.grid.emplace(layout_.mask, layout_.chunk_size);
    if (!layout_.replacement && layout_.shuffle)
      index.order.emplace(static_cast<std::uint64_t>(index.grid->n_chunks()), chunk_key_);
  }

  void place_shorts(Index& index) const {
    const std::int64_t c = layout_.chunk_size;
    const std::int64_t n_chunks = index.grid->n_chunks();
    // A range's first and last grid chunks are its only possibly short ones.
    const Ranges::Grid& grid = *index.grid;
    std::vector<std::uint64_t> chunks;
    for (std::size_t r = 0; r < layout_.mask.size(); ++r) {
      const Slice range = layout_.mask[r];
      const std::int64_t first = grid.first_chunk(r);
      const std::int64_t last = grid.first_chunk(r + 1) - 1;
      const std::int64_t head_stop = std::min(range.stop, (grid.first_cell(r) + 1) * c);
      if (head_stop - range.start < c) {
        chunks.push_back(static_cast<std::uint64_t>(first));
        index.shorts.push_back({.place = 0, .before = 0, .rows = head_stop - range.start});
      }
      const std::int64_t tail_rows = range.stop - (grid.first_cell(r) + (last - first)) * c;
      if (last > first && tail_rows < c) {
        chunks.push_back(static_cast<std::uint64_t>(last));
        index.shorts.push_back({.place = 0, .before = 0, .rows = tail_rows});
      }
    }
    // Their places in the order: one inverse lookup each, all at once (they overlap), then
    // sorted by place; in row order they are sorted already.
    std::vector<std::uint64_t> places(chunks.size());
    if (index.order) index.order->map<true>(chunks, places);
    else places = chunks;
    for (std::size_t i = 0; i < places.size(); ++i) index.shorts[i].place = static_cast<std::int64_t>(places[i]);
    if (index.order) sort_by_place(index.shorts, n_chunks);
    // Stream rows before each short chunk: the full chunks and short ones placed before it.
    std::int64_t place = 0;
    std::int64_t rows = 0;
    for (Short& s : index.shorts) {
      rows += (s.place - place) * c;
      s.before = rows;
      rows += s.rows;
      place = s.place + 1;
    }
  }

  // Sorts `shorts` by place (each in [0, bound)): least significant digit first, 11 bits a
  // pass, so that the first request of a mask of 10^5 ranges does not wait on a comparison sort.
  static void sort_by_place(std::vector<Short>& shorts, std::int64_t bound) {
    constexpr int digit_bits = 11;
    constexpr std::size_t digits = std::size_t{1} << digit_bits;
    if (shorts.size() < digits) {
      std::ranges::sort(shorts, {}, &Short::place);
      return;
    }
    std::vector<Short> sorted(shorts.size());
    const auto bits = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(bound)));
    for (int shift = 0; shift < bits; shift += digit_bits) {
      const auto digit = [shift](const Short& s) {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(s.place) >> static_cast<unsigned>(shift)) &
                                        (digits - 1));
      };
      std::vector<std::size_t> next(digits + 1, 0);
      for (const Short& s : shorts) ++next[digit(s) + 1];
      std::partial_sum(next.begin(), next.end(), next.begin());
      for (const Short& s : shorts) sorted[next[digit(s)]++] = s;
      shorts.swap(sorted);
    }
  }

  // The grid chunk at place `i` of the epoch's order.
  [[nodiscard]] static Slice chunk_at(const Index& index, std::int64_t i) {
    const std::int64_t chunk =
        index.order ? static_cast<std::int64_t>((*index.order)(static_cast<std::uint64_t>(i))) : i;
    return index.grid->chunk(chunk);
  }

  // Appends the pieces of stream rows [begin, end) (begin < end) to `out`.
  void stream_pieces(const Index& index, std::int64_t begin, std::int64_t end, std::vector<Slice>& out) const {
    const std::int64_t c = layout_.chunk_size;
    // Where stream row `begin` lies: after the last short chunk that starts at or before it,
    // every chunk is full (row 0 is at place 0, whatever the short chunks).
    std::int64_t place = begin / c;
    std::int64_t offset = begin % c;
    const std::span<const Short> placed = begin == 0 ? std::span<const Short>() : shorts(index);
    const auto after = std::ranges::upper_bound(placed, begin, {}, &Short::before);
    if (after != placed.begin()) {
      const Short& s = *(after - 1);
      if (begin < s.before + s.rows) {
        place = s.place;
        offset = begin - s.before;
      } else {
        const std::int64_t past = begin - s.before - s.rows;
        place = s.place + 1 + past / c;
        offset = past % c;
      }
    }
    // The places' chunks are looked up a few at a time, as many as the rows left need at
    // least (chunks hold at most chunk_size rows), so that their lookups overlap.
    constexpr std::int64_t at_once = 16;
    std::array<std::uint64_t, at_once> places{};
    std::array<std::uint64_t, at_once> chunks{};
    for (std::int64_t row = begin; row < end;) {
      const auto m = static_cast<std::size_t>(std::min(at_once, ceil_div(end - row + offset, c)));
      std::iota(places.begin(), places.begin() + static_cast<std::ptrdiff_t>(m), static_cast<std::uint64_t>(place));
      if (index.order) index.order->map(std::span<const std::uint64_t>(places.data(), m), std::span(chunks.data(), m));
      else chunks = places;
      for (std::size_t j = 0; j < m && row < end; ++j, ++place, offset = 0) {
        const Slice chunk = index.grid->chunk(static_cast<std::int64_t>(chunks[j]));
        const std::int64_t start = chunk.start + offset;
        const std::int64_t stop = std::min(chunk.stop, start + (end - row));
        out.push_back({start, stop});
        row += stop - start;
      }
    }
  }

  // Appends the pieces of drawn chunk `i` (with replacement) to `out`.
  void drawn_chunk(const Index& index, std::int64_t i, std::vector<Slice>& out) const {
    const std::int64_t rows = std::min(layout_.chunk_size, layout_.stream_obs - i * layout_.chunk_size);
    Engine engine = make_engine(chunk_key_, static_cast<std::uint64_t>(i));
    const Ranges& mask = layout_.mask;
    std::int64_t position = 0;
    if (layout_.grid_starts) {
      const auto chunk = static_cast<std::int64_t>(bounded(engine, static_cast<std::uint64_t>(index.grid->n_chunks())));
      position = *mask.position_of(index.grid->chunk(chunk).start);
    } else {
      position = static_cast<std::int64_t>(bounded(engine, static_cast<std::uint64_t>(n_obs_ - rows + 1)));
    }
    // Union positions [position, position + rows), wrapping past the end (grid starts only).
    std::size_t r = mask.range_at(position);
    std::int64_t start = mask[r].start + (position - mask.offset(r));
    // Grid starts keep every piece inside one cell of the grid, as the chunks without
    // replacement are: a draw from a short head chunk continues into the next cell as a new piece.
    const std::int64_t c = layout_.chunk_size;
    for (std::int64_t left = rows; left > 0;) {
      std::int64_t stop = std::min(mask[r].stop, start + left);
      if (layout_.grid_starts) stop = std::min(stop, (start / c + 1) * c);
      out.push_back({start, stop});
      left -= stop - start;
      if (stop < mask[r].stop) {
        start = stop;
        continue;
      }
      r = r + 1 == mask.size() ? 0 : r + 1;
      start = mask[r].start;
    }
  }

  ChunkLayout layout_;
  std::int64_t n_obs_;  // observations in the mask's union
  std::uint64_t chunk_key_;
  std::uint64_t position_key_;
  std::shared_ptr<Index> index_;
};

}  // namespace chunksampler::detail
