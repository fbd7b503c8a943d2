// SPDX-License-Identifier: MIT
// A restore that fails midway, on an allocation (std::bad_alloc), leaves the sampler exactly as
// it was. To make one allocation fail this file replaces the global operator new and delete. A
// replacement holds for the whole program, so this file is an executable of its own
// (chunksampler_alloc_tests): in chunksampler_tests it would take the place of AddressSanitizer's
// and ThreadSanitizer's operators for every other test.

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler_state.hpp>

#include "../restore_support.hpp"
#include "../support.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace test_restore_alloc {
namespace {
// Set by FailNextAllocation: the next allocation on this thread throws std::bad_alloc.
thread_local bool fail_next_allocation = false;
thread_local int failed_allocations = 0;
}  // namespace
}  // namespace test_restore_alloc

// This executable's operator new: malloc's, but for the one allocation a test makes fail, to see
// that a restore which throws midway leaves the sampler as it was. Every unaligned form is
// replaced, so that no block allocated by one runtime's operator new (AddressSanitizer defines
// them all) is freed by another's delete. None is inlined: GCC 12 at -O1 (the tsan preset) saw
// the free() of an inlined delete meet the operator new of a std::vector and rejected the pair
// (-Wmismatched-new-delete), although this operator new is malloc's.
[[gnu::noinline]] void* operator new(std::size_t size) {
  if (test_restore_alloc::fail_next_allocation) {
    test_restore_alloc::fail_next_allocation = false;
    ++test_restore_alloc::failed_allocations;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t size) { return operator new(size); }
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
[[gnu::noinline]] void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return operator new(size, std::nothrow);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace test_restore_alloc {

namespace {

namespace cs = chunksampler;
using support::restore::Dist;
using support::restore::global;
using support::restore::issue_base;
using support::restore::state_at_37;

// While alive, the next allocation on this thread (one only) throws std::bad_alloc.
class FailNextAllocation {
 public:
  FailNextAllocation() noexcept { fail_next_allocation = true; }
  ~FailNextAllocation() { fail_next_allocation = false; }
  FailNextAllocation(const FailNextAllocation&) = delete;
  FailNextAllocation& operator=(const FailNextAllocation&) = delete;
};

}  // namespace

TEST_CASE("a restore that throws leaves the sampler exactly as it was", "[restore]") {
  // A global-mode state taken after an elastic restart names the runs dealt to the new ranks;
  // restore copies them, and that copy may throw (std::bad_alloc) after every check passed.
  Dist three(issue_base, cs::DistInfo{.rank = 1, .world_size = 3}, global);
  three.restore(state_at_37(10'007));
  (void)three.sample(10'007);
  const cs::SamplerState dealt = three.state(40);
  REQUIRE(support::fields(dealt).runs.has_value());
  REQUIRE(dealt.epoch() == 0);

  // The sampler has played epoch 2 and stands before epoch 3.
  Dist d(issue_base, cs::DistInfo{.rank = 1, .world_size = 3}, global);
  d.set_epoch(2);
  (void)d.sample(10'007);
  Dist untouched = d;
  const int failed_before = failed_allocations;
  const auto failing_restore = [&] {
    const FailNextAllocation fail;
    d.restore(dealt);
  };
  CHECK_THROWS_AS(failing_restore(), std::bad_alloc);
  REQUIRE(failed_allocations == failed_before + 1);  // the restore, not the test, hit the failure
  CHECK(d.epoch() == 3);
  CHECK(d.state(7) == untouched.state(7));  // still a point of epoch 2 over 10,007 observations
  CHECK(d.n_batches(10'007) == untouched.n_batches(10'007));
  CHECK(support::observations(support::epoch(d, 10'007)) == support::observations(support::epoch(untouched, 10'007)));
  CHECK(d.epoch() == 4);

  // The same restore, not made to fail, takes effect.
  d.restore(dealt);
  CHECK(d.epoch() == 0);
  CHECK(d.state(40) == dealt);
}

}  // namespace test_restore_alloc
