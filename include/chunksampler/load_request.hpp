// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/slice.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <span>

namespace chunksampler {

/// The batches of one request: consecutive `batch_size`-long runs of one flat position
/// buffer, the last possibly shorter. A random-access view of `std::span<const std::int64_t>`
/// over memory owned by the sampler's range; it allocates nothing.
class Splits {
 public:
  /// A random-access iterator whose value is one batch; it does not refer to the `Splits`.
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = std::span<const std::int64_t>;
    using difference_type = std::ptrdiff_t;
    using reference = value_type;

    iterator() = default;
    iterator(std::span<const std::int64_t> positions, std::size_t batch_size, difference_type index) noexcept
        : positions_(positions), batch_size_(batch_size), index_(index) {}

    [[nodiscard]] value_type operator*() const noexcept { return batch(positions_, batch_size_, index_); }
    [[nodiscard]] value_type operator[](difference_type n) const noexcept {
      return batch(positions_, batch_size_, index_ + n);
    }
    iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++index_;
      return old;
    }
    iterator& operator--() noexcept {
      --index_;
      return *this;
    }
    iterator operator--(int) noexcept {
      iterator old = *this;
      --index_;
      return old;
    }
    iterator& operator+=(difference_type n) noexcept {
      index_ += n;
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept {
      index_ -= n;
      return *this;
    }
    [[nodiscard]] friend iterator operator+(iterator it, difference_type n) noexcept { return it += n; }
    [[nodiscard]] friend iterator operator+(difference_type n, iterator it) noexcept { return it += n; }
    [[nodiscard]] friend iterator operator-(iterator it, difference_type n) noexcept { return it -= n; }
    [[nodiscard]] friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return a.index_ - b.index_;
    }
    [[nodiscard]] friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.index_ == b.index_; }
    [[nodiscard]] friend auto operator<=>(const iterator& a, const iterator& b) noexcept {
      return a.index_ <=> b.index_;
    }

   private:
    std::span<const std::int64_t> positions_{};
    std::size_t batch_size_ = 0;
    difference_type index_ = 0;
  };

  Splits() = default;
  /// Views `positions` as batches of `batch_size` (>= 1).
  Splits(std::span<const std::int64_t> positions, std::int64_t batch_size) noexcept
      : positions_(positions), batch_size_(static_cast<std::size_t>(batch_size)) {}

  [[nodiscard]] iterator begin() const noexcept { return {positions_, batch_size_, 0}; }
  [[nodiscard]] iterator end() const noexcept { return {positions_, batch_size_, static_cast<std::ptrdiff_t>(size())}; }
  /// Number of batches.
  [[nodiscard]] std::size_t size() const noexcept {
    return batch_size_ == 0 ? 0 : (positions_.size() + batch_size_ - 1) / batch_size_;
  }
  /// True when there is no batch.
  [[nodiscard]] bool empty() const noexcept { return positions_.empty(); }
  /// Batch `i` (`i < size()`).
  [[nodiscard]] std::span<const std::int64_t> operator[](std::ptrdiff_t i) const noexcept {
    return batch(positions_, batch_size_, i);
  }
  /// All positions of all batches, batch after batch.
  [[nodiscard]] std::span<const std::int64_t> positions() const noexcept { return positions_; }
  /// The length of every batch but possibly the last.
  [[nodiscard]] std::int64_t batch_size() const noexcept { return static_cast<std::int64_t>(batch_size_); }

 private:
  [[nodiscard]] static std::span<const std::int64_t> batch(std::span<const std::int64_t> positions,
                                                           std::size_t batch_size, std::ptrdiff_t i) noexcept {
    const std::size_t first = static_cast<std::size_t>(i) * batch_size;
    const std::size_t rest = positions.size() - first;
    return positions.subspan(first, rest < batch_size ? rest : batch_size);
  }

  std::span<const std::int64_t> positions_{};
  std::size_t batch_size_ = 0;
};

/// One read plan: which observation ranges to load, and how the buffer they make splits into batches.
///
/// The loader reads every chunk, concatenates them in the listed order into one buffer, and
/// forms batch `b` from the buffer rows `splits[b]`. A `LoadRequest` yielded by a sampler views
/// memory the sampler's range owns: it stays valid until that range's iterator advances.
///
///     for (const cs::LoadRequest& request : sampler.sample(n_obs))
///       for (std::span<const std::int64_t> batch : request.splits) train_on(buffer_rows(batch));
struct LoadRequest {
  std::span<const Slice> chunks;  ///< contiguous observation ranges, in buffer order
  Splits splits;                  ///< batches as positions into the concatenated buffer

  /// Rows in the concatenated buffer: the sum of the chunk sizes.
  [[nodiscard]] std::int64_t buffer_size() const noexcept {
    std::int64_t total = 0;
    for (const Slice& chunk : chunks) total += chunk.size();
    return total;
  }
};

}  // namespace chunksampler

// `Splits` is a cheap view whose iterators do not refer to it. (Doxygen, which reads these as
// undeclared std names, skips them: docs/Doxyfile defines CHUNKSAMPLER_DOXYGEN.)
#ifndef CHUNKSAMPLER_DOXYGEN
template <>
inline constexpr bool std::ranges::enable_borrowed_range<chunksampler::Splits> = true;
template <>
inline constexpr bool std::ranges::enable_view<chunksampler::Splits> = true;
#endif
