// SPDX-License-Identifier: MIT
// errors.hpp: every throw is one of the library's types, told apart by type: a bad configuration
// or argument (ConfigError), a state that does not fit (StateMismatchError), state text that is
// not a state (StateFormatError), a checkpoint file that cannot be read (StateFileError) or
// written (StateWriteError), a launcher environment at fault (EnvironmentError); each still
// derives from the standard exception callers caught before.
#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>

#include "checkpoint_support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

namespace test_errors {

namespace cs = chunksampler;

namespace {

cs::RandomSampler random_sampler(std::uint64_t seed = 7) {
  return cs::RandomSampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = seed});
}

// A state after 3 batches of epoch 0 over 1,000 observations.
cs::SamplerState state_after_three(cs::RandomSampler sampler) {
  (void)sampler.sample(1'000);
  return sampler.state(3);
}

}  // namespace

TEST_CASE("the error types derive from the standard exceptions and from each other as documented", "[errors]") {
  STATIC_REQUIRE(std::is_base_of_v<std::invalid_argument, cs::ConfigError>);
  STATIC_REQUIRE(std::is_base_of_v<std::invalid_argument, cs::StateError>);
  STATIC_REQUIRE(std::is_base_of_v<cs::StateError, cs::StateMismatchError>);
  STATIC_REQUIRE(std::is_base_of_v<cs::StateError, cs::StateFormatError>);
  STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, cs::EnvironmentError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<cs::StateError, cs::ConfigError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<cs::StateMismatchError, cs::StateFormatError>);
  // load_state's missing or unreadable file is a StateError, so a job that starts afresh on a
  // torn checkpoint does on a missing one too; it is neither of the two above.
  STATIC_REQUIRE(std::is_base_of_v<cs::StateError, cs::StateFileError>);
  STATIC_REQUIRE(std::is_base_of_v<std::invalid_argument, cs::StateFileError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<cs::StateFormatError, cs::StateFileError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<cs::StateMismatchError, cs::StateFileError>);
  // A save that fails is the system's error, not the state's: catch (StateError) to start
  // afresh must not swallow a full disk.
  STATIC_REQUIRE(std::is_base_of_v<std::system_error, cs::StateWriteError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<cs::StateError, cs::StateWriteError>);
  STATIC_REQUIRE_FALSE(std::is_base_of_v<std::invalid_argument, cs::StateWriteError>);
}

TEST_CASE("the file errors carry the system's error code", "[errors]") {
  const cs::StateFileError missing(std::make_error_code(std::errc::no_such_file_or_directory), "no checkpoint");
  CHECK(missing.code() == std::errc::no_such_file_or_directory);
  CHECK(std::string(missing.what()) == "no checkpoint");
  const cs::StateWriteError full(std::make_error_code(std::errc::no_space_on_device), "cannot write");
  CHECK(full.code() == std::errc::no_space_on_device);
  CHECK_THAT(full.what(), Catch::Matchers::StartsWith("cannot write"));
}

TEST_CASE("a bad configuration or argument throws ConfigError", "[errors]") {
  CHECK_THROWS_AS(cs::RandomSampler({.chunk_size = 0, .preload_nchunks = 2, .batch_size = 5}), cs::ConfigError);
  CHECK_THROWS_AS(cs::SequentialSampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 3}), cs::ConfigError);
  CHECK_THROWS_AS(cs::ClassSampler(std::vector<std::int32_t>(100, 0),
                                   {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5}),
                  cs::ConfigError);  // num_samples is required
  CHECK_THROWS_AS(cs::MixtureSampler({100, 5}, {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5}),
                  cs::ConfigError);
  cs::RandomSampler sampler = random_sampler();
  CHECK_THROWS_AS(sampler.validate(-1), cs::ConfigError);
  CHECK_THROWS_AS(sampler.n_batches(1'000, {.id = 2, .num_workers = 2}), cs::ConfigError);
  CHECK_THROWS_AS(sampler.state(1), cs::ConfigError);  // no epoch sampled yet
  CHECK_THROWS_AS(cs::DistributedSampler(sampler, cs::DistInfo{.rank = 2, .world_size = 2}), cs::ConfigError);
  const cs::DistributedSampler dist(sampler, cs::DistInfo{.rank = 0, .world_size = 300});
  CHECK_THROWS_AS(dist.validate(1'000), cs::ConfigError);  // 3 observations per rank: no whole batch of 5
}

TEST_CASE("a state that does not fit the sampler throws StateMismatchError", "[errors]") {
  const cs::SamplerState state = state_after_three(random_sampler(7));

  cs::RandomSampler other_seed = random_sampler(8);
  CHECK_THROWS_AS(other_seed.restore(state), cs::StateMismatchError);

  cs::RandomSampler other_config({.chunk_size = 20, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  CHECK_THROWS_AS(other_config.restore(state), cs::StateMismatchError);

  cs::RandomSampler same = random_sampler(7);
  same.restore(state);
  CHECK_THROWS_AS(same.sample(999), cs::StateMismatchError);                                 // another n_obs
  CHECK_THROWS_AS(same.sample(1'000, {.id = 0, .num_workers = 2}), cs::StateMismatchError);  // another worker

  // A distributed state into a plain sampler, and a contiguous one onto another world size.
  cs::DistributedSampler two(random_sampler(7), cs::DistInfo{.rank = 0, .world_size = 2});
  (void)two.sample(1'000);
  const cs::SamplerState dist_state = two.state(2);
  CHECK_THROWS_AS(random_sampler(7).restore(dist_state), cs::StateMismatchError);
  cs::DistributedSampler three(random_sampler(7), cs::DistInfo{.rank = 0, .world_size = 3});
  CHECK_THROWS_AS(three.restore(dist_state), cs::StateMismatchError);

  // Past the epoch's end: 1,000 observations make 100 batches of 10 on one rank.
  cs::RandomSampler past = random_sampler(7);
  (void)past.sample(1'000);
  const cs::SamplerState beyond = past.state(1'000);
  cs::RandomSampler fresh = random_sampler(7);
  fresh.restore(beyond);
  CHECK_THROWS_AS(fresh.sample(1'000), cs::StateMismatchError);

  // A format this version refuses by name.
  std::string old = state.to_string();
  old.replace(0, old.find(' '), "chunksampler-state/2");
  CHECK_THROWS_AS(cs::SamplerState::parse(old), cs::StateMismatchError);
}

TEST_CASE("state text that is not a state throws StateFormatError", "[errors]") {
  const std::string text = state_after_three(random_sampler()).to_string();
  CHECK_THROWS_AS(cs::SamplerState::parse(""), cs::StateFormatError);
  CHECK_THROWS_AS(cs::SamplerState::parse("not a state"), cs::StateFormatError);
  CHECK_THROWS_AS(cs::SamplerState::parse(text.substr(0, text.size() / 2)), cs::StateFormatError);
  CHECK_THROWS_AS(cs::SamplerState::parse(text + " extra=1"), cs::StateFormatError);
  std::string negative = text;
  negative.replace(negative.find("batches_done=3"), 14, "batches_done=-3");
  CHECK_THROWS_AS(cs::SamplerState::parse(negative), cs::StateFormatError);
}

TEST_CASE("a training script can start afresh on a stale checkpoint and stop on a bad configuration", "[errors]") {
  // The pattern the README shows: catch StateError, let ConfigError through.
  const support::TempDir dir;
  const std::filesystem::path fresh = dir / "fresh.state";
  const std::filesystem::path stale = dir / "stale.state";
  const std::filesystem::path torn = dir / "torn.state";
  cs::save_state(fresh, state_after_three(random_sampler(7)));
  cs::save_state(stale, state_after_three(random_sampler(9)));
  cs::save_state(torn, state_after_three(random_sampler(7)));
  std::filesystem::resize_file(torn, std::filesystem::file_size(torn) - 3);
  const auto resume_or_start = [](std::int64_t chunk_size, const std::filesystem::path& checkpoint) {
    cs::RandomSampler sampler({.chunk_size = chunk_size, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
    try {
      cs::load_state(checkpoint, sampler);
      return true;
    } catch (const cs::StateError&) {
      return false;
    }
  };
  CHECK(resume_or_start(10, fresh));
  CHECK_FALSE(resume_or_start(10, stale));
  CHECK_FALSE(resume_or_start(10, torn));
  CHECK_FALSE(resume_or_start(10, dir / "missing.state"));
  CHECK_THROWS_AS(resume_or_start(0, fresh), cs::ConfigError);
}

TEST_CASE("a launcher environment without a world size throws EnvironmentError", "[errors]") {
  const std::map<std::string, std::string> env{{"RANK", "1"}};
  const auto lookup = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK_THROWS_AS(cs::detail::dist_info_from(lookup), cs::EnvironmentError);
  const auto nothing = [](const char*) -> const char* { return nullptr; };
  CHECK_THROWS_AS(cs::detail::dist_info_from(nothing), cs::EnvironmentError);
  const std::map<std::string, std::string> bad{{"RANK", "one"}, {"WORLD_SIZE", "2"}};
  const auto bad_lookup = [&](const char* name) -> const char* {
    const auto it = bad.find(name);
    return it == bad.end() ? nullptr : it->second.c_str();
  };
  CHECK_THROWS_AS(cs::detail::dist_info_from(bad_lookup), cs::ConfigError);
}

}  // namespace test_errors
