// dist_info.hpp: rank and world size from the launchers' environment variables.
#include <chunksampler.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_dist_info {

namespace cs = chunksampler;

namespace {

using Env = std::map<std::string, std::string>;

/// A lookup over a fake environment, as `dist_info_from` takes it.
cs::DistInfo from(const Env& env) {
  return cs::detail::dist_info_from([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

constexpr std::array<const char*, 8> all_variables{
    "RANK",     "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK", "PMI_SIZE",   "SLURM_PROCID",         "SLURM_NTASKS"};

/// Clears the launcher variables for the test and puts the process environment back afterwards.
class ScopedLauncherEnv {
 public:
  ScopedLauncherEnv() {
    for (std::size_t i = 0; i < all_variables.size(); ++i) {
      if (const char* value = std::getenv(all_variables[i])) saved_[i] = value;
      ::unsetenv(all_variables[i]);
    }
  }
  ScopedLauncherEnv(const ScopedLauncherEnv&) = delete;
  ScopedLauncherEnv& operator=(const ScopedLauncherEnv&) = delete;
  ~ScopedLauncherEnv() {
    for (std::size_t i = 0; i < all_variables.size(); ++i) {
      if (saved_[i]) ::setenv(all_variables[i], saved_[i]->c_str(), 1);
      else ::unsetenv(all_variables[i]);
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::array<std::optional<std::string>, all_variables.size()> saved_{};
};

}  // namespace

TEST_CASE("dist_info_from: each launcher's variables", "[dist_info]") {
  REQUIRE(from({{"RANK", "2"}, {"WORLD_SIZE", "4"}}) == cs::DistInfo{2, 4});
  REQUIRE(from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}}) == cs::DistInfo{3, 8});
  REQUIRE(from({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}) == cs::DistInfo{0, 1});
  REQUIRE(from({{"SLURM_PROCID", "15"}, {"SLURM_NTASKS", "16"}}) == cs::DistInfo{15, 16});
  // large values parse as 64-bit integers
  REQUIRE(from({{"RANK", "4000000000"}, {"WORLD_SIZE", "4000000001"}}) == cs::DistInfo{4000000000, 4000000001});
  // unrelated variables are ignored
  REQUIRE(from({{"LOCAL_RANK", "1"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "0"}}) ==
          cs::DistInfo{5, 6});
}

TEST_CASE("dist_info_from: precedence RANK > OMPI > PMI > SLURM", "[dist_info]") {
  const Env all{{"RANK", "1"},     {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                {"PMI_RANK", "5"}, {"PMI_SIZE", "6"},   {"SLURM_PROCID", "7"},         {"SLURM_NTASKS", "8"}};
  REQUIRE(from(all) == cs::DistInfo{1, 2});

  Env env = all;
  env.erase("RANK");
  env.erase("WORLD_SIZE");
  REQUIRE(from(env) == cs::DistInfo{3, 4});
  env.erase("OMPI_COMM_WORLD_RANK");
  env.erase("OMPI_COMM_WORLD_SIZE");
  REQUIRE(from(env) == cs::DistInfo{5, 6});
  env.erase("PMI_RANK");
  env.erase("PMI_SIZE");
  REQUIRE(from(env) == cs::DistInfo{7, 8});

  // pairs never mix: each launcher's rank comes with its own size
  REQUIRE(from({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "10"}}) ==
          cs::DistInfo{1, 3});
  // a launcher is chosen by its rank variable: a lone size variable does not select it
  REQUIRE(from({{"WORLD_SIZE", "99"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}) ==
          cs::DistInfo{0, 2});
}

TEST_CASE("dist_info_from: no launcher variable is a runtime_error listing all eight", "[dist_info]") {
  REQUIRE_THROWS_AS(from({}), std::runtime_error);
  REQUIRE_THROWS_AS(from({{"WORLD_SIZE", "4"}, {"SLURM_NTASKS", "2"}}), std::runtime_error);  // sizes alone
  try {
    (void)from({{"LOCAL_RANK", "0"}});
    FAIL("expected std::runtime_error");
  } catch (const std::invalid_argument&) {
    FAIL("expected std::runtime_error, not std::invalid_argument");
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    for (const char* variable : all_variables) {
      CAPTURE(variable);
      CHECK_THAT(message, Catch::Contains(variable));
    }
  }
}

TEST_CASE("dist_info_from: a rank variable without its size is a runtime_error", "[dist_info]") {
  const std::array<std::pair<const char*, const char*>, 4> pairs{{{"RANK", "WORLD_SIZE"},
                                                                  {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                                                  {"PMI_RANK", "PMI_SIZE"},
                                                                  {"SLURM_PROCID", "SLURM_NTASKS"}}};
  for (const auto& [rank, size] : pairs) {
    CAPTURE(rank);
    const Env env{{rank, "0"}};
    REQUIRE_THROWS_AS(from(env), std::runtime_error);
    REQUIRE_THROWS_WITH(from(env), Catch::Contains(rank) && Catch::Contains(size));
  }
  // a later, complete launcher does not rescue an incomplete earlier one
  REQUIRE_THROWS_WITH(from({{"RANK", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}),
                      Catch::Contains("RANK") && Catch::Contains("WORLD_SIZE"));
  // ... and it is not an invalid_argument (the environment, not an argument, is at fault)
  bool invalid_argument = false;
  try {
    (void)from({{"RANK", "0"}});
  } catch (const std::invalid_argument&) {
    invalid_argument = true;
  } catch (const std::runtime_error&) {}
  REQUIRE_FALSE(invalid_argument);
}

TEST_CASE("dist_info_from: a value that is not an integer is an invalid_argument naming the variable", "[dist_info]") {
  const char* bad = GENERATE("abc", "1x", "", " 1", "1 ", "1.0", "0x10", "99999999999999999999");
  CAPTURE(bad);
  SECTION("rank") {
    const Env env{{"RANK", bad}, {"WORLD_SIZE", "4"}};
    REQUIRE_THROWS_AS(from(env), std::invalid_argument);
    REQUIRE_THROWS_WITH(from(env), Catch::Contains("RANK") && Catch::Contains(std::string(bad)));
  }
  SECTION("world size") {
    const Env env{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", bad}};
    REQUIRE_THROWS_AS(from(env), std::invalid_argument);
    REQUIRE_THROWS_WITH(from(env), Catch::Contains("OMPI_COMM_WORLD_SIZE") && Catch::Contains(std::string(bad)));
  }
  SECTION("slurm") {
    const Env env{{"SLURM_PROCID", bad}, {"SLURM_NTASKS", "2"}};
    REQUIRE_THROWS_WITH(from(env), Catch::Contains("SLURM_PROCID"));
  }
}

TEST_CASE("dist_info_from: negative integers parse, DistributedSampler rejects them", "[dist_info]") {
  const cs::DistInfo info = from({{"RANK", "-1"}, {"WORLD_SIZE", "4"}});
  REQUIRE(info == cs::DistInfo{-1, 4});
  const cs::SequentialSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  REQUIRE_THROWS_AS(cs::DistributedSampler(base, info), std::invalid_argument);
  REQUIRE_THROWS_AS(cs::DistributedSampler(base, from({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}})), std::invalid_argument);
}

TEST_CASE("DistributedSampler calls its dist_info source exactly once, at construction", "[dist_info]") {
  int calls = 0;
  const auto source = [&calls] {
    ++calls;
    return cs::DistInfo{.rank = 1, .world_size = 2};
  };
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10});
  cs::DistributedSampler dist(base, source);
  REQUIRE(calls == 1);
  REQUIRE(dist.rank() == 1);
  REQUIRE(dist.world_size() == 2);
  REQUIRE(dist.n_batches(100) == 5);
  std::int64_t batches = 0;
  for (const cs::LoadRequest& request : dist.sample(100)) batches += static_cast<std::int64_t>(request.splits.size());
  REQUIRE(batches == 5);
  REQUIRE(dist.shard(100) == cs::Slice{50, 100});
  REQUIRE(calls == 1);
}

TEST_CASE("dist::from_env reads the process environment", "[dist_info]") {
  const ScopedLauncherEnv guard;
  REQUIRE_THROWS_AS(cs::dist::from_env()(), std::runtime_error);

  ScopedLauncherEnv::set("SLURM_PROCID", "2");
  ScopedLauncherEnv::set("SLURM_NTASKS", "5");
  REQUIRE(cs::dist::from_env()() == cs::DistInfo{2, 5});

  ScopedLauncherEnv::set("RANK", "1");
  ScopedLauncherEnv::set("WORLD_SIZE", "3");
  REQUIRE(cs::dist::from_env()() == cs::DistInfo{1, 3});

  // read when called, not when made
  const auto source = cs::dist::from_env();
  ScopedLauncherEnv::set("RANK", "0");
  REQUIRE(source() == cs::DistInfo{0, 3});

  ScopedLauncherEnv::set("WORLD_SIZE", "three");
  REQUIRE_THROWS_AS(source(), std::invalid_argument);
  REQUIRE_THROWS_WITH(source(), Catch::Contains("WORLD_SIZE") && Catch::Contains("three"));

  ::unsetenv("WORLD_SIZE");
  REQUIRE_THROWS_AS(source(), std::runtime_error);
}

TEST_CASE("DistributedSampler with dist::from_env under RANK=1 WORLD_SIZE=3", "[dist_info]") {
  std::optional<cs::DistributedSampler<cs::RandomSampler>> dist;
  {
    const ScopedLauncherEnv guard;
    ScopedLauncherEnv::set("RANK", "1");
    ScopedLauncherEnv::set("WORLD_SIZE", "3");
    const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 4});
    dist.emplace(base, cs::dist::from_env());
  }
  // the environment is read once, at construction: restoring it changes nothing
  REQUIRE(dist->rank() == 1);
  REQUIRE(dist->world_size() == 3);
  // 107 observations over 3 ranks with equal batches of 10: 30 per rank, rank 1 reads [30, 60)
  REQUIRE(dist->shard(107) == cs::Slice{30, 60});
  REQUIRE(dist->n_batches(107) == 3);
  std::vector<int> seen(107, 0);
  for (const cs::LoadRequest& request : dist->sample(107))
    for (const cs::Slice& chunk : request.chunks)
      for (std::int64_t obs = chunk.start; obs < chunk.stop; ++obs) ++seen[static_cast<std::size_t>(obs)];
  for (std::size_t obs = 0; obs < seen.size(); ++obs) {
    CAPTURE(obs);
    REQUIRE(seen[obs] == (obs >= 30 && obs < 60 ? 1 : 0));
  }
}

}  // namespace test_dist_info
