// SPDX-License-Identifier: MIT
// sampler.hpp, plan.hpp and dist_info.hpp concepts: the library's samplers and plans satisfy them,
// near misses do not, and any user type that satisfies DistributableSampler (with its own
// EpochPlan) can be wrapped by DistributedSampler, in contiguous and global mode.
#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_concepts {

namespace cs = chunksampler;

namespace {

// --- a minimal user sampler, written only against the public concepts --------------------------

/// One epoch of BlockSampler: `budget` positions over the rows of `range` in order, wrapping
/// around when the budget exceeds the rows; one batch per request.
class BlockPlan {
 public:
  BlockPlan(cs::Slice range, std::int64_t budget, std::int64_t batch_size)
      : range_(range), budget_(budget), batch_size_(batch_size) {}

  [[nodiscard]] std::int64_t n_batches() const { return budget_ / batch_size_ + (budget_ % batch_size_ != 0 ? 1 : 0); }
  [[nodiscard]] std::int64_t n_requests() const { return n_batches(); }
  [[nodiscard]] std::int64_t batch_size() const { return batch_size_; }
  [[nodiscard]] std::int64_t request_of(std::int64_t batch) const { return batch; }
  [[nodiscard]] std::int64_t request_begin(std::int64_t k) const { return std::min(k, n_batches()); }
  [[nodiscard]] std::int64_t max_chunks() const { return batch_size_ / range_.size() + 2; }
  [[nodiscard]] std::int64_t max_positions() const { return batch_size_; }
  void fill(std::int64_t k, cs::RequestBuffers& out) const {
    const std::int64_t from = k * batch_size_;
    const std::int64_t to = std::min(from + batch_size_, budget_);
    out.chunks.clear();
    out.positions.clear();
    for (std::int64_t p = from; p < to;) {
      const std::int64_t row = p % range_.size();
      const std::int64_t length = std::min(to - p, range_.size() - row);
      out.chunks.push_back({range_.start + row, range_.start + row + length});
      p += length;
    }
    for (std::int64_t q = 0; q < to - from; ++q) out.positions.push_back(q);
  }

 private:
  cs::Slice range_;
  std::int64_t budget_;
  std::int64_t batch_size_;
};

/// The requests of one epoch, owned through a shared pointer so the range stays valid on its own.
class OwnedRequests {
 public:
  struct Storage {
    std::vector<cs::RequestBuffers> buffers;
    std::vector<cs::LoadRequest> requests;
  };
  explicit OwnedRequests(std::shared_ptr<const Storage> storage) : storage_(std::move(storage)) {}
  [[nodiscard]] auto begin() const { return storage_->requests.begin(); }
  [[nodiscard]] auto end() const { return storage_->requests.end(); }

 private:
  std::shared_ptr<const Storage> storage_;
};

/// Reads its range in order, one batch per request. Logs the shards DistributedSampler asks for.
class BlockSampler {
 public:
  explicit BlockSampler(std::int64_t batch_size, std::optional<cs::Slice> mask = std::nullopt,
                        std::vector<cs::Shard>* shard_log = nullptr)
      : batch_size_(batch_size), mask_(mask), shard_log_(shard_log) {}

  [[nodiscard]] std::int64_t batch_size() const { return batch_size_; }
  [[nodiscard]] bool shuffle() const { return false; }
  [[nodiscard]] std::optional<cs::Slice> mask() const { return mask_; }
  [[nodiscard]] std::uint64_t epoch() const { return epoch_; }
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }

  void validate(std::int64_t n_obs) const {
    const cs::Slice range = mask_.value_or(cs::Slice{0, n_obs});
    if (n_obs < 0 || range.start < 0 || range.stop > n_obs || range.empty())
      throw std::invalid_argument("BlockSampler: bad n_obs (" + std::to_string(n_obs) + ")");
  }
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const {
    validate(n_obs);
    return budget_.value_or(mask_.value_or(cs::Slice{0, n_obs}).size());
  }
  [[nodiscard]] BlockPlan plan(std::int64_t n_obs, std::uint64_t /*epoch: every epoch is alike*/) const {
    return {mask_.value_or(cs::Slice{0, n_obs}), epoch_size(n_obs), batch_size_};
  }
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs) const { return plan(n_obs, epoch_).n_batches(); }
  [[nodiscard]] OwnedRequests sample(std::int64_t n_obs) {
    const BlockPlan epoch_plan = plan(n_obs, epoch_++);
    auto storage = std::make_shared<OwnedRequests::Storage>();
    storage->buffers.resize(static_cast<std::size_t>(epoch_plan.n_requests()));
    for (std::size_t k = 0; k < storage->buffers.size(); ++k)
      epoch_plan.fill(static_cast<std::int64_t>(k), storage->buffers[k]);
    for (const cs::RequestBuffers& b : storage->buffers)  // spans into vectors that no longer grow
      storage->requests.push_back({.chunks = b.chunks, .splits = cs::Splits(b.positions, batch_size_)});
    return OwnedRequests(std::move(storage));
  }

  [[nodiscard]] BlockSampler with_shard(const cs::Shard& shard) const {
    if (shard_log_ != nullptr) shard_log_->push_back(shard);
    BlockSampler copy = *this;
    copy.mask_ = shard.mask[0];  // one range: the wrapped mask is one
    copy.budget_ = shard.budget;
    return copy;
  }
  [[nodiscard]] std::uint64_t fingerprint() const {
    const cs::Slice m = mask_.value_or(cs::Slice{-1, -1});
    return std::hash<std::string>{}(std::to_string(batch_size_) + "/" + std::to_string(m.start) + "/" +
                                    std::to_string(m.stop) + "/" + std::to_string(budget_.value_or(-1)));
  }

 private:
  std::int64_t batch_size_;
  std::optional<cs::Slice> mask_;
  std::optional<std::int64_t> budget_;
  std::uint64_t epoch_ = 0;
  std::vector<cs::Shard>* shard_log_;
};

/// BlockSampler's plans and nothing else: no `sample`, `n_batches` or epochs, which a
/// DistributedSampler over it drives.
class BlockSource {
 public:
  explicit BlockSource(BlockSampler plans) : plans_(std::move(plans)) {}

  [[nodiscard]] std::int64_t batch_size() const { return plans_.batch_size(); }
  [[nodiscard]] bool shuffle() const { return plans_.shuffle(); }
  [[nodiscard]] std::optional<cs::Slice> mask() const { return plans_.mask(); }
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const { return plans_.epoch_size(n_obs); }
  [[nodiscard]] BlockPlan plan(std::int64_t n_obs, std::uint64_t epoch) const { return plans_.plan(n_obs, epoch); }
  [[nodiscard]] BlockSource with_shard(const cs::Shard& shard) const { return BlockSource(plans_.with_shard(shard)); }
  [[nodiscard]] std::uint64_t fingerprint() const { return plans_.fingerprint(); }

 private:
  BlockSampler plans_;
};

// --- near misses: EpochPlan ------------------------------------------------------------------

/// All of EpochPlan but max_positions and fill.
struct PlanCounts {
  [[nodiscard]] std::int64_t n_batches() const { return 0; }
  [[nodiscard]] std::int64_t n_requests() const { return 0; }
  [[nodiscard]] std::int64_t batch_size() const { return 1; }
  [[nodiscard]] std::int64_t request_of(std::int64_t) const { return 0; }
  [[nodiscard]] std::int64_t request_begin(std::int64_t) const { return 0; }
  [[nodiscard]] std::int64_t max_chunks() const { return 0; }
};
/// All of EpochPlan but fill.
struct PlanWithoutFill : PlanCounts {
  [[nodiscard]] std::int64_t max_positions() const { return 0; }
};
struct CompletePlan : PlanWithoutFill {
  void fill(std::int64_t, cs::RequestBuffers&) const {}
};
/// fill is not const: a const plan cannot fill.
struct MutatingFillPlan : PlanWithoutFill {
  void fill(std::int64_t, cs::RequestBuffers&) {}
};
struct IntCountsPlan : CompletePlan {
  [[nodiscard]] int n_batches() const { return 0; }
};
struct NoMaxPositionsPlan : PlanCounts {
  void fill(std::int64_t, cs::RequestBuffers&) const {}
};
struct NotCopyablePlan : CompletePlan {
  NotCopyablePlan() = default;
  NotCopyablePlan(const NotCopyablePlan&) = delete;
  NotCopyablePlan(NotCopyablePlan&&) = default;
};

// --- near misses: samplers -------------------------------------------------------------------

struct NoSample {
  [[nodiscard]] std::int64_t batch_size() const { return 1; }
  [[nodiscard]] bool shuffle() const { return false; }
  [[nodiscard]] std::int64_t n_batches(std::int64_t) const { return 0; }
  void validate(std::int64_t) const {}
};

struct SampleReturnsInts : NoSample {
  [[nodiscard]] std::vector<int> sample(std::int64_t) { return {}; }
};

struct NoValidate {
  [[nodiscard]] std::int64_t batch_size() const { return 1; }
  [[nodiscard]] bool shuffle() const { return false; }
  [[nodiscard]] std::int64_t n_batches(std::int64_t) const { return 0; }
  [[nodiscard]] std::vector<cs::LoadRequest> sample(std::int64_t) { return {}; }
};

struct BatchSizeIsText : NoSample {
  [[nodiscard]] std::string batch_size() const { return "1"; }
  [[nodiscard]] std::vector<cs::LoadRequest> sample(std::int64_t) { return {}; }
};

// The parts of DistributableSampler beyond Sampler, to leave out one at a time.
struct ASampler : NoSample {
  [[nodiscard]] std::vector<cs::LoadRequest> sample(std::int64_t) { return {}; }
};
struct Epochs {
  [[nodiscard]] std::uint64_t epoch() const { return 0; }
  void set_epoch(std::uint64_t) {}
};
struct Mask {
  [[nodiscard]] std::optional<cs::Slice> mask() const { return std::nullopt; }
};
struct EpochSize {
  [[nodiscard]] std::int64_t epoch_size(std::int64_t n_obs) const { return n_obs; }
};
struct Plan {
  [[nodiscard]] CompletePlan plan(std::int64_t, std::uint64_t) const { return {}; }
};
struct Fingerprint {
  [[nodiscard]] std::uint64_t fingerprint() const { return 0; }
};

/// Everything DistributableSampler asks for: the control the near misses below differ from.
struct Complete : ASampler, Epochs, Mask, EpochSize, Plan, Fingerprint {
  [[nodiscard]] Complete with_shard(const cs::Shard&) const { return {}; }
};
struct NoWithShard : ASampler, Epochs, Mask, EpochSize, Plan, Fingerprint {};
struct WithShardReturnsOtherType : ASampler, Epochs, Mask, EpochSize, Plan, Fingerprint {
  [[nodiscard]] Complete with_shard(const cs::Shard&) const { return {}; }
};
struct NoPlan : ASampler, Epochs, Mask, EpochSize, Fingerprint {
  [[nodiscard]] NoPlan with_shard(const cs::Shard&) const { return {}; }
};
struct PlanIsNotAPlan : ASampler, Epochs, Mask, EpochSize, Fingerprint {
  [[nodiscard]] PlanWithoutFill plan(std::int64_t, std::uint64_t) const { return {}; }
  [[nodiscard]] PlanIsNotAPlan with_shard(const cs::Shard&) const { return {}; }
};
struct NoEpochSize : ASampler, Epochs, Mask, Plan, Fingerprint {
  [[nodiscard]] NoEpochSize with_shard(const cs::Shard&) const { return {}; }
};
struct NoFingerprint : ASampler, Epochs, Mask, EpochSize, Plan {
  [[nodiscard]] NoFingerprint with_shard(const cs::Shard&) const { return {}; }
};
struct NoMask : ASampler, Epochs, EpochSize, Plan, Fingerprint {
  [[nodiscard]] NoMask with_shard(const cs::Shard&) const { return {}; }
};
struct EpochIsInt : ASampler, Mask, EpochSize, Plan, Fingerprint {
  [[nodiscard]] int epoch() const { return 0; }
  void set_epoch(std::uint64_t) {}
  [[nodiscard]] EpochIsInt with_shard(const cs::Shard&) const { return {}; }
};
/// Everything DistributableSampler asks for, except that it cannot be copied.
struct NotCopyable : ASampler, Epochs, Mask, EpochSize, Plan, Fingerprint {
  NotCopyable() = default;
  NotCopyable(const NotCopyable&) = delete;
  NotCopyable(NotCopyable&&) = default;
  [[nodiscard]] NotCopyable with_shard(const cs::Shard&) const { return {}; }
};

cs::DistInfo fixed_info() { return {.rank = 0, .world_size = 2}; }
int int_info() { return 0; }

struct ConvertsToDistInfo {
  operator cs::DistInfo() const { return {.rank = 1, .world_size = 3}; }  // NOLINT(google-explicit-constructor)
};

// What one rank's (or worker's) epoch trains on: every batch as observation ids.
struct Trained {
  std::vector<std::vector<std::int64_t>> batches;
  std::map<std::int64_t, int> counts;  // observation -> times drawn
};

template <class Range>
Trained train(Range&& range) {
  Trained t;
  for (const cs::LoadRequest& request : range) {
    REQUIRE_FALSE(request.chunks.empty());
    for (const std::span<const std::int64_t> batch : request.splits) {
      std::vector<std::int64_t>& obs = t.batches.emplace_back();
      for (const std::int64_t p : batch) {
        REQUIRE(p >= 0);
        REQUIRE(p < request.buffer_size());
        std::int64_t offset = 0;
        for (const cs::Slice& chunk : request.chunks) {
          if (p < offset + chunk.size()) {
            obs.push_back(chunk.start + (p - offset));
            break;
          }
          offset += chunk.size();
        }
        ++t.counts[obs.back()];
      }
    }
  }
  return t;
}

}  // namespace

TEST_CASE("the library's samplers satisfy Sampler", "[concepts]") {
  STATIC_REQUIRE(cs::Sampler<cs::RandomSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::SequentialSampler>>);

  STATIC_REQUIRE(cs::HasEpochs<cs::RandomSampler>);
  STATIC_REQUIRE(cs::HasEpochs<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::HasEpochs<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::RandomSampler::range_type>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::SequentialSampler::range_type>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::DistributedSampler<cs::RandomSampler>::range_type>);
  STATIC_REQUIRE(cs::LoadRequestRange<std::vector<cs::LoadRequest>>);
  STATIC_REQUIRE(cs::LoadRequestRange<const std::vector<cs::LoadRequest>&>);
}

TEST_CASE("EpochPlan: the library's plan satisfies it, near misses do not", "[concepts]") {
  STATIC_REQUIRE(cs::EpochPlan<cs::detail::ChunkPlan>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<const cs::RandomSampler&>().plan(1, 0)), cs::detail::ChunkPlan>);
  STATIC_REQUIRE(cs::EpochPlan<CompletePlan>);
  STATIC_REQUIRE(cs::EpochPlan<BlockPlan>);

  STATIC_REQUIRE_FALSE(cs::EpochPlan<PlanWithoutFill>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<MutatingFillPlan>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<IntCountsPlan>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<NoMaxPositionsPlan>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<NotCopyablePlan>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<int>);
  STATIC_REQUIRE_FALSE(cs::EpochPlan<cs::RandomSampler>);
}

TEST_CASE("Random and Sequential samplers are DistributableSampler, DistributedSampler is not", "[concepts]") {
  STATIC_REQUIRE(cs::DistributableSampler<cs::RandomSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::Plannable<cs::RandomSampler>);
  STATIC_REQUIRE(cs::Plannable<cs::SequentialSampler>);
  // A DistributedSampler has no plan of its own and cannot be restricted to a further shard
  // (no with_shard), so it cannot be wrapped again.
  STATIC_REQUIRE_FALSE(cs::Plannable<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<cs::DistributedSampler<cs::SequentialSampler>>);
}

TEST_CASE("the class samplers are DistributableSampler, with their own EpochPlan", "[concepts]") {
  STATIC_REQUIRE(cs::DistributableSampler<cs::ClassSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::WeightedClassSampler>);
  STATIC_REQUIRE(cs::EpochPlan<cs::ClassPlan>);
  STATIC_REQUIRE(cs::EpochPlan<cs::WeightedClassPlan>);
  STATIC_REQUIRE(
      std::same_as<decltype(std::declval<const cs::WeightedClassSampler&>().plan(1, 0)), cs::WeightedClassPlan>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::WeightedClassSampler>>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<cs::DistributedSampler<cs::WeightedClassSampler>>);
}

TEST_CASE("near misses do not satisfy the concepts", "[concepts]") {
  STATIC_REQUIRE_FALSE(cs::Sampler<int>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<int>);
  STATIC_REQUIRE_FALSE(cs::HasBatchSize<int>);
  STATIC_REQUIRE_FALSE(cs::LoadRequestRange<int>);
  STATIC_REQUIRE_FALSE(cs::LoadRequestRange<std::vector<int>>);
  STATIC_REQUIRE_FALSE(cs::LoadRequestRange<std::vector<cs::Slice>>);

  STATIC_REQUIRE(cs::CountsBatches<NoSample>);
  STATIC_REQUIRE_FALSE(cs::ProducesRequests<NoSample>);
  STATIC_REQUIRE_FALSE(cs::Sampler<NoSample>);

  STATIC_REQUIRE_FALSE(cs::ProducesRequests<SampleReturnsInts>);
  STATIC_REQUIRE_FALSE(cs::Sampler<SampleReturnsInts>);

  STATIC_REQUIRE(cs::ProducesRequests<NoValidate>);
  STATIC_REQUIRE_FALSE(cs::CountsBatches<NoValidate>);
  STATIC_REQUIRE_FALSE(cs::Sampler<NoValidate>);

  STATIC_REQUIRE_FALSE(cs::HasBatchSize<BatchSizeIsText>);
  STATIC_REQUIRE_FALSE(cs::Sampler<BatchSizeIsText>);

  // the control: every part present
  STATIC_REQUIRE(cs::Sampler<Complete>);
  STATIC_REQUIRE(cs::HasEpochs<Complete>);
  STATIC_REQUIRE(cs::Plannable<Complete>);
  STATIC_REQUIRE(cs::DistributableSampler<Complete>);

  // each near miss lacks one part (and is still a Sampler)
  STATIC_REQUIRE(cs::Sampler<NoWithShard>);
  STATIC_REQUIRE(cs::HasEpochs<NoWithShard>);
  STATIC_REQUIRE_FALSE(cs::Plannable<NoWithShard>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoWithShard>);

  STATIC_REQUIRE_FALSE(cs::Plannable<WithShardReturnsOtherType>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<WithShardReturnsOtherType>);

  STATIC_REQUIRE(cs::Sampler<NoPlan>);
  STATIC_REQUIRE_FALSE(cs::Plannable<NoPlan>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoPlan>);

  STATIC_REQUIRE_FALSE(cs::Plannable<PlanIsNotAPlan>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<PlanIsNotAPlan>);

  STATIC_REQUIRE_FALSE(cs::Plannable<NoEpochSize>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoEpochSize>);

  STATIC_REQUIRE_FALSE(cs::Plannable<NoFingerprint>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoFingerprint>);

  STATIC_REQUIRE_FALSE(cs::Plannable<NoMask>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoMask>);

  // Epochs are not asked for: the DistributedSampler drives them.
  STATIC_REQUIRE(cs::Plannable<EpochIsInt>);
  STATIC_REQUIRE_FALSE(cs::HasEpochs<EpochIsInt>);
  STATIC_REQUIRE(cs::DistributableSampler<EpochIsInt>);

  STATIC_REQUIRE(cs::Sampler<NotCopyable>);
  STATIC_REQUIRE(cs::HasEpochs<NotCopyable>);
  STATIC_REQUIRE(cs::Plannable<NotCopyable>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NotCopyable>);
}

TEST_CASE("a user-defined sampler with its own EpochPlan can be distributed", "[concepts]") {
  STATIC_REQUIRE(cs::Sampler<BlockSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<BlockSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<BlockSampler>>);
  STATIC_REQUIRE(cs::HasEpochs<cs::DistributedSampler<BlockSampler>>);

  std::vector<cs::Shard> shards;
  const BlockSampler base(10, std::nullopt, &shards);
  constexpr std::int64_t n_obs = 105;

  SECTION("on its own") {
    BlockSampler plain = base;
    REQUIRE(plain.n_batches(n_obs) == 11);
    const Trained t = train(plain.sample(n_obs));
    REQUIRE(t.batches.size() == 11);
    REQUIRE(t.batches.front() == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    REQUIRE(t.batches.back() == std::vector<std::int64_t>{100, 101, 102, 103, 104});
    REQUIRE(plain.epoch() == 1);
    REQUIRE(shards.empty());
  }

  SECTION("contiguous shards") {
    // 105 / 3 = 35 per rank, 30 in whole batches: rank r reads [30r, 30r + 30), the tail is left out
    std::map<std::int64_t, int> all;
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      cs::DistributedSampler dist(base, cs::DistInfo{.rank = rank, .world_size = 3});
      STATIC_REQUIRE(std::same_as<decltype(dist), cs::DistributedSampler<BlockSampler>>);
      REQUIRE(dist.batch_size() == 10);
      REQUIRE_FALSE(dist.shuffle());
      const cs::Slice shard{rank * 30, rank * 30 + 30};
      REQUIRE(dist.shard(n_obs) == shard);
      REQUIRE(dist.n_batches(n_obs) == 3);
      shards.clear();
      const Trained t = train(dist.sample(n_obs));
      REQUIRE(t.batches.size() == 3);
      for (const auto& [obs, times] : t.counts) {
        REQUIRE(shard.contains(obs));
        REQUIRE(times == 1);
        REQUIRE(++all[obs] == 1);  // disjoint across ranks
      }
      REQUIRE(t.counts.size() == 30);
      // DistributedSampler asked the user's sampler for this rank's shard, on the rank's stream
      REQUIRE_FALSE(shards.empty());
      for (const cs::Shard& s : shards) {
        CHECK(s.mask == shard);
        CHECK(s.stream == static_cast<std::uint64_t>(rank));
        CHECK(s.budget == 30);
      }
      // the epoch moved on in the DistributedSampler only
      REQUIRE(dist.epoch() == 1);
      REQUIRE(dist.sampler().epoch() == 0);
    }
    REQUIRE(all.size() == 90);
    REQUIRE(base.epoch() == 0);
    REQUIRE_FALSE(base.mask().has_value());
  }

  SECTION("a global shuffle, with a mask") {
    // mask [5, 100): 95 observations, 90 kept in whole batches for 3 ranks, dealt 3 batches each
    const BlockSampler masked(10, cs::Slice{5, 100}, &shards);
    std::map<std::int64_t, int> all;
    std::vector<std::int64_t> batch_counts;
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      cs::DistributedSampler dist(masked, cs::DistInfo{.rank = rank, .world_size = 3}, {.mode = cs::ShardMode::global});
      shards.clear();
      const Trained t = train(dist.sample(n_obs));
      batch_counts.push_back(static_cast<std::int64_t>(t.batches.size()));
      for (const auto& [obs, times] : t.counts) {
        REQUIRE((obs >= 5 && obs < 100));
        REQUIRE(times == 1);
        REQUIRE(++all[obs] == 1);  // disjoint across ranks
      }
      REQUIRE_FALSE(shards.empty());
      for (const cs::Shard& s : shards) {
        CHECK(s.mask == cs::Slice{5, 95});
        CHECK(s.stream == ~std::uint64_t{0});  // one stream for all ranks
        CHECK(s.budget == 90);
      }
      // workers split the rank's stream: their union is its epoch
      std::map<std::int64_t, int> workers;
      for (std::int64_t id = 0; id < 2; ++id) {
        cs::DistributedSampler copy(masked, cs::DistInfo{.rank = rank, .world_size = 3},
                                    {.mode = cs::ShardMode::global});
        for (const auto& [obs, times] : train(copy.sample(n_obs, cs::WorkerInfo{.id = id, .num_workers = 2})).counts)
          workers[obs] += times;
      }
      CHECK(workers == t.counts);
    }
    REQUIRE(batch_counts == std::vector<std::int64_t>{3, 3, 3});
    REQUIRE(all.size() == 90);
  }

  SECTION("padding repeats the user's rows, resume works on its plan") {
    // balanced shards of 35; every rank yields ceil(35 / 10) = 4 full batches
    std::map<std::int64_t, int> all;
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      const auto make = [&] {
        return cs::DistributedSampler(base, cs::DistInfo{.rank = rank, .world_size = 3},
                                      {.remainder = cs::Remainder::pad});
      };
      auto dist = make();
      const Trained t = train(dist.sample(n_obs));
      REQUIRE(t.batches.size() == 4);
      for (const auto& b : t.batches) REQUIRE(b.size() == 10);
      for (const auto& [obs, times] : t.counts) {
        REQUIRE(cs::Slice{rank * 35, rank * 35 + 35}.contains(obs));
        all[obs] += times;
      }
      auto resumed = make();
      resumed.restore(cs::SamplerState::parse(dist.state(1).to_string()));
      const Trained rest = train(resumed.sample(n_obs));
      REQUIRE(rest.batches == std::vector<std::vector<std::int64_t>>(t.batches.begin() + 1, t.batches.end()));
    }
    REQUIRE(all.size() == 105);  // nothing left out
  }

  SECTION("without equal batches, and its own validation") {
    cs::DistributedSampler loose(base, cs::DistInfo{.rank = 1, .world_size = 2}, {.enforce_equal_batches = false});
    REQUIRE(loose.shard(n_obs) == cs::Slice{52, 104});
    REQUIRE(loose.n_batches(n_obs) == 6);
    const Trained t = train(loose.sample(n_obs));
    REQUIRE(t.batches.size() == 6);
    REQUIRE(t.batches.back().size() == 2);
    cs::DistributedSampler dist(base, cs::DistInfo{.rank = 1, .world_size = 2});
    REQUIRE_THROWS_AS(dist.n_batches(-1), std::invalid_argument);
  }
}

TEST_CASE("a source of plans alone, without sample() or epochs, can be distributed", "[concepts]") {
  STATIC_REQUIRE_FALSE(cs::Sampler<BlockSource>);
  STATIC_REQUIRE_FALSE(cs::HasEpochs<BlockSource>);
  STATIC_REQUIRE(cs::DistributableSampler<BlockSource>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<BlockSource>>);

  constexpr std::int64_t n_obs = 105;
  for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      INFO("mode " << static_cast<int>(mode) << ", rank " << rank);
      const cs::DistInfo info{.rank = rank, .world_size = 3};
      cs::DistributedSampler from_source(BlockSource(BlockSampler(10, cs::Slice{5, 100})), info, {.mode = mode});
      cs::DistributedSampler from_sampler(BlockSampler(10, cs::Slice{5, 100}), info, {.mode = mode});
      REQUIRE(from_source.epoch() == 0);
      REQUIRE(from_source.n_batches(n_obs) == from_sampler.n_batches(n_obs));
      for (int epoch = 0; epoch < 2; ++epoch) {
        const Trained a = train(from_source.sample(n_obs));
        const Trained b = train(from_sampler.sample(n_obs));
        REQUIRE_FALSE(a.batches.empty());
        REQUIRE(a.batches == b.batches);
      }
      REQUIRE(from_source.epoch() == 2);
      // the driver's state and restore work over the source alone
      const cs::SamplerState start = from_source.next_state();
      const Trained again = train(from_source.sample(n_obs));
      from_source.restore(start);
      REQUIRE(train(from_source.sample(n_obs)).batches == again.batches);
    }
  }
}

TEST_CASE("DistInfoSource: callables returning DistInfo", "[concepts]") {
  const auto lambda = [] { return cs::DistInfo{.rank = 0, .world_size = 1}; };
  const auto returns_int = [] { return 1; };
  const auto takes_argument = [](int rank) { return cs::DistInfo{.rank = rank, .world_size = 4}; };
  STATIC_REQUIRE(cs::DistInfoSource<decltype(lambda)>);
  STATIC_REQUIRE(cs::DistInfoSource<cs::DistInfo (*)()>);
  STATIC_REQUIRE(cs::DistInfoSource<decltype(&fixed_info)>);
  STATIC_REQUIRE(cs::DistInfoSource<std::function<cs::DistInfo()>>);
  STATIC_REQUIRE(cs::DistInfoSource<cs::dist::EnvDistInfo>);
  STATIC_REQUIRE(cs::DistInfoSource<decltype(cs::dist::from_env())>);
  STATIC_REQUIRE(cs::DistInfoSource<ConvertsToDistInfo (*)()>);  // a result convertible to DistInfo

  STATIC_REQUIRE_FALSE(cs::DistInfoSource<decltype(returns_int)>);
  STATIC_REQUIRE_FALSE(cs::DistInfoSource<decltype(&int_info)>);
  STATIC_REQUIRE_FALSE(cs::DistInfoSource<int (*)()>);
  STATIC_REQUIRE_FALSE(cs::DistInfoSource<decltype(takes_argument)>);
  STATIC_REQUIRE_FALSE(cs::DistInfoSource<cs::DistInfo>);  // a value, not a source
  STATIC_REQUIRE_FALSE(cs::DistInfoSource<int>);

  // each kind of source constructs a DistributedSampler
  const cs::SequentialSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  REQUIRE(cs::DistributedSampler(base, lambda).world_size() == 1);
  REQUIRE(cs::DistributedSampler(base, &fixed_info).world_size() == 2);
  REQUIRE(cs::DistributedSampler(base, std::function<cs::DistInfo()>(fixed_info)).rank() == 0);
  REQUIRE(cs::DistributedSampler(base, [] { return ConvertsToDistInfo{}; }).rank() == 1);
  REQUIRE(cs::DistributedSampler(base, cs::DistInfo{.rank = 2, .world_size = 3}).rank() == 2);
  // int_info is referenced so the negative check above is on a real function
  REQUIRE(int_info() == 0);
}

}  // namespace test_concepts
