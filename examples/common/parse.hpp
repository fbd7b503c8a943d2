// SPDX-License-Identifier: MIT
// The values the example programs read from their command lines and files: integers, sizes
// (20000 or 2e4), masks (START:STOP or START:, or a list of them), and words from a fixed list (--mode global). Each
// parser names what it read in its error, a BadArgument: the programs print it as one line and
// exit with status 2.

#pragma once

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace examples {

namespace cs = chunksampler;

/// A bad command line, or an input the user must fix: one line on stderr and exit status 2.
struct BadArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

template <class... Args>
[[noreturn]] void bad_argument(fmt::format_string<Args...> format, Args&&... args) {
  throw BadArgument(fmt::format(format, std::forward<Args>(args)...));
}

/// The one line a program prints when it stops on an error: `program: error: message`.
inline void print_error(std::string_view program, std::string_view message) {
  fmt::print(stderr, "{}: error: {}\n", program, message);
}

/// The whole of `text` as a base-10 integer; `what` names it in the error.
template <class Int>
Int parse_integer(std::string_view what, std::string_view text) {
  Int value{};
  const char* const last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  if (error == std::errc::result_out_of_range)
    bad_argument("{}: {:?} is out of range (at most {})", what, text, std::numeric_limits<Int>::max());
  if (error != std::errc{} || end != last || text.empty())
    bad_argument("{}: {:?} is not {}", what, text, std::is_signed_v<Int> ? "an integer" : "a non-negative integer");
  return value;
}

/// A count of observations or chunks: an integer, or one written with a power of ten (1e6).
inline std::int64_t parse_size(std::string_view what, std::string_view text) {
  const std::size_t e = text.find_first_of("eE");
  if (e == std::string_view::npos) return parse_integer<std::int64_t>(what, text);
  const std::int64_t mantissa = parse_integer<std::int64_t>(what, text.substr(0, e));
  int exponent = 0;
  const std::string_view power = text.substr(e + 1);
  const auto [end, error] = std::from_chars(power.data(), power.data() + power.size(), exponent);
  if (error != std::errc{} || end != power.data() + power.size() || power.empty() || exponent < 0)
    bad_argument("{}: {:?} is not a size such as 20000 or 2e4", what, text);
  std::int64_t value = mantissa;
  for (int i = 0; i < exponent; ++i) {
    if (value > std::numeric_limits<std::int64_t>::max() / 10 || value < std::numeric_limits<std::int64_t>::min() / 10)
      bad_argument("{}: {:?} is out of range (at most {})", what, text, std::numeric_limits<std::int64_t>::max());
    value *= 10;
  }
  return value;
}

/// `START:STOP`, or `START:` for the open-ended `[START, n_obs)` (annbatch's `slice(START, None)`).
inline cs::Slice parse_mask(std::string_view what, std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) bad_argument("{}: {:?} is not START:STOP", what, text);
  const std::int64_t start = parse_size(fmt::format("{} START", what), text.substr(0, colon));
  if (colon + 1 == text.size()) return cs::Slice::from(start);
  return {start, parse_size(fmt::format("{} STOP", what), text.substr(colon + 1))};
}

/// A list of masks, `START:STOP,START:STOP,...` (the last may be `START:`), as a `cs::Ranges`.
/// The library checks the list (sorted, disjoint, non-empty ranges): its message is the error.
inline cs::Ranges parse_ranges(std::string_view what, std::string_view text) {
  std::vector<cs::Slice> ranges;
  const bool many = text.find(',') != std::string_view::npos;
  for (std::size_t at = 0;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string name = many ? fmt::format("{} ranges[{}]", what, ranges.size()) : std::string(what);
    ranges.push_back(parse_mask(name, text.substr(at, comma - at)));
    if (comma == text.size()) break;
    at = comma + 1;
  }
  try {
    return cs::Ranges(ranges);
  } catch (const cs::ConfigError& error) {
    bad_argument("{}: {}", what, error.what());
  }
}

/// One value of an option that takes a word from a fixed list.
template <class T>
struct Choice {
  std::string_view name;
  T value;
};

inline constexpr Choice<cs::ShardMode> shard_modes[] = {{"contiguous", cs::ShardMode::contiguous},
                                                        {"global", cs::ShardMode::global}};
inline constexpr Choice<cs::Remainder> remainders[] = {{"drop", cs::Remainder::drop},
                                                       {"pad", cs::Remainder::pad},
                                                       {"rotate", cs::Remainder::rotate}};

/// The word that chose `value`.
template <class T, std::size_t N>
std::string_view name_of(const Choice<T> (&choices)[N], T value) {
  for (const Choice<T>& choice : choices)
    if (choice.value == value) return choice.name;
  return "?";
}

inline std::string_view mode_name(cs::ShardMode mode) { return name_of(shard_modes, mode); }
inline std::string_view remainder_name(cs::Remainder remainder) { return name_of(remainders, remainder); }

/// The words of `choices`, joined: "a, b or c" (`separator` ", ", `last` " or "), or "a|b|c".
template <class T, std::size_t N>
std::string choice_list(const Choice<T> (&choices)[N], std::string_view separator, std::string_view last) {
  std::string text;
  for (std::size_t i = 0; i < N; ++i)
    text += fmt::format("{}{}", i == 0 ? "" : i + 1 == N ? last : separator, choices[i].name);
  return text;
}

template <class T, std::size_t N>
T parse_choice(std::string_view what, std::string_view text, const Choice<T> (&choices)[N]) {
  for (const Choice<T>& choice : choices)
    if (choice.name == text) return choice.value;
  bad_argument("{}: {:?} is not {}", what, text, choice_list(choices, ", ", " or "));
}

}  // namespace examples
