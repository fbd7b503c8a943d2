// SPDX-License-Identifier: MIT
// Catch2's implementation, without a main: compiled once (under a sanitizer it is the costliest
// file after the tests themselves) and linked into every test program, whose main calls
// run_catch_session().
#define CATCH_CONFIG_RUNNER
// Catch2's implementation uses std::regex, in which GCC 12 with optimization and sanitizers reports a false
// -Wmaybe-uninitialized inside libstdc++'s std::function.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "catch_session.hpp"

#include <catch2/catch.hpp>

namespace chunksampler_tests {

int run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }

}  // namespace chunksampler_tests
