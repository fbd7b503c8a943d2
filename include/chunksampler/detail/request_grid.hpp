// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>

#include <algorithm>
#include <cstdint>

namespace chunksampler::detail {

/// What every plan shares: an epoch's `used_obs` positions cut into batches of `batch_size`,
/// grouped into requests of `chunk_size * preload_nchunks` rows, every request but the last
/// full (`EpochPlan`'s requirements 1 and 2). `Derived` provides `layout()`, with those four
/// fields, and `n_requests()`.
template <class Derived>
class RequestGrid {
 public:
  /// Rows of every request but the last.
  [[nodiscard]] std::int64_t request_obs() const noexcept {
    return self().layout().chunk_size * self().layout().preload_nchunks;
  }
  [[nodiscard]] std::int64_t n_batches() const noexcept {
    return ceil_div(self().layout().used_obs, self().layout().batch_size);
  }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return self().layout().batch_size; }
  [[nodiscard]] std::int64_t request_of(std::int64_t batch) const noexcept {
    return std::min(batch / batches_per_request(), self().n_requests() - 1);
  }
  [[nodiscard]] std::int64_t request_begin(std::int64_t k) const noexcept {
    return k >= self().n_requests() ? n_batches() : k * batches_per_request();
  }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
  [[nodiscard]] std::int64_t batches_per_request() const noexcept { return request_obs() / self().layout().batch_size; }
};

}  // namespace chunksampler::detail
