// sampler.hpp and dist_info.hpp concepts: the library's samplers satisfy them, near misses do not,
// and any user type that satisfies DistributableSampler can be wrapped by DistributedSampler.
#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

// --- a minimal user sampler ------------------------------------------------------------------

/// The requests of one epoch, owned through a shared pointer so the range stays valid on its own.
class OwnedRequests {
 public:
  struct Storage {
    std::vector<cs::Slice> chunks;
    std::vector<std::int64_t> positions;
    std::vector<cs::LoadRequest> requests;
  };
  explicit OwnedRequests(std::shared_ptr<const Storage> storage) : storage_(std::move(storage)) {}
  [[nodiscard]] auto begin() const { return storage_->requests.begin(); }
  [[nodiscard]] auto end() const { return storage_->requests.end(); }

 private:
  std::shared_ptr<const Storage> storage_;
};

/// Reads its range in order, one batch-long chunk per request. Written only against the concepts.
class BlockSampler {
 public:
  explicit BlockSampler(std::int64_t batch_size, std::vector<cs::Shard>* shard_log = nullptr)
      : batch_size_(batch_size), shard_log_(shard_log) {}

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
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs) const {
    validate(n_obs);
    const std::int64_t size = mask_.value_or(cs::Slice{0, n_obs}).size();
    return size / batch_size_ + (size % batch_size_ != 0 ? 1 : 0);
  }
  [[nodiscard]] OwnedRequests sample(std::int64_t n_obs) {
    validate(n_obs);
    ++epoch_;
    const cs::Slice range = mask_.value_or(cs::Slice{0, n_obs});
    auto storage = std::make_shared<OwnedRequests::Storage>();
    for (std::int64_t start = range.start; start < range.stop; start += batch_size_)
      storage->chunks.push_back({start, std::min(start + batch_size_, range.stop)});
    for (std::int64_t p = 0; p < batch_size_; ++p) storage->positions.push_back(p);
    for (const cs::Slice& chunk : storage->chunks)  // spans into vectors that no longer grow
      storage->requests.push_back(
          {.chunks = std::span<const cs::Slice>(&chunk, 1),
           .splits = cs::Splits(std::span<const std::int64_t>(storage->positions)
                                    .first(static_cast<std::size_t>(chunk.size())),
                                batch_size_)});
    return OwnedRequests(std::move(storage));
  }

  [[nodiscard]] BlockSampler with_shard(const cs::Shard& shard) const {
    if (shard_log_ != nullptr) shard_log_->push_back(shard);
    BlockSampler copy = *this;
    copy.mask_ = shard.mask;
    return copy;
  }

 private:
  std::int64_t batch_size_;
  std::optional<cs::Slice> mask_;
  std::uint64_t epoch_ = 0;
  std::vector<cs::Shard>* shard_log_;
};

// --- near misses -----------------------------------------------------------------------------

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

/// A complete Sampler with epochs and a mask, but no with_shard.
struct NoWithShard : NoSample {
  [[nodiscard]] std::vector<cs::LoadRequest> sample(std::int64_t) { return {}; }
  [[nodiscard]] std::uint64_t epoch() const { return 0; }
  void set_epoch(std::uint64_t) {}
  [[nodiscard]] std::optional<cs::Slice> mask() const { return std::nullopt; }
};

struct WithShardReturnsOtherType : NoWithShard {
  [[nodiscard]] NoWithShard with_shard(const cs::Shard&) const { return {}; }
};

struct EpochIsInt : NoSample {
  [[nodiscard]] std::vector<cs::LoadRequest> sample(std::int64_t) { return {}; }
  [[nodiscard]] int epoch() const { return 0; }
  void set_epoch(std::uint64_t) {}
  [[nodiscard]] std::optional<cs::Slice> mask() const { return std::nullopt; }
  [[nodiscard]] EpochIsInt with_shard(const cs::Shard&) const { return {}; }
};

/// Everything DistributableSampler asks for, except that it cannot be copied.
struct NotCopyable : NoWithShard {
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

}  // namespace

TEST_CASE("the library's samplers satisfy Sampler", "[concepts]") {
  STATIC_REQUIRE(cs::Sampler<cs::RandomSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<cs::SequentialSampler>>);

  STATIC_REQUIRE(cs::HasEpochs<cs::RandomSampler>);
  STATIC_REQUIRE(cs::HasEpochs<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::RandomSampler::range_type>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::SequentialSampler::range_type>);
  STATIC_REQUIRE(cs::LoadRequestRange<std::vector<cs::LoadRequest>>);
  STATIC_REQUIRE(cs::LoadRequestRange<const std::vector<cs::LoadRequest>&>);
}

TEST_CASE("Random and Sequential samplers are DistributableSampler, DistributedSampler is not", "[concepts]") {
  STATIC_REQUIRE(cs::DistributableSampler<cs::RandomSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<cs::SequentialSampler>);
  STATIC_REQUIRE(cs::Shardable<cs::RandomSampler>);
  STATIC_REQUIRE(cs::Shardable<cs::SequentialSampler>);
  // A DistributedSampler cannot be restricted to a further shard (it has no with_shard), so it
  // cannot be wrapped again.
  STATIC_REQUIRE_FALSE(cs::Shardable<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<cs::DistributedSampler<cs::RandomSampler>>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<cs::DistributedSampler<cs::SequentialSampler>>);
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

  STATIC_REQUIRE(cs::Sampler<NoWithShard>);
  STATIC_REQUIRE(cs::HasEpochs<NoWithShard>);
  STATIC_REQUIRE_FALSE(cs::Shardable<NoWithShard>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NoWithShard>);

  STATIC_REQUIRE_FALSE(cs::Shardable<WithShardReturnsOtherType>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<WithShardReturnsOtherType>);

  STATIC_REQUIRE(cs::Shardable<EpochIsInt>);
  STATIC_REQUIRE_FALSE(cs::HasEpochs<EpochIsInt>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<EpochIsInt>);

  STATIC_REQUIRE(cs::Sampler<NotCopyable>);
  STATIC_REQUIRE(cs::Shardable<NotCopyable>);
  STATIC_REQUIRE_FALSE(cs::DistributableSampler<NotCopyable>);
}

TEST_CASE("a user-defined sampler can be distributed", "[concepts]") {
  STATIC_REQUIRE(cs::Sampler<BlockSampler>);
  STATIC_REQUIRE(cs::DistributableSampler<BlockSampler>);
  STATIC_REQUIRE(cs::Sampler<cs::DistributedSampler<BlockSampler>>);

  std::vector<cs::Shard> shards;
  BlockSampler base(10, &shards);
  cs::DistributedSampler dist(base, cs::DistInfo{.rank = 1, .world_size = 2});
  STATIC_REQUIRE(std::same_as<decltype(dist), cs::DistributedSampler<BlockSampler>>);

  REQUIRE(dist.batch_size() == 10);
  REQUIRE_FALSE(dist.shuffle());
  REQUIRE(dist.shard(105) == cs::Slice{50, 100});  // 52 per rank, rounded down to whole batches
  REQUIRE(dist.n_batches(105) == 5);

  shards.clear();
  std::vector<cs::Slice> chunks;
  std::int64_t batches = 0;
  for (const cs::LoadRequest& request : dist.sample(105)) {
    chunks.insert(chunks.end(), request.chunks.begin(), request.chunks.end());
    for (const auto batch : request.splits) {
      ++batches;
      for (const std::int64_t p : batch) REQUIRE(p < request.buffer_size());
    }
  }
  REQUIRE(chunks == std::vector<cs::Slice>{{50, 60}, {60, 70}, {70, 80}, {80, 90}, {90, 100}});
  REQUIRE(batches == 5);

  // DistributedSampler asked the user's sampler for this rank's shard
  REQUIRE_FALSE(shards.empty());
  for (const cs::Shard& shard : shards) {
    REQUIRE(shard.mask == cs::Slice{50, 100});
    REQUIRE(shard.rank == 1);
    REQUIRE(shard.world_size == 2);
    REQUIRE(shard.equal_batches);
  }
  // the epoch moved on in the wrapped copy only
  REQUIRE(dist.epoch() == 1);
  REQUIRE(base.epoch() == 0);
  REQUIRE_FALSE(base.mask().has_value());

  // without equal batches the user's sampler gets the raw share and its last batch is short
  cs::DistributedSampler loose(base, cs::DistInfo{.rank = 1, .world_size = 2}, {.enforce_equal_batches = false});
  REQUIRE(loose.shard(105) == cs::Slice{52, 104});
  REQUIRE(loose.n_batches(105) == 6);
  // and its own validation still applies
  REQUIRE_THROWS_AS(dist.n_batches(-1), std::invalid_argument);
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
