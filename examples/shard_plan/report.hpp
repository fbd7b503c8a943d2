// SPDX-License-Identifier: MIT
// The planner's text: the configuration and how the policy shares it out, a table per rank, the
// chunks each rank read per epoch (and the reading order of global epochs), how much was walked,
// and PASS or FAIL.

#pragma once

#include "job.hpp"

#include "common/failures.hpp"

namespace shard_plan {

// Everything before the verdict.
void print_report(const Job& job, const WalkExtent& extent, const Walked& walked);

// PASS with what was shown to hold, or FAIL with the first violations; returns the exit status.
int print_verdict(const Job& job, const WalkExtent& extent, const Walked& walked, const examples::Failures& checks);

}  // namespace shard_plan
