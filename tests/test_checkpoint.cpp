// SPDX-License-Identifier: MIT
// checkpoint.hpp: save_state writes the documented file (a header with the state's size and
// CRC-32C, then the state's line), load_state reads back exactly the state saved, and a sampler
// restored from the file yields the rest of the epoch, for a few hundred random configurations
// of every sampler (workers, both shard modes, elastic states, sizes up to 2^62). A checkpoint
// cut at any byte, or with any one byte changed, is a StateError naming the file, never a state.
// Every error names the file and has the documented type; write_atomically replaces a file whole.
// Crashes mid-save and concurrent saves are in test_checkpoint_atomic.cpp.

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>

#include "checkpoint_support.hpp"
#include "class_support.hpp"
#include "harness.hpp"
#include "mixture_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <sys/stat.h>

namespace test_checkpoint {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;
using support::OwnedRequest;
using Requests = std::vector<OwnedRequest>;

constexpr std::int64_t two62 = cs::detail::max_size;

// The first `count` requests of a range, or all of them if it has fewer.
template <class Range>
Requests first_requests(Range&& range, std::size_t count) {
  Requests taken;
  for (const cs::LoadRequest& request : range) {
    if (taken.size() == count) break;
    taken.push_back(support::own(request));
  }
  return taken;
}

// What the random configurations exercised, so that no kind silently drops out of the test.
struct Tally {
  std::set<std::string> kinds;
  int resumes = 0;       // states saved, loaded and resumed from
  int huge = 0;          // of which over more than 2^40 observations
  int with_workers = 0;  // of which of a worker's share
  int several_runs = 0;  // of which global-mode states after an elastic re-deal naming 2 runs or more
  int mid_epoch = 0;     // middle-of-a-long-epoch resumes compared with a restore from memory
};

// Epoch `epoch` of `make()` samplers over `n_obs`, worker `worker`'s share: the first `limit`
// requests are played, a state is taken after a drawn batch of them, saved to `path` and loaded
// back equal; a fresh sampler restored by `load_state(path, sampler)` yields the rest of what was
// played, request for request (and nothing after it, when that was the whole epoch). In an epoch
// too long to play, a state from its middle resumes as the same state restored from memory does.
template <class Make>
void check_file_resume(const std::filesystem::path& path, const Make& make, std::int64_t n_obs, std::uint64_t epoch,
                       cs::WorkerInfo worker, std::size_t limit, support::ConfigRng& g, Tally& tally) {
  INFO("epoch " << epoch << ", worker " << worker.id << " of " << worker.num_workers);
  auto played = make();
  played.set_epoch(epoch);
  const std::int64_t total = played.n_batches(n_obs, worker);
  const Requests seen = first_requests(played.sample(n_obs, worker), limit);
  const std::int64_t n = support::n_batches(seen);
  const bool whole = n == total;
  const std::int64_t b = g.between(0, n);
  INFO("state after " << b << " of " << total << " batches (" << n << " played)");
  const cs::SamplerState state = played.state(b);
  cs::save_state(path, state);
  REQUIRE(cs::load_state(path) == state);
  auto resumed = make();
  REQUIRE(cs::load_state(path, resumed) == state);
  const Requests expected = support::after(seen, b);
  const Requests rest = whole ? support::collect(resumed.sample(n_obs, worker))
                              : first_requests(resumed.sample(n_obs, worker), expected.size());
  REQUIRE(rest == expected);
  ++tally.resumes;
  if (n_obs > (std::int64_t{1} << 40)) ++tally.huge;
  if (worker.num_workers > 1) ++tally.with_workers;
  if (whole) return;

  const cs::SamplerState middle = played.state(total / 2 + g.between(0, 1));
  cs::save_state(path, middle);
  auto from_file = make();
  REQUIRE(cs::load_state(path, from_file) == middle);
  auto from_memory = make();
  from_memory.restore(middle);
  const Requests got = first_requests(from_file.sample(n_obs, worker), 2);
  REQUIRE_FALSE(got.empty());
  REQUIRE(got == first_requests(from_memory.sample(n_obs, worker), 2));
  ++tally.mid_epoch;
}

std::uint64_t random_epoch(support::ConfigRng& g) {
  constexpr std::array<std::uint64_t, 6> epochs = {0, 1, 2, 5, 1'000'000'007, 18'446'744'073'709'551'614U};
  return epochs[static_cast<std::size_t>(g.between(0, 5))];
}

cs::WorkerInfo random_worker(support::ConfigRng& g) {
  const std::int64_t workers = g.between(0, 2) == 0 ? 1 : g.between(2, 4);
  return {.id = g.between(0, workers - 1), .num_workers = workers};
}

// A configuration over up to 2^62 observations: any chunk up to 4096 (a small one makes 2^60
// chunks), with a mask, replacement and num_samples some of the time, and a DistributedSampler's
// settings for up to 8 ranks.
support::Config huge_config(support::ConfigRng& g) {
  support::Config c;
  c.chunk = g.between(1, std::int64_t{1} << g.between(0, 12));
  c.preload = g.between(1, 8);
  c.batch = g.divisor_of(c.chunk * c.preload);
  const std::int64_t exponent = g.between(24, 62);
  c.n_obs = exponent == 62 ? two62 - g.between(0, 999) : (std::int64_t{1} << exponent) + g.between(0, 999);
  if (g.coin()) c.mask = cs::Slice{g.between(0, 999), c.n_obs - g.between(0, 999)};
  c.sequential = g.between(0, 3) == 0;
  if (!c.sequential) {
    c.replacement = g.between(0, 3) == 0;
    const std::int64_t size = c.size();
    if (g.coin()) c.num_samples = g.between(size / 2, c.replacement ? std::min(two62, 2 * size) : size);
  }
  c.drop_last = g.coin();
  c.world = g.between(2, 8);
  c.mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous;
  c.remainder = support::draw_remainder(g);
  c.enforce = g.between(0, 3) != 0;
  c.seed = g.next();
  return c;
}

// `config` drawn at random, for the elastic trials: `world` ranks in global mode whose state
// restores on any world size up to 6.
support::Config elastic_config(support::ConfigRng& g, std::int64_t world, bool huge) {
  support::Config c = huge ? huge_config(g) : support::Config{};
  if (!huge) {
    support::draw_shape(g, c, 6, 3);
    c.drop_last = g.coin();
    support::place(g, c, g.between(7 * c.batch, 28 * c.batch + 20));
    c.seed = g.next();
  }
  c.world = world;
  c.mode = cs::ShardMode::global;
  c.remainder = support::draw_remainder(g);
  c.enforce = true;
  c.num_samples.reset();
  c.replacement = false;
  return c;
}

// An elastic restart through a checkpoint file: `world` ranks read to a drawn batch, a new job
// of `new_world` ranks restores their state (re-dealing what they left) and reads on; the state
// of one of its ranks after a drawn batch names the runs it was dealt, saved to `path`, loaded
// back equal, and restored on that rank from the file yields the rest of its uninterrupted run.
void check_elastic(const std::filesystem::path& path, const support::Config& c, std::int64_t new_world,
                   std::size_t limit, support::ConfigRng& g, Tally& tally) {
  INFO(c.describe() << " | restarted on " << new_world << " ranks");
  auto old = c.rank(0, c.world);
  old.set_epoch(c.epoch);
  const std::int64_t b = g.between(0, old.n_batches(c.n_obs));
  (void)old.sample(c.n_obs);
  const std::string text = old.state(b).to_string();
  const std::int64_t r = g.between(0, new_world - 1);
  INFO("old ranks at batch " << b << "; new rank " << r);
  auto restarted = c.rank(r, new_world);
  restarted.restore(cs::SamplerState::parse(text));
  const std::int64_t left = restarted.n_batches_left(c.n_obs);
  const Requests seen = first_requests(restarted.sample(c.n_obs), limit);
  const std::int64_t n = support::n_batches(seen);
  const std::int64_t b2 = g.between(0, n);
  INFO("new rank at " << b2 << " of " << left << " batches (" << n << " played)");
  const cs::SamplerState state = restarted.state(b + b2);
  const auto& runs = support::fields(state).runs;
  if (runs && runs->size() >= 2) ++tally.several_runs;
  cs::save_state(path, state);
  REQUIRE(cs::load_state(path) == state);
  auto resumed = c.rank(r, new_world);
  REQUIRE(cs::load_state(path, resumed) == state);
  const Requests expected = support::after(seen, b2);
  const Requests rest =
      n == left ? support::collect(resumed.sample(c.n_obs)) : first_requests(resumed.sample(c.n_obs), expected.size());
  REQUIRE(rest == expected);
  ++tally.resumes;
  if (c.n_obs > (std::int64_t{1} << 40)) ++tally.huge;
}

// Calls `body(make)` with a maker of `base`, or some of the time of a rank of a
// DistributedSampler around it (when that configuration can be served over `n_obs`).
template <class Base, class Body>
void maybe_distributed(const Base& base, std::int64_t n_obs, support::ConfigRng& g, Tally& tally, const Body& body) {
  const std::int64_t world = g.between(1, 3);
  if (world > 1) {
    const cs::DistInfo info{.rank = g.between(0, world - 1), .world_size = world};
    const cs::DistributedOptions options{.mode = g.coin() ? cs::ShardMode::global : cs::ShardMode::contiguous};
    const auto make = [&] { return cs::DistributedSampler(base, info, options); };
    bool servable = true;
    try {
      make().validate(n_obs);
    } catch (const cs::ConfigError&) {
      servable = false;  // too few observations per rank for a batch
    }
    if (servable) {
      tally.kinds.insert(fmt::format("distributed {}", Base::name));
      INFO("rank " << info.rank << " of " << world);
      body(make);
      return;
    }
  }
  tally.kinds.insert(std::string(Base::name));
  body([&] { return base; });
}

}  // namespace

TEST_CASE("checkpoint: CRC-32C gives the standard check values", "[checkpoint]") {
  // The check value of every CRC catalogue, and RFC 3720's (iSCSI) test vectors.
  STATIC_REQUIRE(cs::detail::crc32c("123456789") == 0xe3069283U);
  STATIC_REQUIRE(cs::detail::crc32c("") == 0U);
  CHECK(cs::detail::crc32c(std::string(32, '\0')) == 0x8a9136aaU);
  CHECK(cs::detail::crc32c(std::string(32, '\xff')) == 0x62a8ab43U);
  std::string ascending;
  for (char c = 0; c < 32; ++c) ascending += c;
  CHECK(cs::detail::crc32c(ascending) == 0x46dd794eU);
}

TEST_CASE("checkpoint: the file holds the documented header and then the state's line", "[checkpoint]") {
  // The state's line is 170 characters and its newline; its CRC-32C (computed apart from this
  // library, bit by bit) is 451fc874.
  const cs::SamplerState state = cs::detail::StateAccess::make({.fingerprint = 0x0123456789abcdefU,
                                                                .seed = 42,
                                                                .epoch = 3,
                                                                .n_obs = 1000,
                                                                .batches_done = 17,
                                                                .world_size = 3,
                                                                .plan_world_size = 4,
                                                                .num_workers = 1,
                                                                .worker = 0,
                                                                .runs = std::vector<cs::BatchRun>{{1, 3}, {4, 6}},
                                                                .dealt_at = 1});
  const std::string line =
      "chunksampler-state/6 fingerprint=0123456789abcdef order_generation=1 seed=42 epoch=3 n_obs=1000 batches_done=17 "
      "world_size=3 num_workers=1 worker=0 plan_world_size=4 runs=1-3,4-6 dealt_at=1";
  REQUIRE(state.to_string() == line);
  const std::string file = "chunksampler-checkpoint/1 bytes=190 crc32c=0daad1fd\n" + line + "\n";

  const support::TempDir dir;
  cs::save_state(dir / "job.state", state);
  CHECK(support::read_bytes(dir / "job.state") == file);
  CHECK(support::entries(dir.path()) == std::vector<std::string>{"job.state"});
  // The format is what another program writes too: the same bytes, written by hand, load.
  support::write_bytes(dir / "by-hand.state", file);
  CHECK(cs::load_state(dir / "by-hand.state") == state);
}

TEST_CASE("checkpoint: save_state then load_state over random configurations of every sampler", "[checkpoint]") {
  // A few hundred trials, each its own sampler and configuration: RandomSampler and
  // SequentialSampler (also over up to 2^62 observations), DistributedSampler around them in both
  // modes, ClassSampler and MixtureSampler (each also distributed), workers, later epochs, and
  // global-mode states after an elastic restart. Long epochs are played for their first requests.
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  support::ConfigRng g(190001);
  Tally tally;
  constexpr std::size_t all = SIZE_MAX;
  for (int trial = 0; trial < 320; ++trial) {
    INFO("trial " << trial);
    const std::uint64_t epoch = random_epoch(g);
    switch (trial % 8) {
      case 0:
      case 1: {
        const support::Config c = support::servable_config(g, {});
        INFO(c.describe());
        tally.kinds.insert(c.sequential ? "sequential" : "random");
        c.with_base([&](const auto& base) {
          check_file_resume(path, [&] { return base; }, c.n_obs, epoch, random_worker(g), all, g, tally);
        });
        break;
      }
      case 2: {
        const support::Config c = huge_config(g);
        INFO(c.describe());
        tally.kinds.insert(c.sequential ? "huge sequential" : "huge random");
        c.with_base([&](const auto& base) {
          check_file_resume(path, [&] { return base; }, c.n_obs, epoch, random_worker(g), 3, g, tally);
        });
        break;
      }
      case 3:
      case 4: {
        support::Config c = support::servable_config(g, {.max_world = 4});
        const support::Config huge = huge_config(g);
        if (trial % 8 == 4) c = huge;
        INFO(c.describe());
        const std::int64_t rank = g.between(0, c.world - 1);
        tally.kinds.insert(c.mode == cs::ShardMode::global ? "global" : "contiguous");
        c.with_base([&](const auto& base) {
          const auto make = [&] {
            return cs::DistributedSampler(base, cs::DistInfo{.rank = rank, .world_size = c.world}, c.dist_options());
          };
          check_file_resume(path, make, c.n_obs, epoch, random_worker(g), trial % 8 == 4 ? 3 : all, g, tally);
        });
        break;
      }
      case 5: {
        const support::classes::ClassConfig c = support::classes::random_config(g);
        INFO(c.describe());
        maybe_distributed(c.sampler(), c.n_obs(), g, tally, [&](const auto& make) {
          check_file_resume(path, make, c.n_obs(), epoch, random_worker(g), all, g, tally);
        });
        break;
      }
      case 6: {
        support::mixture::MixConfig c = support::mixture::random_mix(g);
        const bool huge = g.coin();
        if (huge) {
          // Up to 5 datasets of up to 2^62 / 6 observations each: memory is per dataset, not per row.
          for (std::int64_t& size : c.sizes) size = g.between(c.chunk, two62 / 6);
          c.num_samples.reset();
        }
        INFO(c.describe());
        maybe_distributed(c.sampler(), c.n_obs(), g, tally, [&](const auto& make) {
          check_file_resume(path, make, c.n_obs(), epoch, random_worker(g), huge ? 3 : all, g, tally);
        });
        break;
      }
      default: {
        const bool huge = g.between(0, 3) == 0;
        const std::int64_t world = g.between(2, 6);
        std::int64_t new_world = g.between(1, 5);
        if (new_world >= world) ++new_world;  // another world size than the old one
        support::Config c = elastic_config(g, world, huge);
        c.epoch = epoch;
        tally.kinds.insert("elastic");
        check_elastic(path, c, new_world, huge ? 3 : all, g, tally);
      }
    }
  }
  for (const char* kind :
       {"random", "sequential", "huge random", "huge sequential", "contiguous", "global", "ClassSampler",
        "distributed ClassSampler", "MixtureSampler", "distributed MixtureSampler", "elastic"}) {
    INFO(kind);
    CHECK(tally.kinds.contains(kind));
  }
  CHECK(tally.resumes == 320);
  CHECK(tally.huge > 60);
  CHECK(tally.with_workers > 80);
  CHECK(tally.several_runs > 20);
  CHECK(tally.mid_epoch > 60);
  CHECK(support::entries(dir.path()) == std::vector<std::string>{"job.state"});
}

namespace {

// Checkpoints of several lengths and shapes: a plain sampler's, a worker's of a global-mode rank,
// one over 2^62 observations at a late epoch with the largest seed, and one after an elastic
// restart from 40 ranks that names 40 runs.
std::vector<cs::SamplerState> sample_states() {
  std::vector<cs::SamplerState> states;
  cs::RandomSampler plain({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  (void)plain.sample(1'000);
  states.push_back(plain.state(3));

  cs::DistributedSampler worker(cs::RandomSampler(
                                    {.chunk_size = 8, .preload_nchunks = 4, .batch_size = 16, .seed = 11}),
                                cs::DistInfo{.rank = 1, .world_size = 3}, {.mode = cs::ShardMode::global});
  worker.set_epoch(4);
  (void)worker.sample(5'000, {.id = 1, .num_workers = 2});
  states.push_back(worker.state(6));

  cs::RandomSampler huge({.chunk_size = 256, .preload_nchunks = 64, .batch_size = 256, .seed = UINT64_MAX});
  huge.set_epoch(UINT64_MAX - 1);
  const std::int64_t n = huge.n_batches(two62);
  (void)huge.sample(two62);
  states.push_back(huge.state(n - 1));

  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 1, .batch_size = 10, .seed = 5});
  const cs::DistributedOptions global{.mode = cs::ShardMode::global};
  cs::DistributedSampler old(base, cs::DistInfo{.rank = 0, .world_size = 40}, global);
  (void)old.sample(4'000);  // 10 batches per rank
  cs::DistributedSampler restarted(base, cs::DistInfo{.rank = 2, .world_size = 3}, global);
  restarted.restore(old.state(3));
  (void)restarted.sample(4'000);
  states.push_back(restarted.state(5));
  REQUIRE(support::fields(states.back()).runs->size() == 40);
  return states;
}

enum class Kind { state, format, mismatch, file, other };

// What load_state made of a file: a state, or the kind of error and its message.
struct Loaded {
  Kind kind = Kind::other;
  std::string text;  // the state's text, or the error's message

  [[nodiscard]] std::string describe() const {
    constexpr std::array<const char*, 5> names = {"a state", "StateFormatError", "StateMismatchError", "StateFileError",
                                                  "another exception"};
    return fmt::format("{}: {}", names[static_cast<std::size_t>(kind)], text);
  }
};

Loaded load(const std::filesystem::path& path) {
  try {
    return {Kind::state, cs::load_state(path).to_string()};
  } catch (const cs::StateFormatError& e) {
    return {Kind::format, e.what()};
  } catch (const cs::StateMismatchError& e) {
    return {Kind::mismatch, e.what()};
  } catch (const cs::StateFileError& e) {
    return {Kind::file, e.what()};
  } catch (const std::exception& e) {
    return {Kind::other, e.what()};
  }
}

// The first few of `wrong`, one a line, for the failure's message.
std::string first_of(const std::vector<std::string>& wrong) {
  std::string text = fmt::format("{} wrong:", wrong.size());
  for (std::size_t i = 0; i < std::min<std::size_t>(wrong.size(), 8); ++i) text += "\n  " + wrong[i];
  return text;
}

// The exception of type `E` that `f()` throws; nothing when it returns. Any other exception
// goes through to the test.
template <class E, class F>
std::optional<E> thrown(const F& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("checkpoint: a file cut at any byte is a StateFormatError that says it is truncated", "[checkpoint]") {
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  std::vector<std::string> wrong;
  std::size_t cuts = 0;
  for (const cs::SamplerState& state : sample_states()) {
    cs::save_state(path, state);
    const std::string file = support::read_bytes(path);
    REQUIRE(cs::load_state(path) == state);  // whole, it loads: every cut below is what fails it
    // Cut shorter and shorter in place: ext4 flushes a file truncated to 0 and written again
    // when it is closed, which would make this test take a minute.
    for (std::size_t size = file.size(); size-- > 0;) {
      std::filesystem::resize_file(path, size);
      const Loaded loaded = load(path);
      ++cuts;
      if (loaded.kind != Kind::format || loaded.text.find(path.string()) == std::string::npos ||
          loaded.text.find("truncated") == std::string::npos)
        wrong.push_back(fmt::format("{} of its {} bytes: {}", size, file.size(), loaded.describe()));
    }
  }
  INFO(first_of(wrong));
  CHECK(wrong.empty());
  CHECK(cuts > 1'000);
}

TEST_CASE("checkpoint: a file with any one byte changed is a StateError naming it, never a state", "[checkpoint]") {
  // At every offset: each single-bit flip, all eight bits flipped, and a few characters that keep
  // a digit a digit, a hexadecimal digit hexadecimal, or that split or end a field or a line.
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  std::vector<std::string> wrong;
  std::size_t changes = 0;
  std::size_t mismatches = 0;
  for (const cs::SamplerState& state : sample_states()) {
    cs::save_state(path, state);
    const std::string file = support::read_bytes(path);
    for (std::size_t offset = 0; offset < file.size(); ++offset) {
      const auto original = static_cast<unsigned char>(file[offset]);
      std::set<unsigned char> replacements;
      for (unsigned bit = 0; bit < 8; ++bit) replacements.insert(static_cast<unsigned char>(original ^ (1U << bit)));
      replacements.insert(static_cast<unsigned char>(original ^ 0xFFU));
      for (const char c : std::string_view("019af \n=")) replacements.insert(static_cast<unsigned char>(c));
      replacements.erase(original);
      for (const unsigned char replacement : replacements) {
        support::overwrite_byte(path, offset, static_cast<char>(replacement));
        const Loaded loaded = load(path);
        ++changes;
        if (loaded.kind == Kind::mismatch) ++mismatches;
        if ((loaded.kind != Kind::format && loaded.kind != Kind::mismatch) ||
            loaded.text.find(path.string()) == std::string::npos)
          wrong.push_back(fmt::format("byte {} of {} ({:?} -> {:?}): {}", offset, file.size(),
                                      static_cast<char>(original), static_cast<char>(replacement), loaded.describe()));
      }
      support::overwrite_byte(path, offset, static_cast<char>(original));
    }
    REQUIRE(cs::load_state(path) == state);  // every byte put back: the changes were what failed it
  }
  INFO(first_of(wrong));
  CHECK(wrong.empty());
  CHECK(changes > 15'000);
  // The header's format digit changed to a higher one reads as a newer format.
  CHECK(mismatches > 0);
}

TEST_CASE("checkpoint: a missing or unreadable file is a StateFileError with the system's reason", "[checkpoint]") {
  const support::TempDir dir;
  const std::filesystem::path missing = dir / "never-written.state";
  const auto error = thrown<cs::StateFileError>([&] { (void)cs::load_state(missing); });
  REQUIRE(error);
  CHECK(error->code() == std::errc::no_such_file_or_directory);
  CHECK_THAT(error->what(), Contains(missing.string()) && Contains("missing"));
  // A job that starts afresh on any StateError starts afresh on a missing checkpoint too.
  CHECK_THROWS_AS(cs::load_state(missing), cs::StateError);

  // Linux opens a directory for reading; reading it fails with EISDIR.
  const auto directory = thrown<cs::StateFileError>([&] { (void)cs::load_state(dir.path()); });
  REQUIRE(directory);
  CHECK(directory->code() == std::errc::is_a_directory);
  CHECK_THAT(directory->what(), Contains(dir.path().string()));
}

TEST_CASE("checkpoint: files that are not checkpoints of this version are refused by name", "[checkpoint]") {
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  (void)sampler.sample(1'000);
  const cs::SamplerState state = sampler.state(3);
  const std::string body = state.to_string() + "\n";

  SECTION("bare state text, as the examples wrote it by hand before save_state") {
    support::write_bytes(path, body);
    const auto e = thrown<cs::StateFormatError>([&] { (void)cs::load_state(path); });
    REQUIRE(e);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("bare state text") && Contains("SamplerState::parse"));
    // What it says to do works: the text is a state.
    CHECK(cs::SamplerState::parse(state.to_string()) == state);
  }
  SECTION("a header of a newer format, whatever follows it") {
    for (const std::string& header :
         {fmt::format("chunksampler-checkpoint/2 bytes={} crc32c={:08x}\n", body.size(), cs::detail::crc32c(body)),
          std::string("chunksampler-checkpoint/17 with another layout\n")}) {
      INFO(header);
      support::write_bytes(path, header + body);
      const auto e = thrown<cs::StateMismatchError>([&] { (void)cs::load_state(path); });
      REQUIRE(e);
      CHECK_THAT(e->what(), Contains(path.string()) && Contains("newer version of chunksampler"));
    }
  }
  SECTION("a state text of a version SamplerState::parse refuses, in a sound file") {
    std::string old = state.to_string();
    old.replace(0, old.find(' '), "chunksampler-state/2");
    old += "\n";
    support::write_bytes(path, fmt::format("chunksampler-checkpoint/1 bytes={} crc32c={:08x}\n{}", old.size(),
                                           cs::detail::crc32c(old), old));
    const auto e = thrown<cs::StateMismatchError>([&] { (void)cs::load_state(path); });
    REQUIRE(e);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("chunksampler-state/2"));
  }
  SECTION("another file altogether") {
    support::write_bytes(path, "PK\x03\x04 a zip archive, say\n");
    const auto e = thrown<cs::StateFormatError>([&] { (void)cs::load_state(path); });
    REQUIRE(e);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("not a chunksampler checkpoint"));
  }
  SECTION("a file larger than any checkpoint is refused; one at the limit is read") {
    // Sparse files: their zeros are not on disk.
    support::write_bytes(path, "");
    std::filesystem::resize_file(path, static_cast<std::uintmax_t>(cs::detail::max_checkpoint_bytes) + 1);
    const auto large = thrown<cs::StateFormatError>([&] { (void)cs::load_state(path); });
    REQUIRE(large);
    CHECK_THAT(large->what(), Contains(path.string()) && Contains("larger than 67108864 bytes"));
    std::filesystem::resize_file(path, static_cast<std::uintmax_t>(cs::detail::max_checkpoint_bytes));
    const auto at_limit = thrown<cs::StateFormatError>([&] { (void)cs::load_state(path); });
    REQUIRE(at_limit);
    CHECK_THAT(at_limit->what(), Contains("not a chunksampler checkpoint"));
  }
  SECTION("a FIFO is refused, not waited on") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    const auto e = thrown<cs::StateFileError>([&] { (void)cs::load_state(path); });
    REQUIRE(e);
    CHECK(e->code() == std::errc::invalid_argument);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("not a regular file"));
  }
}

TEST_CASE("checkpoint: load_state(path, sampler) names the file when the state does not fit", "[checkpoint]") {
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  const cs::RandomSampler base({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  cs::RandomSampler played = base;
  (void)played.sample(1'000);
  cs::save_state(path, played.state(3));
  cs::RandomSampler fresh = base;
  const Requests fresh_epoch = support::epoch(fresh, 1'000);

  // Another seed, and another chunk size: a state of another configuration.
  for (const std::uint64_t seed : {7U, 8U}) {
    cs::RandomSampler other({.chunk_size = seed == 7 ? 20 : 10, .preload_nchunks = 2, .batch_size = 5, .seed = seed});
    const auto e = thrown<cs::StateMismatchError>([&] { (void)cs::load_state(path, other); });
    REQUIRE(e);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains(seed == 7 ? "fingerprint" : "seed"));
  }
  // A distributed sampler on another world size in contiguous mode.
  cs::DistributedSampler two(base, cs::DistInfo{.rank = 0, .world_size = 2});
  (void)two.sample(1'000);
  cs::save_state(path, two.state(2));
  cs::DistributedSampler three(base, cs::DistInfo{.rank = 0, .world_size = 3});
  const auto e = thrown<cs::StateMismatchError>([&] { (void)cs::load_state(path, three); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Contains(path.string()) && Contains("world_size"));

  // A refused or unreadable checkpoint leaves the sampler as it was: it plays its epoch afresh.
  cs::RandomSampler untouched = base;
  CHECK_THROWS_AS(cs::load_state(path, untouched), cs::StateMismatchError);
  support::write_bytes(path, "chunksampler-checkpoint/1 bytes=9");
  CHECK_THROWS_AS(cs::load_state(path, untouched), cs::StateFormatError);
  CHECK_THROWS_AS(cs::load_state(dir / "missing.state", untouched), cs::StateFileError);
  CHECK(support::epoch(untouched, 1'000) == fresh_epoch);
}

TEST_CASE("checkpoint: a save that cannot be written is a StateWriteError and leaves nothing behind", "[checkpoint]") {
  const support::TempDir dir;
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  (void)sampler.sample(1'000);
  const cs::SamplerState state = sampler.state(3);

  SECTION("into a directory that does not exist") {
    const std::filesystem::path path = dir / "missing" / "job.state";
    const auto e = thrown<cs::StateWriteError>([&] { cs::save_state(path, state); });
    REQUIRE(e);
    CHECK(e->code() == std::errc::no_such_file_or_directory);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("create the temporary file"));
    CHECK(support::entries(dir.path()).empty());
  }
  SECTION("over a directory") {
    const std::filesystem::path path = dir / "job.state";
    std::filesystem::create_directory(path);
    support::write_bytes(path / "inside", "kept");
    const auto e = thrown<cs::StateWriteError>([&] { cs::save_state(path, state); });
    REQUIRE(e);
    CHECK(e->code() == std::errc::is_a_directory);
    CHECK_THAT(e->what(), Contains(path.string()) && Contains("rename over it"));
    CHECK(std::filesystem::is_directory(path));
    CHECK(support::entries(path) == std::vector<std::string>{"inside"});
    CHECK(support::read_bytes(path / "inside") == "kept");
    CHECK(support::entries(dir.path()) == std::vector<std::string>{"job.state"});
  }
}

namespace {

// Sets the process's umask, and restores it.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

// Makes `dir` the current directory, and restores the old one.
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const std::filesystem::path& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;
  ~WorkingDirectory() {
    std::error_code ignored;  // a destructor must not throw
    std::filesystem::current_path(old_, ignored);
  }

 private:
  std::filesystem::path old_;
};

mode_t permissions(const std::filesystem::path& path) {
  struct stat info{};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 0777U;
}

}  // namespace

TEST_CASE("checkpoint: write_atomically replaces a file whole, as a new file", "[checkpoint]") {
  const support::TempDir dir;
  const std::filesystem::path path = dir / "model.pt";
  const std::string first = "a longer first content, which the second must not leave a tail of\n";
  const std::string second("\0binary\n\xff\0", 10);
  cs::write_atomically(path, first);
  CHECK(support::read_bytes(path) == first);

  // A reader that opened the old file reads the old bytes: the new ones are another file,
  // renamed over the name, not written into the old one.
  std::ifstream reader(path, std::ios::binary);
  cs::write_atomically(path, second);
  CHECK(support::read_bytes(path) == second);
  CHECK(std::string(std::istreambuf_iterator<char>(reader), std::istreambuf_iterator<char>()) == first);

  cs::write_atomically(path, "");
  CHECK(support::read_bytes(path).empty());
  CHECK(support::entries(dir.path()) == std::vector<std::string>{"model.pt"});
}

TEST_CASE("checkpoint: write_atomically creates files as open(2) would, 0666 less the umask", "[checkpoint]") {
  const support::TempDir dir;
  for (const mode_t mask : {mode_t{022}, mode_t{077}, mode_t{002}, mode_t{0}}) {
    INFO(fmt::format("umask {:03o}", mask));
    const Umask set(mask);
    const std::filesystem::path path = dir / fmt::format("file-{:03o}", mask);
    cs::write_atomically(path, "new");
    CHECK(permissions(path) == (0666U & ~mask));
    cs::write_atomically(path, "replaced");  // a replacement is a new file, made alike
    CHECK(permissions(path) == (0666U & ~mask));
  }
}

TEST_CASE("checkpoint: a bare file name is relative to the current directory", "[checkpoint]") {
  const support::TempDir dir;
  cs::RandomSampler sampler({.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 7});
  (void)sampler.sample(1'000);
  const cs::SamplerState state = sampler.state(3);
  {
    const WorkingDirectory inside(dir.path());
    cs::write_atomically("weights.bin", "weights");
    cs::save_state("job.state", state);
    CHECK(cs::load_state("job.state") == state);
    const auto e = thrown<cs::StateFileError>([] { (void)cs::load_state("other.state"); });
    REQUIRE(e);
    CHECK_THAT(e->what(), Contains("\"other.state\""));
  }
  CHECK(support::entries(dir.path()) == std::vector<std::string>{"job.state", "weights.bin"});
  CHECK(support::read_bytes(dir / "weights.bin") == "weights");
  CHECK(cs::load_state(dir / "job.state") == state);
}

}  // namespace test_checkpoint
