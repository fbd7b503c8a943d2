// SPDX-License-Identifier: MIT
// The public API as users read it: what sample() and plan() return has public names, calls that
// used to compile and do nothing (or the wrong thing) no longer compile or now do what they say,
// and internals are out of reach. The compile-time checks are requires-expressions on templates,
// so a call that must not compile is checked without breaking the build.
#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <vector>

namespace test_public_api {

namespace cs = chunksampler;

namespace {

// `dist.sampler().set_epoch(5)` once compiled and left the distributed epoch unchanged.
template <class D>
concept SetsEpochThroughSampler = requires(D& dist) { dist.sampler().set_epoch(5); };
template <class D>
concept UpdatesWeights = requires(D& dist, std::vector<double> w) { dist.update_weights(w); };
template <class D>
concept UpdatesWeightsAndTemperature = requires(D& dist, std::vector<double> w) { dist.update_weights(w, 2.0); };
template <class S>
concept HasNIters = requires(const S& s) { s.n_iters(std::int64_t{1}); };
template <class O>
concept HasSeedField = requires(O& o) { o.seed; };
template <class R>
concept ExposesKeys = requires(const R& r) { r.key(0, 0); } || requires(const R& r) { r.path(); };
template <class State>
concept ExposesInternals = requires(State& s) { s.plan_world_size; } || requires(State& s) { s.runs; } ||
                           requires(State& s) { s.dealt_at; } || requires(State& s) { s.batches_done = 1; };
// Each concept above that a real type must NOT satisfy is also checked against a local type that
// has the member: a misspelt concept would pass its STATIC_REQUIRE_FALSE and fail here.
struct WithMutableSampler {
  cs::RandomSampler& sampler();
};
struct WithUpdateWeights {
  void update_weights(const std::vector<double>& weights);
};
struct WithNIters {
  [[nodiscard]] std::int64_t n_iters(std::int64_t n_obs) const;
};
struct WithKey {
  [[nodiscard]] std::uint64_t key(int stream, int purpose) const;
};
struct WithPath {
  [[nodiscard]] std::vector<std::uint64_t> path() const;
};
struct WithPlanWorldSize {
  std::int64_t plan_world_size;
};
struct WithRuns {
  std::vector<cs::BatchRun> runs;
};
struct WithDealtAt {
  std::int64_t dealt_at;
};
struct WithBatchesDone {
  std::int64_t batches_done;
};

template <class D>
concept ForwardsChunkSettings = requires(const D& d) {
  { d.chunk_size() } -> std::same_as<std::int64_t>;
  { d.preload_nchunks() } -> std::same_as<std::int64_t>;
  { d.batch_size() } -> std::same_as<std::int64_t>;
};

using RandomDist = cs::DistributedSampler<cs::RandomSampler>;
using MixtureDist = cs::DistributedSampler<cs::MixtureSampler>;

}  // namespace

TEST_CASE("what sample() and plan() return is named in public headers", "[api]") {
  STATIC_REQUIRE(std::same_as<decltype(std::declval<cs::RandomSampler&>().sample(1)), cs::Epoch<cs::ChunkPlan>>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<cs::SequentialSampler&>().sample(1)), cs::Epoch<cs::ChunkPlan>>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<cs::ClassSampler&>().sample(1)), cs::Epoch<cs::ClassPlan>>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<cs::MixtureSampler&>().sample(1)), cs::Epoch<cs::MixturePlan>>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<RandomDist&>().sample(1)), cs::Epoch<cs::ChunkPlan>>);
  STATIC_REQUIRE(std::same_as<decltype(std::declval<const cs::RandomSampler&>().plan(1, 0)), cs::ChunkPlan>);
  STATIC_REQUIRE(std::same_as<cs::RandomSampler::range_type, cs::Epoch<cs::ChunkPlan>>);
  STATIC_REQUIRE(std::same_as<RandomDist::range_type, cs::Epoch<cs::ChunkPlan>>);
  STATIC_REQUIRE(cs::LoadRequestRange<cs::Epoch<cs::ChunkPlan>>);

  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5});
  cs::Epoch<cs::ChunkPlan> epoch = sampler.sample(95);
  CHECK(epoch.n_batches() == 19);
  std::int64_t batches = 0;
  for (const cs::LoadRequest& request : epoch) batches += std::ssize(request.splits);
  CHECK(batches == 19);
}

TEST_CASE("a default-constructed Epoch iterator is past the end", "[api]") {
  // Documented as past-the-end: it compares equal to the range's end, with no range to read.
  const cs::Epoch<cs::ChunkPlan>::iterator none;
  CHECK(none == std::default_sentinel);
  CHECK(std::default_sentinel == none);
  CHECK_FALSE(none != std::default_sentinel);
  const cs::Epoch<cs::MixturePlan>::iterator no_mixture;
  CHECK(no_mixture == std::default_sentinel);

  // An iterator of a range compares equal to the end once, and only once, it has ended.
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5});
  cs::Epoch<cs::ChunkPlan> epoch = sampler.sample(95);
  auto it = epoch.begin();
  std::int64_t requests = 0;
  for (; it != epoch.end(); ++it) ++requests;
  CHECK(requests == 5);
  CHECK(it == epoch.end());
}

TEST_CASE("the footguns that compiled no longer do", "[api]") {
  // The wrapped sampler is read-only through DistributedSampler; weights change through it.
  STATIC_REQUIRE(SetsEpochThroughSampler<WithMutableSampler>);
  STATIC_REQUIRE_FALSE(SetsEpochThroughSampler<RandomDist>);
  STATIC_REQUIRE_FALSE(SetsEpochThroughSampler<MixtureDist>);
  STATIC_REQUIRE(UpdatesWeights<MixtureDist>);
  STATIC_REQUIRE(UpdatesWeightsAndTemperature<MixtureDist>);
  STATIC_REQUIRE(UpdatesWeights<WithUpdateWeights>);
  STATIC_REQUIRE_FALSE(UpdatesWeights<RandomDist>);
  // One name for the batch count.
  STATIC_REQUIRE(HasNIters<WithNIters>);
  STATIC_REQUIRE_FALSE(HasNIters<cs::RandomSampler>);
  STATIC_REQUIRE_FALSE(HasNIters<cs::ClassSampler>);
  STATIC_REQUIRE_FALSE(HasNIters<cs::MixtureSampler>);
  STATIC_REQUIRE_FALSE(HasNIters<RandomDist>);
  // No option that does nothing; num_samples alike everywhere.
  STATIC_REQUIRE_FALSE(HasSeedField<cs::SequentialOptions>);
  STATIC_REQUIRE(HasSeedField<cs::RandomOptions>);
  STATIC_REQUIRE(std::same_as<decltype(cs::RandomOptions::num_samples), std::optional<std::int64_t>>);
  STATIC_REQUIRE(std::same_as<decltype(cs::ClassOptions::num_samples), std::optional<std::int64_t>>);
  STATIC_REQUIRE(std::same_as<decltype(cs::MixtureOptions::num_samples), std::optional<std::int64_t>>);
  // DistributedSampler forwards the wrapped configuration with its real types.
  STATIC_REQUIRE(ForwardsChunkSettings<RandomDist>);
  STATIC_REQUIRE(ForwardsChunkSettings<cs::DistributedSampler<cs::ClassSampler>>);
  STATIC_REQUIRE(ForwardsChunkSettings<MixtureDist>);
  // Internals are out of reach.
  STATIC_REQUIRE(ExposesKeys<WithKey>);
  STATIC_REQUIRE(ExposesKeys<WithPath>);
  STATIC_REQUIRE_FALSE(ExposesKeys<cs::Rng>);
  STATIC_REQUIRE(ExposesInternals<WithPlanWorldSize>);
  STATIC_REQUIRE(ExposesInternals<WithRuns>);
  STATIC_REQUIRE(ExposesInternals<WithDealtAt>);
  STATIC_REQUIRE(ExposesInternals<WithBatchesDone>);
  STATIC_REQUIRE_FALSE(ExposesInternals<cs::SamplerState>);

  const RandomDist dist(cs::RandomSampler({.chunk_size = 64, .preload_nchunks = 4, .batch_size = 32}),
                        cs::DistInfo{.rank = 0, .world_size = 2});
  CHECK(dist.chunk_size() == 64);
  CHECK(dist.preload_nchunks() == 4);
  CHECK(dist.batch_size() == 32);
}

TEST_CASE("update_weights keeps the temperature unless given one", "[api][mixture]") {
  const cs::MixtureOptions options{
      .chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .weights = {1.0, 3.0}, .temperature = 2.0};
  cs::MixtureSampler mix({100, 100}, options);
  mix.update_weights({3.0, 1.0});
  CHECK(mix.temperature() == 2.0);
  CHECK(mix.weights() == std::vector<double>{3.0, 1.0});
  cs::MixtureOptions same = options;
  same.weights = {3.0, 1.0};
  CHECK(mix.fingerprint() == cs::MixtureSampler({100, 100}, same).fingerprint());

  mix.update_weights({1.0, 1.0}, 0.5);
  CHECK(mix.temperature() == 0.5);

  // Through DistributedSampler: every rank's epochs follow the new weights.
  MixtureDist dist(cs::MixtureSampler({100, 100}, options), cs::DistInfo{.rank = 1, .world_size = 2});
  const std::uint64_t before = dist.fingerprint();
  dist.update_weights({3.0, 1.0});
  CHECK(dist.sampler().temperature() == 2.0);
  CHECK(dist.fingerprint() != before);
  const MixtureDist rebuilt(cs::MixtureSampler({100, 100}, same), cs::DistInfo{.rank = 1, .world_size = 2});
  CHECK(dist.fingerprint() == rebuilt.fingerprint());
}

TEST_CASE("a state shows what users need through accessors that match its text", "[api][state]") {
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 11});
  sampler.set_epoch(4);
  (void)sampler.sample(1'000, {.id = 1, .num_workers = 3});
  const cs::SamplerState state = sampler.state(6);
  CHECK(state.epoch() == 4);
  CHECK(state.batches_done() == 6);
  CHECK(state.seed() == 11);
  CHECK(state.n_obs() == std::optional<std::int64_t>(1'000));
  CHECK(state.world_size() == 1);
  CHECK(state.num_workers() == 3);
  CHECK(state.worker() == 1);
  CHECK(state.fingerprint() == sampler.fingerprint());
  // Pinned, as the README shows it: a change to the fingerprint would refuse every checkpoint.
  CHECK(sampler.fingerprint() == 0xd6ca4225b2c5492aULL);
  const std::string text = state.to_string();
  CHECK(text == fmt::format("chunksampler-state/6 fingerprint={:016x} order_generation=2 seed=11 epoch=4 n_obs=1000 "
                            "batches_done=6 world_size=1 num_workers=3 worker=1 plan_world_size=1 runs=all dealt_at=0",
                            sampler.fingerprint()));
  CHECK(cs::SamplerState::parse(text) == state);
  // Versions 3 and 4 (chunksampler 0.2) are refused by name: their epochs read off the grid.
  for (const char* old : {"chunksampler-state/3", "chunksampler-state/4"}) {
    std::string older = text;
    older.replace(0, older.find(' '), old);
    CHECK_THROWS_AS(cs::SamplerState::parse(older), cs::StateMismatchError);
    CHECK_THROWS_WITH(cs::SamplerState::parse(older),
                      Catch::Matchers::Contains("storage grid") && Catch::Matchers::Contains(old));
  }
}

}  // namespace test_public_api
