// SPDX-License-Identifier: MIT
// Catch2's session, for the test programs' mains: tests/main.cpp's, and the MPI tests' own, which
// runs it between MPI_Init and MPI_Finalize. Catch2's implementation behind it
// (tests/catch_session.cpp) is compiled once for every test program.
#pragma once

namespace chunksampler_tests {

/// Runs the test cases linked into the program as Catch2's command line `argv` selects; returns
/// the exit status Catch2 gives (0 when every test passed).
int run_catch_session(int argc, char* argv[]);

}  // namespace chunksampler_tests
