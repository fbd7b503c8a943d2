// SPDX-License-Identifier: MIT
// The example programs' command lines. CLI11 parses them and writes their --help; CommandLine
// gives the options the programs share one spelling, one meaning and one error message:
//
//   examples::CommandLine cli("rank_job", "One rank of a real data-parallel job.");
//   cli.size("--n-obs", o.n_obs, "observations in the data set", 1, 100'000'000);
//   cli.request_shape(o.chunk_size, o.preload, o.batch_size);
//   cli.mode(o.mode);
//   if (!cli.parse(argc, argv)) return 0;  // --help was printed
//
// Values are parsed by parse.hpp, not by CLI11's own conversions, which read "010" as octal and
// clamp an integer too large for its type instead of refusing it. A bad value throws BadArgument,
// whose message names the option and the value; so does every error CLI11 finds (an unknown
// option, a missing value), which parse() turns into a BadArgument.

#pragma once

#include "common/parse.hpp"

#include <chunksampler.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace examples {

/// A program's command line: its options, its --help, and their parsing.
class CommandLine {
 public:
  /// `description` heads the help; `footer` (optional) ends it.
  CommandLine(std::string program, std::string description, std::string footer = {})
      : app_(std::move(description), std::move(program)) {
    app_.footer(std::move(footer));
    app_.get_formatter()->column_width(34);
    // An option given twice keeps its last value, so that a script can override one it passes.
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    // A flag takes no value: --no-enforce=1 is an error, not another spelling of the flag.
    app_.option_defaults()->disable_flag_override();
  }

  [[nodiscard]] CLI::App& app() noexcept { return app_; }

  /// An option whose text `from_text(name, text)` turns into `target`; `type` and the default shown
  /// in --help describe it.
  template <class T, class Parse>
  CLI::Option* parsed(const std::string& name, T& target, Parse from_text, const std::string& help, std::string type,
                      std::string shown_default) {
    CLI::Option* option = app_.add_option_function<std::string>(
        name, [&target, from_text, name](const std::string& text) { target = from_text(name, text); }, help);
    return option->type_name(std::move(type))->default_str(std::move(shown_default));
  }

  /// A base-10 integer in [min, max].
  template <class Int>
  CLI::Option* integer(const std::string& name, Int& target, const std::string& help,
                       Int min = std::numeric_limits<Int>::min(), Int max = std::numeric_limits<Int>::max()) {
    const auto from_text = [min, max](std::string_view what, std::string_view text) {
      return bounded(what, parse_integer<Int>(what, text), min, max);
    };
    return parsed(name, target, from_text, help, std::is_signed_v<Int> ? "INT" : "UINT", fmt::format("{}", target));
  }

  /// An optional base-10 integer in [min, max], unset unless given.
  template <class Int>
  CLI::Option* integer(const std::string& name, std::optional<Int>& target, const std::string& help,
                       Int min = std::numeric_limits<Int>::min(), Int max = std::numeric_limits<Int>::max()) {
    const auto from_text = [min, max](std::string_view what, std::string_view text) {
      return std::optional<Int>(bounded(what, parse_integer<Int>(what, text), min, max));
    };
    return parsed(name, target, from_text, help, std::is_signed_v<Int> ? "INT" : "UINT", "");
  }

  /// A size in [min, max]: an integer, or one written with a power of ten (1e6).
  CLI::Option* size(const std::string& name, std::int64_t& target, const std::string& help,
                    std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                    std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    const auto from_text = [min, max](std::string_view what, std::string_view text) {
      return bounded(what, parse_size(what, text), min, max);
    };
    return parsed(name, target, from_text, help, "SIZE", fmt::format("{}", target));
  }

  /// --chunk-size, --preload and --batch-size: the shape of the sampler's requests. The library
  /// checks them (batch_size must divide chunk_size * preload_nchunks), so its message is the error.
  void request_shape(std::int64_t& chunk_size, std::int64_t& preload, std::int64_t& batch_size) {
    size("--chunk-size", chunk_size, "observations per contiguous chunk read");
    size("--preload", preload, "chunks per load request (preload_nchunks)");
    size("--batch-size", batch_size, "observations per batch; divides chunk size x preload");
  }

  /// FILE.h5ad, the one positional argument of the .h5ad jobs: an existing file.
  void h5ad_file(std::string& file) {
    app_.add_option("file", file, "the .h5ad file; X must be a CSR matrix (anndata's csr_matrix)")
        ->type_name("FILE.h5ad")
        ->required()
        ->check(CLI::Validator(CLI::ExistingFile).description(""));
  }

  /// --seed: the seed of the shuffles.
  CLI::Option* seed(std::uint64_t& seed, const std::string& help = "seed of the shuffles") {
    return integer("--seed", seed, help);
  }

  /// One word of `choices`.
  template <class T, std::size_t N>
  CLI::Option* choice(const std::string& name, T& target, const Choice<T> (&choices)[N], const std::string& help) {
    const auto from_text = [&choices](std::string_view what, std::string_view text) {
      return parse_choice(what, text, choices);
    };
    return parsed(name, target, from_text, help, choice_list(choices, "|", "|"), std::string(name_of(choices, target)));
  }

  /// --mode contiguous|global.
  CLI::Option* mode(cs::ShardMode& mode, const std::string& help = "contiguous: each rank reads its own slice;\n"
                                                                   "global: one shuffled plan shared by all ranks") {
    return choice("--mode", mode, shard_modes, help);
  }

  /// --remainder drop|pad|rotate.
  CLI::Option* remainder(cs::Remainder& remainder, const std::string& help = "what becomes of the observations "
                                                                             "that do not divide evenly") {
    return choice("--remainder", remainder, remainders, help);
  }

  /// --mask START:STOP or START:.
  CLI::Option* mask(std::optional<cs::Slice>& mask, const std::string& help) {
    return parsed("--mask", mask, parse_mask, help, "START:STOP", "");
  }

  /// --mask START:STOP,START:STOP,...: one range or a list of them, the last possibly START:.
  CLI::Option* mask(std::optional<cs::Ranges>& mask, const std::string& help) {
    const auto from_text = [](std::string_view what, std::string_view text) {
      return std::optional<cs::Ranges>(parse_ranges(what, text));
    };
    return parsed("--mask", mask, from_text, help, "START:STOP[,...]", "");
  }

  /// Parses the command line. Returns false when --help was asked for: the help is printed (by a
  /// process that `speaks`; in an MPI job, one rank) and the program exits with status 0. A bad
  /// command line throws BadArgument.
  bool parse(int argc, const char* const* argv, bool speaks = true) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      if (speaks) fmt::print("{}", app_.help());
      return false;
    } catch (const CLI::ParseError& error) {
      throw BadArgument(fmt::format("{} (see --help)", error.what()));
    }
    return true;
  }

 private:
  template <class Int>
  static Int bounded(std::string_view what, Int value, Int min, Int max) {
    if (max != std::numeric_limits<Int>::max() && (value < min || value > max))
      bad_argument("{} ({}) must be in [{}, {}]", what, value, min, max);
    if (value < min) bad_argument("{} ({}) must be >= {}", what, value, min);
    return value;
  }

  CLI::App app_;
};

}  // namespace examples
