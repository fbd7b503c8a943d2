// SPDX-License-Identifier: MIT
// shard_plan: plans how DistributedSampler splits a dataset over the ranks of a data-parallel
// job, then proves the plan by walking every rank's epoch.
//
// For each rank it prints the shard [start, stop), its observations, its batches per epoch and the
// size of its last batch, then the totals and the observations of the sampled range that no rank
// reads. The check walks each rank's epoch with cs::DistributedSampler (a bounded prefix of it
// when epochs are too large to walk quickly) and prints one PASS or FAIL line.
//
//   shard_plan                       # annbatch's 2-GPU tutorial: 20000 obs, 2 ranks => 39 batches each
//   shard_plan --n-obs 107 --world-size 3 --chunk-size 10 --preload 1 --batch-size 10 --no-enforce
//   shard_plan --help
//
// Exit status: 0 when every invariant holds, 1 when one fails, 2 on a bad argument.

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

constexpr std::string_view usage = R"(usage: shard_plan [options]

Plans how cs::DistributedSampler shards n_obs observations over world_size ranks, prints each
rank's shard, observations and batches per epoch, and checks the plan by walking every rank's epoch.

options:
  --n-obs N            observations in the dataset                  (default 20000)
  --world-size W       ranks in the job, at most 1048576            (default 2)
  --chunk-size C       observations per contiguous chunk read       (default 64)
  --preload P          chunks per load request (preload_nchunks)    (default 32)
  --batch-size B       observations per batch; divides C * P        (default 256)
  --mask START:STOP    sample only observations [START, STOP)       (default: all of [0, N))
  --no-enforce         do not round each rank's share down to whole batches
  --drop-last          drop each rank's last, short batch
  --seed S             seed of the shuffles, not of the plan        (default 0)
  --sampler KIND       random or sequential                         (default random)
  -h, --help           print this help and exit

Options also take the form --name=value. The defaults are annbatch's multi-GPU tutorial:
2 ranks of RandomSampler(chunk 64, preload 32, batch 256) over 20000 observations, 39 batches each.

exit status: 0 every invariant holds, 1 an invariant failed, 2 bad arguments.
)";

// Whole epochs are walked only while that stays a matter of seconds; beyond, each rank walks a prefix.
constexpr std::int64_t full_walk_per_rank = 50'000'000;
constexpr std::int64_t full_walk_total = 200'000'000;
constexpr std::int64_t prefix_per_rank = 1'000'000;
// A request's positions are one allocation in the sampler's range: refuse to materialize huge ones.
constexpr std::int64_t max_walked_request = std::int64_t{1} << 24;
// Every rank is planned and checked; a bound keeps that from running for minutes.
constexpr std::int64_t max_world_size = std::int64_t{1} << 20;
// Long tables hide their middle ranks, whose numbers equal their neighbours'.
constexpr std::int64_t max_listed_ranks = 64;
constexpr std::int64_t listed_at_each_end = 8;

struct Options {
  std::int64_t n_obs = 20'000;
  std::int64_t world_size = 2;
  std::int64_t chunk_size = 64;
  std::int64_t preload = 32;
  std::int64_t batch_size = 256;
  std::optional<cs::Slice> mask;
  bool enforce = true;
  bool drop_last = false;
  std::uint64_t seed = cs::default_seed;
  bool sequential = false;
  bool help = false;
};

template <class... Args>
[[noreturn]] void bad_argument(fmt::format_string<Args...> format, Args&&... args) {
  throw std::invalid_argument(fmt::format(format, std::forward<Args>(args)...));
}

template <class Int>
Int parse_integer(std::string_view option, std::string_view text) {
  Int value{};
  const char* const last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  if (error == std::errc::result_out_of_range)
    bad_argument("{}: {:?} is out of range (at most {})", option, text, std::numeric_limits<Int>::max());
  if (error != std::errc{} || end != last || text.empty())
    bad_argument("{}: {:?} is not {}", option, text, std::is_signed_v<Int> ? "an integer" : "a non-negative integer");
  return value;
}

cs::Slice parse_mask(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) bad_argument("--mask: {:?} is not START:STOP", text);
  return {parse_integer<std::int64_t>("--mask START", text.substr(0, colon)),
          parse_integer<std::int64_t>("--mask STOP", text.substr(colon + 1))};
}

Options parse_options(std::span<char* const> args) {
  Options options;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::optional<std::string_view> inline_value;
    if (const std::size_t equals = name.find('='); name.starts_with("--") && equals != std::string_view::npos) {
      inline_value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    const auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) bad_argument("option {} needs a value", name);
      return args[++i];
    };
    const auto flag = [&](bool& target, bool set_to) {
      if (inline_value) bad_argument("option {} takes no value", name);
      target = set_to;
    };
    if (name == "-h" || name == "--help") flag(options.help, true);
    else if (name == "--no-enforce") flag(options.enforce, false);
    else if (name == "--drop-last") flag(options.drop_last, true);
    else if (name == "--n-obs") options.n_obs = parse_integer<std::int64_t>(name, value());
    else if (name == "--world-size") options.world_size = parse_integer<std::int64_t>(name, value());
    else if (name == "--chunk-size") options.chunk_size = parse_integer<std::int64_t>(name, value());
    else if (name == "--preload") options.preload = parse_integer<std::int64_t>(name, value());
    else if (name == "--batch-size") options.batch_size = parse_integer<std::int64_t>(name, value());
    else if (name == "--seed") options.seed = parse_integer<std::uint64_t>(name, value());
    else if (name == "--mask") options.mask = parse_mask(value());
    else if (name == "--sampler") {
      const std::string_view kind = value();
      if (kind != "random" && kind != "sequential") bad_argument("--sampler: {:?} is not random or sequential", kind);
      options.sequential = kind == "sequential";
    } else if (name.starts_with("-")) {
      bad_argument("unknown option {} (see --help)", name);
    } else {
      bad_argument("unexpected argument {:?} (see --help)", name);
    }
  }
  return options;
}

// The plan as the semantics contract states it, derived here independently of the library so
// that the check compares two computations rather than reading the library's answer back.
struct Expected {
  cs::Slice range;
  std::int64_t per_rank = 0;
  std::int64_t n_batches = 0;
  std::int64_t used = 0;  // observations one rank's batches take from its shard
  std::int64_t last_batch = 0;

  [[nodiscard]] cs::Slice shard(std::int64_t rank) const {
    return {range.start + rank * per_rank, range.start + (rank + 1) * per_rank};
  }
};

Expected expected_plan(const Options& o) {
  Expected e;
  e.range = o.mask.value_or(cs::Slice{0, o.n_obs});
  e.per_rank = e.range.size() / o.world_size;
  if (o.enforce) e.per_rank -= e.per_rank % o.batch_size;
  e.n_batches = e.per_rank / o.batch_size + (!o.drop_last && e.per_rank % o.batch_size != 0 ? 1 : 0);
  e.used = o.drop_last ? e.n_batches * o.batch_size : e.per_rank;
  e.last_batch = e.n_batches == 0 ? 0 : e.used - (e.n_batches - 1) * o.batch_size;
  return e;
}

// What the library says about one rank.
struct RankPlan {
  cs::Slice shard;
  std::int64_t n_batches = 0;
  std::int64_t used = 0;
  std::int64_t last_batch = 0;
};

class Checks {
 public:
  template <class... Args>
  void fail(fmt::format_string<Args...> format, Args&&... args) {
    // Formatting only what is shown keeps a systematic failure from costing a string per observation.
    if (failures_ < max_shown) shown_.push_back(fmt::format(format, std::forward<Args>(args)...));
    ++failures_;
  }
  [[nodiscard]] bool passed() const noexcept { return failures_ == 0; }
  [[nodiscard]] std::int64_t failures() const noexcept { return failures_; }
  [[nodiscard]] const std::vector<std::string>& shown() const noexcept { return shown_; }

 private:
  static constexpr std::int64_t max_shown = 20;
  std::int64_t failures_ = 0;
  std::vector<std::string> shown_;
};

// Observations a rank has yielded: a bitmap over its shard for whole epochs, a sorted list for
// prefixes (whose shard may be far too large for a bitmap).
class Seen {
 public:
  void reset(cs::Slice shard, bool bitmap) {
    shard_ = shard;
    bitmap_ = bitmap;
    bits_.assign(bitmap ? static_cast<std::size_t>(shard.size()) : 0, false);
    list_.clear();
  }
  // False when `obs` was seen before (detected at once with the bitmap, by `duplicates` otherwise).
  bool mark(std::int64_t obs) {
    if (!bitmap_) {
      list_.push_back(obs);
      return true;
    }
    const auto bit = static_cast<std::size_t>(obs - shard_.start);
    if (bits_[bit]) return false;
    bits_[bit] = true;
    return true;
  }
  // Observations marked more than once since `reset`, in list mode (the bitmap reports them in `mark`).
  std::int64_t duplicates() {
    std::sort(list_.begin(), list_.end());
    return static_cast<std::int64_t>(list_.end() - std::unique(list_.begin(), list_.end()));
  }

 private:
  cs::Slice shard_;
  bool bitmap_ = true;
  std::vector<bool> bits_;
  std::vector<std::int64_t> list_;
};

struct Walked {
  std::int64_t requests = 0;
  std::int64_t batches = 0;
  std::int64_t observations = 0;
  std::int64_t last_batch = 0;
  bool whole_epoch = true;
};

// Walks one rank's epoch (or its first `prefix` observations, whole requests at a time) and checks
// every chunk, batch and position against the shard.
template <class Dist>
Walked walk_rank(Dist& dist, const Options& o, cs::Slice shard, std::optional<std::int64_t> prefix, Seen& seen,
                 std::vector<std::int64_t>& offsets, Checks& checks) {
  const std::int64_t rank = dist.rank();
  Walked w;
  seen.reset(shard, !prefix && shard.size() <= full_walk_per_rank);
  bool after_short_batch = false;
  for (const cs::LoadRequest& request : dist.sample(o.n_obs)) {
    ++w.requests;
    const auto n_chunks = static_cast<std::int64_t>(request.chunks.size());
    if (n_chunks < 1 || n_chunks > o.preload)
      checks.fail("rank {}: request {} has {} chunks, outside [1, preload {}]", rank, w.requests - 1, n_chunks,
                  o.preload);
    offsets.assign(1, 0);
    for (const cs::Slice& chunk : request.chunks) {
      if (chunk.empty() || chunk.size() > o.chunk_size || chunk.start < shard.start || chunk.stop > shard.stop)
        checks.fail("rank {}: chunk [{}, {}) is empty, longer than chunk_size {} or outside shard [{}, {})", rank,
                    chunk.start, chunk.stop, o.chunk_size, shard.start, shard.stop);
      offsets.push_back(offsets.back() + chunk.size());
    }
    const std::int64_t buffer = offsets.back();
    for (const std::span<const std::int64_t> batch : request.splits) {
      const auto size = static_cast<std::int64_t>(batch.size());
      if (after_short_batch) checks.fail("rank {}: batch {} follows a short batch", rank, w.batches);
      if (size < 1 || size > o.batch_size)
        checks.fail("rank {}: batch {} has {} positions, outside [1, batch_size {}]", rank, w.batches, size,
                    o.batch_size);
      after_short_batch = size < o.batch_size;
      w.last_batch = size;
      ++w.batches;
      for (const std::int64_t position : batch) {
        if (position < 0 || position >= buffer) {
          checks.fail("rank {}: position {} is outside the request's buffer of {} rows", rank, position, buffer);
          continue;
        }
        const auto chunk = std::upper_bound(offsets.begin() + 1, offsets.end(), position) - (offsets.begin() + 1);
        const cs::Slice& source = request.chunks[static_cast<std::size_t>(chunk)];
        const std::int64_t obs = source.start + (position - offsets[static_cast<std::size_t>(chunk)]);
        ++w.observations;
        if (!shard.contains(obs)) {
          checks.fail("rank {}: observation {} is outside its shard [{}, {})", rank, obs, shard.start, shard.stop);
          continue;
        }
        if (!seen.mark(obs)) checks.fail("rank {}: observation {} is yielded twice in one epoch", rank, obs);
      }
    }
    if (prefix && w.observations >= *prefix) {
      w.whole_epoch = false;
      break;
    }
  }
  if (const std::int64_t twice = seen.duplicates(); twice > 0)
    checks.fail("rank {}: {} observations are yielded more than once", rank, twice);
  return w;
}

std::string slice_text(cs::Slice s) { return fmt::format("[{}, {})", s.start, s.stop); }

std::string counted(std::int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}
std::string observations(std::int64_t n) { return counted(n, "observation", "observations"); }
std::string batches(std::int64_t n) { return counted(n, "batch", "batches"); }

// Left-aligns the second column (the shard ranges) and right-aligns the others, numbers all.
template <std::size_t N>
void print_table(const std::vector<std::array<std::string, N>>& rows) {
  std::array<std::size_t, N> width{};
  for (const auto& row : rows)
    for (std::size_t c = 0; c < N; ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < N; ++c) {
      if (c > 0) line += "  ";
      line += c == 1 ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  }
}

template <class Base>
int run(const Options& o, const Base& base) {
  using Dist = cs::DistributedSampler<Base>;
  const auto rank_sampler = [&](std::int64_t rank) {
    return Dist(base, cs::DistInfo{.rank = rank, .world_size = o.world_size}, {.enforce_equal_batches = o.enforce});
  };
  // The library validates n_obs, the mask and the share per rank first: its message is the error.
  (void)rank_sampler(0).n_batches(o.n_obs);
  if (o.world_size > max_world_size)
    bad_argument("--world-size ({}) must be <= {}: the planner checks every rank", o.world_size, max_world_size);

  const Expected expected = expected_plan(o);
  std::vector<RankPlan> plans;
  plans.reserve(static_cast<std::size_t>(o.world_size));
  for (std::int64_t rank = 0; rank < o.world_size; ++rank) {
    const Dist dist = rank_sampler(rank);
    RankPlan plan{.shard = dist.shard(o.n_obs), .n_batches = dist.n_batches(o.n_obs)};
    plan.used = std::min(plan.shard.size(), plan.n_batches * o.batch_size);
    plan.last_batch = plan.n_batches == 0 ? 0 : plan.used - (plan.n_batches - 1) * o.batch_size;
    plans.push_back(plan);
  }

  const cs::Slice range = expected.range;
  fmt::print("{} over {} ranks\n", Base::name, o.world_size);
  fmt::print("  sampler   chunk_size {}, preload_nchunks {} ({} rows per request), batch_size {}, drop_last {}, "
             "seed {}\n",
             o.chunk_size, o.preload, o.chunk_size * o.preload, o.batch_size, o.drop_last ? "on" : "off", o.seed);
  fmt::print("  range     {} = {}\n", slice_text(range),
             o.mask ? fmt::format("{} of the {} observations (the mask)", range.size(), o.n_obs)
                    : fmt::format("all {} observations (no mask)", o.n_obs));
  fmt::print("  per rank  {} / {} = {}{} observations (enforce_equal_batches {})\n\n", range.size(), o.world_size,
             range.size() / o.world_size,
             o.enforce ? fmt::format(", rounded down to a multiple of {} = {}", o.batch_size, expected.per_rank)
                       : std::string{},
             o.enforce ? "on" : "off");

  std::vector<std::array<std::string, 6>> rows;
  rows.push_back({"rank", "shard", "observations", "batches", "last batch", "unused"});
  std::int64_t total_obs = 0;
  std::int64_t total_batches = 0;
  std::int64_t total_unused = 0;
  for (std::int64_t rank = 0; rank < o.world_size; ++rank) {
    const RankPlan& p = plans[static_cast<std::size_t>(rank)];
    total_obs += p.shard.size();
    total_batches += p.n_batches;
    total_unused += p.shard.size() - p.used;
    const bool listed = o.world_size <= max_listed_ranks || rank < listed_at_each_end ||
                        rank >= o.world_size - listed_at_each_end;
    if (listed)
      rows.push_back({fmt::format("{}", rank), slice_text(p.shard), fmt::format("{}", p.shard.size()),
                      fmt::format("{}", p.n_batches), p.n_batches == 0 ? "-" : fmt::format("{}", p.last_batch),
                      fmt::format("{}", p.shard.size() - p.used)});
    else if (rank == listed_at_each_end)
      rows.push_back({"...", fmt::format("({} more ranks)", o.world_size - 2 * listed_at_each_end), "", "", "", ""});
  }
  rows.push_back({"total", "", fmt::format("{}", total_obs), fmt::format("{}", total_batches), "",
                  fmt::format("{}", total_unused)});
  print_table(rows);

  // Gaps between the shards, as the library placed them: the observations no rank reads.
  std::vector<cs::Slice> shards;
  shards.reserve(plans.size());
  for (const RankPlan& p : plans) shards.push_back(p.shard);
  std::sort(shards.begin(), shards.end(), [](cs::Slice a, cs::Slice b) { return a.start < b.start; });
  std::vector<cs::Slice> gaps;
  std::int64_t cursor = range.start;
  for (const cs::Slice& s : shards) {
    if (s.start > cursor) gaps.push_back({cursor, std::min(s.start, range.stop)});
    cursor = std::max(cursor, s.stop);
  }
  if (cursor < range.stop) gaps.push_back({cursor, range.stop});
  std::int64_t dropped = 0;
  std::string gap_list;
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    dropped += gaps[i].size();
    if (i < 4) gap_list += fmt::format("{}{}", i == 0 ? "" : ", ", slice_text(gaps[i]));
  }
  if (gaps.size() > 4) gap_list += fmt::format(", ... ({} ranges)", gaps.size());
  fmt::print("\ndropped   {} of the range in no rank's shard{}{}\n", observations(dropped),
             gaps.empty() ? "" : ": ", gap_list);
  if (o.mask)
    fmt::print("          {} of n_obs outside the mask, never sampled\n", observations(o.n_obs - range.size()));
  if (total_unused > 0)
    fmt::print("unused    {} in shards but in no batch (drop_last)\n", observations(total_unused));

  Checks checks;
  // The shard arithmetic, against the contract.
  for (std::int64_t rank = 0; rank < o.world_size; ++rank) {
    const RankPlan& p = plans[static_cast<std::size_t>(rank)];
    const cs::Slice want = expected.shard(rank);
    if (p.shard != want)
      checks.fail("rank {}: shard {} differs from the contract's {}", rank, slice_text(p.shard), slice_text(want));
    if (p.shard.empty() || p.shard.start < range.start || p.shard.stop > range.stop)
      checks.fail("rank {}: shard {} is empty or outside the range {}", rank, slice_text(p.shard), slice_text(range));
    if (rank > 0 && p.shard.start < plans[static_cast<std::size_t>(rank - 1)].shard.stop)
      checks.fail("rank {}: shard {} overlaps rank {}'s {}", rank, slice_text(p.shard), rank - 1,
                  slice_text(plans[static_cast<std::size_t>(rank - 1)].shard));
    if (p.n_batches != expected.n_batches)
      checks.fail("rank {}: n_batches {} differs from the contract's {}", rank, p.n_batches, expected.n_batches);
    if (p.n_batches != plans.front().n_batches)
      checks.fail("rank {}: n_batches {} differs from rank 0's {}", rank, p.n_batches, plans.front().n_batches);
  }

  // The walk: whole epochs when that is quick, else a prefix of each.
  const std::int64_t used = expected.used;
  const bool whole = used <= full_walk_per_rank && used <= full_walk_total / o.world_size;
  const std::int64_t request_rows = std::min(o.chunk_size * o.preload, used);
  const bool walkable = request_rows <= max_walked_request;
  const std::optional<std::int64_t> prefix =
      whole ? std::nullopt
            : std::optional<std::int64_t>(std::clamp<std::int64_t>(full_walk_total / o.world_size, 1, prefix_per_rank));
  Walked total;
  std::optional<std::int64_t> yielded_batches;
  if (walkable) {
    Seen seen;
    std::vector<std::int64_t> offsets;
    offsets.reserve(static_cast<std::size_t>(o.preload) + 1);
    for (std::int64_t rank = 0; rank < o.world_size; ++rank) {
      const RankPlan& p = plans[static_cast<std::size_t>(rank)];
      Dist dist = rank_sampler(rank);
      const Walked w = walk_rank(dist, o, p.shard, prefix, seen, offsets, checks);
      total.requests += w.requests;
      total.batches += w.batches;
      total.observations += w.observations;
      if (!w.whole_epoch) continue;
      if (w.batches != p.n_batches)
        checks.fail("rank {}: yielded {} batches, n_batches says {}", rank, w.batches, p.n_batches);
      if (w.observations != expected.used)
        checks.fail("rank {}: yielded {} observations, the contract says {}", rank, w.observations, expected.used);
      if (w.batches > 0 && w.last_batch != expected.last_batch)
        checks.fail("rank {}: the last batch has {} positions, the contract says {}", rank, w.last_batch,
                    expected.last_batch);
      if (o.enforce && w.last_batch != o.batch_size && w.batches > 0)
        checks.fail("rank {}: enforce_equal_batches, yet its last batch has {} positions", rank, w.last_batch);
      if (!yielded_batches) yielded_batches = w.batches;
      if (w.batches != *yielded_batches)
        checks.fail("rank {}: yielded {} batches, rank 0 yielded {}", rank, w.batches, *yielded_batches);
    }
  }

  if (!walkable)
    fmt::print("\ncheck     requests of {} rows are too large to walk (limit {}): checked the shard arithmetic only\n",
               request_rows, max_walked_request);
  else if (prefix)
    fmt::print(
        "\ncheck     epochs too large to walk quickly ({} observations per rank): checked the shard arithmetic of "
        "every rank and walked only a prefix of each epoch, at least {} per rank ({}, {}, {} in all)\n",
        used, observations(*prefix), counted(total.requests, "request", "requests"), batches(total.batches),
        observations(total.observations));
  else
    fmt::print("\ncheck     walked every rank's whole epoch: {}, {}, {}\n",
               counted(total.requests, "request", "requests"), batches(total.batches), observations(total.observations));

  if (checks.passed()) {
    const std::string shards_ok = "shards disjoint, inside the range, as the contract computes them";
    if (!walkable)
      fmt::print("PASS      {}; {} on every rank = n_batches\n", shards_ok, batches(expected.n_batches));
    else
      fmt::print("PASS      {}; every {} observation in its rank's shard, once; {} on every rank = n_batches\n",
                 shards_ok, prefix ? "walked" : "yielded", batches(expected.n_batches));
    return 0;
  }
  const auto shown = static_cast<std::int64_t>(checks.shown().size());
  fmt::print("FAIL      {} invariant violations{}\n", checks.failures(),
             checks.failures() > shown ? fmt::format(", the first {}:", shown) : std::string(":"));
  for (const std::string& failure : checks.shown()) fmt::print("          {}\n", failure);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(std::span<char* const>(argv, static_cast<std::size_t>(argc)));
    if (o.help) {
      fmt::print("{}", usage);
      return 0;
    }
    if (o.sequential)
      return run(o, cs::SequentialSampler({.chunk_size = o.chunk_size, .preload_nchunks = o.preload,
                                           .batch_size = o.batch_size, .drop_last = o.drop_last, .mask = o.mask,
                                           .seed = o.seed}));
    return run(o, cs::RandomSampler({.chunk_size = o.chunk_size, .preload_nchunks = o.preload,
                                     .batch_size = o.batch_size, .drop_last = o.drop_last, .mask = o.mask,
                                     .seed = o.seed}));
  } catch (const std::invalid_argument& error) {
    fmt::print(stderr, "shard_plan: error: {}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "shard_plan: error: {}\n", error.what());
    return 1;
  }
}
