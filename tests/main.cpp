// SPDX-License-Identifier: MIT
// The main of the test programs but the MPI tests' (tests/mpi/main.cpp): Catch2's session alone.
#include "catch_session.hpp"

int main(int argc, char* argv[]) { return chunksampler_tests::run_catch_session(argc, argv); }
