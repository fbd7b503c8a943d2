// SPDX-License-Identifier: MIT
// The planner: checks the library's plan against the contract, walks it, and reports.

#pragma once

#include "library.hpp"
#include "options.hpp"

namespace shard_plan {

// Plans, checks and reports the job; returns the exit status (0 every invariant holds, 1 one
// failed). A configuration the library refuses throws its std::invalid_argument.
int plan(const Options& o, const Library& library);

}  // namespace shard_plan
