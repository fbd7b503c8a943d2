// SPDX-License-Identifier: MIT
// <chunksampler/torch.hpp> against libtorch's own contract: the adapter's batches are the
// sampler's, reset() moves epochs, save/load through torch::serialize resumes batch for batch,
// and a real DataLoader with worker threads reads each chunk once and each index once per epoch.

#include <chunksampler/torch.hpp>

#include <chunksampler.hpp>

#include <catch2/catch.hpp>
#include <pcg_random.hpp>
#include <torch/data/dataloader.h>
#include <torch/data/samplers/serialize.h>
#include <torch/serialize.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <ostream>
#include <set>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

namespace {

namespace cs = chunksampler;

/// One batch as a loader sees it: its request's chunks and its global indices.
struct SeenBatch {
  std::vector<cs::Slice> chunks;
  std::vector<std::int64_t> indices;
  friend bool operator==(const SeenBatch&, const SeenBatch&) = default;
  // Catch prints vectors through glog's stream operators (libtorch includes them), which need this.
  friend std::ostream& operator<<(std::ostream& out, const SeenBatch& batch) {
    out << "{chunks";
    for (const cs::Slice chunk : batch.chunks) out << " [" << chunk.start << ", " << chunk.stop << ")";
    out << ", indices";
    for (const std::int64_t i : batch.indices) out << ' ' << i;
    return out << '}';
  }
};

// The batches of the sampler's next epoch, iterated directly.
template <class S>
std::vector<SeenBatch> direct(S& sampler, std::int64_t n_obs) {
  std::vector<SeenBatch> result;
  for (const cs::LoadRequest& request : sampler.sample(n_obs)) {
    std::vector<std::int64_t> rows;
    for (const cs::Slice chunk : request.chunks)
      for (std::int64_t i = chunk.start; i < chunk.stop; ++i) rows.push_back(i);
    for (const std::span<const std::int64_t> batch : request.splits) {
      SeenBatch seen{{request.chunks.begin(), request.chunks.end()}, {}};
      for (const std::int64_t p : batch) seen.indices.push_back(rows[static_cast<std::size_t>(p)]);
      result.push_back(std::move(seen));
    }
  }
  return result;
}

// The rest of the adapter's epoch, asked for as libtorch's DataLoader asks.
template <class A>
std::vector<SeenBatch> drain(A& adapter, std::int64_t batch_size) {
  std::vector<SeenBatch> result;
  while (auto batch = adapter.next(static_cast<std::size_t>(batch_size)))
    result.push_back({{batch->chunks().begin(), batch->chunks().end()}, batch->indices()});
  return result;
}

// Same epochs through the adapter as directly, for two epochs.
template <class S>
void check_same_batches(const S& sampler, std::int64_t n_obs) {
  S reference = sampler;
  auto adapter = cs::torch::adapt(sampler, n_obs);
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::vector<SeenBatch> expected = direct(reference, n_obs);
    adapter.reset();
    const std::vector<SeenBatch> got = drain(adapter, sampler.batch_size());
    REQUIRE(!expected.empty());
    CHECK(got == expected);
    CHECK(adapter.epoch() == reference.epoch());
  }
}

cs::RandomSampler small_random(std::uint64_t seed = 3) {
  return cs::RandomSampler({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 4, .seed = seed});
}

std::vector<int> class_codes() {
  std::vector<int> codes;
  for (int c = 0; c < 4; ++c) codes.insert(codes.end(), 20, c);
  return codes;
}

// Saves `adapter` at `batches_done` (the served count by default) and loads it into `into`,
// through torch's archives and a byte stream.
template <class A>
void save_and_load(const A& adapter, A& into, std::optional<std::int64_t> batches_done = std::nullopt) {
  torch::serialize::OutputArchive out;
  if (batches_done) adapter.save(out, *batches_done);
  else adapter.save(out);
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  into.load(in);
}

template <class S>
void check_resume_everywhere(const S& sampler, std::int64_t n_obs) {
  auto reference = cs::torch::adapt(sampler, n_obs);
  reference.reset();
  const std::vector<SeenBatch> full = drain(reference, sampler.batch_size());
  reference.reset();
  const std::vector<SeenBatch> next_epoch = drain(reference, sampler.batch_size());
  REQUIRE(full.size() >= 3);
  for (std::size_t k = 0; k <= full.size(); ++k) {
    CAPTURE(k);
    auto first = cs::torch::adapt(sampler, n_obs);
    first.reset();
    for (std::size_t b = 0; b < k; ++b) REQUIRE(first.next(static_cast<std::size_t>(sampler.batch_size())));
    auto second = cs::torch::adapt(sampler, n_obs);
    save_and_load(first, second);
    second.reset();
    const std::vector<SeenBatch> rest = drain(second, sampler.batch_size());
    CHECK(rest == std::vector<SeenBatch>(full.begin() + static_cast<std::ptrdiff_t>(k), full.end()));
    second.reset();
    CHECK(drain(second, sampler.batch_size()) == next_epoch);
  }
}

/// A dataset whose rows are their own indices, which counts every chunk it reads (copies, one per
/// DataLoader worker, share the counts).
struct CountingDataset
    : cs::torch::ChunkedDataset<CountingDataset, std::vector<std::int64_t>, std::vector<std::int64_t>> {
  struct Reads {
    std::mutex mutex;
    std::map<std::pair<std::int64_t, std::int64_t>, int> chunks;
    std::int64_t total = 0;
  };

  explicit CountingDataset(std::int64_t n) : n_obs(n) {}

  void read_chunk(cs::Slice chunk, std::vector<std::int64_t>& buffer) const {
    {
      const std::lock_guard lock(reads->mutex);
      ++reads->chunks[{chunk.start, chunk.stop}];
      ++reads->total;
    }
    for (std::int64_t i = chunk.start; i < chunk.stop; ++i) buffer.push_back(i);
  }
  [[nodiscard]] std::vector<std::int64_t> make_batch(const std::vector<std::int64_t>& buffer,
                                                     std::span<const std::int64_t> positions) const {
    std::vector<std::int64_t> batch;
    for (const std::int64_t p : positions) batch.push_back(buffer.at(static_cast<std::size_t>(p)));
    return batch;
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(n_obs); }

  std::int64_t n_obs;
  std::shared_ptr<Reads> reads = std::make_shared<Reads>();
};

struct LoaderEpoch {
  std::vector<std::vector<std::int64_t>> batches;
  std::map<std::pair<std::int64_t, std::int64_t>, int> chunk_reads;
  std::int64_t reads = 0;
};

// Runs `epochs` epochs of a DataLoader over a CountingDataset driven by the adapter.
template <class S>
std::vector<LoaderEpoch> run_loader(const S& sampler, std::int64_t n_obs, std::size_t workers, bool enforce_ordering,
                                    int epochs) {
  const CountingDataset dataset(n_obs);
  auto loader =
      torch::data::make_data_loader(dataset, cs::torch::adapt(sampler, n_obs),
                                    torch::data::DataLoaderOptions(static_cast<std::size_t>(sampler.batch_size()))
                                        .workers(workers)
                                        .enforce_ordering(enforce_ordering));
  std::vector<LoaderEpoch> result;
  for (int e = 0; e < epochs; ++e) {
    LoaderEpoch epoch;
    for (std::vector<std::int64_t>& batch : *loader) epoch.batches.push_back(std::move(batch));
    const std::lock_guard lock(dataset.reads->mutex);
    epoch.chunk_reads = std::exchange(dataset.reads->chunks, {});
    epoch.reads = std::exchange(dataset.reads->total, 0);
    result.push_back(std::move(epoch));
  }
  return result;
}

// The loader's epochs hold exactly the direct epochs' batches (in order under enforce_ordering),
// and read each chunk of them once.
template <class S>
void check_loader(const S& sampler, std::int64_t n_obs, std::size_t workers, bool enforce_ordering) {
  S reference = sampler;
  const std::vector<LoaderEpoch> epochs = run_loader(sampler, n_obs, workers, enforce_ordering, 2);
  for (const LoaderEpoch& epoch : epochs) {
    const std::vector<SeenBatch> expected = direct(reference, n_obs);
    std::vector<std::vector<std::int64_t>> expected_batches;
    std::map<std::pair<std::int64_t, std::int64_t>, int> expected_chunks;
    std::int64_t expected_reads = 0;
    const std::vector<cs::Slice>* previous = nullptr;
    for (const SeenBatch& batch : expected) {
      expected_batches.push_back(batch.indices);
      if (previous == nullptr || *previous != batch.chunks) {
        for (const cs::Slice chunk : batch.chunks) ++expected_chunks[{chunk.start, chunk.stop}];
        expected_reads += static_cast<std::int64_t>(batch.chunks.size());
      }
      previous = &batch.chunks;
    }
    std::vector<std::vector<std::int64_t>> got = epoch.batches;
    if (!enforce_ordering) {
      std::sort(got.begin(), got.end());
      std::sort(expected_batches.begin(), expected_batches.end());
    }
    CHECK(got == expected_batches);
    CHECK(epoch.reads == expected_reads);
    CHECK(epoch.chunk_reads == expected_chunks);
  }
}

}  // namespace

TEST_CASE("torch adapter: next() yields the sampler's batches, for every sampler", "[torch]") {
  SECTION("RandomSampler") { check_same_batches(small_random(), 97); }
  SECTION("RandomSampler with replacement and drop_last") {
    check_same_batches(cs::RandomSampler({.chunk_size = 6,
                                          .preload_nchunks = 2,
                                          .batch_size = 4,
                                          .drop_last = true,
                                          .seed = 5,
                                          .replacement = true,
                                          .num_samples = 70}),
                       90);
  }
  SECTION("SequentialSampler") {
    check_same_batches(cs::SequentialSampler({.chunk_size = 7, .preload_nchunks = 3, .batch_size = 3}), 100);
  }
  SECTION("ClassSampler") {
    const std::vector<int> codes = class_codes();
    check_same_batches(
        cs::ClassSampler(codes, {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 60}), 80);
  }
  SECTION("MixtureSampler") {
    check_same_batches(
        cs::MixtureSampler({40, 60}, {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .weights = {1, 3}}), 100);
  }
  SECTION("DistributedSampler, both modes") {
    check_same_batches(cs::DistributedSampler(small_random(), cs::DistInfo{.rank = 1, .world_size = 3}), 200);
    check_same_batches(cs::DistributedSampler(small_random(), cs::DistInfo{.rank = 2, .world_size = 3},
                                              {.mode = cs::ShardMode::global}),
                       200);
  }
}

TEST_CASE("torch adapter: reset() starts the next epoch, or the one set_epoch pins", "[torch]") {
  cs::RandomSampler reference = small_random();
  auto adapter = cs::torch::adapt(reference, 60);
  CHECK(adapter.epoch() == 0);
  adapter.reset();
  CHECK(adapter.epoch() == 1);
  CHECK(drain(adapter, 4).size() == 15);
  CHECK_FALSE(adapter.next(4));  // the end of an epoch stays the end until reset()
  adapter.reset();
  reference.set_epoch(1);
  CHECK(drain(adapter, 4) == direct(reference, 60));
  adapter.set_epoch(7);
  adapter.reset();
  reference.set_epoch(7);
  CHECK(drain(adapter, 4) == direct(reference, 60));
  // An epoch cut short: reset() moves on to the next epoch, not the rest of this one.
  adapter.reset();
  REQUIRE(adapter.next(4));
  adapter.reset();
  reference.set_epoch(9);
  CHECK(drain(adapter, 4) == direct(reference, 60));
  // next() before any reset() starts the first epoch, as libtorch's samplers need no reset.
  auto fresh = cs::torch::adapt(small_random(), 60);
  reference.set_epoch(0);
  CHECK(drain(fresh, 4) == direct(reference, 60));
}

TEST_CASE("torch adapter: save and load resume at every batch of an epoch", "[torch]") {
  SECTION("plain") { check_resume_everywhere(small_random(), 57); }
  SECTION("distributed, contiguous") {
    check_resume_everywhere(cs::DistributedSampler(small_random(), cs::DistInfo{.rank = 1, .world_size = 2}), 90);
  }
  SECTION("distributed, global") {
    check_resume_everywhere(cs::DistributedSampler(small_random(), cs::DistInfo{.rank = 0, .world_size = 3},
                                                   {.mode = cs::ShardMode::global}),
                            130);
  }
  SECTION("torch::save and torch::load, and a point other than the batches served") {
    auto first = cs::torch::adapt(small_random(), 57);
    first.reset();
    const std::vector<SeenBatch> full = drain(first, 4);
    first.reset();
    for (int b = 0; b < 6; ++b) REQUIRE(first.next(4));
    std::stringstream bytes;
    torch::save(first, bytes);
    auto second = cs::torch::adapt(small_random(), 57);
    torch::load(second, bytes);
    second.reset();
    CHECK(drain(second, 4).size() == full.size() - 6);
    // A DataLoader that prefetched: save at the batches training finished.
    auto third = cs::torch::adapt(small_random(), 57);
    save_and_load(first, third, 4);
    CHECK(third.epoch() == 1);
    third.reset();
    auto fourth = cs::torch::adapt(small_random(), 57);
    fourth.set_epoch(1);
    fourth.reset();
    std::vector<SeenBatch> expected = drain(fourth, 4);
    expected.erase(expected.begin(), expected.begin() + 4);
    CHECK(drain(third, 4) == expected);
  }
  SECTION("a state of another sampler is refused by type") {
    auto first = cs::torch::adapt(small_random(3), 57);
    first.reset();
    REQUIRE(first.next(4));
    auto other = cs::torch::adapt(small_random(4), 57);
    CHECK_THROWS_AS(save_and_load(first, other), cs::StateMismatchError);
  }
}

TEST_CASE("torch adapter: a DataLoader with 2 workers reads each chunk once and each index once", "[torch]") {
  const std::int64_t n_obs = 1003;
  const cs::RandomSampler sampler({.chunk_size = 16, .preload_nchunks = 4, .batch_size = 8, .seed = 1});
  const std::vector<LoaderEpoch> epochs = run_loader(sampler, n_obs, 2, true, 2);
  for (const LoaderEpoch& epoch : epochs) {
    std::vector<std::int64_t> seen;
    for (const auto& batch : epoch.batches) seen.insert(seen.end(), batch.begin(), batch.end());
    std::sort(seen.begin(), seen.end());
    std::vector<std::int64_t> all(static_cast<std::size_t>(n_obs));
    std::iota(all.begin(), all.end(), 0);
    CHECK(seen == all);
    // The 63 grid chunks of 16 rows ([992, 1003) the short one), each read once, or in two pieces
    // where it straddles two of the epoch's 16 requests of 64 rows.
    std::set<std::int64_t> cells;
    for (const auto& [chunk, reads] : epoch.chunk_reads) {
      CHECK(reads == 1);
      CHECK(chunk.first / 16 == (chunk.second - 1) / 16);
      cells.insert(chunk.first / 16);
    }
    CHECK(cells.size() == 63);
    CHECK(epoch.reads >= 63);
    CHECK(epoch.reads <= 63 + 15);
    CHECK(static_cast<std::int64_t>(epoch.chunk_reads.size()) == epoch.reads);
  }
  CHECK(epochs[0].batches != epochs[1].batches);
  check_loader(cs::DistributedSampler(sampler, cs::DistInfo{.rank = 1, .world_size = 2}), n_obs, 2, true);
  check_loader(sampler, n_obs, 2, false);
}

TEST_CASE("torch adapter: a batch size other than the sampler's, or a size it cannot serve, is refused", "[torch]") {
  auto adapter = cs::torch::adapt(small_random(), 60);
  CHECK_THROWS_AS(adapter.next(5), cs::ConfigError);
  CHECK_THROWS_WITH(adapter.next(5), Catch::Contains("batch_size (5)") && Catch::Contains("batch_size (4)"));
  const CountingDataset dataset(60);
  // The sampler runs in the DataLoader's main thread, with workers too: the error reaches the loop.
  for (const std::size_t workers : {std::size_t{0}, std::size_t{2}}) {
    auto loader = torch::data::make_data_loader(dataset, adapter, torch::data::DataLoaderOptions(32).workers(workers));
    CHECK_THROWS_AS(
        [&loader] {
          for ([[maybe_unused]] auto& batch : *loader) {}
        }(),
        cs::ConfigError);
  }

  const std::vector<int> codes = class_codes();
  auto classes = cs::torch::adapt(
      cs::ClassSampler(codes, {.chunk_size = 5, .preload_nchunks = 2, .batch_size = 5, .num_samples = 60}), 80);
  CHECK_THROWS_AS(classes.reset(81), cs::ConfigError);
  CHECK_THROWS_WITH(classes.reset(81), Catch::Contains("reset(new_size = 81)") && Catch::Contains("80"));
  CHECK_NOTHROW(classes.reset(80));
  CHECK_THROWS_WITH(adapter.reset(std::size_t{1} << 63), Catch::Contains("2^62"));
  CHECK_THROWS_AS(cs::torch::adapt(small_random(), -1), cs::ConfigError);
  // A size that fits is taken from then on.
  adapter.reset(40);
  CHECK(adapter.n_obs() == 40);
  CHECK(drain(adapter, 4).size() == 10);
}

TEST_CASE("torch adapter: the DataLoader's batches cover the epoch, over random configurations", "[torch]") {
  pcg32 rng(2024);
  const auto draw = [&rng](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng(static_cast<std::uint32_t>(hi - lo + 1)));
  };
  for (int round = 0; round < 30; ++round) {
    const std::int64_t chunk = draw(1, 12);
    const std::int64_t preload = draw(1, 4);
    std::vector<std::int64_t> divisors;
    for (std::int64_t d = 1; d <= chunk * preload; ++d)
      if (chunk * preload % d == 0) divisors.push_back(d);
    const std::int64_t batch =
        divisors[static_cast<std::size_t>(draw(0, static_cast<std::int64_t>(divisors.size()) - 1))];
    const std::int64_t n_obs = draw(1, 400);
    const auto workers = static_cast<std::size_t>(draw(0, 3));
    const bool ordered = draw(0, 1) == 1;
    const cs::RandomSampler sampler(
        {.chunk_size = chunk, .preload_nchunks = preload, .batch_size = batch, .seed = rng()});
    CAPTURE(round, chunk, preload, batch, n_obs, workers, ordered);
    check_loader(sampler, n_obs, workers, ordered);
    const std::int64_t world = draw(1, 3);
    if (n_obs / world >= batch) {
      const cs::DistributedSampler dist(sampler, cs::DistInfo{.rank = draw(0, world - 1), .world_size = world},
                                        {.mode = draw(0, 1) == 1 ? cs::ShardMode::global : cs::ShardMode::contiguous});
      check_loader(dist, n_obs, workers, ordered);
    }
  }
}
