// SPDX-License-Identifier: MIT
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace chunksampler::detail {

/// Throws `std::invalid_argument` with a message built by {fmt}; every message names the
/// parameter, its value and the rule it broke.
template <class... Args>
[[noreturn]] void throw_invalid(fmt::format_string<Args...> format, Args&&... args) {
  throw std::invalid_argument(fmt::format(format, std::forward<Args>(args)...));
}

/// Throws `std::runtime_error`: the environment, not an argument, is at fault.
template <class... Args>
[[noreturn]] void throw_runtime(fmt::format_string<Args...> format, Args&&... args) {
  throw std::runtime_error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace chunksampler::detail
