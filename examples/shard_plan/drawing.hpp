// SPDX-License-Identifier: MIT
// The picture of a job (--svg): its rows, which the walk fills, and their text.

#pragma once

#include "job.hpp"
#include "picture.hpp"

namespace shard_plan {

// An empty picture of the first epochs and ranks, over the job's range.
Picture make_picture(const Job& job);

// Completes the picture with what the walk could not see, its headers, notes and caption, and
// writes it to --svg.
void draw_picture(const Job& job, const WalkExtent& extent, const Walked& walked, Picture& pic);

}  // namespace shard_plan
