// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/load_request.hpp>
#include <chunksampler/slice.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The reusable storage of one request: filled in place, so steady state allocates nothing.
struct RequestBuffers {
  std::vector<Slice> chunks;
  std::vector<std::int64_t> positions;
};

/// An epoch whose request `k` can be computed on its own from `k`: the plan of every sampler.
template <class P>
concept RequestPlan = std::copy_constructible<P> && requires(const P& plan, std::int64_t k, RequestBuffers& out) {
  { plan.n_requests() } -> std::same_as<std::int64_t>;
  { plan.batch_size() } -> std::same_as<std::int64_t>;
  { plan.max_chunks() } -> std::same_as<std::int64_t>;
  { plan.max_positions() } -> std::same_as<std::int64_t>;
  plan.fill(k, out);
};

/// The input range `sample()` returns: owns its plan and buffers, and computes request
/// `first`, `first + stride`, ... one at a time into the same buffers.
template <RequestPlan Plan>
class RequestRange {
 public:
  class iterator {
   public:
    using value_type = LoadRequest;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    explicit iterator(RequestRange* range) noexcept : range_(range) {}

    [[nodiscard]] const LoadRequest& operator*() const noexcept { return range_->current_; }
    [[nodiscard]] const LoadRequest* operator->() const noexcept { return &range_->current_; }
    iterator& operator++() {
      range_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    [[nodiscard]] friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return it.at_end();
    }

   private:
    [[nodiscard]] bool at_end() const noexcept { return range_->index_ >= range_->end_; }

    RequestRange* range_ = nullptr;
  };

  /// Requests `first`, `first + stride`, ... of `plan` (`first >= 0`, `stride >= 1`).
  explicit RequestRange(Plan plan, std::int64_t first = 0, std::int64_t stride = 1)
      : plan_(std::move(plan)), index_(first), end_(plan_.n_requests()), stride_(stride) {}

  RequestRange(RequestRange&&) noexcept = default;
  RequestRange& operator=(RequestRange&&) noexcept = default;
  // A copy would share nothing with its iterators' range: forbid it, as std::ranges input views do.
  RequestRange(const RequestRange&) = delete;
  RequestRange& operator=(const RequestRange&) = delete;
  ~RequestRange() = default;

  /// Starts the epoch; call once, as for any input range.
  [[nodiscard]] iterator begin() {
    if (!started_) {
      started_ = true;
      buffers_.chunks.reserve(static_cast<std::size_t>(plan_.max_chunks()));
      buffers_.positions.reserve(static_cast<std::size_t>(plan_.max_positions()));
      load();
    }
    return iterator(this);
  }
  [[nodiscard]] static std::default_sentinel_t end() noexcept { return {}; }

  /// The plan this range walks.
  [[nodiscard]] const Plan& plan() const noexcept { return plan_; }

 private:
  void advance() {
    index_ += stride_;
    load();
  }
  void load() {
    if (index_ >= end_) return;
    plan_.fill(index_, buffers_);
    current_.chunks = std::span<const Slice>(buffers_.chunks);
    current_.splits = Splits(std::span<const std::int64_t>(buffers_.positions), plan_.batch_size());
  }

  Plan plan_;
  std::int64_t index_;
  std::int64_t end_;
  std::int64_t stride_;
  bool started_ = false;
  RequestBuffers buffers_;
  LoadRequest current_;
};

}  // namespace chunksampler::detail
