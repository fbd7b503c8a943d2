// SPDX-License-Identifier: MIT
#pragma once

/// Library version; kept equal to `project(VERSION)` in CMakeLists.txt (a test checks it).
#define CHUNKSAMPLER_VERSION_MAJOR 0
#define CHUNKSAMPLER_VERSION_MINOR 3
#define CHUNKSAMPLER_VERSION_PATCH 0
/// The version as one integer: major * 10000 + minor * 100 + patch.
#define CHUNKSAMPLER_VERSION \
  (CHUNKSAMPLER_VERSION_MAJOR * 10000 + CHUNKSAMPLER_VERSION_MINOR * 100 + CHUNKSAMPLER_VERSION_PATCH)
