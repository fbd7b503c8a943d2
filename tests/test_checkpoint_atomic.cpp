// SPDX-License-Identifier: MIT
// checkpoint.hpp under crashes and concurrency: a process SIGKILLed at random moments while it
// saves state after state leaves a checkpoint that loads as one of the states it saved (or the
// one before), never a torn one, and the kills demonstrably landed inside save_state (they left
// its temporary files behind); saves from several threads to one path all finish, a reader
// meanwhile only ever loads whole states, and no temporary file is left.

#include <chunksampler/checkpoint.hpp>
#include <chunksampler/random_sampler.hpp>

#include "checkpoint_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace test_checkpoint_atomic {

namespace {

namespace cs = chunksampler;

// `count` distinct states of one sampler, of different lengths (so that a file mixing two would
// not even have the right size): after 10^0, 10^1, ... batches of an epoch over 10^12.
std::vector<cs::SamplerState> distinct_states(int count) {
  // Named options: with the options built in the call, GCC 12 at -O1 under TSan warns (falsely)
  // that the sampler's num_samples may be read uninitialized.
  const cs::RandomOptions options{.chunk_size = 64, .preload_nchunks = 4, .batch_size = 32, .seed = 19};
  cs::RandomSampler sampler(options);
  (void)sampler.sample(1'000'000'000'000);
  std::vector<cs::SamplerState> states;
  std::int64_t done = 1;
  for (int i = 0; i < count; ++i, done *= 10) states.push_back(sampler.state(done));
  return states;
}

// A forked child, SIGKILLed and reaped by the destructor if the test has not done so (a failed
// REQUIRE must not leave it saving forever).
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) (void)kill_and_wait();
  }
  // Kills the child and returns its wait status.
  int kill_and_wait() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

}  // namespace

TEST_CASE("checkpoint: a save killed at any moment leaves the previous state or the next, never a torn one",
          "[checkpoint]") {
  // After `initial` is saved, each round forks a child that saves `a` and `b` in turn to the same
  // path as fast as it can, and kills it with SIGKILL (no handler, no cleanup) after a drawn
  // delay of 0.2 ms to 3 ms, or to two saves where a save takes longer: most of a save is its
  // two fsyncs, 0.4 ms on an idle ext4 disk and ten times that while another build writes. The
  // child is the only writer and `path` is only ever renamed over, so what a kill can tear is a
  // temporary file: a kill inside save_state leaves one behind, which the test counts.
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  const std::vector<cs::SamplerState> states = distinct_states(3);
  const cs::SamplerState& initial = states[0];
  const cs::SamplerState& a = states[1];
  const cs::SamplerState& b = states[2];
  std::vector<std::int64_t> save_us;
  for (int i = 0; i < 5; ++i) {
    const auto started = std::chrono::steady_clock::now();
    cs::save_state(path, initial);
    save_us.push_back(static_cast<std::int64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count()));
  }
  std::ranges::sort(save_us);
  const std::int64_t longest_delay = std::max<std::int64_t>(3'000, 2 * save_us[2]);
  support::ConfigRng g(190002);
  std::map<std::string, int> outcomes;
  int kills_inside_save = 0;
  constexpr int rounds = 200;
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round);
    const auto delay = std::chrono::microseconds(g.between(200, longest_delay));
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The child: only the calls under test, then _exit (no Catch, no destructors, no atexit).
      try {
        for (;;) {
          cs::save_state(path, a);
          cs::save_state(path, b);
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    Child child(pid);
    std::this_thread::sleep_for(delay);
    const int status = child.kill_and_wait();
    // Killed by our signal: it never threw (it would have exited with 3) and never finished.
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);

    const cs::SamplerState loaded = cs::load_state(path);
    REQUIRE((loaded == initial || loaded == a || loaded == b));
    ++outcomes[loaded == initial ? "initial" : loaded == a ? "a" : "b"];
    // One save at a time: at most its one temporary file.
    const std::vector<std::string> left = support::temporaries(dir.path());
    REQUIRE(left.size() <= 1);
    if (!left.empty()) {
      ++kills_inside_save;
      std::filesystem::remove(dir / left.front());
    }
    REQUIRE(support::entries(dir.path()) == std::vector<std::string>{"job.state"});
  }
  INFO(fmt::format("{} of {} kills inside save_state; loaded initial {}, a {}, b {}; a save took {} µs",
                   kills_inside_save, rounds, outcomes["initial"], outcomes["a"], outcomes["b"], save_us[2]));
  // The kills hit the window the test is about, and the child's saves did complete between them.
  CHECK(kills_inside_save > 0);
  CHECK(outcomes["a"] + outcomes["b"] > 0);
}

TEST_CASE("checkpoint: saves from several threads to one path all finish, and readers see whole states",
          "[checkpoint]") {
  // Four writers save their own state 25 times each while a reader loads the file in a loop:
  // the path always names a whole checkpoint (rename replaces it in one step, so there is no
  // moment without one), each with a distinct temporary file. Catch2's assertions are not
  // thread-safe: the threads count, the test checks.
  const support::TempDir dir;
  const std::filesystem::path path = dir / "job.state";
  const std::vector<cs::SamplerState> states = distinct_states(5);
  cs::save_state(path, states[0]);

  std::atomic<bool> writing{true};
  std::atomic<int> reads{0};
  std::atomic<int> unknown{0};  // loaded a state no writer saved
  std::vector<std::string> errors(5);
  std::thread reader([&] {
    try {
      while (writing.load()) {
        const cs::SamplerState loaded = cs::load_state(path);
        if (std::find(states.begin(), states.end(), loaded) == states.end()) unknown.fetch_add(1);
        reads.fetch_add(1);
      }
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  });
  std::vector<std::thread> writers;
  for (std::size_t w = 1; w <= 4; ++w)
    writers.emplace_back([&, w] {
      try {
        for (int i = 0; i < 25; ++i) cs::save_state(path, states[w]);
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  for (std::thread& writer : writers) writer.join();
  writing.store(false);
  reader.join();

  for (const std::string& error : errors) CHECK(error.empty());
  CHECK(unknown.load() == 0);
  CHECK(reads.load() > 0);
  const cs::SamplerState last = cs::load_state(path);
  CHECK(std::find(states.begin() + 1, states.end(), last) != states.end());
  CHECK(support::entries(dir.path()) == std::vector<std::string>{"job.state"});
}

}  // namespace test_checkpoint_atomic
