// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/request_grid.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/slice.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <ranges>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The runs of one sampled class (weight > 0), or its pieces inside a mask's ranges
/// (`clip_classes`), in data order, with the prefix sums of the chunk starts they hold: run `i`
/// holds `runs[i].size() - chunk_size + 1` starts, and `prefix[i]` counts those of runs `[0, i)`
/// (`prefix.size() == runs.size() + 1`).
struct ClassRuns {
  std::int32_t code = 0;
  double weight = 0;
  std::vector<Slice> runs;
  std::vector<std::int64_t> prefix;
};

/// The run-length encoding a `ClassSampler` keeps of its codes: only the runs of sampled
/// classes, by class code. Built once and shared, never changed, by every copy and plan.
struct ClassTable {
  std::int64_t chunk_size = 0;
  std::vector<ClassRuns> classes;
};

/// Where one class's chunk starts lie inside the sampled ranges: runs `[lo, hi)` of its
/// `ClassRuns` hold `starts` valid starts there, numbered in row order. Over one range the runs
/// are the table's: the first `skipped` starts of run `lo` fall before the range's start
/// (clipping at its stop only shortens the count), so the range's `s`-th start is the
/// `(prefix[lo] + skipped + s)`-th start of the class. Over many ranges the runs are the class's
/// pieces inside them (`clip_classes`), all of them: `lo = 0`, `skipped = 0`.
struct ClassWindow {
  std::size_t index = 0;  ///< the class's position in the plan's class list (`ClassScope::classes`)
  std::size_t lo = 0;
  std::size_t hi = 0;
  std::int64_t skipped = 0;
  std::int64_t starts = 0;
  double cumulative = 0;  ///< the weights of this class and those before it in the window list
  /// When the window is one run (`hi == lo + 1`): the row of its first start in the range, so
  /// that a chunk's start is found without reading the class's runs.
  std::int64_t first_start = 0;
};

/// The classes that hold at least one whole chunk inside `range`, with their starts there and
/// their cumulative weights: renormalizing over them is drawing below the last cumulative.
/// O(classes * log(runs)).
[[nodiscard]] inline std::vector<ClassWindow> class_windows(std::span<const ClassRuns> classes, std::int64_t chunk,
                                                            Slice range) {
  const auto clipped = [&](const Slice& run) {
    return std::max<std::int64_t>(std::min(run.stop, range.stop) - std::max(run.start, range.start) - chunk + 1, 0);
  };
  std::vector<ClassWindow> windows;
  double cumulative = 0;
  for (std::size_t index = 0; index < classes.size(); ++index) {
    const ClassRuns& c = classes[index];
    const auto first = std::ranges::partition_point(c.runs, [&](const Slice& r) { return r.stop <= range.start; });
    const auto last = std::ranges::partition_point(c.runs, [&](const Slice& r) { return r.start < range.stop; });
    if (first >= last) continue;
    const auto lo = static_cast<std::size_t>(first - c.runs.begin());
    const auto hi = static_cast<std::size_t>(last - c.runs.begin());
    std::int64_t starts = clipped(c.runs[lo]);
    if (hi - lo > 1) starts += c.prefix[hi - 1] - c.prefix[lo + 1] + clipped(c.runs[hi - 1]);
    if (starts == 0) continue;
    const std::int64_t in_lo = c.prefix[lo + 1] - c.prefix[lo];
    // Separate statements: the sum must round alike on every platform.
    cumulative = cumulative + c.weight;
    const std::int64_t skipped = std::min(std::max<std::int64_t>(range.start - c.runs[lo].start, 0), in_lo);
    windows.push_back({.index = index,
                       .lo = lo,
                       .hi = hi,
                       .skipped = skipped,
                       .starts = starts,
                       .cumulative = cumulative,
                       .first_start = c.runs[lo].start + skipped});
  }
  return windows;
}

/// Each class of `table` clipped to `ranges` (closed, sorted, disjoint): its pieces
/// `run ∩ range` that hold a whole chunk, in row order, with their prefix sums of starts. A
/// piece shorter than a chunk holds no start, so no chunk drawn from the pieces crosses a range
/// edge. Per class, a merge of its runs with the ranges that jumps over the ranges between two
/// runs by binary search: O(classes * log(runs) + runs * log(ranges) + pieces) time, and the
/// pieces (at most runs + ranges) in memory.
[[nodiscard]] inline std::vector<ClassRuns> clip_classes(const ClassTable& table, std::span<const Slice> ranges) {
  const std::int64_t chunk = table.chunk_size;
  std::vector<ClassRuns> clipped;
  clipped.reserve(table.classes.size());
  for (const ClassRuns& c : table.classes) {
    ClassRuns& out = clipped.emplace_back(ClassRuns{.code = c.code, .weight = c.weight, .runs = {}, .prefix = {0}});
    if (ranges.empty()) continue;
    // Only the runs that meet the ranges' hull: a shard's ranges skip the rest at once.
    const auto first =
        std::ranges::partition_point(c.runs, [&](const Slice& r) { return r.stop <= ranges.front().start; });
    const auto last =
        std::ranges::partition_point(c.runs, [&](const Slice& r) { return r.start < ranges.back().stop; });
    auto range = ranges.begin();
    for (auto run = first; run < last; ++run) {
      // The first range that ends after the run starts; ranges before it end before this run
      // and every later one.
      // (An iterator pair, not std::ranges::subrange, which clang 14 cannot use with libstdc++ 12.)
      range = std::partition_point(range, ranges.end(), [&](const Slice& r) { return r.stop <= run->start; });
      for (auto r = range; r != ranges.end() && r->start < run->stop; ++r) {
        const Slice piece{std::max(run->start, r->start), std::min(run->stop, r->stop)};
        if (piece.size() < chunk) continue;
        out.runs.push_back(piece);
        out.prefix.push_back(out.prefix.back() + piece.size() - chunk + 1);
      }
    }
  }
  return clipped;
}

/// The windows of a scope, and their cumulative weights on their own, which a class draw
/// searches (8 bytes an entry where a window has 48: fewer cache lines at 10^5 classes).
struct ClassWindows {
  std::vector<ClassWindow> list;
  std::vector<double> cumulative;

  explicit ClassWindows(std::vector<ClassWindow> windows) : list(std::move(windows)) {
    cumulative.reserve(list.size());
    for (const ClassWindow& w : list) cumulative.push_back(w.cumulative);
  }
};

/// The classes a plan draws from and the windows over them, both shared by every copy of the
/// sampler and every plan it makes (O(classes) each: copied per epoch, they cost more than the
/// epoch's draws at 10^5 classes).
struct ClassScope {
  std::shared_ptr<const std::vector<ClassRuns>> classes;
  std::shared_ptr<const ClassWindows> windows;

  /// Whether the ranges hold no chunk of a sampled class.
  [[nodiscard]] bool empty() const noexcept { return !windows || windows->list.empty(); }
};

/// The scope of the union of `ranges` (closed, sorted, disjoint, at least one). One range keeps
/// the shared table and clips its runs through the windows alone, O(classes * log(runs)); many
/// clip the runs into pieces first (`clip_classes`). Both number a class's valid starts in row
/// order, so a mask of many ranges whose extra ranges hold no chunk draws exactly as its one
/// range does.
[[nodiscard]] inline ClassScope class_scope(const std::shared_ptr<const ClassTable>& table,
                                            std::span<const Slice> ranges) {
  if (ranges.size() == 1)
    return {.classes = std::shared_ptr<const std::vector<ClassRuns>>(table, &table->classes),
            .windows =
                std::make_shared<const ClassWindows>(class_windows(table->classes, table->chunk_size, ranges.front()))};
  auto clipped = std::make_shared<const std::vector<ClassRuns>>(clip_classes(*table, ranges));
  // Every piece lies inside the hull of the ranges: the windows over it take each class whole.
  auto windows = std::make_shared<const ClassWindows>(
      class_windows(*clipped, table->chunk_size, {ranges.front().start, ranges.back().stop}));
  return {.classes = std::move(clipped), .windows = std::move(windows)};
}

/// What a class plan needs besides its scope; checked before it gets here.
struct ClassLayout {
  std::int64_t chunk_size;
  std::int64_t preload_nchunks;
  std::int64_t batch_size;
  std::int64_t used_obs;  ///< positions the epoch's batches hold (after drop_last)
};

/// The draws every class plan makes: a class by weight, and a chunk's start inside its class,
/// each from an engine of its own keyed by its index, so any chunk is computed alone.
class ClassDraws {
 public:
  ClassDraws(ClassScope scope, const ClassLayout& layout, std::uint64_t chunk_start_key) noexcept
      : classes_(std::move(scope.classes)),
        windows_(std::move(scope.windows)),
        layout_(layout),
        chunk_start_key_(chunk_start_key) {}

  /// The classes the sampled ranges hold, with their starts and cumulative weights.
  [[nodiscard]] std::span<const ClassWindow> windows() const noexcept { return windows_->list; }
  [[nodiscard]] const ClassLayout& layout() const noexcept { return layout_; }
  /// The weight of the class `windows()[window]`, as given.
  [[nodiscard]] double weight_of(std::size_t window) const noexcept {
    return (*classes_)[windows_->list[window].index].weight;
  }

  /// The class (an index into `windows()`) that draw `index` under `key` picks: class `c` with
  /// probability `weight(c) / total` over the sampled classes, from a uniform double of 53
  /// random bits.
  [[nodiscard]] std::size_t draw_class(std::uint64_t key, std::int64_t index) const noexcept {
    Engine engine = make_engine(key, static_cast<std::uint64_t>(index));
    const std::uint64_t high = engine() >> 5U;  // 27 bits
    const std::uint64_t low = engine() >> 6U;   // 26 bits
    const double unit = static_cast<double>((high << 26U) | low) * 0x1p-53;
    // One product, apart from any sum, so no platform fuses it differently.
    const std::span<const double> cumulative = windows_->cumulative;
    const double target = unit * cumulative.back();
    const auto it = std::ranges::upper_bound(cumulative, target);
    // `target` may round up to the total itself: it then belongs to the last class.
    return it == cumulative.end() ? cumulative.size() - 1 : static_cast<std::size_t>(it - cumulative.begin());
  }

  /// Chunk `i` of the epoch, of the class `windows()[window]`: a uniform valid start of the
  /// class in the sampled ranges, the chunk cut to the epoch's remainder when it is the last.
  [[nodiscard]] Slice chunk_of(std::int64_t i, std::size_t window) const noexcept {
    const ClassWindow& w = windows_->list[window];
    Engine engine = make_engine(chunk_start_key_, static_cast<std::uint64_t>(i));
    const auto draw = static_cast<std::int64_t>(bounded(engine, static_cast<std::uint64_t>(w.starts)));
    std::int64_t start = w.first_start + draw;
    if (w.hi > w.lo + 1) {
      const ClassRuns& c = (*classes_)[w.index];
      const std::int64_t target = c.prefix[w.lo] + w.skipped + draw;
      // The run holding start number `target`: the last r in [lo, hi) with prefix[r] <= target.
      const auto from = c.prefix.begin() + static_cast<std::ptrdiff_t>(w.lo) + 1;
      const auto to = c.prefix.begin() + static_cast<std::ptrdiff_t>(w.hi) + 1;
      const auto r = static_cast<std::size_t>(std::upper_bound(from, to, target) - c.prefix.begin()) - 1;
      start = c.runs[r].start + (target - c.prefix[r]);
    }
    const std::int64_t length = std::min(layout_.chunk_size, layout_.used_obs - i * layout_.chunk_size);
    return {start, start + length};
  }

  /// Asks the processor to fetch the window `window` soon (for `chunk_of`): a request's chunks
  /// draw classes at random among up to 10^5 windows, so each would otherwise wait on memory.
  void prefetch(std::size_t window) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(&windows_->list[window]);
#else
    (void)window;
#endif
  }

 private:
  std::shared_ptr<const std::vector<ClassRuns>> classes_;
  std::shared_ptr<const ClassWindows> windows_;
  ClassLayout layout_;
  std::uint64_t chunk_start_key_;
};

/// The keys of the three kinds of draw in one epoch.
struct ClassKeys {
  std::uint64_t group_class;  ///< one class per group of chunks, keyed by group index
  std::uint64_t chunk_start;  ///< one start per chunk, keyed by chunk index
  std::uint64_t batch_order;  ///< the row order within each batch, keyed by request index
};

/// One epoch of a `ClassSampler` (an `EpochPlan`). The epoch's `used_obs` rows are read as
/// `ceil(used_obs / chunk_size)` chunks, the last cut to the remainder; chunk `i` belongs to
/// group `i / g`, `g = batch_size / gcd(chunk_size, batch_size)`, one `lcm(chunk_size,
/// batch_size)` block, so group edges are batch edges. Group `j` draws its class from an
/// engine keyed by `j`, chunk `i` its start among the class's valid starts in the sampled
/// ranges from an engine keyed by `i`, and request `k` the order of each batch's rows from an
/// engine keyed by `k`: any request is computed in O(request * log runs) from its index alone.
class ClassPlan : public RequestGrid<ClassPlan> {
 public:
  ClassPlan(ClassScope scope, const ClassLayout& layout, const ClassKeys& keys) noexcept
      : draws_(std::move(scope), layout, keys.chunk_start),
        keys_(keys),
        group_chunks_(layout.batch_size / std::gcd(layout.chunk_size, layout.batch_size)),
        n_chunks_(ceil_div(layout.used_obs, layout.chunk_size)) {}

  [[nodiscard]] std::int64_t n_requests() const noexcept { return ceil_div(layout().used_obs, request_obs()); }
  [[nodiscard]] std::int64_t max_chunks() const noexcept { return std::min(layout().preload_nchunks, n_chunks_); }
  [[nodiscard]] const ClassLayout& layout() const noexcept { return draws_.layout(); }
  [[nodiscard]] std::int64_t max_positions() const noexcept { return std::min(request_obs(), layout().used_obs); }
  /// Chunks per class group.
  [[nodiscard]] std::int64_t group_chunks() const noexcept { return group_chunks_; }
  /// Chunks the epoch reads.
  [[nodiscard]] std::int64_t n_chunks() const noexcept { return n_chunks_; }
  /// The classes the sampled ranges hold, with their starts and cumulative weights.
  [[nodiscard]] std::span<const ClassWindow> windows() const noexcept { return draws_.windows(); }

  /// Request `k`: chunks `[k * preload_nchunks, ...)` of the epoch, and each batch `b` the
  /// buffer rows `[b * batch_size, (b + 1) * batch_size)` in random order, so a batch holds the
  /// rows of one group, hence of one class.
  void fill(std::int64_t k, RequestBuffers& out) const {
    const ClassLayout& l = layout();
    const std::int64_t first = k * l.preload_nchunks;
    const std::int64_t n = std::min(l.preload_nchunks, n_chunks_ - first);
    out.chunks.resize(static_cast<std::size_t>(n));
    std::int64_t group = -1;
    std::size_t window = 0;
    // A few chunks' classes first, their windows fetched together, then their starts.
    constexpr std::int64_t at_once = 16;
    std::array<std::size_t, at_once> windows{};
    for (std::int64_t from = 0; from < n; from += at_once) {
      const std::int64_t m = std::min(at_once, n - from);
      for (std::int64_t j = 0; j < m; ++j) {
        const std::int64_t i = first + from + j;
        if (i / group_chunks_ != group) {
          group = i / group_chunks_;
          window = draws_.draw_class(keys_.group_class, group);
          draws_.prefetch(window);
        }
        windows[static_cast<std::size_t>(j)] = window;
      }
      for (std::int64_t j = 0; j < m; ++j)
        out.chunks[static_cast<std::size_t>(from + j)] =
            draws_.chunk_of(first + from + j, windows[static_cast<std::size_t>(j)]);
    }
    const std::int64_t rows = std::min(request_obs(), l.used_obs - k * request_obs());
    out.positions.resize(static_cast<std::size_t>(rows));
    std::iota(out.positions.begin(), out.positions.end(), std::int64_t{0});
    Engine engine = make_engine(keys_.batch_order, static_cast<std::uint64_t>(k));
    const std::span<std::int64_t> positions(out.positions);
    for (std::int64_t b = 0; b < rows; b += l.batch_size) {
      const auto size = static_cast<std::size_t>(std::min(l.batch_size, rows - b));
      partial_shuffle(engine, positions.subspan(static_cast<std::size_t>(b), size), size);
    }
  }

 private:
  ClassDraws draws_;
  ClassKeys keys_;
  std::int64_t group_chunks_;
  std::int64_t n_chunks_;
};

}  // namespace chunksampler::detail
