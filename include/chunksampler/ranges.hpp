// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/slice.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chunksampler {

namespace detail {

/// `[start, stop)`, or `[start, end)` for an open-ended range, as error messages show a range.
[[nodiscard]] inline std::string range_text(Slice range) {
  return range.open_ended() ? fmt::format("[{}, end)", range.start) : fmt::format("[{}, {})", range.start, range.stop);
}

/// A mask is a non-empty range inside `[0, 2^62]`, or `Slice::from(start)` with `start < 2^62`
/// (`[start, n_obs)`, checked against each `n_obs`).
inline void check_mask(std::string_view name, Slice mask) {
  if (mask.start < 0) throw_config("{}: mask.start must be >= 0 (got {})", name, mask.start);
  if (mask.open_ended()) {
    if (mask.start >= max_size) throw_config("{}: mask.start ({}) must be < 2^62", name, mask.start);
    return;
  }
  if (mask.start >= mask.stop)
    throw_config("{}: mask.start must be < mask.stop (got mask.start {}, mask.stop {})", name, mask.start, mask.stop);
  if (mask.stop > max_size) throw_config("{}: mask.stop ({}) must be <= 2^62", name, mask.stop);
}

/// "The last `r` with `before[r] <= i`" over a nondecreasing array with `before[0] == 0`, for
/// `i` below the array's total, in O(1) expected steps: buckets of `2^shift` values, about as
/// many as entries, each knowing the entry its first value lies in, so that a lookup searches
/// only the few entries that start inside its bucket, without branches on the data (lookups come
/// in random order, where a branchy search mispredicts at every step).
class BucketSearch {
 public:
  BucketSearch() = default;
  /// The buckets over `before`, whose values lie in `[0, total)` (`total >= 1`).
  BucketSearch(std::span<const std::int64_t> before, std::int64_t total) {
    const auto entry_bits = static_cast<int>(std::bit_width(before.size() - 1));
    shift_ = std::max(static_cast<int>(std::bit_width(static_cast<std::uint64_t>(total - 1))) - entry_bits, 0);
    const std::size_t buckets = static_cast<std::size_t>((total - 1) >> shift_) + 1;
    first_.reserve(buckets + 1);
    std::size_t r = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::int64_t first = static_cast<std::int64_t>(b) << shift_;
      while (r + 1 < before.size() && before[r + 1] <= first) ++r;
      first_.push_back(r);
    }
    first_.push_back(before.size() - 1);
  }

  /// The last `r` with `before[r] <= i` (`0 <= i < total`), `before` as given to the constructor.
  [[nodiscard]] std::size_t find(std::span<const std::int64_t> before, std::int64_t i) const noexcept {
    const auto bucket = static_cast<std::size_t>(i >> shift_);
    const std::int64_t* base = before.data() + first_[bucket];
    for (std::size_t length = first_[bucket + 1] - first_[bucket] + 1; length > 1;) {
      const std::size_t half = length / 2;
      base = base[half] <= i ? base + half : base;
      length -= half;
    }
    return static_cast<std::size_t>(base - before.data());
  }

 private:
  int shift_ = 0;
  std::vector<std::size_t> first_;  // the entry bucket b's first value lies in; then the last entry
};

}  // namespace detail

/// A mask of many ranges: sorted, disjoint, non-empty `Slice`s, the last of which may be
/// open-ended (`Slice::from(start)`, ending at each epoch's `n_obs`). A train / validation /
/// test split is rarely one range; this is the set of rows a sampler reads, in O(number of
/// ranges) memory however many observations it covers.
///
///     cs::Ranges train{{0, 1'000}, {5'000, 8'000}, cs::Slice::from(20'000)};
///     cs::Ranges closed = train.resolve(30'000);         // [0, 1000), [5000, 8000), [20000, 30000)
///     closed.count();                                     // 14'000 observations
///     closed.locate(1'000);                               // row 5'000
///     cs::Ranges::Grid grid = closed.grid(64);            // chunks on the multiples of 64
///     grid.chunk(0);                                      // [0, 64)
///
/// Adjacent ranges (`[0, 10), [10, 20)`) are accepted and merged into one (`[0, 20)`): they
/// select the same rows, and a split that follows a categorical column on disk gives adjacent
/// runs of one selection whose merging lets a grid chunk span the seam instead of being cut in
/// two short reads. `size()`, `operator[]` and the indices in `resolve`'s messages count the
/// merged ranges; the constructor's messages count the ranges as given.
///
/// Copies share the (immutable) storage, so a `Ranges` is cheap to pass by value and a `Grid`
/// keeps the ranges it was made from alive.
class Ranges {
 public:
  class Grid;

 private:
  struct GridIndex;

 public:
  /// The ranges in `ranges`, checked and with adjacent ones merged. Throws `ConfigError` naming
  /// the first offending range (or pair) by index and value: no ranges, an empty range,
  /// `start < 0`, `stop > 2^62`, an open-ended range that is not the last or starts at or after
  /// 2^62, unsorted or overlapping neighbours.
  ///
  ///     std::vector<cs::Slice> runs = runs_of_train_rows();
  ///     cs::Ranges mask(runs);
  explicit Ranges(std::span<const Slice> ranges) : data_(build(ranges)) {}
  /// The ranges of a braced list: `cs::Ranges{{0, 10}, {20, 30}}`.
  Ranges(std::initializer_list<Slice> ranges) : Ranges(std::span<const Slice>(ranges.begin(), ranges.size())) {}
  /// One range, so a mask written as a `Slice` is a `Ranges` of one: `cs::Ranges mask = cs::Slice{16, 1000};`.
  // Implicit on purpose: every mask written today as a Slice stays valid where a Ranges is taken.
  Ranges(Slice range) : Ranges(std::span<const Slice>(&range, 1)) {}
  /// One range `[start, stop)`: `cs::Ranges(16, 1000)`, and `cs::Shard{.mask = {16, 1000}}`. (An
  /// options struct's `std::optional<Ranges>` mask takes `cs::Slice{16, 1000}` or a `Ranges`.)
  Ranges(std::int64_t start, std::int64_t stop) : Ranges(Slice{start, stop}) {}

  /// Number of (merged) ranges.
  [[nodiscard]] std::size_t size() const noexcept { return data_->ranges.size(); }
  /// The `i`-th range (`i < size()`).
  [[nodiscard]] const Slice& operator[](std::size_t i) const noexcept { return data_->ranges[i]; }
  /// The ranges, in row order.
  [[nodiscard]] std::span<const Slice> slices() const noexcept { return data_->ranges; }
  /// Iteration over the ranges, in row order.
  [[nodiscard]] std::span<const Slice>::iterator begin() const noexcept { return slices().begin(); }
  /// End of the iteration over the ranges.
  [[nodiscard]] std::span<const Slice>::iterator end() const noexcept { return slices().end(); }
  /// True when the last range is open-ended (ends at each epoch's `n_obs`).
  [[nodiscard]] bool open_ended() const noexcept { return data_->ranges.back().open_ended(); }

  /// The closed ranges over `n_obs` observations: an open-ended last range becomes
  /// `[start, n_obs)`. Throws `ConfigError` when `n_obs` is outside `[0, 2^62]`, a closed range
  /// reaches past `n_obs`, or the open range starts at or after `n_obs` (it would be empty),
  /// naming the range.
  ///
  ///     cs::Ranges{{0, 10}, cs::Slice::from(50)}.resolve(80);   // [0, 10), [50, 80)
  [[nodiscard]] Ranges resolve(std::int64_t n_obs) const {
    if (n_obs < 0 || n_obs > detail::max_size) detail::throw_config("Ranges: n_obs ({}) must be in [0, 2^62]", n_obs);
    const std::vector<Slice>& ranges = data_->ranges;
    const std::size_t last = ranges.size() - 1;
    if (ranges[last].open_ended()) {
      if (ranges[last].start >= n_obs)
        detail::throw_config("Ranges: the open-ended ranges[{}] = {} must start before n_obs ({})", last,
                             detail::range_text(ranges[last]), n_obs);
    } else if (ranges[last].stop > n_obs) {
      // Sorted ranges: the first range past n_obs is the first whose stop is.
      const auto past = std::ranges::partition_point(ranges, [n_obs](const Slice& r) { return r.stop <= n_obs; });
      const auto i = static_cast<std::size_t>(past - ranges.begin());
      detail::throw_config("Ranges: ranges[{}] = {} must end at or before n_obs ({})", i, detail::range_text(*past),
                           n_obs);
    }
    if (!open_ended()) return *this;
    std::vector<Slice> closed = ranges;
    closed.back() = closed.back().resolve(n_obs);
    return Ranges(from_checked(std::move(closed)));
  }

  /// Observations in the union. Needs closed ranges: throws `ConfigError` on open-ended ones,
  /// whose size depends on `n_obs` (`resolve(n_obs).count()`).
  [[nodiscard]] std::int64_t count() const {
    require_closed("count()");
    return data_->before.back() + data_->ranges.back().size();
  }

  /// The `k`-th observation of the union (0-based, in row order) as an absolute row, in
  /// O(log ranges). Needs closed ranges and `k` in `[0, count())`, else `ConfigError`.
  ///
  ///     cs::Ranges{{10, 20}, {50, 60}}.locate(12);   // 52
  [[nodiscard]] std::int64_t locate(std::int64_t k) const {
    require_closed("locate()");
    if (k < 0 || k >= count()) detail::throw_config("Ranges::locate: k ({}) must be in [0, {})", k, count());
    const std::vector<std::int64_t>& before = data_->before;
    const auto i = static_cast<std::size_t>(std::ranges::upper_bound(before, k) - before.begin()) - 1;
    return data_->ranges[i].start + (k - before[i]);
  }

  /// The index of the range that holds the union's `k`-th observation (`k` as in `locate`), in
  /// O(log ranges); with `offset(i)`, where a walk along the union starts.
  [[nodiscard]] std::size_t range_at(std::int64_t k) const {
    (void)locate(k);  // checks closed ranges and k
    const std::vector<std::int64_t>& before = data_->before;
    return static_cast<std::size_t>(std::ranges::upper_bound(before, k) - before.begin()) - 1;
  }

  /// Observations of the union in the ranges before range `i` (`i < size()`): where range `i`
  /// starts when the union is counted from 0.
  [[nodiscard]] std::int64_t offset(std::size_t i) const noexcept { return data_->before[i]; }

  /// The observations at positions `[first, first + count)` of the (closed) union as ranges, in
  /// O(log ranges + ranges kept) the first time: how a distributed sampler cuts the union into shards by
  /// observation count, a shard possibly spanning several ranges. Needs `count >= 1` and
  /// `first + count <= count()`, else `ConfigError`. The last two results are remembered (and
  /// shared with every copy), so cutting the same shard again costs O(1).
  ///
  ///     cs::Ranges{{0, 10}, {20, 30}}.sub(5, 10);   // [5, 10), [20, 25)
  [[nodiscard]] Ranges sub(std::int64_t first, std::int64_t count) const {
    require_closed("sub()");
    if (first < 0 || count < 1 || first > this->count() - count)
      detail::throw_config("Ranges::sub: [{}, {} + {}) must be a non-empty part of the union's [0, {})", first, first,
                           count, this->count());
    if (first == 0 && count == this->count()) return *this;
    // A distributed sampler cuts the same shard (or two, alternating) every epoch: the last
    // two results are kept, so that the shard and the grid made over it are built once.
    const Data& data = *data_;
    const std::scoped_lock lock(data.grid_mutex);
    for (const Data::Cut& cut : data.cuts)
      if (cut.ranges && cut.first == first && cut.count == count) return Ranges(cut.ranges);
    const std::size_t lo = range_at(first);
    const std::size_t hi = range_at(first + count - 1);
    std::vector<Slice> kept(data.ranges.begin() + static_cast<std::ptrdiff_t>(lo),
                            data.ranges.begin() + static_cast<std::ptrdiff_t>(hi) + 1);
    kept.front().start += first - data.before[lo];
    kept.back().stop = data.ranges[hi].start + (first + count - data.before[hi]);
    Data::Cut& cut = data.cuts[data.next_cut];
    data.next_cut = (data.next_cut + 1) % data.cuts.size();
    cut = {.first = first, .count = count, .ranges = from_checked(std::move(kept))};
    return Ranges(cut.ranges);
  }

  /// A hash of the ranges (after merging): what a sampler's fingerprint holds of its mask. O(ranges)
  /// the first time it is asked of a `Ranges` or any copy of it, O(1) after: the ranges a
  /// distributed sampler cuts every epoch are never hashed.
  [[nodiscard]] std::uint64_t hash() const noexcept {
    const Data& data = *data_;
    if (data.hashed.load(std::memory_order_acquire)) return data.hash.load(std::memory_order_relaxed);
    // Threads that get here together compute and store the same value.
    std::uint64_t hash = detail::mix64(data.ranges.size());
    for (const Slice& range : data.ranges)
      hash = detail::derive(detail::derive(hash, static_cast<std::uint64_t>(range.start)),
                            static_cast<std::uint64_t>(range.stop));
    data.hash.store(hash, std::memory_order_relaxed);
    data.hashed.store(true, std::memory_order_release);
    return hash;
  }

  /// The inverse of `locate`: where `row` stands in the union (0-based), or `std::nullopt` when
  /// the union does not hold it; O(log ranges). Works on open-ended ranges too.
  ///
  ///     cs::Ranges{{10, 20}, {50, 60}}.position_of(52);   // 12
  [[nodiscard]] std::optional<std::int64_t> position_of(std::int64_t row) const noexcept {
    const std::optional<std::size_t> i = range_of(row);
    if (!i) return std::nullopt;
    return data_->before[*i] + (row - data_->ranges[*i].start);
  }

  /// The index of the range that holds `row`, or `std::nullopt`; O(log ranges).
  [[nodiscard]] std::optional<std::size_t> range_of(std::int64_t row) const noexcept {
    const std::vector<Slice>& ranges = data_->ranges;
    const auto after = std::ranges::upper_bound(ranges, row, {}, &Slice::start);
    if (after == ranges.begin()) return std::nullopt;
    const auto i = static_cast<std::size_t>(after - ranges.begin()) - 1;
    if (!ranges[i].contains(row)) return std::nullopt;
    return i;
  }

  /// Number of grid chunks of `chunk_size` over the union (see `Grid`), in O(ranges). Needs
  /// closed ranges and `chunk_size` in `[1, 2^62]`, else `ConfigError`.
  [[nodiscard]] std::int64_t n_chunks(std::int64_t chunk_size) const {
    check_chunk_size(chunk_size);
    require_closed("n_chunks()");
    std::int64_t total = 0;
    for (const Slice& range : data_->ranges) total += chunks_in(range, chunk_size);
    return total;
  }

  /// The grid chunks of `chunk_size` over these (closed) ranges, with random access in
  /// O(log ranges); building it costs O(ranges) time and memory.
  [[nodiscard]] Grid grid(std::int64_t chunk_size) const;

  /// Equal when they hold the same ranges (after merging).
  friend bool operator==(const Ranges& a, const Ranges& b) noexcept {
    return a.data_ == b.data_ || a.data_->ranges == b.data_->ranges;
  }

 private:
  struct Data {
    std::vector<Slice> ranges;
    std::vector<std::int64_t> before;            ///< observations in the ranges before range i
    mutable std::atomic<std::uint64_t> hash{0};  ///< of the ranges, for fingerprints, once `hashed`
    mutable std::atomic<bool> hashed{false};
    /// The index of the grid last built over these ranges (for its chunk size), so that the
    /// plan of every epoch over the same mask reuses it instead of an O(ranges) rebuild.
    mutable std::mutex grid_mutex;
    mutable std::shared_ptr<const GridIndex> grid;
    /// The last two `sub` results (under `grid_mutex`).
    struct Cut {
      std::int64_t first = 0;
      std::int64_t count = 0;
      std::shared_ptr<const Data> ranges;
    };
    mutable std::array<Cut, 2> cuts;
    mutable std::size_t next_cut = 0;
  };

  explicit Ranges(std::shared_ptr<const Data> data) noexcept : data_(std::move(data)) {}

  static void check_chunk_size(std::int64_t chunk_size) {
    if (chunk_size < 1 || chunk_size > detail::max_size)
      detail::throw_config("Ranges: chunk_size ({}) must be in [1, 2^62]", chunk_size);
  }

  void require_closed(const char* what) const {
    if (open_ended())
      detail::throw_config("Ranges::{}: the last range {} is open-ended; resolve(n_obs) first", what,
                           detail::range_text(data_->ranges.back()));
  }

  /// Grid chunks in a closed range: the multiples of `chunk_size` its rows fall between.
  [[nodiscard]] static std::int64_t chunks_in(Slice range, std::int64_t chunk_size) noexcept {
    return (range.stop - 1) / chunk_size - range.start / chunk_size + 1;
  }

  /// Checks `given` as the constructor documents and merges adjacent ranges.
  [[nodiscard]] static std::shared_ptr<const Data> build(std::span<const Slice> given) {
    if (given.empty()) detail::throw_config("Ranges: no ranges given; a mask needs at least one range");
    // One range is a mask written as a Slice: named as such.
    if (given.size() == 1) detail::check_mask("Ranges", given[0]);
    std::vector<Slice> merged;
    merged.reserve(given.size());
    for (std::size_t i = 0; i < given.size(); ++i) {
      const Slice r = given[i];
      if (r.start < 0) detail::throw_config("Ranges: ranges[{}] = {}: start must be >= 0", i, detail::range_text(r));
      if (r.open_ended()) {
        if (i + 1 != given.size())
          detail::throw_config(
              "Ranges: ranges[{}] = {} is open-ended but not the last of {} ranges; only the last may be", i,
              detail::range_text(r), given.size());
        if (r.start >= detail::max_size)
          detail::throw_config("Ranges: ranges[{}] = {}: an open-ended range must start before 2^62", i,
                               detail::range_text(r));
      } else {
        if (r.empty())
          detail::throw_config("Ranges: ranges[{}] = {} is empty; start must be < stop", i, detail::range_text(r));
        if (r.stop > detail::max_size)
          detail::throw_config("Ranges: ranges[{}] = {}: stop must be <= 2^62", i, detail::range_text(r));
      }
      if (i > 0) {
        const Slice prev = given[i - 1];
        if (r.start < prev.start)
          detail::throw_config(
              "Ranges: ranges[{}] = {} and ranges[{}] = {} are not sorted; ranges must be in row order", i - 1,
              detail::range_text(prev), i, detail::range_text(r));
        if (r.start < prev.stop)
          detail::throw_config("Ranges: ranges[{}] = {} overlaps ranges[{}] = {}", i - 1, detail::range_text(prev), i,
                               detail::range_text(r));
      }
      if (!merged.empty() && merged.back().stop == r.start) merged.back().stop = r.stop;
      else merged.push_back(r);
    }
    return from_checked(std::move(merged));
  }

  /// Storage for ranges already checked and merged: they and their prefix sums. Sums stay
  /// below 2^62 as the ranges are disjoint inside `[0, 2^62]`.
  [[nodiscard]] static std::shared_ptr<const Data> from_checked(std::vector<Slice> ranges) {
    auto data = std::make_shared<Data>();
    data->before.reserve(ranges.size());
    std::int64_t total = 0;
    for (const Slice& range : ranges) {
      data->before.push_back(total);
      if (!range.open_ended()) total += range.size();
    }
    data->ranges = std::move(ranges);
    return data;
  }

  std::shared_ptr<const Data> data_;
};

/// What a `Ranges::Grid` looks chunks up in: O(ranges) arrays for one chunk size, built once per
/// `Ranges` storage and chunk size and shared by every grid made from them.
struct Ranges::GridIndex {
  std::int64_t chunk_size = 0;
  std::int64_t n_chunks = 0;
  std::vector<std::int64_t> before;      ///< chunks in the ranges before range r
  std::vector<std::int64_t> first_cell;  ///< the grid cell range r starts in: start / chunk_size
  detail::BucketSearch chunks;           ///< chunk -> range
  // The short chunks (fewer than chunk_size rows: a range's head or tail off the grid) and the
  // full ones, each counted in row order.
  std::int64_t n_short = 0;
  std::int64_t short_rows = 0;
  std::vector<std::int64_t> full_before;  ///< full chunks in the ranges before range r
  std::vector<std::int64_t> rows_before;  ///< short chunks' rows in the ranges before range r
  detail::BucketSearch fulls;             ///< full chunk -> range
  detail::BucketSearch shorts;            ///< short chunks' row -> range

  GridIndex(std::span<const Slice> ranges, std::int64_t c) : chunk_size(c) {
    before.reserve(ranges.size());
    first_cell.reserve(ranges.size());
    full_before.reserve(ranges.size());
    rows_before.reserve(ranges.size());
    std::int64_t n_full = 0;
    for (const Slice& range : ranges) {
      before.push_back(n_chunks);
      first_cell.push_back(range.start / c);
      full_before.push_back(n_full);
      rows_before.push_back(short_rows);
      const Edges e = edges(range, c);
      n_chunks += chunks_in(range, c);
      n_full += chunks_in(range, c) - (e.head > 0 ? 1 : 0) - (e.tail > 0 ? 1 : 0);
      n_short += (e.head > 0 ? 1 : 0) + (e.tail > 0 ? 1 : 0);
      short_rows += e.head + e.tail;
    }
    chunks = detail::BucketSearch(before, n_chunks);
    if (n_full > 0) fulls = detail::BucketSearch(full_before, n_full);
    if (short_rows > 0) shorts = detail::BucketSearch(rows_before, short_rows);
  }

  /// The rows of a range's short head and tail chunks (0 where the chunk is full or, for the
  /// tail, where the range has one chunk, which counts as its head).
  struct Edges {
    std::int64_t head;
    std::int64_t tail;
  };
  [[nodiscard]] static Edges edges(Slice range, std::int64_t c) noexcept {
    const std::int64_t head_stop = std::min(range.stop, (range.start / c + 1) * c);
    const std::int64_t head = head_stop - range.start;
    if (head_stop == range.stop) return {head < c ? head : 0, 0};
    const std::int64_t tail = range.stop - (range.stop - 1) / c * c;
    return {head < c ? head : 0, tail < c ? tail : 0};
  }
};

/// The grid chunks of one `chunk_size` over closed `Ranges`: chunk `j` of the grid is
/// `[j * chunk_size, (j + 1) * chunk_size)` in absolute rows, cut to the range it lies in. Every
/// full chunk starts at a multiple of `chunk_size` counted from row 0 (so a store chunked by
/// `chunk_size` rows, or a divisor of it, is never read across a storage chunk), a range that
/// starts or ends off the grid has a short head or tail chunk, and no chunk crosses a range
/// boundary. Chunks are numbered in row order.
///
///     cs::Ranges::Grid grid = cs::Ranges{cs::Slice{16, 1000}}.grid(64);
///     grid.n_chunks();   // 16
///     grid.chunk(0);     // [16, 64)
///     grid.chunk(15);    // [960, 1000)
///     grid.n_short();    // 2: [16, 64) and [960, 1000), 88 rows (short_rows())
///     grid.full_chunk(0);   // [64, 128)
///
/// It is a separate object because O(1) access needs, for its `chunk_size`, the number of chunks
/// before each range: O(ranges) memory, built at the first grid of a chunk size over a
/// `Ranges` (or any copy of it) and shared by the grids made after it, so that a sampler's
/// every epoch over the same mask does not rebuild it. It shares the ranges' storage, so it may
/// outlive the `Ranges` it came from.
class Ranges::Grid {
 public:
  /// The grid of `chunk_size` over `ranges` (as `ranges.grid(chunk_size)`).
  Grid(Ranges ranges, std::int64_t chunk_size) : ranges_(std::move(ranges)) {
    check_chunk_size(chunk_size);
    ranges_.require_closed("grid()");
    const Data& data = *ranges_.data_;
    const std::scoped_lock lock(data.grid_mutex);
    if (!data.grid || data.grid->chunk_size != chunk_size)
      data.grid = std::make_shared<const GridIndex>(data.ranges, chunk_size);
    index_ = data.grid;
  }

  /// Number of chunks over the union.
  [[nodiscard]] std::int64_t n_chunks() const noexcept { return index_->n_chunks; }
  /// The chunk size the grid was built for.
  [[nodiscard]] std::int64_t chunk_size() const noexcept { return index_->chunk_size; }
  /// The ranges the grid is over.
  [[nodiscard]] const Ranges& ranges() const noexcept { return ranges_; }
  /// The index of range `r`'s first chunk (`r <= ranges().size()`; `n_chunks()` past the last).
  [[nodiscard]] std::int64_t first_chunk(std::size_t r) const noexcept {
    return r < index_->before.size() ? index_->before[r] : index_->n_chunks;
  }
  /// The grid cell range `r` starts in (`r < ranges().size()`): `ranges()[r].start / chunk_size()`.
  [[nodiscard]] std::int64_t first_cell(std::size_t r) const noexcept { return index_->first_cell[r]; }

  /// The `i`-th chunk in row order (`i` in `[0, n_chunks())`, else `ConfigError`), in O(1)
  /// expected steps.
  [[nodiscard]] Slice chunk(std::int64_t i) const {
    const GridIndex& index = *index_;
    if (i < 0 || i >= index.n_chunks)
      detail::throw_config("Ranges::Grid::chunk: i ({}) must be in [0, {})", i, index.n_chunks);
    const std::size_t r = index.chunks.find(index.before, i);
    const Slice range = ranges_[r];
    const std::int64_t cell = index.first_cell[r] + (i - index.before[r]);
    // cell * chunk_size <= range.stop - 1 < 2^62 and chunk_size <= 2^62: the cell's end fits in
    // std::int64_t even at the top of the grid.
    const std::int64_t cell_start = cell * index.chunk_size;
    return {std::max(range.start, cell_start), std::min(range.stop, cell_start + index.chunk_size)};
  }

  /// Number of short chunks: those of fewer than `chunk_size` rows, at a range's edges.
  [[nodiscard]] std::int64_t n_short() const noexcept { return index_->n_short; }
  /// Rows in the short chunks.
  [[nodiscard]] std::int64_t short_rows() const noexcept { return index_->short_rows; }
  /// Number of full chunks: `n_chunks() - n_short()`.
  [[nodiscard]] std::int64_t n_full() const noexcept { return index_->n_chunks - index_->n_short; }

  /// The `i`-th full chunk in row order (`i` in `[0, n_full())`, else `ConfigError`), in O(1)
  /// expected steps.
  [[nodiscard]] Slice full_chunk(std::int64_t i) const {
    const GridIndex& index = *index_;
    if (i < 0 || i >= n_full())
      detail::throw_config("Ranges::Grid::full_chunk: i ({}) must be in [0, {})", i, n_full());
    const std::size_t r = index.fulls.find(index.full_before, i);
    const std::int64_t c = index.chunk_size;
    // A range that holds a full chunk has a short head exactly when it starts off the grid.
    const bool head_short = ranges_[r].start != index.first_cell[r] * c;
    const std::int64_t cell = index.first_cell[r] + (head_short ? 1 : 0) + (i - index.full_before[r]);
    return {cell * c, cell * c + c};
  }

  /// Appends to `out` the rows `[first, first + count)` of the short chunks read one after the
  /// other in row order (`0 <= first`, `count >= 0`, `first + count <= short_rows()`, else
  /// `ConfigError`): one piece per short chunk they touch, in O(1) expected steps plus one per
  /// piece.
  ///
  ///     std::vector<cs::Slice> pieces;
  ///     cs::Ranges{{16, 1000}}.grid(64).short_pieces(40, 20, pieces);   // [56, 64), [960, 972)
  void short_pieces(std::int64_t first, std::int64_t count, std::vector<Slice>& out) const {
    const GridIndex& index = *index_;
    if (first < 0 || count < 0 || first > index.short_rows - count)
      detail::throw_config("Ranges::Grid::short_pieces: [{}, {} + {}) must lie in the short rows' [0, {})", first,
                           first, count, index.short_rows);
    if (count == 0) return;
    std::size_t r = index.shorts.find(index.rows_before, first);
    std::int64_t skip = first - index.rows_before[r];
    for (std::int64_t left = count; left > 0; ++r) {
      const Slice range = ranges_[r];
      const GridIndex::Edges e = GridIndex::edges(range, index.chunk_size);
      const std::array<Slice, 2> pieces{Slice{range.start, range.start + e.head},
                                        Slice{range.stop - e.tail, range.stop}};
      for (const Slice& piece : pieces) {
        if (piece.size() <= skip) {
          skip -= piece.size();
          continue;
        }
        const std::int64_t start = piece.start + skip;
        const std::int64_t stop = std::min(piece.stop, start + left);
        out.push_back({start, stop});
        left -= stop - start;
        skip = 0;
        if (left == 0) break;
      }
    }
  }

 private:
  Ranges ranges_;
  std::shared_ptr<const GridIndex> index_;
};

inline Ranges::Grid Ranges::grid(std::int64_t chunk_size) const { return Grid(*this, chunk_size); }

}  // namespace chunksampler
