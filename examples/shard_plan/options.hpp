// SPDX-License-Identifier: MIT
// shard_plan's command line: what to plan and how much of it to check.

#pragma once

#include <chunksampler.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shard_plan {

namespace cs = chunksampler;

// Epochs are walked one after another; a bound keeps a typo from running for hours.
inline constexpr std::int64_t max_epochs = 1000;

struct Options {
  std::int64_t n_obs = 20'000;
  std::int64_t world_size = 2;
  std::int64_t chunk_size = 64;
  std::int64_t preload = 32;
  std::int64_t batch_size = 256;
  std::int64_t row_bytes = 4096;   // one row's size in memory, for the buffer's (1,024 float32 genes)
  bool n_obs_given = false;        // --n-obs on the command line (else a codes file's rows)
  std::optional<cs::Ranges> mask;  // --mask, or the selection's runs; its ranges end at or before n_obs
  // --codes FILE --select KEY...: a split by categorical columns (codes.hpp).
  std::optional<std::string> codes;
  std::vector<std::string> select;   // one key per --select, its values comma-separated
  std::vector<std::string> groupby;  // the file's columns the keys name (default: all)
  std::optional<double> max_short_share;
  std::optional<cs::SplitReport> split;    // what cs::split_mask said of the selection
  std::vector<std::string> split_columns;  // the columns it read
  cs::ShardMode mode = cs::ShardMode::contiguous;
  cs::Remainder remainder = cs::Remainder::drop;
  bool enforce = true;
  bool drop_last = false;
  std::int64_t epochs = 1;
  std::uint64_t seed = cs::default_seed;
  bool sequential = false;
  std::optional<std::string> svg;

  [[nodiscard]] bool global() const noexcept { return mode == cs::ShardMode::global; }
  [[nodiscard]] bool pad() const noexcept { return remainder == cs::Remainder::pad; }
  [[nodiscard]] bool rotate() const noexcept { return remainder == cs::Remainder::rotate; }
};

/// The options of `argv`, or nothing when --help was printed. A bad option throws
/// examples::BadArgument. A split (--codes) is read afterwards by with_split (codes.hpp).
std::optional<Options> parse_options(int argc, const char* const* argv);

}  // namespace shard_plan
