// SPDX-License-Identifier: MIT
// SamplerState: the text form round-trips for any valid state, parse() refuses malformed text
// naming the bad field, and restore() refuses states of another configuration, seed, kind of
// sampler, world size (contiguous mode) or worker, and points beyond the epoch.

#include <chunksampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_sampler_state {

namespace {

namespace cs = chunksampler;
using Catch::Matchers::Contains;

constexpr std::int64_t max_size = std::int64_t{1} << 62;

// The message of the std::invalid_argument `f` throws; fails the test if it throws nothing or
// anything else.
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("threw another exception: " << e.what());
  }
  FAIL("threw nothing");
  return {};
}

// True when `word` occurs in `text` as a whole word (not inside a longer identifier).
bool names(const std::string& text, const std::string& word) {
  const auto is_ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_'; };
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !is_ident(text[at - 1]);
    const bool ends = at + word.size() == text.size() || !is_ident(text[at + word.size()]);
    if (starts && ends) return true;
  }
  return false;
}

// Parsing `text` throws std::invalid_argument whose message names `field`.
void require_rejected(const std::string& text, const std::string& field) {
  INFO("text: " << text);
  const std::string message = invalid_argument_message([&] { (void)cs::SamplerState::parse(text); });
  INFO("message: " << message);
  CHECK(names(message, field));
  CHECK_THROWS_AS(cs::SamplerState::parse(text), cs::StateError);
}

// A value in [lo, hi], often one of its ends.
std::int64_t edgy(support::ConfigRng& g, std::int64_t lo, std::int64_t hi) {
  switch (g.between(0, 4)) {
    case 0: return lo;
    case 1: return hi;
    case 2: return g.between(lo, std::min(hi, lo + 10));
    default: return g.between(lo, hi);
  }
}
std::uint64_t edgy_unsigned(support::ConfigRng& g) {
  switch (g.between(0, 3)) {
    case 0: return 0;
    case 1: return ~std::uint64_t{0};
    default: return g.next();
  }
}

cs::SamplerState random_state(support::ConfigRng& g) {
  cs::detail::StateFields s;
  s.fingerprint = edgy_unsigned(g);
  s.order_generation = static_cast<std::uint32_t>(edgy(g, 1, std::int64_t{0xffffffff}));
  s.seed = edgy_unsigned(g);
  s.epoch = edgy_unsigned(g);
  if (g.between(0, 7) == 0) return cs::detail::StateAccess::make(s);  // n_obs=any: the start of an epoch, nothing more
  s.n_obs = edgy(g, 0, max_size);
  s.batches_done = edgy(g, 0, max_size);
  s.world_size = edgy(g, 1, max_size);
  s.plan_world_size = edgy(g, 1, max_size);
  s.num_workers = edgy(g, 1, max_size);
  s.worker = edgy(g, 0, s.num_workers - 1);
  if (g.between(0, 3) == 0) return cs::detail::StateAccess::make(s);  // runs=all, dealt_at=0
  // Ordered, non-empty runs (or none); neighbours may touch; the last may end at 2^62.
  std::vector<cs::BatchRun>& runs = s.runs.emplace();
  const std::int64_t count = g.between(0, 6);
  std::int64_t previous_end = 0;
  for (std::int64_t i = 0; i < count && previous_end < max_size; ++i) {
    const bool large = g.coin();
    const std::int64_t gap = large ? g.between(0, max_size / 8) : g.between(0, 3);
    const std::int64_t begin = std::min(max_size - 1, previous_end + gap);
    const std::int64_t end = std::min(max_size, begin + (large ? g.between(1, max_size / 8) : g.between(1, 9)));
    runs.push_back({begin, end});
    previous_end = end;
  }
  s.dealt_at = edgy(g, 0, s.batches_done);
  return cs::detail::StateAccess::make(s);
}

// The fields of a valid state's text, each "name=value", after the header.
struct Fields {
  std::vector<std::pair<std::string, std::string>> items = {{"fingerprint", "00000000000000ab"},
                                                            {"order_generation", "1"},
                                                            {"seed", "7"},
                                                            {"epoch", "3"},
                                                            {"n_obs", "1000"},
                                                            {"batches_done", "12"},
                                                            {"world_size", "4"},
                                                            {"num_workers", "3"},
                                                            {"worker", "1"},
                                                            {"plan_world_size", "2"},
                                                            {"runs", "0-5,9-12"},
                                                            {"dealt_at", "4"}};
  std::string header = "chunksampler-state/6";

  [[nodiscard]] std::string text() const {
    std::string t = header;
    for (const auto& [name, value] : items) t += " " + name + "=" + value;
    return t;
  }
  Fields& set(const std::string& name, const std::string& value) {
    for (auto& item : items)
      if (item.first == name) item.second = value;
    return *this;
  }
};

}  // namespace

TEST_CASE("SamplerState text: the documented format", "[state]") {
  const cs::SamplerState state = cs::detail::StateAccess::make({.fingerprint = 0xab,
                                                                .seed = 7,
                                                                .epoch = 3,
                                                                .n_obs = 1000,
                                                                .batches_done = 12,
                                                                .world_size = 4,
                                                                .plan_world_size = 2,
                                                                .num_workers = 3,
                                                                .worker = 1,
                                                                .runs = std::vector<cs::BatchRun>{{0, 5}, {9, 12}},
                                                                .dealt_at = 4});
  CHECK(state.to_string() == Fields{}.text());
  CHECK(
      state.to_string() ==
      "chunksampler-state/6 fingerprint=00000000000000ab order_generation=1 seed=7 epoch=3 n_obs=1000 batches_done=12 "
      "world_size=4 num_workers=3 worker=1 plan_world_size=2 runs=0-5,9-12 dealt_at=4");
  CHECK(cs::SamplerState::parse(Fields{}.text()) == state);

  const cs::SamplerState plain{};
  CHECK(plain.to_string() ==
        "chunksampler-state/6 fingerprint=0000000000000000 order_generation=1 seed=0 epoch=0 n_obs=any batches_done=0 "
        "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=all dealt_at=0");
  CHECK(cs::SamplerState::parse(plain.to_string()) == plain);

  // every batch (runs=all) and no batch (runs=none) are different states
  const cs::SamplerState none = support::edited(plain, [](cs::detail::StateFields& f) { f.runs.emplace(); });
  CHECK(none.to_string() ==
        "chunksampler-state/6 fingerprint=0000000000000000 order_generation=1 seed=0 epoch=0 n_obs=any batches_done=0 "
        "world_size=1 num_workers=1 worker=0 plan_world_size=1 runs=none dealt_at=0");
  CHECK(cs::SamplerState::parse(none.to_string()) == none);
  CHECK_FALSE(none == plain);
}

TEST_CASE("SamplerState text round-trips for any valid state", "[state]") {
  support::ConfigRng g(40001);
  int with_runs = 0;
  int all_runs = 0;
  int no_runs = 0;
  int at_limits = 0;
  int later_generations = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const cs::SamplerState state = random_state(g);
    const std::string text = state.to_string();
    INFO(text);
    const cs::SamplerState parsed = cs::SamplerState::parse(text);
    REQUIRE(parsed == state);
    REQUIRE(parsed.to_string() == text);
    CHECK(text.find('\n') == std::string::npos);
    with_runs += support::fields(state).runs && !support::fields(state).runs->empty() ? 1 : 0;
    all_runs += support::fields(state).runs ? 0 : 1;
    no_runs += support::fields(state).runs && support::fields(state).runs->empty() ? 1 : 0;
    at_limits += state.batches_done() == max_size || state.seed() == ~std::uint64_t{0} ? 1 : 0;
    later_generations += state.order_generation() > 1 ? 1 : 0;
  }
  CHECK(later_generations > 1000);
  CHECK(with_runs > 1000);
  CHECK(all_runs > 300);
  CHECK(no_runs > 100);
  CHECK(at_limits > 100);
}

TEST_CASE("SamplerState::parse rejects malformed text, naming the field", "[state]") {
  const Fields valid;
  REQUIRE_NOTHROW(cs::SamplerState::parse(valid.text()));

  SECTION("a missing field") {
    for (std::size_t i = 0; i < valid.items.size(); ++i) {
      Fields f = valid;
      f.items.erase(f.items.begin() + static_cast<std::ptrdiff_t>(i));
      require_rejected(f.text(), valid.items[i].first);
    }
    require_rejected(valid.header, "fingerprint");
  }
  SECTION("fields in the wrong order") {
    for (std::size_t i = 0; i + 1 < valid.items.size(); ++i) {
      Fields f = valid;
      std::swap(f.items[i], f.items[i + 1]);
      require_rejected(f.text(), valid.items[i].first);
    }
  }
  SECTION("a misspelt or unvalued field") {
    for (std::size_t i = 0; i < valid.items.size(); ++i) {
      const std::string& name = valid.items[i].first;
      Fields misspelt = valid;
      misspelt.items[i].first += "x";
      require_rejected(misspelt.text(), name);
      std::string no_equals = valid.text();
      const std::string key = " " + name + "=";
      no_equals.replace(no_equals.find(key), key.size(), " " + name + " ");
      require_rejected(no_equals, name);
    }
  }
  SECTION("a bad number") {
    for (const std::string bad : {"", "abc", "12x", "1.5", "+1", "1e3", "0x1", "1-2"}) {
      INFO("value " << bad);
      for (const char* name : {"order_generation", "seed", "epoch", "n_obs", "batches_done", "world_size",
                               "plan_world_size", "num_workers", "worker", "dealt_at"})
        require_rejected(Fields(valid).set(name, bad).text(), name);
    }
    for (const std::string bad : {"", "xyz", "0x1f", "-1", "+1", "12g4", "1.0"})
      require_rejected(Fields(valid).set("fingerprint", bad).text(), "fingerprint");
    // fingerprint is hexadecimal, the others decimal
    CHECK(cs::SamplerState::parse(Fields(valid).set("fingerprint", "ff").text()).fingerprint() == 0xff);
    CHECK(cs::SamplerState::parse(Fields(valid).set("seed", "10").text()).seed() == 10);
  }
  SECTION("numbers out of range") {
    require_rejected(Fields(valid).set("fingerprint", "10000000000000000").text(), "fingerprint");  // 2^64
    for (const char* name : {"seed", "epoch"})
      require_rejected(Fields(valid).set(name, "18446744073709551616").text(), name);  // 2^64
    CHECK(cs::SamplerState::parse(Fields(valid).set("seed", "18446744073709551615").text()).seed() ==
          ~std::uint64_t{0});
    require_rejected(Fields(valid).set("order_generation", "4294967296").text(), "order_generation");  // 2^32
    CHECK(cs::SamplerState::parse(Fields(valid).set("order_generation", "4294967295").text()).order_generation() ==
          0xffffffffU);
    for (const char* name : {"n_obs", "batches_done", "world_size", "plan_world_size", "num_workers", "dealt_at"}) {
      require_rejected(Fields(valid).set(name, "9223372036854775808").text(), name);  // 2^63
      require_rejected(Fields(valid).set(name, "4611686018427387905").text(), name);  // 2^62 + 1
    }
    CHECK(cs::SamplerState::parse(Fields(valid).set("batches_done", "4611686018427387904").text()).batches_done() ==
          max_size);
  }
  SECTION("negative or zero values") {
    for (const char* name : {"order_generation", "seed", "epoch", "n_obs", "batches_done", "world_size",
                             "plan_world_size", "num_workers", "worker", "dealt_at"})
      require_rejected(Fields(valid).set(name, "-1").text(), name);
    for (const char* name : {"order_generation", "world_size", "plan_world_size", "num_workers"})
      require_rejected(Fields(valid).set(name, "0").text(), name);
    CHECK(cs::SamplerState::parse(Fields(valid).set("batches_done", "0").set("dealt_at", "0").text()).batches_done() ==
          0);
  }
  SECTION("dealt_at beyond batches, or with every batch") {
    require_rejected(Fields(valid).set("batches_done", "12").set("dealt_at", "13").text(), "dealt_at");
    require_rejected(Fields(valid).set("runs", "all").set("dealt_at", "1").text(), "dealt_at");
    CHECK(support::fields(cs::SamplerState::parse(Fields(valid).set("dealt_at", "12").text())).dealt_at == 12);
    CHECK(support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "none").set("dealt_at", "12").text()))
              .dealt_at == 12);
    CHECK_FALSE(
        support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "all").set("dealt_at", "0").text())).runs);
  }
  SECTION("n_obs=any only at the start of an epoch") {
    require_rejected(Fields(valid).set("n_obs", "any").text(), "n_obs=any");
    require_rejected(Fields(valid).set("n_obs", "none").text(), "n_obs");
    const cs::SamplerState start =
        cs::SamplerState::parse(Fields(valid).set("n_obs", "any").set("batches_done", "0").set("dealt_at", "0").text());
    CHECK_FALSE(start.n_obs());
    CHECK(cs::SamplerState::parse(Fields(valid).set("n_obs", "0").text()).n_obs() == 0);
  }
  SECTION("worker >= workers") {
    require_rejected(Fields(valid).set("num_workers", "3").set("worker", "3").text(), "worker");
    require_rejected(Fields(valid).set("num_workers", "1").set("worker", "1").text(), "worker");
    CHECK(cs::SamplerState::parse(Fields(valid).set("num_workers", "3").set("worker", "2").text()).worker() == 2);
  }
  SECTION("bad runs") {
    for (const std::string bad : {"5-9,1-3",
                                  "1-5,4-8",
                                  "3-3",
                                  "5-3",
                                  "",
                                  "-",
                                  "1-3,",
                                  ",1-3",
                                  "1-3,,4-5",
                                  "a-3",
                                  "1-b",
                                  "7",
                                  "1-2-3",
                                  "-1-3",
                                  "0--3",
                                  "4611686018427387904-4611686018427387905",
                                  "0-4611686018427387905",
                                  "1-3,2-3",
                                  "All",
                                  "all,1-2",
                                  "none,1-2"}) {
      INFO("runs " << bad);
      require_rejected(Fields(valid).set("runs", bad).text(), "run");
    }
    // neighbours may touch, a run may end at 2^62, "none" is the empty list and "all" no list
    CHECK(support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "1-3,3-4").text())).runs ==
          std::vector<cs::BatchRun>{{1, 3}, {3, 4}});
    CHECK(support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "0-4611686018427387904").text())).runs ==
          std::vector<cs::BatchRun>{{0, max_size}});
    CHECK(support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "none").text())).runs ==
          std::vector<cs::BatchRun>{});
    CHECK_FALSE(
        support::fields(cs::SamplerState::parse(Fields(valid).set("runs", "all").set("dealt_at", "0").text())).runs);
  }
  SECTION("trailing text") {
    require_rejected(valid.text() + " extra", "extra");
    require_rejected(valid.text() + " runs=1-2", "runs");
    require_rejected(valid.text() + " dealt_at=4", "dealt_at");
    require_rejected(valid.text() + " 0", "0");
  }
  SECTION("a wrong header") {
    for (const std::string header :
         {"chunksampler-state/7", "chunksampler-state", "Chunksampler-state/6", "chunksampler-state/6x", "state"}) {
      Fields f = valid;
      f.header = header;
      require_rejected(f.text(), "chunksampler-state/6");
    }
    require_rejected("", "chunksampler-state/6");
    require_rejected(valid.text().substr(valid.header.size() + 1), "chunksampler-state/6");
  }
  SECTION("a state of format 5 (chunksampler 0.3) has no order_generation: it reads as generation 1") {
    Fields v5 = valid;
    v5.header = "chunksampler-state/5";
    v5.items.erase(v5.items.begin() + 1);
    const cs::SamplerState state = cs::SamplerState::parse(v5.text());
    CHECK(state.order_generation() == 1);
    CHECK(state == cs::SamplerState::parse(valid.text()));
    CHECK(state.to_string() == valid.text());
    // a format-5 text with the field is neither format
    require_rejected(Fields(valid).set("order_generation", "1").text().replace(0, valid.header.size(), v5.header),
                     "seed");
  }
  SECTION("a state of format 3 or 4 (before the storage grid) is refused by name") {
    for (const char* header : {"chunksampler-state/3", "chunksampler-state/4"}) {
      Fields f = valid;
      f.header = header;
      require_rejected(f.text(), fmt::format("format {}", header));
      require_rejected(f.text(), "storage grid");
    }
  }
  SECTION("a state of format 2 (before the uniform chunk orders) is refused by name") {
    const std::string old =
        "chunksampler-state/2 fingerprint=00000000000000ab seed=7 epoch=3 n_obs=1000 batches=12 world_size=4 "
        "plan_world_size=2 workers=3 worker=1 runs=0-5,9-12 dealt_at=4";
    require_rejected(old, "format chunksampler-state/2");
    require_rejected(old, "another order");
  }
  SECTION("a state of format 1 (chunksampler 0.1, no n_obs) is refused by name") {
    const std::string old =
        "chunksampler-state/1 fingerprint=00000000000000ab seed=7 epoch=3 batches=12 world_size=4 plan_world_size=2 "
        "workers=3 worker=1 runs=0-5,9-12 dealt_at=4";
    require_rejected(old, "format chunksampler-state/1");
    require_rejected(old, "n_obs");
  }
}

namespace {

constexpr std::int64_t n_obs = 100;
const cs::RandomOptions base_options{.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6, .seed = 5};

// A state after three batches of epoch 2 of a sampler that played it.
template <class S>
cs::SamplerState played_state(S sampler, std::int64_t batches = 3, const cs::WorkerInfo& worker = {}) {
  sampler.set_epoch(2);
  (void)support::collect(sampler.sample(n_obs, worker));
  return sampler.state(batches);
}

template <class S>
std::string restore_message(S& sampler, const cs::SamplerState& state) {
  return invalid_argument_message([&] { sampler.restore(state); });
}

}  // namespace

TEST_CASE("restore refuses a state of another configuration or seed", "[state]") {
  const cs::SamplerState state = played_state(cs::RandomSampler(base_options));

  // the same configuration restores
  cs::RandomSampler same(base_options);
  REQUIRE_NOTHROW(same.restore(state));
  CHECK(support::observations(support::collect(same.sample(n_obs))).size() == 17 - 3);  // ceil(100 / 6) - 3

  struct Variant {
    const char* setting;
    cs::RandomOptions options;
  };
  const auto with = [](auto change) {
    cs::RandomOptions o = base_options;
    change(o);
    return o;
  };
  const Variant variants[] = {
      {"chunk_size", with([](cs::RandomOptions& o) { o.chunk_size = 2; })},
      {"batch_size", with([](cs::RandomOptions& o) { o.batch_size = 3; })},
      {"preload_nchunks", with([](cs::RandomOptions& o) { o.preload_nchunks = 6; })},
      {"drop_last", with([](cs::RandomOptions& o) { o.drop_last = true; })},
      {"mask", with([](cs::RandomOptions& o) { o.mask = cs::Slice{10, 90}; })},
      {"replacement", with([](cs::RandomOptions& o) { o.replacement = true; })},
      {"num_samples", with([](cs::RandomOptions& o) { o.num_samples = 50; })},
  };
  for (const Variant& v : variants) {
    INFO("another " << v.setting);
    cs::RandomSampler other(v.options);
    const std::string message = restore_message(other, state);
    INFO(message);
    CHECK(names(message, "fingerprint"));
    // refused, not half-applied: the sampler still plays its own epoch 0 from the start
    CHECK(other.epoch() == 0);
    cs::RandomSampler fresh(v.options);
    CHECK(support::collect(other.sample(n_obs)) == support::collect(fresh.sample(n_obs)));
  }

  SECTION("another seed") {
    cs::RandomOptions o = base_options;
    o.seed = 6;
    cs::RandomSampler other(o);
    const std::string message = restore_message(other, state);
    INFO(message);
    CHECK(names(message, "seed"));
  }
  SECTION("another kind of sampler with the same settings") {
    cs::SequentialSampler sequential({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6});
    CHECK(names(restore_message(sequential, state), "fingerprint"));
    cs::RandomSampler random(base_options);
    CHECK(names(restore_message(random, played_state(sequential)), "fingerprint"));
  }
  SECTION("a state that is not valid cannot be made, so it never reaches restore") {
    const auto make_message = [&](auto edit) {
      CHECK_THROWS_AS(support::edited(state, edit), cs::StateFormatError);
      return invalid_argument_message([&] { (void)support::edited(state, edit); });
    };
    CHECK(names(make_message([](cs::detail::StateFields& f) {
                  f.worker = 2;
                  f.num_workers = 2;
                }),
                "worker"));
    CHECK(names(make_message([](cs::detail::StateFields& f) { f.batches_done = -1; }), "batches_done"));
  }
}

TEST_CASE("restore refuses states of another kind of job", "[state]") {
  const cs::RandomSampler base(base_options);
  using Dist = cs::DistributedSampler<cs::RandomSampler>;

  SECTION("a distributed state into a plain sampler") {
    cs::RandomSampler plain(base);
    for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
      CHECK_THROWS_AS(plain.restore(played_state(Dist(base, cs::DistInfo{0, 2}, {.mode = mode}))),
                      std::invalid_argument);
      CHECK_THROWS_AS(plain.restore(played_state(Dist(base, cs::DistInfo{0, 1}, {.mode = mode}))),
                      std::invalid_argument);
    }
    // refused for being distributed, even with this sampler's fingerprint and seed
    const cs::SamplerState own = played_state(base);
    REQUIRE_NOTHROW(plain.restore(own));
    cs::SamplerState forged = own;
    forged = support::edited(forged, [&](cs::detail::StateFields& f) { f.world_size = 2; });
    CHECK(names(restore_message(plain, forged), "world_size"));
    forged = own;
    forged = support::edited(forged, [&](cs::detail::StateFields& f) { f.plan_world_size = 2; });
    CHECK_THROWS_AS(plain.restore(forged), std::invalid_argument);
    forged = own;
    forged = support::edited(forged, [&](cs::detail::StateFields& f) { f.runs = std::vector<cs::BatchRun>{{0, 5}}; });
    CHECK_THROWS_AS(plain.restore(forged), std::invalid_argument);
    forged = support::edited(forged, [](cs::detail::StateFields& f) { f.runs.emplace(); });  // none
    CHECK_THROWS_AS(plain.restore(forged), std::invalid_argument);
  }
  SECTION("a plain state into a DistributedSampler") {
    const cs::SamplerState own = played_state(base);
    for (const cs::ShardMode mode : {cs::ShardMode::contiguous, cs::ShardMode::global}) {
      Dist one(base, cs::DistInfo{0, 1}, {.mode = mode});
      CHECK(names(restore_message(one, own), "fingerprint"));
    }
  }
  SECTION("a contiguous-mode state on another world size") {
    const cs::SamplerState two = played_state(Dist(base, cs::DistInfo{1, 2}));
    for (const std::int64_t world : {1, 3, 4}) {
      Dist other(base, cs::DistInfo{0, world});
      const std::string message = restore_message(other, two);
      INFO(message);
      CHECK_THAT(message, Contains("ShardMode::global"));
      CHECK(names(message, "world_size"));
    }
    Dist same(base, cs::DistInfo{0, 2});
    CHECK_NOTHROW(same.restore(two));
    // a contiguous state carries no runs and a single world size
    cs::SamplerState forged = two;
    forged = support::edited(forged, [&](cs::detail::StateFields& f) { f.runs = std::vector<cs::BatchRun>{{0, 2}}; });
    CHECK_THROWS_AS(same.restore(forged), std::invalid_argument);
    forged = two;
    forged = support::edited(forged, [&](cs::detail::StateFields& f) { f.plan_world_size = 1; });
    CHECK_THROWS_AS(same.restore(forged), std::invalid_argument);
  }
  SECTION("another mode, remainder policy or batch rule") {
    const cs::SamplerState contiguous = played_state(Dist(base, cs::DistInfo{0, 2}));
    Dist global(base, cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global});
    CHECK(names(restore_message(global, contiguous), "fingerprint"));
    const cs::SamplerState padded =
        played_state(Dist(base, cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global, .remainder = cs::Remainder::pad}));
    CHECK(names(restore_message(global, padded), "fingerprint"));
    Dist rotate(base, cs::DistInfo{0, 2}, {.remainder = cs::Remainder::rotate});
    CHECK(names(restore_message(rotate, contiguous), "fingerprint"));
    Dist loose(base, cs::DistInfo{0, 2}, {.enforce_equal_batches = false});
    CHECK(names(restore_message(loose, contiguous), "fingerprint"));
    cs::RandomOptions o = base_options;
    o.seed = 9;
    Dist reseeded(cs::RandomSampler(o), cs::DistInfo{0, 2});
    CHECK(names(restore_message(reseeded, contiguous), "seed"));
    o = base_options;
    o.drop_last = true;
    Dist reconfigured(cs::RandomSampler(o), cs::DistInfo{0, 2});
    CHECK(names(restore_message(reconfigured, contiguous), "fingerprint"));
  }
  SECTION("an elastic restart from a worker's state") {
    const Dist global(base, cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global});
    const cs::SamplerState worker_state = played_state(global, 1, {.id = 1, .num_workers = 2});
    Dist three(base, cs::DistInfo{0, 3}, {.mode = cs::ShardMode::global});
    CHECK(names(restore_message(three, worker_state), "workers"));
    Dist two(base, cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global});
    CHECK_NOTHROW(two.restore(worker_state));
  }
}

TEST_CASE("a worker's state resumes only that worker", "[state]") {
  const cs::RandomSampler base(base_options);
  const cs::WorkerInfo mine{.id = 1, .num_workers = 3};
  const auto check = [&](const auto& sampler) {
    const cs::SamplerState state = played_state(sampler, 1, mine);
    CHECK(state.worker() == 1);
    CHECK(state.num_workers() == 3);
    auto restored = sampler;
    restored.restore(state);
    for (const cs::WorkerInfo other :
         {cs::WorkerInfo{0, 3}, cs::WorkerInfo{2, 3}, cs::WorkerInfo{1, 2}, cs::WorkerInfo{1, 4}, cs::WorkerInfo{}}) {
      INFO("sampled as worker " << other.id << " of " << other.num_workers);
      const std::string message = invalid_argument_message([&] { (void)restored.sample(n_obs, other); });
      INFO(message);
      CHECK(names(message, "worker"));
    }
    // the refused calls left the restored point pending: the right worker resumes from it
    auto reference = sampler;
    reference.set_epoch(2);
    const auto whole = support::observations(support::collect(reference.sample(n_obs, mine)));
    REQUIRE(whole.size() > 1);
    CHECK(support::observations(support::collect(restored.sample(n_obs, mine))) ==
          std::vector<std::vector<std::int64_t>>(whole.begin() + 1, whole.end()));
  };
  SECTION("RandomSampler") { check(base); }
  SECTION("DistributedSampler, contiguous") { check(cs::DistributedSampler(base, cs::DistInfo{1, 2})); }
  SECTION("DistributedSampler, global") {
    check(cs::DistributedSampler(base, cs::DistInfo{1, 2}, {.mode = cs::ShardMode::global}));
  }
}

TEST_CASE("a state beyond the epoch is refused by sample()", "[state]") {
  const cs::RandomSampler base(base_options);
  const auto check = [&](const auto& sampler, const cs::WorkerInfo& worker) {
    auto probe = sampler;
    probe.set_epoch(2);
    const std::int64_t n = probe.n_batches(n_obs, worker);
    REQUIRE(n > 0);
    {
      // at the end: nothing left, then the next epoch from its start
      auto at_end = sampler;
      at_end.restore(played_state(sampler, n, worker));
      CHECK(support::collect(at_end.sample(n_obs, worker)).empty());
      auto next = sampler;
      next.set_epoch(3);
      CHECK(support::collect(at_end.sample(n_obs, worker)) == support::collect(next.sample(n_obs, worker)));
    }
    for (const std::int64_t beyond : {n + 1, n + 100, max_size}) {
      INFO("batches " << beyond << " of " << n);
      auto restored = sampler;
      restored.restore(played_state(sampler, beyond, worker));
      const std::string message = invalid_argument_message([&] { (void)restored.sample(n_obs, worker); });
      INFO(message);
      CHECK(names(message, "batches_done"));
    }
  };
  const cs::SequentialSampler sequential({.chunk_size = 4, .preload_nchunks = 3, .batch_size = 6});
  for (const cs::WorkerInfo worker : {cs::WorkerInfo{}, cs::WorkerInfo{1, 3}}) {
    INFO("worker " << worker.id << " of " << worker.num_workers);
    check(base, worker);
    check(sequential, worker);
    check(cs::DistributedSampler(base, cs::DistInfo{1, 3}), worker);
    check(cs::DistributedSampler(base, cs::DistInfo{1, 3}, {.mode = cs::ShardMode::global}), worker);
  }
  SECTION("a global state whose runs go past the epoch") {
    const cs::DistributedSampler global(base, cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global});
    cs::SamplerState state = played_state(global, 0);
    state = support::edited(state, [&](cs::detail::StateFields& f) { f.runs = std::vector<cs::BatchRun>{{0, 1000}}; });
    auto restored = global;
    restored.restore(state);
    CHECK_THROWS_AS(restored.sample(n_obs), std::invalid_argument);
  }
  SECTION("negative or oversized points are not states") {
    CHECK_THROWS_AS(base.state(-1), std::invalid_argument);
    CHECK_THROWS_AS(base.state(max_size + 1), std::invalid_argument);
    CHECK_THROWS_AS(cs::DistributedSampler(base, cs::DistInfo{0, 2}).state(-1), std::invalid_argument);
  }
}

}  // namespace test_sampler_state
