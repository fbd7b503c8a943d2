// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/errors.hpp>

#include <fmt/format.h>

#include <utility>

namespace chunksampler::detail {

/// Throws `E` with a message built by {fmt}; every message names the parameter, its value and
/// the rule it broke.
template <class E, class... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}

/// Throws `ConfigError`: a bad option or argument.
template <class... Args>
[[noreturn]] void throw_config(fmt::format_string<Args...> format, Args&&... args) {
  throw_error<ConfigError>(format, std::forward<Args>(args)...);
}

/// Throws `StateMismatchError`: a state that does not fit the sampler it is restored into.
template <class... Args>
[[noreturn]] void throw_state_mismatch(fmt::format_string<Args...> format, Args&&... args) {
  throw_error<StateMismatchError>(format, std::forward<Args>(args)...);
}

/// Throws `StateFormatError`: state text or fields that are not a state.
template <class... Args>
[[noreturn]] void throw_state_format(fmt::format_string<Args...> format, Args&&... args) {
  throw_error<StateFormatError>(format, std::forward<Args>(args)...);
}

/// Throws `EnvironmentError`: the environment, not an argument, is at fault.
template <class... Args>
[[noreturn]] void throw_environment(fmt::format_string<Args...> format, Args&&... args) {
  throw_error<EnvironmentError>(format, std::forward<Args>(args)...);
}

}  // namespace chunksampler::detail
