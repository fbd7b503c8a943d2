// Catch2 main for the MPI tests: a one-process MPI job started by the test itself (no mpirun).
// from_mpi() must refuse to work before MPI_Init and after MPI_Finalize; the tests in between
// run with MPI initialized.
#include "../catch_session.hpp"

#include <chunksampler/mpi.hpp>

#include <mpi.h>

#include <cstdio>
#include <stdexcept>
#include <string>

// Under AddressSanitizer: OpenMPI keeps allocations from MPI_Init past MPI_Finalize (in libmpi and in
// plugins it has unloaded by exit). Suppress leaks whose stack passes through MPI's libraries, and
// unwind fully so those frames are seen; leaks anywhere else are still reported.
#if defined(__SANITIZE_ADDRESS__)
#define CHUNKSAMPLER_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHUNKSAMPLER_TEST_ASAN 1
#endif
#endif
#if defined(CHUNKSAMPLER_TEST_ASAN)
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\nleak:libhwloc.so\n"
         "leak:libevent\n";
}
#endif

namespace {

/// True when from_mpi() throws std::runtime_error whose message contains `expected`.
bool refuses(const char* when, const std::string& expected) {
  try {
    const chunksampler::DistInfo info = chunksampler::dist::from_mpi()();
    std::fprintf(stderr, "FAILED: from_mpi() %s returned {%lld, %lld} instead of throwing\n", when,
                 static_cast<long long>(info.rank), static_cast<long long>(info.world_size));
  } catch (const std::runtime_error& error) {
    if (std::string(error.what()).find(expected) != std::string::npos) return true;
    std::fprintf(stderr, "FAILED: from_mpi() %s threw \"%s\", expected it to mention \"%s\"\n", when, error.what(),
                 expected.c_str());
  }
  return false;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (!refuses("before MPI_Init", "not initialized")) return 1;

  MPI_Init(&argc, &argv);
  const int result = chunksampler_tests::run_catch_session(argc, argv);
  MPI_Finalize();

  if (!refuses("after MPI_Finalize", "finalized")) return 1;
  std::printf("from_mpi() refused to run before MPI_Init and after MPI_Finalize, as it should\n");
  return result;
}
