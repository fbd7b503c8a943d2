// SPDX-License-Identifier: MIT
// Threads: the thread-safety rules of the README, each checked against the same work done on one
// thread (scripts/test.sh also runs the whole suite under ThreadSanitizer, the `tsan` preset):
//  1. Samplers share nothing mutable, copies included (ClassSampler's copies share their run
//     table read-only, through a shared_ptr to const): one sampler per thread, any calls.
//  2. The const members of one sampler (n_batches, validate, epoch_size, plan, state,
//     fingerprint, shard, ...) may run on many threads at once while no thread calls a non-const
//     one (sample, set_epoch, restore, update_weights).
//  3. A range from sample() needs nothing of its sampler: another thread may read it while the
//     sampler samples on, changes or is destroyed. A range is one input stream: one thread at a
//     time reads it, handed over with a happens-before (a join, a mutex, ...).
//  4. A plan is immutable: fill(k, buffers) on one plan from many threads, each with its own buffers.
// Catch2's assertions are not thread-safe: the threads only record, the main thread checks.
#include <chunksampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <latch>
#include <optional>
#include <ranges>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_threads {

namespace {

namespace cs = chunksampler;
using support::OwnedRequest;
using Requests = std::vector<OwnedRequest>;

constexpr std::int64_t n_obs = 12'000;

// Runs f(0), ..., f(n - 1) on n threads released together (so their work overlaps); rethrows
// here the first exception a thread threw.
template <class F>
void on_threads(std::size_t n, F&& f) {
  std::latch start(static_cast<std::ptrdiff_t>(n));
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    threads.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      threads.emplace_back([&start, &errors, &f, i] {
        start.arrive_and_wait();
        try {
          f(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

// Class codes in runs of 50 of 5 classes (class 3 has weight 0 below).
std::vector<std::int32_t> make_codes() {
  support::ConfigRng g(17);
  std::vector<std::int32_t> codes;
  while (std::ssize(codes) < n_obs) codes.insert(codes.end(), 50, static_cast<std::int32_t>(g.between(0, 4)));
  return codes;
}
const std::vector<std::int32_t> codes = make_codes();

// Calls f(name, make) for every kind of sampler, `make()` returning a fresh one.
template <class F>
void for_each_kind(F&& f) {
  const auto random = [](std::uint64_t seed) {
    return cs::RandomSampler({.chunk_size = 16, .preload_nchunks = 8, .batch_size = 32, .seed = seed});
  };
  const auto class_sampler = [] {
    return cs::ClassSampler(codes, {.chunk_size = 16,
                                    .preload_nchunks = 4,
                                    .batch_size = 32,
                                    .seed = 5,
                                    .num_samples = 9'000,
                                    .class_weights = {1, 2, 1, 0, 3}});
  };
  const auto mixture = [] {
    return cs::MixtureSampler({5'000, 4'000, 3'000}, {.chunk_size = 16,
                                                      .preload_nchunks = 4,
                                                      .batch_size = 32,
                                                      .seed = 6,
                                                      .num_samples = 10'000,
                                                      .weights = {1, 2, 1}});
  };
  const cs::DistributedOptions global_pad{.mode = cs::ShardMode::global, .remainder = cs::Remainder::pad};
  f("RandomSampler", [&] { return random(1); });
  f("RandomSampler with replacement", [] {
    return cs::RandomSampler({.chunk_size = 16,
                              .preload_nchunks = 4,
                              .batch_size = 16,
                              .seed = 2,
                              .replacement = true,
                              .num_samples = 9'000});
  });
  f("SequentialSampler", [] {
    return cs::SequentialSampler(
        {.chunk_size = 32, .preload_nchunks = 4, .batch_size = 64, .mask = cs::Slice{100, 11'900}});
  });
  f("DistributedSampler, contiguous", [&] { return cs::DistributedSampler(random(3), cs::DistInfo{1, 3}); });
  f("DistributedSampler, global, pad",
    [&] { return cs::DistributedSampler(random(4), cs::DistInfo{2, 3}, global_pad); });
  f("ClassSampler", class_sampler);
  f("DistributedSampler<ClassSampler>, global",
    [&] { return cs::DistributedSampler(class_sampler(), cs::DistInfo{0, 2}, {.mode = cs::ShardMode::global}); });
  f("MixtureSampler", mixture);
  f("DistributedSampler<MixtureSampler>, contiguous",
    [&] { return cs::DistributedSampler(mixture(), cs::DistInfo{1, 2}); });
}

template <class S>
constexpr bool is_distributed = requires(const S& s) { s.world_size(); };

// Work on one sampler: two epochs, a jump to epoch 7, and its rest after 3 batches resumed
// through a state's text on a copy.
template <class S>
std::vector<Requests> play(S sampler) {
  std::vector<Requests> epochs;
  epochs.push_back(support::epoch(sampler, n_obs));
  epochs.push_back(support::epoch(sampler, n_obs));
  sampler.set_epoch(7);
  epochs.push_back(support::epoch(sampler, n_obs));
  S resumed = sampler;
  resumed.restore(cs::SamplerState::parse(sampler.state(3).to_string()));
  epochs.push_back(support::epoch(resumed, n_obs));
  return epochs;
}

// Between two epochs, what a training loop may change: a mixture's weights, or the epoch.
template <class S>
void change(S& sampler, std::size_t epoch) {
  const std::vector<double> weights = epoch % 2 == 0 ? std::vector<double>{3, 1, 1} : std::vector<double>{1, 1, 3};
  if constexpr (std::is_same_v<S, cs::MixtureSampler>) sampler.update_weights(weights);
  else if constexpr (std::is_same_v<S, cs::DistributedSampler<cs::MixtureSampler>>) sampler.update_weights(weights);
  else if (epoch == 1) sampler.set_epoch(10);
}

// What the const members answer; equal answers from every thread is rule 2's property.
struct Answers {
  std::int64_t batches = 0;
  std::int64_t worker_batches = 0;
  std::uint64_t epoch = 0;
  std::uint64_t fingerprint = 0;
  std::string state;
  std::optional<cs::Ranges> shard;
  std::int64_t epoch_size = 0;
  Requests plan;  ///< every request of the plan of epoch 4

  friend bool operator==(const Answers&, const Answers&) = default;
};

template <class S>
Answers ask(const S& sampler) {
  Answers a;
  sampler.validate(n_obs);
  a.batches = sampler.n_batches(n_obs);
  a.worker_batches = sampler.n_batches(n_obs, cs::WorkerInfo{.id = 1, .num_workers = 3});
  a.epoch = sampler.epoch();
  a.fingerprint = sampler.fingerprint();
  a.state = sampler.state(a.batches / 2).to_string();
  if constexpr (is_distributed<S>) {
    a.shard = sampler.shard(n_obs);
  } else {
    a.epoch_size = sampler.epoch_size(n_obs);
    const auto plan = sampler.plan(n_obs, 4);
    cs::RequestBuffers buffers;
    for (std::int64_t k = 0; k < plan.n_requests(); ++k) {
      plan.fill(k, buffers);
      a.plan.push_back({buffers.chunks, {buffers.positions}});
    }
  }
  return a;
}

}  // namespace

TEST_CASE("threads: one sampler per thread gives what it gives alone", "[threads]") {
  std::vector<std::string> names;
  std::vector<bool> shuffled;
  std::vector<std::function<std::vector<Requests>()>> jobs;
  for_each_kind([&](const char* name, auto make) {
    names.emplace_back(name);
    shuffled.push_back(make().shuffle());
    // Built here, played by copy on the job's thread.
    jobs.emplace_back([sampler = make()] { return play(sampler); });
  });
  std::vector<std::vector<Requests>> alone;
  for (const auto& job : jobs) alone.push_back(job());
  std::vector<std::vector<Requests>> together(jobs.size());
  on_threads(jobs.size(), [&](std::size_t i) { together[i] = jobs[i](); });
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    INFO(names[i]);
    REQUIRE(alone[i].size() == 4);
    CHECK(together[i] == alone[i]);
    // The comparison says something: the epochs hold many batches and, shuffled, differ.
    CHECK(support::n_batches(alone[i][0]) >= 50);
    if (shuffled[i]) CHECK(alone[i][0] != alone[i][1]);
  }
}

TEST_CASE("threads: copies of one sampler, made and played on several threads", "[threads]") {
  constexpr std::size_t n_threads = 4;
  for_each_kind([&](const char* name, auto make) {
    INFO(name);
    const auto original = make();
    using S = std::remove_const_t<decltype(original)>;
    // Each thread copies the one original (a const read, shared_ptr copies included) and plays
    // its own epoch, then resumes that epoch after 5 batches on a second copy.
    const auto work = [&original](std::size_t t) {
      S mine = original;
      mine.set_epoch(t);
      std::vector<Requests> result{support::epoch(mine, n_obs)};
      S resumed = original;
      resumed.restore(mine.state(5));
      result.push_back(support::epoch(resumed, n_obs));
      return result;
    };
    std::vector<std::vector<Requests>> alone;
    for (std::size_t t = 0; t < n_threads; ++t) alone.push_back(work(t));
    std::vector<std::vector<Requests>> together(n_threads);
    on_threads(n_threads, [&](std::size_t t) { together[t] = work(t); });
    CHECK(together == alone);
    if (original.shuffle()) CHECK(alone[0][0] != alone[1][0]);
  });
}

TEST_CASE("threads: const members of one shared sampler, called from many threads at once", "[threads]") {
  constexpr std::size_t n_threads = 4;
  for_each_kind([&](const char* name, auto make) {
    INFO(name);
    auto prepared = make();
    // Mid-epoch after an elastic restart (global mode), so that state() reads the dealt runs.
    if constexpr (is_distributed<decltype(prepared)>) {
      if (prepared.options().mode == cs::ShardMode::global) {
        cs::DistributedSampler other(prepared.sampler(), cs::DistInfo{0, 4}, prepared.options());
        (void)other.sample(n_obs);
        prepared.restore(other.state(2));
      }
    }
    (void)support::epoch(prepared, n_obs);
    const auto& shared = prepared;
    const Answers alone = ask(shared);
    if constexpr (is_distributed<decltype(prepared)>)
      if (shared.options().mode == cs::ShardMode::global) CHECK(alone.state.find("dealt_at=2") != std::string::npos);
    std::vector<std::vector<Answers>> together(n_threads);
    on_threads(n_threads, [&](std::size_t t) {
      for (int i = 0; i < 3; ++i) together[t].push_back(ask(shared));
    });
    for (const std::vector<Answers>& answers : together)
      for (const Answers& a : answers) CHECK(a == alone);
  });
}

TEST_CASE("threads: ranges read on other threads while their sampler samples on and dies", "[threads]") {
  constexpr std::size_t n_epochs = 4;
  for_each_kind([&](const char* name, auto make) {
    INFO(name);
    using S = decltype(make());
    std::vector<Requests> alone;
    {
      S sampler = make();
      for (std::size_t e = 0; e < n_epochs; ++e) {
        alone.push_back(support::epoch(sampler, n_obs));
        change(sampler, e);
      }
    }
    std::vector<Requests> handed(n_epochs);
    {
      std::vector<std::jthread> readers;
      {
        S sampler = make();
        for (std::size_t e = 0; e < n_epochs; ++e) {
          readers.emplace_back(
              [&handed, e, range = sampler.sample(n_obs)]() mutable { handed[e] = support::collect(range); });
          change(sampler, e);  // mutates the sampler while earlier ranges are being read
        }
      }  // the sampler dies; its ranges live on
    }  // the readers join
    CHECK(handed == alone);
    CHECK(support::n_batches(alone[0]) >= 50);
  });
}

TEST_CASE("threads: one range read by two threads in turn", "[threads]") {
  for_each_kind([&](const char* name, auto make) {
    INFO(name);
    auto sampler = make();
    const Requests alone = support::epoch(sampler, n_obs);
    sampler.set_epoch(0);
    auto range = sampler.sample(n_obs);
    std::ranges::iterator_t<decltype(range)> it;
    Requests read;
    // The first thread starts the stream and reads half of it; the join hands it to the second.
    std::jthread([&] {
      it = range.begin();
      for (std::size_t i = 0; i < alone.size() / 2 && it != range.end(); ++i, ++it) read.push_back(support::own(*it));
    }).join();
    std::jthread([&] {
      for (; it != range.end(); ++it) read.push_back(support::own(*it));
    }).join();
    CHECK(read == alone);
  });
}

TEST_CASE("threads: one plan filled from many threads, each with its own buffers", "[threads]") {
  constexpr std::size_t n_threads = 4;
  for_each_kind([&](const char* name, auto make) {
    const auto sampler = make();
    if constexpr (!is_distributed<decltype(sampler)>) {
      INFO(name);
      const auto plan = sampler.plan(n_obs, 2);
      const auto n = static_cast<std::size_t>(plan.n_requests());
      const auto fill_all = [&plan, n](std::size_t first) {
        // Every request, from a different one on each thread, into the thread's own buffers.
        std::vector<cs::RequestBuffers> result(n);
        cs::RequestBuffers buffers;
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t k = (first + i) % n;
          plan.fill(static_cast<std::int64_t>(k), buffers);
          result[k] = buffers;
        }
        return result;
      };
      const std::vector<cs::RequestBuffers> alone = fill_all(0);
      std::vector<std::vector<cs::RequestBuffers>> together(n_threads);
      on_threads(n_threads, [&](std::size_t t) { together[t] = fill_all(t * n / n_threads); });
      for (const auto& result : together)
        for (std::size_t k = 0; k < n; ++k) {
          CHECK(result[k].chunks == alone[k].chunks);
          CHECK(result[k].positions == alone[k].positions);
        }
    }
  });
}

TEST_CASE("threads: a rank's workers, each a copy on its own thread, read its epoch between them", "[threads]") {
  constexpr std::size_t n_workers = 3;
  for_each_kind([&](const char* name, auto make) {
    INFO(name);
    const auto original = make();
    auto whole_sampler = original;
    const Requests whole = support::epoch(whole_sampler, n_obs);
    std::vector<Requests> mine(n_workers);
    on_threads(n_workers, [&](std::size_t i) {
      auto worker = original;
      mine[i] = support::collect(worker.sample(n_obs, cs::WorkerInfo{.id = static_cast<std::int64_t>(i),
                                                                     .num_workers = std::int64_t{n_workers}}));
    });
    // Worker i reads requests i, i + 3, ... of the rank's stream.
    for (std::size_t i = 0; i < mine.size(); ++i) {
      Requests expected;
      for (std::size_t k = i; k < whole.size(); k += n_workers) expected.push_back(whole[k]);
      CHECK(mine[i] == expected);
    }
  });
}

}  // namespace test_threads
