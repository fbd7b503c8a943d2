// SPDX-License-Identifier: MIT

// fuzz_state: checkpoint text and what restore does with it.
//
// 1. The input as text: `SamplerState::parse` either refuses with a clear cs::StateError or
//    returns a state that passes `check()` and whose `to_string()` parses back to an equal state
//    with the same text.
// 2. The same bytes forge a state: a genuine one of a fixed sampler (its fingerprint and seed, so
//    restore gets past them), some of whose fields the input replaces. Any state the input yields
//    is restored into every fixed sampler (plain, distributed contiguous and global on several
//    world sizes, so elastic restores happen, with the state's worker). Restore either refuses, or:
//    a checkpoint taken before the first step names the restored point, `sample()` for another
//    worker is refused, and `sample()` for the state's worker either refuses before yielding
//    anything, saying the restored state is at fault (another n_obs, batches past the stream,
//    runs past the plan, or a plan world size too large for n_obs), or yields requests that keep
//    every per-batch invariant, and as many batches as the state leaves of the epoch.
//    `n_batches()` and `n_batches_left()` refuse exactly when `sample()` does, and otherwise
//    differ by the state's batches, the second being what the stream yields.

#include "fuzz_support.hpp"

#include <chunksampler.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace fuzz {
namespace {

constexpr std::int64_t n_obs = 1000;
constexpr std::int64_t max_batches = 300;
constexpr std::int64_t max_positions = 4096;

/// A sampler states are restored into, and what its requests must satisfy in an epoch.
template <class S>
struct Fixture {
  std::string_view name;
  S prototype;
  std::int64_t world_size = 1;
  std::function<Expect(std::uint64_t epoch)> expect;
};

[[nodiscard]] std::vector<std::int32_t> class_codes() {
  std::vector<std::int32_t> codes(static_cast<std::size_t>(n_obs));
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::int32_t>(i / 40 % 3);  // 25 runs of 40
  return codes;
}

const std::vector<std::int32_t> codes = class_codes();

[[nodiscard]] cs::RandomSampler random_base() {
  return cs::RandomSampler({.chunk_size = 10, .preload_nchunks = 3, .batch_size = 6, .seed = 7});
}
[[nodiscard]] cs::SequentialSampler sequential_base() {
  return cs::SequentialSampler(
      {.chunk_size = 16, .preload_nchunks = 2, .batch_size = 8, .drop_last = true, .mask = cs::Slice{100, 900}});
}
[[nodiscard]] cs::ClassSampler class_base() {
  return cs::ClassSampler(codes,
                          {.chunk_size = 5, .preload_nchunks = 4, .batch_size = 10, .seed = 11, .num_samples = 700});
}
[[nodiscard]] cs::WeightedClassSampler weighted_base() {
  return cs::WeightedClassSampler(codes, {.chunk_size = 5,
                                          .preload_nchunks = 4,
                                          .batch_size = 10,
                                          .seed = 17,
                                          .num_samples = 700,
                                          .composition = cs::Composition::stratified});
}
[[nodiscard]] cs::MixtureSampler mixture_base() {
  return cs::MixtureSampler(
      {300, 200, 500},
      {.chunk_size = 10, .preload_nchunks = 2, .batch_size = 5, .seed = 13, .weights = {1.0, 2.0, 0.5}});
}

// Every batch of a ClassSampler holds one class.
void one_class(std::span<const std::int64_t> observations) {
  const std::int32_t code = codes[static_cast<std::size_t>(observations.front())];
  for (const std::int64_t obs : observations)
    check(codes[static_cast<std::size_t>(obs)] == code, "a ClassSampler batch mixes classes");
}

template <class S>
[[nodiscard]] Expect plain_expect(const S& s, cs::Slice bounds) {
  return {.batch_size = s.batch_size(),
          .chunk_size = s.chunk_size(),
          .max_chunks = max_chunks_of(s),
          .bounds = bounds,
          .full_batches = s.drop_last(),
          .distinct_positions = true,
          .distinct_observations = false,
          .on_chunk = {},
          .on_batch = {}};
}

template <class S>
[[nodiscard]] Fixture<S> plain(std::string_view name, S sampler, cs::Slice bounds) {
  Expect e = plain_expect(sampler, bounds);
  if constexpr (std::is_same_v<S, cs::ClassSampler>) e.on_batch = one_class;
  return {name, std::move(sampler), 1, [e](std::uint64_t) { return e; }};
}

// A distributed fixture: chunks inside the rank's shard (contiguous) or the range (global, whose
// window depends on the world size the restored plan was laid out for).
template <class S>
[[nodiscard]] Fixture<cs::DistributedSampler<S>> distributed(std::string_view name, const S& base, std::int64_t rank,
                                                             std::int64_t world, cs::DistributedOptions o,
                                                             cs::Slice range) {
  cs::DistributedSampler<S> sampler(base, cs::DistInfo{.rank = rank, .world_size = world}, o);
  Expect e = plain_expect(base, range);
  e.full_batches = base.drop_last() || o.enforce_equal_batches;
  e.distinct_positions =
      o.remainder != cs::Remainder::pad || (o.mode == cs::ShardMode::global && !o.enforce_equal_batches);
  if constexpr (std::is_same_v<S, cs::ClassSampler>) e.on_batch = one_class;
  auto expect = [sampler, e, global = o.mode == cs::ShardMode::global](std::uint64_t epoch) {
    Expect result = e;
    if (!global) result.bounds = only_range(sampler.shard(n_obs, epoch));
    return result;
  };
  return {name, std::move(sampler), world, std::move(expect)};
}

[[nodiscard]] const auto& fixtures() {
  using cs::Remainder;
  using cs::ShardMode;
  constexpr cs::Slice all{0, n_obs};
  static const auto list = std::make_tuple(
      plain("plain random", random_base(), all), plain("plain sequential", sequential_base(), {100, 900}),
      plain("plain class", class_base(), all), plain("plain mixture", mixture_base(), all),
      plain("plain weighted class", weighted_base(), all),
      distributed("random, rank 1 of 3, contiguous drop", random_base(), 1, 3,
                  {.mode = ShardMode::contiguous, .remainder = Remainder::drop}, all),
      distributed("random, rank 2 of 3, contiguous pad, unequal", random_base(), 2, 3,
                  {.enforce_equal_batches = false, .mode = ShardMode::contiguous, .remainder = Remainder::pad}, all),
      distributed("random, rank 0 of 3, global pad", random_base(), 0, 3,
                  {.mode = ShardMode::global, .remainder = Remainder::pad}, all),
      distributed("random, rank 1 of 2, global pad", random_base(), 1, 2,
                  {.mode = ShardMode::global, .remainder = Remainder::pad}, all),
      distributed("random, rank 3 of 4, global drop", random_base(), 3, 4,
                  {.mode = ShardMode::global, .remainder = Remainder::drop}, all),
      distributed("random, rank 0 of 1, global drop", random_base(), 0, 1,
                  {.mode = ShardMode::global, .remainder = Remainder::drop}, all),
      distributed("random, rank 0 of 2, global, unequal", random_base(), 0, 2,
                  {.enforce_equal_batches = false, .mode = ShardMode::global}, all),
      distributed("sequential, rank 1 of 2, global rotate", sequential_base(), 1, 2,
                  {.mode = ShardMode::global, .remainder = Remainder::rotate}, {100, 900}),
      distributed("class, rank 0 of 2, contiguous drop", class_base(), 0, 2, {.mode = ShardMode::contiguous}, all),
      distributed("mixture, rank 1 of 2, global drop", mixture_base(), 1, 2, {.mode = ShardMode::global}, all),
      distributed("weighted class, rank 1 of 3, global pad", weighted_base(), 1, 3,
                  {.mode = ShardMode::global, .remainder = Remainder::pad}, all),
      distributed("weighted class, rank 0 of 2, contiguous drop", weighted_base(), 0, 2,
                  {.mode = ShardMode::contiguous}, all));
  return list;
}

template <class F>
void for_each_fixture(F&& f) {
  std::apply([&](const auto&... fixture) { (f(fixture), ...); }, fixtures());
}

// A refusal by sample() after restore must say the restored state is at fault: it names the
// restore, or (a plan laid out for the state's world size, too many ranks for n_obs) that world size.
[[nodiscard]] bool blames_state(std::string_view message, const cs::SamplerState& state) {
  return message.find("restore") != std::string_view::npos ||
         message.find(fmt::format("world_size ({})", cs::detail::StateAccess::fields(state).plan_world_size)) !=
             std::string_view::npos;
}

template <class S>
void restore_into(const Fixture<S>& fixture, const cs::SamplerState& state) {
  S sampler = fixture.prototype;
  if (!accepted([&] { sampler.restore(state); })) return;
  check(sampler.epoch() == state.epoch(), "restore moved to epoch {}, the state is of {}", sampler.epoch(),
        state.epoch());
  const cs::SamplerState pending = sampler.state(state.batches_done());
  // The same point, recorded as every state this version takes: in its own generation of the order
  // (RandomSampler restores an older generation's state where the orders did not change).
  cs::detail::StateFields expected = cs::detail::StateAccess::fields(state);
  expected.order_generation = cs::detail::order_generation_of<S>;
  check(pending == cs::detail::StateAccess::make(expected),
        "a checkpoint before the first step after restore is {:?}, the restored state {:?}", pending.to_string(),
        state.to_string());

  const cs::WorkerInfo worker{.id = state.worker(), .num_workers = state.num_workers()};
  std::string why;
  // A state at the start of an epoch no sample() had begun (n_obs=any) is no worker's point: any
  // worker, the whole rank too, begins it. Any other state is its worker's alone.
  if (worker != cs::WorkerInfo{} && state.n_obs().has_value()) {
    check(!accepted([&] { (void)sampler.sample(n_obs); }, &why) && why.find("restore") != std::string::npos,
          "sample() for the whole rank was not refused after restoring worker {} of {}", state.worker(),
          state.num_workers());
    check(sampler.epoch() == state.epoch(), "a refused sample() moved the epoch");
  }
  // n_batches and n_batches_left refuse what sample() refuses, and otherwise count what it
  // yields: the epoch from its start, and what is left of it after the state's batches.
  std::int64_t whole = -1;
  std::int64_t left = -1;
  const bool counted = accepted([&] {
    whole = sampler.n_batches(n_obs, worker);
    left = sampler.n_batches_left(n_obs, worker);
  });

  std::optional<typename S::range_type> range;
  if (!accepted([&] { range.emplace(sampler.sample(n_obs, worker)); }, &why)) {
    check(blames_state(why, state), "sample() after restore refused without naming the state: {:?}", why);
    check(!counted, "n_batches() counted ({}) a restored epoch that sample() refuses: {:?}", whole, why);
    check(sampler.epoch() == state.epoch(), "a refused sample() moved the epoch");
    return;
  }
  check(counted, "n_batches() refused a restored epoch that sample() accepts");
  check(whole - left == state.batches_done(), "n_batches() is {} and n_batches_left() {} after a restore at {}", whole,
        left, state.batches_done());
  check(range->n_batches() == left, "the range announces {} batches, n_batches_left() {}", range->n_batches(), left);
  check(sampler.epoch() == state.epoch() + 1, "sample() after restore did not move past the state's epoch");
  // A state's plan_world_size lays out a global pad plan padded to whole rounds of that many
  // ranks, all in its last request: past a few requests' size that one is not filled here.
  if (range->plan().max_positions() > max_positions) return;
  const Walk w = walk(*range, fixture.expect(state.epoch()), max_batches, max_positions);
  if (w.complete)
    check(w.batches == left, "restored at {} of {} batches, the stream yielded {}, not the {} announced",
          state.batches_done(), whole, w.batches, left);
}

void restore_everywhere(const cs::SamplerState& state) {
  const std::string input = context();
  for_each_fixture([&](const auto& fixture) {
    context() = fmt::format("{}; restored into {}", input, fixture.name);
    restore_into(fixture, state);
  });
  context() = input;
}

// Parsing, and the text of what was parsed.
void parse_text(std::string_view text) {
  context() = "the input as text";
  std::optional<cs::SamplerState> parsed;
  if (!accepted([&] { parsed = cs::SamplerState::parse(text); })) return;
  check(accepted([&] { (void)cs::detail::StateAccess::make(cs::detail::StateAccess::fields(*parsed)); }),
        "parse returned a state whose fields a sampler could not make");
  const std::string canonical = parsed->to_string();
  std::optional<cs::SamplerState> again;
  check(accepted([&] { again = cs::SamplerState::parse(canonical); }),
        "to_string() of a parsed state does not parse: {:?}", canonical);
  check(*again == *parsed, "the text {:?} parses to another state", canonical);
  check(again->to_string() == canonical, "to_string() is not stable: {:?}", canonical);
  restore_everywhere(*parsed);
}

// --- forged states ------------------------------------------------------------------------------

template <class S>
[[nodiscard]] cs::SamplerState genuine(const Fixture<S>& fixture, std::uint64_t epoch, const cs::WorkerInfo& worker,
                                       std::int64_t batches_done) {
  S sampler = fixture.prototype;
  sampler.set_epoch(epoch);
  (void)sampler.sample(n_obs, worker);
  return sampler.state(batches_done);
}

[[nodiscard]] std::int64_t count_value(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(0, 6) : size_value(in, 300);
}

[[nodiscard]] std::optional<std::vector<cs::BatchRun>> runs_value(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return std::nullopt;
  std::vector<cs::BatchRun> runs(in.ConsumeIntegralInRange<std::size_t>(0, 4));
  // Mostly ordered, non-empty runs after one another; sometimes any bound.
  const auto after = [&in](std::int64_t from, std::int64_t least) {
    const auto step = in.ConsumeIntegralInRange<std::int64_t>(least, 49);
    return from > std::numeric_limits<std::int64_t>::max() - step ? from : from + step;
  };
  std::int64_t at = 0;
  for (cs::BatchRun& run : runs) {
    run.begin = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? size_value(in, 300) : after(at, 0);
    run.end = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? size_value(in, 300) : after(run.begin, 1);
    at = run.end;
  }
  return runs;
}

// A genuine state of fixture `index`, then the fields the input chooses to replace.
void forge(FuzzedDataProvider& in) {
  const auto index =
      in.ConsumeIntegralInRange<std::size_t>(0, std::tuple_size_v<std::decay_t<decltype(fixtures())>> - 1);
  const std::uint64_t epoch = epoch_value(in);
  const cs::WorkerInfo worker = in.ConsumeBool() ? cs::WorkerInfo{} : worker_value(in);
  const std::int64_t done = count_value(in);
  std::optional<cs::SamplerState> state;
  std::size_t at = 0;
  for_each_fixture([&](const auto& fixture) {
    if (at++ == index) (void)accepted([&] { state = genuine(fixture, epoch, worker, done); });
  });
  if (!state) return;
  // The fields a sampler writes, replaced where the input says; a state is a value only the
  // samplers and parse() make, so one out of range cannot even be made (make() refuses it as
  // parse() does) and never reaches restore().
  cs::detail::StateFields f = cs::detail::StateAccess::fields(*state);
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) f.fingerprint = in.ConsumeIntegral<std::uint64_t>();
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) f.seed = in.ConsumeIntegral<std::uint64_t>();
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.epoch = epoch_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0)
    f.n_obs = in.ConsumeBool() ? std::nullopt : std::optional<std::int64_t>(count_value(in));
  if (in.ConsumeBool()) f.batches_done = count_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.world_size = count_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.plan_world_size = count_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.num_workers = count_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.worker = count_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.runs = runs_value(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) f.dealt_at = count_value(in);
  // Another generation of the order (read last, and on 1: an exhausted input reads 0 and keeps the genuine one).
  if (in.ConsumeIntegralInRange<int>(0, 31) == 1) f.order_generation = in.ConsumeIntegral<std::uint32_t>();

  std::optional<cs::SamplerState> made;
  if (!accepted([&] { made = cs::detail::StateAccess::make(f); })) return;
  const cs::SamplerState& s = *made;
  context() = fmt::format("state forged from fixture {}: {}", index, s.to_string());
  std::optional<cs::SamplerState> parsed;
  check(accepted([&] { parsed = cs::SamplerState::parse(s.to_string()); }),
        "the text of a valid state does not parse: {:?}", s.to_string());
  check(*parsed == s, "a valid state's text parses to another state: {:?}", s.to_string());
  restore_everywhere(s);
}

}  // namespace
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::guard([&] {
    fuzz::parse_text(std::string_view(reinterpret_cast<const char*>(data), size));
    FuzzedDataProvider in(data, size);
    fuzz::forge(in);
  });
  return 0;
}
