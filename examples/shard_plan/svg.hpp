// SPDX-License-Identifier: MIT
// The picture as an SVG document: one row per (epoch, rank) over the observation axis.

#pragma once

#include "picture.hpp"

#include <string>
#include <vector>

namespace shard_plan {

// Writes `pic` under the lines of `caption` to `path`, coarsening its bins until the document is
// small enough, and prints where it went.
void write_svg(const std::string& path, Picture& pic, const std::vector<std::string>& caption);

}  // namespace shard_plan
