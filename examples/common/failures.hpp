// SPDX-License-Identifier: MIT
// A record of failed checks that keeps the first few messages: a check that fails for every
// observation costs a count, not a string per observation.

#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace examples {

class Failures {
 public:
  /// Keeps the messages of the first `shown` failures.
  explicit Failures(std::int64_t shown) noexcept : max_shown_(shown) {}

  template <class... Args>
  void fail(fmt::format_string<Args...> format, Args&&... args) {
    // Formatting only what is shown keeps a systematic failure from costing a string per observation.
    if (failures_ < max_shown_) shown_.push_back(fmt::format(format, std::forward<Args>(args)...));
    ++failures_;
  }
  [[nodiscard]] bool passed() const noexcept { return failures_ == 0; }
  [[nodiscard]] std::int64_t failures() const noexcept { return failures_; }
  [[nodiscard]] const std::vector<std::string>& shown() const noexcept { return shown_; }

 private:
  std::int64_t max_shown_;
  std::int64_t failures_ = 0;
  std::vector<std::string> shown_;
};

}  // namespace examples
