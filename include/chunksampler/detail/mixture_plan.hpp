// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/request_grid.hpp>
#include <chunksampler/detail/shares.hpp>
#include <chunksampler/plan.hpp>
#include <chunksampler/slice.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// `total` split in proportion to `numerators` by largest remainder: dataset d gets
/// `floor(total * n_d / N)` and the `total - sum` largest remainders one more each, ties to
/// the lower index. The quotas sum to `total`, each within one of its exact share.
[[nodiscard]] inline std::vector<std::int64_t> largest_remainder(std::int64_t total,
                                                                 std::span<const std::uint64_t> numerators) {
  const std::uint64_t sum = std::accumulate(numerators.begin(), numerators.end(), std::uint64_t{0});
  std::vector<std::int64_t> quotas(numerators.size());
  std::vector<std::uint64_t> remainders(numerators.size());
  std::int64_t given = 0;
  for (std::size_t d = 0; d < numerators.size(); ++d) {
    const QuotientRemainder share = mul_div(static_cast<std::uint64_t>(total), numerators[d], sum);
    quotas[d] = static_cast<std::int64_t>(share.quotient);
    remainders[d] = share.remainder;
    given += quotas[d];
  }
  std::vector<std::size_t> order(numerators.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::stable_sort(order, [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  // Fewer than one per dataset are left: each floor loses less than one.
  for (std::int64_t i = 0; i < total - given; ++i) ++quotas[order[static_cast<std::size_t>(i)]];
  return quotas;
}

/// The part of `dataset` that the shard `[a, b)` of a collection of `total` observations
/// designates: the same fraction of every dataset, cut on the dataset's grid of `m = size /
/// chunk_size` whole chunks from its start, chunks `[floor(a * m / total), floor(b * m / total))`.
/// Monotone in `a` and `b`, so disjoint shards give disjoint parts, and shards that tile
/// `[0, total)` give parts that tile the grid: no chunk is cut in two, so every row of the grid
/// is read by some rank. `0 <= a <= b <= total`, `1 <= total <= 2^62`, `chunk_size >= 1`.
[[nodiscard]] inline Slice shard_part(Slice dataset, std::int64_t chunk_size, std::int64_t a, std::int64_t b,
                                      std::int64_t total) noexcept {
  const auto chunks = static_cast<std::uint64_t>(dataset.size() / chunk_size);
  const auto at = [&](std::int64_t x) {
    // The quotient is at most `chunks`, so the product stays within the dataset.
    return dataset.start +
           static_cast<std::int64_t>(
               mul_div(static_cast<std::uint64_t>(x), chunks, static_cast<std::uint64_t>(total)).quotient) *
               chunk_size;
  };
  return {at(a), at(b)};
}

/// What a mixture needs to lay out one epoch; checked before it gets here.
struct MixtureLayout {
  std::vector<Slice> parts;           ///< per dataset, the range it reads (all of it, or a shard's part)
  std::vector<std::uint64_t> shares;  ///< per dataset, its share of the requests (`share_numerators`)
  std::int64_t chunk_size;            ///< rows per chunk
  std::int64_t preload_nchunks;       ///< chunks per request
  std::int64_t batch_size;            ///< positions per batch
  std::int64_t used_obs;              ///< positions the epoch's batches hold
};

/// The keys of one epoch's draws.
struct MixtureKeys {
  std::uint64_t request_order;  ///< which dataset each request slot reads
  std::uint64_t chunk_order;    ///< the order of a dataset's grid, per (dataset, pass)
  std::uint64_t positions;      ///< the shuffle of each request's buffer
};

/// One epoch of a `MixtureSampler` (an `EpochPlan`): `n_requests()` requests of
/// `chunk_size * preload_nchunks` rows, the last holding the rest of `used_obs`, each of them
/// `preload_nchunks` chunks of one dataset.
///
/// Request slot `k` reads the request `pi(k)` of the concatenation of the datasets' quotas, `pi`
/// a uniform keyed permutation of the slots (`KeyedPermutation`): that is dataset d's local
/// request `l = pi(k) - Q_d` (`Q_d` the quotas' prefix sum), found by binary search; the epoch's
/// last slot takes its dataset's last local request. Its chunks are the dataset's chunks
/// `j = l * P + t` of the epoch: pass `p = j / m_d` over the dataset's `m_d` grid chunks, chunk
/// `sigma_d(f_p(j mod m_d))`, where `sigma_d` is the dataset's uniform keyed permutation and
/// `f_p` a keyed `FeistelPermutation` of pass `p` (the identity in pass 0). Each pass is thus a
/// uniform order, whatever `f_p` is, since `sigma_d` is uniform and independent of it. Every
/// request is computed alone in O(request + log D), and a plan holds O(D) (with a table of at
/// most 256 KiB per dataset and one for the slots, built at first use), whatever `n_obs` and
/// the number of requests.
class MixturePlan : public RequestGrid<MixturePlan> {
 public:
  MixturePlan(MixtureLayout layout, const MixtureKeys& keys)
      : layout_(std::move(layout)),
        n_requests_(ceil_div(layout_.used_obs, request_obs())),
        quotas_(largest_remainder(n_requests_, layout_.shares)),
        order_(static_cast<std::uint64_t>(std::max<std::int64_t>(n_requests_, 1)), keys.request_order),
        chunk_key_(keys.chunk_order),
        position_key_(keys.positions) {
    dataset_orders_.reserve(layout_.parts.size());
    for (std::size_t d = 0; d < layout_.parts.size(); ++d)
      dataset_orders_.emplace_back(static_cast<std::uint64_t>(std::max<std::int64_t>(grid(d), 1)),
                                   derive(dataset_key(d), 0));
    prefix_.reserve(quotas_.size() + 1);
    prefix_.push_back(0);
    for (const std::int64_t q : quotas_) prefix_.push_back(prefix_.back() + q);
    if (n_requests_ > 0) last_ = drawn(n_requests_ - 1);
  }

  [[nodiscard]] std::int64_t n_requests() const noexcept { return n_requests_; }
  /// A request lists the chunks its rows need: never more than the epoch's rows fill.
  [[nodiscard]] std::int64_t max_chunks() const noexcept {
    return ceil_div(std::min(request_obs(), layout_.used_obs), layout_.chunk_size);
  }
  [[nodiscard]] std::int64_t max_positions() const noexcept { return std::min(request_obs(), layout_.used_obs); }
  [[nodiscard]] const MixtureLayout& layout() const noexcept { return layout_; }
  /// Requests per dataset: `n_requests()` split by the shares (`largest_remainder`).
  [[nodiscard]] const std::vector<std::int64_t>& quotas() const noexcept { return quotas_; }

  /// Where a request slot reads: its dataset and that dataset's local request.
  struct Assignment {
    std::size_t dataset;
    std::int64_t local;
    friend constexpr bool operator==(const Assignment&, const Assignment&) noexcept = default;
  };
  /// Where request slot `k` reads. The epoch's last slot, the one request that may be short,
  /// is always its dataset's last local request (swapped with the one the bijection gave it):
  /// so a dataset reads a prefix of its chunk sequence, whole passes and then part of one.
  [[nodiscard]] Assignment assignment(std::int64_t k) const {
    Assignment where = drawn(k);
    if (where.dataset != last_.dataset) return where;
    const std::int64_t final_local = quotas_[where.dataset] - 1;
    if (k == n_requests_ - 1) where.local = final_local;
    else if (where.local == final_local) where.local = last_.local;
    return where;
  }

  /// Request `k` (`k < n_requests()`): its chunks, the last cut to the epoch's end, and all its
  /// rows in a uniform random order, batch after batch.
  void fill(std::int64_t k, RequestBuffers& out) const {
    const Assignment where = assignment(k);
    const Slice part = layout_.parts[where.dataset];
    const std::int64_t chunk = layout_.chunk_size;
    const auto grid_chunks = static_cast<std::uint64_t>(grid(where.dataset));
    const std::int64_t rows = std::min(request_obs(), layout_.used_obs - k * request_obs());
    const std::int64_t n_chunks = ceil_div(rows, chunk);
    const KeyedPermutation& sigma = dataset_orders_[where.dataset];

    out.chunks.resize(static_cast<std::size_t>(n_chunks));
    const auto first = static_cast<std::uint64_t>(where.local) * static_cast<std::uint64_t>(layout_.preload_nchunks);
    std::uint64_t pass = first / grid_chunks;
    FeistelPermutation pass_order = pass_permutation(where.dataset, pass);
    for (std::int64_t t = 0; t < n_chunks; ++t) {
      const std::uint64_t j = first + static_cast<std::uint64_t>(t);
      if (j / grid_chunks != pass) {
        pass = j / grid_chunks;
        pass_order = pass_permutation(where.dataset, pass);
      }
      const std::uint64_t in_pass = j % grid_chunks;
      const std::uint64_t slot = sigma(pass == 0 ? in_pass : pass_order(in_pass));
      const std::int64_t start = part.start + static_cast<std::int64_t>(slot) * chunk;
      out.chunks[static_cast<std::size_t>(t)] = {start, start + chunk};
    }
    out.chunks.back().stop -= n_chunks * chunk - rows;

    out.positions.resize(static_cast<std::size_t>(rows));
    std::iota(out.positions.begin(), out.positions.end(), std::int64_t{0});
    Engine engine = make_engine(position_key_, static_cast<std::uint64_t>(k));
    partial_shuffle(engine, std::span<std::int64_t>(out.positions), out.positions.size());
  }

 private:
  // Dataset d's grid chunks, and the key of its orders.
  [[nodiscard]] std::int64_t grid(std::size_t d) const noexcept { return layout_.parts[d].size() / layout_.chunk_size; }
  [[nodiscard]] std::uint64_t dataset_key(std::size_t d) const noexcept {
    return derive(chunk_key_, static_cast<std::uint64_t>(d));
  }
  // f_p: how pass p (>= 1) of dataset d reorders the dataset's permutation sigma_d.
  [[nodiscard]] FeistelPermutation pass_permutation(std::size_t d, std::uint64_t pass) const noexcept {
    return {static_cast<std::uint64_t>(std::max<std::int64_t>(grid(d), 1)), derive(dataset_key(d), pass)};
  }

  // The slot's request as the permutation draws it, before the last slot's swap.
  [[nodiscard]] Assignment drawn(std::int64_t k) const {
    const auto u = static_cast<std::int64_t>(order_(static_cast<std::uint64_t>(k)));
    // The last prefix at or below u: datasets with no quota have empty ranges and are passed over.
    const auto it = std::ranges::upper_bound(prefix_, u) - 1;
    return {static_cast<std::size_t>(it - prefix_.begin()), u - *it};
  }

  MixtureLayout layout_;
  std::int64_t n_requests_;
  std::vector<std::int64_t> quotas_;
  std::vector<std::int64_t> prefix_;
  KeyedPermutation order_;
  std::vector<KeyedPermutation> dataset_orders_;
  Assignment last_{};
  std::uint64_t chunk_key_;
  std::uint64_t position_key_;
};

}  // namespace chunksampler::detail
