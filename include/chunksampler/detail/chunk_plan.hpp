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
/// O(request) expected time from its index alone, memory O(ranges) and never O(n_obs).
///
/// Without replacement the epoch reads the chunks of the mask's storage grid
/// (`Ranges::Grid`: cells `[j * chunk_size, (j + 1) * chunk_size)` cut to the ranges, so every
/// full chunk sits on the grid and short ones touch a range edge). Their rows, one after the
/// other, are the epoch's stream, and request `k` reads the stream's rows
/// `[k * request_obs, (k + 1) * request_obs)`: every request but the last is full, so it splits
/// into whole batches however many short chunks it holds, and a chunk that straddles two
/// requests is read in two pieces, one in each. In order (not shuffled) the stream is the
/// union's rows in row order. Shuffled, it is a uniform keyed order (`KeyedPermutation`) of
///  - every grid chunk, short ones included, when the grid has at most `placed_shorts` short
///    chunks: where stream row `x` lies is found through the short chunks' places in the order
///    (all others have `chunk_size` rows), one inverse lookup of the permutation each, computed
///    at the first request that does not start at the stream's first row;
///  - else the full chunks and the short chunks' slots: the short chunks read one after the
///    other in row order and cut every `chunk_size` rows (each piece still inside one grid cell),
///    so that every slot but the last has `chunk_size` rows and finding a stream row costs one
///    inverse lookup instead of one per short chunk, each epoch, on every rank (what made a
///    mask of 10^5 ranges 12x the shuffle's cost in global mode).
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

  /// Short chunks up to which a shuffled epoch gives each its own place in the order; past
  /// them it orders the short chunks' slots (see the class's description).
  static constexpr std::int64_t placed_shorts = 256;

  /// Chunks in the epoch's stream: the mask's grid chunks (or full chunks and short chunks'
  /// slots), or with replacement the drawn ones.
  [[nodiscard]] std::int64_t stream_chunks() const {
    if (layout_.replacement) return ceil_div(layout_.stream_obs, layout_.chunk_size);
    const Index& index = built();
    return index.slots ? index.grid->n_full() + ceil_div(index.grid->short_rows(), layout_.chunk_size)
                       : index.grid->n_chunks();
  }
  /// Appends the rows of stream chunk `i` (`i < stream_chunks()`) to `out`: its grid chunk (or
  /// slot: one piece per short chunk it holds), or with replacement one piece per range the
  /// drawn chunk touches.
  void pieces(std::int64_t i, std::vector<Slice>& out) const {
    const Index& index = built();
    if (layout_.replacement) {
      drawn_chunk(index, i, out);
      return;
    }
    const std::uint64_t id =
        index.order ? (*index.order)(static_cast<std::uint64_t>(i)) : static_cast<std::uint64_t>(i);
    chunk_pieces(index, id, 0, layout_.chunk_size, out);
  }
  /// Stream chunk `i` when it is one piece (always for a grid chunk; with replacement when it
  /// lies in one range), else its first piece.
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
  // A chunk of fewer than chunk_size rows at its place in the epoch's order: a short chunk, or
  // with slots the last one.
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
    bool slots = false;  // the order is over the full chunks and the short chunks' slots
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
    const Ranges::Grid& grid = index.grid.emplace(layout_.mask, layout_.chunk_size);
    if (layout_.replacement || !layout_.shuffle) return;
    index.slots = grid.n_short() > placed_shorts;
    const std::int64_t ids =
        index.slots ? grid.n_full() + ceil_div(grid.short_rows(), layout_.chunk_size) : grid.n_chunks();
    index.order.emplace(static_cast<std::uint64_t>(ids), chunk_key_);
  }

  // The places of the order's chunks of fewer than chunk_size rows (shuffled epochs only).
  void place_shorts(Index& index) const {
    const std::int64_t c = layout_.chunk_size;
    const Ranges::Grid& grid = *index.grid;
    std::vector<std::uint64_t> chunks;
    if (index.slots) {
      // Every slot is full but the last, when the short rows do not fill it.
      const std::int64_t rest = grid.short_rows() % c;
      if (rest != 0) {
        chunks.push_back(static_cast<std::uint64_t>(grid.n_full() + grid.short_rows() / c));
        index.shorts.push_back({.place = 0, .before = 0, .rows = rest});
      }
    } else {
      // A range's first and last grid chunks are its only possibly short ones.
      const auto add_if_short = [&](std::int64_t j) {
        const std::int64_t rows = grid.chunk(j).size();
        if (rows == c) return;
        chunks.push_back(static_cast<std::uint64_t>(j));
        index.shorts.push_back({.place = 0, .before = 0, .rows = rows});
      };
      for (std::size_t r = 0; r < layout_.mask.size(); ++r) {
        const std::int64_t first = grid.first_chunk(r);
        const std::int64_t last = grid.first_chunk(r + 1) - 1;
        add_if_short(first);
        if (last > first) add_if_short(last);
      }
    }
    // Their places in the order: one inverse lookup each, all at once (they overlap), then
    // sorted by place (at most placed_shorts of them).
    std::vector<std::uint64_t> places(chunks.size());
    index.order->map<true>(chunks, places);
    for (std::size_t i = 0; i < places.size(); ++i) index.shorts[i].place = static_cast<std::int64_t>(places[i]);
    std::ranges::sort(index.shorts, {}, &Short::place);
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

  // Where stream row `row` lies: the place of its chunk (or slot) and the rows before it there.
  struct Spot {
    std::int64_t place;
    std::int64_t offset;
  };
  [[nodiscard]] Spot locate(const Index& index, std::int64_t row) const {
    const std::int64_t c = layout_.chunk_size;
    if (!index.order) {
      // In row order the stream is the union: its row-th observation, in the grid chunk of its cell.
      const Ranges& mask = layout_.mask;
      const std::size_t r = mask.range_at(row);
      const std::int64_t at = mask[r].start + (row - mask.offset(r));
      const std::int64_t chunk = index.grid->first_chunk(r) + (at / c - index.grid->first_cell(r));
      return {chunk, at - std::max(mask[r].start, at / c * c)};
    }
    // After the last short chunk that starts at or before it, every chunk is full (row 0 is at
    // place 0, whatever the short chunks).
    const std::span<const Short> placed = row == 0 ? std::span<const Short>() : shorts(index);
    const auto after = std::ranges::upper_bound(placed, row, {}, &Short::before);
    if (after == placed.begin()) return {row / c, row % c};
    const Short& s = *(after - 1);
    if (row < s.before + s.rows) return {s.place, row - s.before};
    const std::int64_t past = row - s.before - s.rows;
    return {s.place + 1 + past / c, past % c};
  }

  // Appends the rows [offset, offset + rows) of the chunk (or slot) the order gives `id`, cut
  // to its end, to `out`; returns the rows appended.
  std::int64_t chunk_pieces(const Index& index, std::uint64_t id, std::int64_t offset, std::int64_t rows,
                            std::vector<Slice>& out) const {
    const Ranges::Grid& grid = *index.grid;
    const auto i = static_cast<std::int64_t>(id);
    if (!index.slots || i < grid.n_full()) {
      const Slice chunk = index.slots ? grid.full_chunk(i) : grid.chunk(i);
      const std::int64_t start = chunk.start + offset;
      const std::int64_t stop = std::min(chunk.stop, start + rows);
      out.push_back({start, stop});
      return stop - start;
    }
    const std::int64_t first = (i - grid.n_full()) * layout_.chunk_size + offset;
    const std::int64_t count = std::min(rows, std::min(grid.short_rows(), first - offset + layout_.chunk_size) - first);
    grid.short_pieces(first, count, out);
    return count;
  }

  // Appends the pieces of stream rows [begin, end) (begin < end) to `out`.
  void stream_pieces(const Index& index, std::int64_t begin, std::int64_t end, std::vector<Slice>& out) const {
    Spot spot = locate(index, begin);
    // The places' chunks are looked up a few at a time, as many as the rows left need at
    // least (chunks hold at most chunk_size rows), so that their lookups overlap.
    constexpr std::int64_t at_once = 16;
    std::array<std::uint64_t, at_once> places{};
    std::array<std::uint64_t, at_once> ids{};
    for (std::int64_t row = begin; row < end;) {
      const auto m = static_cast<std::size_t>(std::min(at_once, ceil_div(end - row + spot.offset, layout_.chunk_size)));
      std::iota(places.begin(), places.begin() + static_cast<std::ptrdiff_t>(m),
                static_cast<std::uint64_t>(spot.place));
      if (index.order) index.order->map(std::span<const std::uint64_t>(places.data(), m), std::span(ids.data(), m));
      else ids = places;
      for (std::size_t j = 0; j < m && row < end; ++j, ++spot.place, spot.offset = 0)
        row += chunk_pieces(index, ids[j], spot.offset, end - row, out);
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
