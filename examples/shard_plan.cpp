// SPDX-License-Identifier: MIT
// shard_plan: plans how DistributedSampler splits a dataset over the ranks of a data-parallel
// job, in either shard mode and under any remainder policy, then proves the plan by walking every
// rank's epochs, and can draw it.
//
// For each rank it prints its shard (contiguous mode) or its block of the shared plan (global
// mode), its batches per epoch, the observations it reads, and those left out or repeated, per
// epoch where they change. The check walks each rank's epochs with cs::DistributedSampler (a
// bounded prefix of them when epochs are too large to walk quickly), compares them with the
// contract computed here independently, checks the policy's promise, and prints PASS or FAIL.
// --svg FILE draws the first epochs: one row per (epoch, rank) over the observation axis.
//
//   shard_plan                       # annbatch's 2-GPU tutorial: 20000 obs, 2 ranks => 39 batches each
//   shard_plan --n-obs 107 --world-size 3 --chunk-size 10 --preload 1 --batch-size 10 --no-enforce
//   shard_plan --mode global --remainder rotate --epochs 2 --svg plan.svg
//   shard_plan --help
//
// Exit status: 0 when every invariant holds, 1 when one fails, 2 on a bad argument.

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
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

Plans how cs::DistributedSampler shares n_obs observations among world_size ranks, prints what
each rank reads, and checks the plan by walking every rank's epochs.

options:
  --n-obs N            observations in the dataset                  (default 20000)
  --world-size W       ranks in the job, at most 1048576            (default 2)
  --chunk-size C       observations per contiguous chunk read       (default 64)
  --preload P          chunks per load request (preload_nchunks)    (default 32)
  --batch-size B       observations per batch; divides C * P        (default 256)
  --mask START:STOP    sample only observations [START, STOP)       (default: all of [0, N));
                       START: alone is [START, N), annbatch's slice(START, None)
  --mode MODE          contiguous: each rank shuffles its own slice (annbatch);
                       global: one shuffled plan per epoch, dealt to the ranks in
                       blocks of batches                            (default contiguous)
  --remainder POLICY   what becomes of what does not divide evenly:
                       drop: left out, the same every epoch; pad: repeat rows so
                       nothing is left out; rotate: left out from the tail in even
                       epochs and the head in odd ones              (default drop)
  --no-enforce         do not make every rank yield the same number of full batches
  --drop-last          drop each rank's last, short batch
  --epochs E           epochs to walk and check, 1 to 1000          (default 1)
  --seed S             seed of the shuffles, not of the plan        (default 0)
  --sampler KIND       random or sequential                         (default random)
  --svg FILE           draw the first epochs (up to 4) as an SVG picture
  -h, --help           print this help and exit

Options also take the form --name=value. The defaults are annbatch's multi-GPU tutorial:
2 ranks of RandomSampler(chunk 64, preload 32, batch 256) over 20000 observations, 39 batches each.

exit status: 0 every invariant holds, 1 an invariant failed, 2 bad arguments.
)";

// Whole epochs are walked while that stays a matter of seconds (in row-equivalents: a row costs 1,
// a chunk 8 and a request 32); beyond, each rank walks a prefix of its first few epochs.
constexpr double walk_budget = 100'000'000;
constexpr std::int64_t prefix_total = 1'000'000;  // observations per epoch over all ranks
constexpr std::int64_t prefix_per_rank = 1'000'000;
constexpr std::int64_t prefix_epochs = 4;
// A whole walk tracks the range's observations bit by bit, in a few bitmaps of this many bits.
constexpr std::int64_t max_bitmap = std::int64_t{1} << 28;
// A request's positions are one allocation in the sampler's range: refuse to materialize huge ones.
constexpr std::int64_t max_walked_request = std::int64_t{1} << 24;
// Every rank is planned and checked; a bound keeps that from running for minutes.
constexpr std::int64_t max_world_size = std::int64_t{1} << 20;
constexpr std::int64_t max_epochs = 1000;
// Long tables hide their middle ranks, whose numbers equal their neighbours'.
constexpr std::int64_t max_listed_ranks = 64;
constexpr std::int64_t listed_at_each_end = 8;
// The epochs listed one by one (global mode) and the ranks listed in each.
constexpr std::int64_t max_listed_epochs = 4;
constexpr std::int64_t max_epoch_lines_ranks = 8;
// The picture: this many epochs and ranks at most, over an axis this many pixels wide.
constexpr std::int64_t max_drawn_epochs = 4;
constexpr std::int64_t max_drawn_ranks = 16;
constexpr std::int64_t axis_pixels = 800;
constexpr std::size_t max_svg_bytes = 190'000;

struct Options {
  std::int64_t n_obs = 20'000;
  std::int64_t world_size = 2;
  std::int64_t chunk_size = 64;
  std::int64_t preload = 32;
  std::int64_t batch_size = 256;
  std::optional<cs::Slice> mask;
  cs::ShardMode mode = cs::ShardMode::contiguous;
  cs::Remainder remainder = cs::Remainder::drop;
  bool enforce = true;
  bool drop_last = false;
  std::int64_t epochs = 1;
  std::uint64_t seed = cs::default_seed;
  bool sequential = false;
  std::optional<std::string> svg;
  bool help = false;

  [[nodiscard]] bool global() const noexcept { return mode == cs::ShardMode::global; }
  [[nodiscard]] bool pad() const noexcept { return remainder == cs::Remainder::pad; }
  [[nodiscard]] bool rotate() const noexcept { return remainder == cs::Remainder::rotate; }
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
  const auto start = parse_integer<std::int64_t>("--mask START", text.substr(0, colon));
  if (colon + 1 == text.size()) return cs::Slice::from(start);
  return {start, parse_integer<std::int64_t>("--mask STOP", text.substr(colon + 1))};
}

std::string_view mode_name(cs::ShardMode mode) { return mode == cs::ShardMode::global ? "global" : "contiguous"; }
std::string_view remainder_name(cs::Remainder remainder) {
  switch (remainder) {
    case cs::Remainder::pad: return "pad";
    case cs::Remainder::rotate: return "rotate";
    case cs::Remainder::drop: break;
  }
  return "drop";
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
    else if (name == "--epochs") options.epochs = parse_integer<std::int64_t>(name, value());
    else if (name == "--seed") options.seed = parse_integer<std::uint64_t>(name, value());
    else if (name == "--mask") options.mask = parse_mask(value());
    else if (name == "--svg") {
      options.svg = std::string(value());
      if (options.svg->empty()) bad_argument("--svg needs a file name");
    } else if (name == "--mode") {
      const std::string_view mode = value();
      if (mode != "contiguous" && mode != "global") bad_argument("--mode: {:?} is not contiguous or global", mode);
      options.mode = mode == "global" ? cs::ShardMode::global : cs::ShardMode::contiguous;
    } else if (name == "--remainder") {
      const std::string_view policy = value();
      if (policy == "drop") options.remainder = cs::Remainder::drop;
      else if (policy == "pad") options.remainder = cs::Remainder::pad;
      else if (policy == "rotate") options.remainder = cs::Remainder::rotate;
      else bad_argument("--remainder: {:?} is not drop, pad or rotate", policy);
    } else if (name == "--sampler") {
      const std::string_view kind = value();
      if (kind != "random" && kind != "sequential") bad_argument("--sampler: {:?} is not random or sequential", kind);
      options.sequential = kind == "sequential";
    } else if (name.starts_with("-")) {
      bad_argument("unknown option {} (see --help)", name);
    } else {
      bad_argument("unexpected argument {:?} (see --help)", name);
    }
  }
  if (options.epochs < 1 || options.epochs > max_epochs)
    bad_argument("--epochs ({}) must be in [1, {}]", options.epochs, max_epochs);
  return options;
}

[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}
[[nodiscard]] constexpr std::int64_t round_down(std::int64_t a, std::int64_t b) noexcept { return a / b * b; }

// ---------------------------------------------------------------------------------------------
// The plan as the semantics contract states it, derived here independently of the library so
// that the check compares two computations rather than reading the library's answer back.

// One epoch of the whole job.
struct JobEpoch {
  std::uint64_t epoch = 0;
  cs::Slice window;              // contiguous: the union of the shards; global: what the shared plan reads
  std::int64_t per_rank = 0;     // contiguous drop and rotate: every shard's size
  std::int64_t budget = 0;       // positions of each rank's plan (contiguous) or of the shared plan (global)
  std::int64_t used = 0;         // of them, those in batches (drop_last may drop a short last batch)
  std::int64_t plan_batches = 0; // global: batches of the shared plan
  std::vector<cs::Slice> left_out;  // the range outside the window: left out by the policy
  // Over all ranks:
  std::int64_t reads = 0;     // positions yielded
  std::int64_t distinct = 0;  // distinct observations read
  std::int64_t repeated = 0;  // reads of an observation already read (padding)
  std::int64_t trimmed = 0;   // observations of the window no batch reads (drop_last)
};

// One rank in one epoch.
struct RankShare {
  cs::Slice shard;     // contiguous: its shard; global: the window it shares with every rank
  cs::BatchRun block;  // global: its batches of the shared plan; contiguous: all of its own plan's
  std::int64_t n_batches = 0;
  std::int64_t reads = 0;
  std::int64_t last_batch = 0;
  std::int64_t repeated = 0;  // contiguous only: in global mode the plan's repeats are the job's
  std::int64_t left_out = 0;  // contiguous only: rows of its shard no batch reads
  std::int64_t chunks = 0;    // chunks its requests list
};

class Contract {
 public:
  explicit Contract(const Options& o)
      : o_(o), range_(o.mask ? o.mask->resolve(o.n_obs) : cs::Slice{0, o.n_obs}), size_(range_.size()), world_(o.world_size) {}

  [[nodiscard]] cs::Slice range() const noexcept { return range_; }

  [[nodiscard]] JobEpoch epoch(std::uint64_t e) const {
    JobEpoch job;
    job.epoch = e;
    const std::int64_t b = o_.batch_size;
    const bool odd = e % 2 == 1;
    if (o_.global()) {
      // One plan over the window; with equal batches it holds a multiple of world_size * batch_size.
      const std::int64_t unit = o_.enforce ? world_ * b : world_;
      job.window = range_;
      job.budget = size_;
      if (o_.enforce && o_.pad()) {
        job.budget = ceil_div(size_, unit) * unit;
      } else if (o_.enforce) {
        const std::int64_t kept = round_down(size_, unit);
        const std::int64_t offset = o_.rotate() && odd ? size_ - kept : 0;
        job.window = {range_.start + offset, range_.start + offset + kept};
        job.budget = kept;
      }
      job.used = o_.drop_last ? round_down(job.budget, b) : job.budget;
      job.plan_batches = ceil_div(job.used, b);
      job.reads = job.used;
      job.distinct = std::min(job.used, job.window.size());
    } else {
      const std::int64_t unit = o_.enforce ? b : 1;
      if (o_.pad()) {
        // Balanced shards, every rank padded to the largest's batches.
        job.window = range_;
        job.budget = ceil_div(ceil_div(size_, world_), unit) * unit;
      } else {
        job.per_rank = round_down(size_ / world_, unit);
        const std::int64_t offset = o_.rotate() && odd ? size_ - world_ * job.per_rank : 0;
        job.window = {range_.start + offset, range_.start + offset + world_ * job.per_rank};
        job.budget = job.per_rank;
      }
      job.used = o_.drop_last ? round_down(job.budget, b) : job.budget;
      job.reads = world_ * job.used;
      if (o_.pad()) {
        const std::int64_t base = size_ / world_;
        const std::int64_t extra = size_ % world_;
        job.distinct = extra * std::min(job.used, base + 1) + (world_ - extra) * std::min(job.used, base);
      } else {
        job.distinct = world_ * std::min(job.used, job.per_rank);
      }
    }
    job.repeated = job.reads - job.distinct;
    job.trimmed = job.window.size() - job.distinct;
    if (job.window.start > range_.start) job.left_out.push_back({range_.start, job.window.start});
    if (job.window.stop < range_.stop) job.left_out.push_back({job.window.stop, range_.stop});
    return job;
  }

  [[nodiscard]] RankShare rank(const JobEpoch& job, std::int64_t r) const {
    RankShare share;
    const std::int64_t b = o_.batch_size;
    if (!o_.global()) {
      if (o_.pad()) {
        const std::int64_t base = size_ / world_;
        const std::int64_t extra = size_ % world_;
        const std::int64_t start = range_.start + r * base + std::min(r, extra);
        share.shard = {start, start + base + (r < extra ? 1 : 0)};
      } else {
        share.shard = {job.window.start + r * job.per_rank, job.window.start + (r + 1) * job.per_rank};
      }
      share.n_batches = ceil_div(job.used, b);
      share.block = {0, share.n_batches};
      share.reads = job.used;
      share.last_batch = job.used - (share.n_batches - 1) * b;
      const std::int64_t distinct = std::min(job.used, share.shard.size());
      share.repeated = job.used - distinct;
      share.left_out = share.shard.size() - distinct;
      share.chunks = chunks(share.shard.size(), job.used, 0, share.n_batches - 1);
      return share;
    }
    const std::int64_t n = job.plan_batches;
    if (o_.enforce) {
      const std::int64_t each = n / world_;  // a multiple of world_size batches, for every policy
      share.block = {r * each, (r + 1) * each};
    } else {
      const std::int64_t base = n / world_;
      const std::int64_t extra = n % world_;
      const std::int64_t start = r * base + std::min(r, extra);
      share.block = {start, start + base + (r < extra ? 1 : 0)};
    }
    share.shard = job.window;
    share.n_batches = share.block.size();
    const std::int64_t last_of_plan = job.used - (n - 1) * b;
    const bool holds_last = share.block.size() > 0 && share.block.end == n;
    share.reads = share.block.size() * b - (holds_last ? b - last_of_plan : 0);
    share.last_batch = share.block.size() == 0 ? 0 : holds_last ? last_of_plan : b;
    share.chunks = share.block.size() == 0 ? 0
                                           : chunks(job.window.size(), job.used, share.block.begin, share.block.end - 1);
    return share;
  }

 private:
  // Chunks listed by the requests holding batches [first, last] of a plan over `rows` rows with
  // `used` positions: a full request lists preload_nchunks chunks; the last lists what remains
  // of the stream (shuffled), or the fewest chunks that cover its rows (in order).
  [[nodiscard]] std::int64_t chunks(std::int64_t rows, std::int64_t used, std::int64_t first, std::int64_t last) const {
    const std::int64_t request = o_.chunk_size * o_.preload;
    const std::int64_t n_requests = ceil_div(std::min(used, rows), request);
    if (n_requests == 0 || last < first) return 0;  // drop_last may leave a rank no batch at all
    const std::int64_t per_request = request / o_.batch_size;
    const std::int64_t k0 = std::min(first / per_request, n_requests - 1);
    const std::int64_t k1 = std::min(last / per_request, n_requests - 1);
    if (k1 < n_requests - 1) return (k1 - k0 + 1) * o_.preload;
    const std::int64_t k = n_requests - 1;
    const std::int64_t stream_chunks = ceil_div(rows, o_.chunk_size);
    const std::int64_t final_chunks =
        o_.sequential ? std::min(ceil_div(std::min(request, used - k * request), o_.chunk_size),
                                 stream_chunks - k * o_.preload)
                      : std::min(o_.preload, stream_chunks - k * o_.preload);
    return (k1 - k0) * o_.preload + final_chunks;
  }

  const Options& o_;
  cs::Slice range_;
  std::int64_t size_;
  std::int64_t world_;
};

// ---------------------------------------------------------------------------------------------
// Bookkeeping of the walk.

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

// A fixed-size bitmap with the few range operations the checks need.
class Bits {
 public:
  void assign(std::int64_t size) {
    size_ = size;
    words_.assign(static_cast<std::size_t>(ceil_div(size, 64)), 0);
  }
  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  // Sets bit i; returns whether it was already set.
  bool set(std::int64_t i) noexcept {
    std::uint64_t& word = words_[static_cast<std::size_t>(i / 64)];
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    const bool was = (word & bit) != 0;
    word |= bit;
    return was;
  }
  [[nodiscard]] bool test(std::int64_t i) const noexcept {
    return (words_[static_cast<std::size_t>(i / 64)] >> (i % 64) & 1U) != 0;
  }
  // Set bits in [lo, hi).
  [[nodiscard]] std::int64_t count(std::int64_t lo, std::int64_t hi) const noexcept {
    std::int64_t total = 0;
    while (lo < hi && lo % 64 != 0) total += test(lo++) ? 1 : 0;
    for (; lo + 64 <= hi; lo += 64) total += std::popcount(words_[static_cast<std::size_t>(lo / 64)]);
    while (lo < hi) total += test(lo++) ? 1 : 0;
    return total;
  }
  [[nodiscard]] std::int64_t count() const noexcept { return count(0, size_); }
  // The first clear bit at or after i (size() if none).
  [[nodiscard]] std::int64_t next_clear(std::int64_t i) const noexcept { return next(i, true); }
  // The first set bit at or after i (size() if none).
  [[nodiscard]] std::int64_t next_set(std::int64_t i) const noexcept { return next(i, false); }
  // Whether every bit of `*this | other` is set.
  [[nodiscard]] bool covers_with(const Bits& other) const noexcept {
    for (std::int64_t i = 0; i < size_; i += 64) {
      const std::int64_t n = std::min<std::int64_t>(64, size_ - i);
      const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
      const auto w = static_cast<std::size_t>(i / 64);
      if (((words_[w] | other.words_[w]) & all) != all) return false;
    }
    return true;
  }
  friend bool operator==(const Bits&, const Bits&) = default;

 private:
  [[nodiscard]] std::int64_t next(std::int64_t i, bool clear) const noexcept {
    while (i < size_) {
      const std::uint64_t word = words_[static_cast<std::size_t>(i / 64)];
      const std::uint64_t looked = (clear ? ~word : word) >> (i % 64);
      if (looked != 0) return std::min(size_, i + std::countr_zero(looked));
      i = (i / 64 + 1) * 64;
    }
    return size_;
  }

  std::int64_t size_ = 0;
  std::vector<std::uint64_t> words_;
};

// The runs of clear bits of `bits` (offset by `start`): the first `keep` of them and how many in all.
struct Gaps {
  std::vector<cs::Slice> first;
  std::int64_t runs = 0;
  std::int64_t total = 0;
};
Gaps clear_runs(const Bits& bits, std::int64_t start, std::size_t keep) {
  Gaps gaps;
  for (std::int64_t i = bits.next_clear(0); i < bits.size(); i = bits.next_clear(i)) {
    const std::int64_t end = bits.next_set(i);
    if (gaps.first.size() < keep) gaps.first.push_back({start + i, start + end});
    ++gaps.runs;
    gaps.total += end - i;
    i = end;
  }
  return gaps;
}

// ---------------------------------------------------------------------------------------------
// The picture's data: per (epoch, rank) row and per epoch, counts of observations in pixel bins.

struct Bins {
  cs::Slice axis;
  std::int64_t width = 1;  // observations per bin
  std::int64_t count = 0;

  static Bins over(cs::Slice axis, std::int64_t max_bins) {
    Bins bins{.axis = axis, .width = ceil_div(axis.size(), std::min(axis.size(), max_bins))};
    bins.count = ceil_div(axis.size(), bins.width);
    return bins;
  }
  [[nodiscard]] std::size_t of(std::int64_t obs) const noexcept {
    return static_cast<std::size_t>((obs - axis.start) / width);
  }
  [[nodiscard]] cs::Slice span(std::size_t bin) const noexcept {
    const std::int64_t lo = axis.start + static_cast<std::int64_t>(bin) * width;
    return {lo, std::min(axis.stop, lo + width)};
  }
  // Adds the overlap of [s.start, s.stop) with each bin to `counts`.
  void add(std::vector<std::int64_t>& counts, cs::Slice s) const {
    const cs::Slice clipped{std::max(s.start, axis.start), std::min(s.stop, axis.stop)};
    if (clipped.empty()) return;
    for (std::size_t bin = of(clipped.start); bin <= of(clipped.stop - 1); ++bin) {
      const cs::Slice b = span(bin);
      counts[bin] += std::min(b.stop, clipped.stop) - std::max(b.start, clipped.start);
    }
  }
};

struct Row {
  std::vector<std::int64_t> loaded;    // rows of the chunks its requests list
  std::vector<std::int64_t> read;      // positions it reads
  std::vector<std::int64_t> repeated;  // reads of observations already read this epoch
  std::string note;                    // drawn to the row's right
};

struct Picture {
  Bins bins;
  std::vector<std::uint64_t> epochs;  // drawn epochs
  std::vector<std::int64_t> ranks;    // drawn ranks
  std::vector<Row> rows;              // epoch-major
  std::vector<std::vector<std::int64_t>> left_out;  // per drawn epoch: observations no rank reads
  std::vector<std::string> headers;                 // per drawn epoch

  [[nodiscard]] Row* row(std::uint64_t epoch, std::int64_t rank) {
    const auto e = std::find(epochs.begin(), epochs.end(), epoch);
    const auto r = std::find(ranks.begin(), ranks.end(), rank);
    if (e == epochs.end() || r == ranks.end()) return nullptr;
    return &rows[static_cast<std::size_t>((e - epochs.begin()) * std::ssize(ranks) + (r - ranks.begin()))];
  }
};

// The observations one epoch has read, over all ranks: bitmaps over the range when the epoch is
// walked whole, a list sorted at the end when only prefixes are.
class EpochReads {
 public:
  void reset(cs::Slice range, bool bitmap) {
    range_ = range;
    bitmap_ = bitmap;
    if (bitmap) read_.assign(range.size());
    list_.clear();
  }
  [[nodiscard]] bool bitmap() const noexcept { return bitmap_; }
  // Records one read of `obs` (inside the range); returns false when it repeats one of this epoch
  // (known at once with the bitmap; with the list, `list_repeats` counts them at the end).
  bool mark(std::int64_t obs) {
    if (!bitmap_) {
      list_.push_back(obs);
      return true;
    }
    return !read_.set(obs - range_.start);
  }
  [[nodiscard]] std::int64_t list_repeats() {
    std::sort(list_.begin(), list_.end());
    return static_cast<std::int64_t>(list_.end() - std::unique(list_.begin(), list_.end()));
  }
  [[nodiscard]] const Bits& read() const noexcept { return read_; }

 private:
  cs::Slice range_;
  bool bitmap_ = true;
  Bits read_;
  std::vector<std::int64_t> list_;
};

// What walking one rank's epoch (or a prefix of it) measured.
struct RankWalk {
  std::int64_t requests = 0;  // LoadRequests yielded
  std::int64_t batches = 0;
  std::int64_t reads = 0;
  std::int64_t last_batch = 0;
  std::int64_t repeated = 0;
  std::int64_t chunks = 0;
  std::int64_t misplaced_repeats = 0;  // repeats outside the rank's final request
  bool whole = true;
  std::vector<cs::Slice> final_chunks;  // the chunks of its final request
  std::vector<cs::Slice> order;         // its chunks in reading order, merged where adjacent (the first few)
  std::int64_t order_runs = 0;          // merged runs in all
};

// The chunk ranges an epoch line lists per rank.
constexpr std::size_t kept_order = 6;

struct WalkSetup {
  const Options& o;
  std::uint64_t epoch;
  std::optional<std::int64_t> prefix;  // observations to walk, else the whole epoch
};

// Walks one rank's epoch and checks every chunk, batch and position against its shard (or the
// shared window); records reads in `reads` and, when drawn, in `row`.
template <class Dist>
RankWalk walk_rank(Dist& dist, const WalkSetup& setup, cs::Slice bounds, EpochReads& reads, Row* row,
                   const Bins& bins, Checks& checks) {
  const Options& o = setup.o;
  const std::int64_t rank = dist.rank();
  const std::uint64_t epoch = setup.epoch;
  RankWalk w;
  std::vector<std::int64_t> offsets;
  offsets.reserve(static_cast<std::size_t>(o.preload) + 1);
  std::optional<cs::Slice> previous_first;
  std::int64_t repeats_in_request = 0;
  std::int64_t last_stop = 0;
  bool after_short_batch = false;
  for (const cs::LoadRequest& request : dist.sample(o.n_obs)) {
    ++w.requests;
    const auto n_chunks = static_cast<std::int64_t>(request.chunks.size());
    if (n_chunks < 1 || n_chunks > o.preload) {
      checks.fail("epoch {} rank {}: request {} has {} chunks, outside [1, preload {}]", epoch, rank, w.requests - 1,
                  n_chunks, o.preload);
      if (n_chunks < 1) continue;
    }
    // A global block may begin or end inside a request: its pieces list the same chunks.
    if (!previous_first || *previous_first != request.chunks.front()) {
      previous_first = request.chunks.front();
      w.misplaced_repeats += repeats_in_request;
      repeats_in_request = 0;
      w.chunks += n_chunks;
      w.final_chunks.assign(request.chunks.begin(), request.chunks.end());
      for (const cs::Slice& chunk : request.chunks) {
        if (row != nullptr) bins.add(row->loaded, chunk);
        if (w.order_runs > 0 && last_stop == chunk.start) {
          if (w.order_runs == std::ssize(w.order)) w.order.back().stop = chunk.stop;
        } else {
          if (w.order.size() < kept_order) w.order.push_back(chunk);
          ++w.order_runs;
        }
        last_stop = chunk.stop;
      }
    }
    offsets.assign(1, 0);
    for (const cs::Slice& chunk : request.chunks) {
      if (chunk.empty() || chunk.size() > o.chunk_size || chunk.start < bounds.start || chunk.stop > bounds.stop)
        checks.fail("epoch {} rank {}: chunk [{}, {}) is empty, longer than chunk_size {} or outside {} [{}, {})", epoch,
                    rank, chunk.start, chunk.stop, o.chunk_size, o.global() ? "the window" : "its shard", bounds.start,
                    bounds.stop);
      offsets.push_back(offsets.back() + chunk.size());
    }
    const std::int64_t buffer = offsets.back();
    for (const std::span<const std::int64_t> batch : request.splits) {
      const auto size = static_cast<std::int64_t>(batch.size());
      if (after_short_batch) checks.fail("epoch {} rank {}: batch {} follows a short batch", epoch, rank, w.batches);
      if (size < 1 || size > o.batch_size)
        checks.fail("epoch {} rank {}: batch {} has {} positions, outside [1, batch_size {}]", epoch, rank, w.batches,
                    size, o.batch_size);
      after_short_batch = size < o.batch_size;
      w.last_batch = size;
      ++w.batches;
      for (const std::int64_t position : batch) {
        if (position < 0 || position >= buffer) {
          checks.fail("epoch {} rank {}: position {} is outside the request's buffer of {} rows", epoch, rank, position,
                      buffer);
          continue;
        }
        const auto chunk = std::upper_bound(offsets.begin() + 1, offsets.end(), position) - (offsets.begin() + 1);
        const cs::Slice& source = request.chunks[static_cast<std::size_t>(chunk)];
        const std::int64_t obs = source.start + (position - offsets[static_cast<std::size_t>(chunk)]);
        ++w.reads;
        if (!bounds.contains(obs)) {
          checks.fail("epoch {} rank {}: observation {} is outside {} [{}, {})", epoch, rank, obs,
                      o.global() ? "the window" : "its shard", bounds.start, bounds.stop);
          continue;
        }
        if (row != nullptr) ++row->read[bins.of(obs)];
        if (!reads.mark(obs)) {
          ++w.repeated;
          ++repeats_in_request;
          if (row != nullptr) ++row->repeated[bins.of(obs)];
          if (!o.pad())
            checks.fail("epoch {} rank {}: observation {} is read twice in one epoch ({} ranks must be disjoint)",
                        epoch, rank, obs, remainder_name(o.remainder));
        }
      }
    }
    if (setup.prefix && w.reads >= *setup.prefix) {
      w.whole = false;
      break;
    }
  }
  return w;
}

// ---------------------------------------------------------------------------------------------
// Text.

std::string slice_text(cs::Slice s) { return fmt::format("[{}, {})", s.start, s.stop); }
std::string run_text(cs::BatchRun r) { return fmt::format("[{}, {})", r.begin, r.end); }

std::string counted(std::int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}
std::string observations(std::int64_t n) { return counted(n, "observation", "observations"); }
std::string batches(std::int64_t n) { return counted(n, "batch", "batches"); }

std::string slices_text(std::span<const cs::Slice> slices, std::int64_t runs) {
  std::string text;
  for (const cs::Slice& s : slices) text += fmt::format("{}{}", text.empty() ? "" : ", ", slice_text(s));
  if (runs > std::ssize(slices)) text += fmt::format(", ... ({} ranges)", runs);
  return text;
}

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

[[nodiscard]] bool listed_rank(std::int64_t rank, std::int64_t world, std::int64_t max, std::int64_t at_each_end) {
  return world <= max || rank < at_each_end || rank >= world - at_each_end;
}

// What the policy does, in one line, for the picture's caption.
std::string policy_text(const Options& o, cs::Slice range, const JobEpoch& even, const JobEpoch& odd) {
  const std::int64_t left = range.size() - even.window.size();
  if (o.global() && !o.enforce)
    return "without enforce_equal_batches nothing is left out or padded; ranks differ by at most one batch";
  if (o.pad() && even.repeated == 0) return "the range divides evenly: nothing is left out and nothing repeats";
  if (o.pad())
    return fmt::format("nothing is left out; {} positions repeat a row so that every rank yields as many full batches",
                       even.repeated);
  if (left == 0) return "the range divides evenly: nothing is left out";
  if (o.rotate())
    return fmt::format("{} left out: {} in even epochs, {} in odd ones, so every observation is read in any two "
                       "consecutive epochs",
                       left, slices_text(even.left_out, 0), slices_text(odd.left_out, 0));
  return fmt::format("{} left out, the same every epoch: {}", left, slices_text(even.left_out, 0));
}

// ---------------------------------------------------------------------------------------------
// The picture.

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A number short enough for a tick or a note: 950, 20000, 12.5k, 3.5M, 4.61e+18.
std::string short_number(std::int64_t v) {
  if (v < 100'000) return fmt::format("{}", v);
  const auto x = static_cast<double>(v);
  if (x < 999.5e3) return fmt::format("{:.3g}k", x / 1e3);
  if (x < 999.5e6) return fmt::format("{:.3g}M", x / 1e6);
  if (x < 999.5e9) return fmt::format("{:.3g}G", x / 1e9);
  return fmt::format("{:.3g}", x);
}
std::string short_slice(cs::Slice s) { return fmt::format("[{}, {})", short_number(s.start), short_number(s.stop)); }

constexpr std::array<std::string_view, 10> palette{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf"};

struct Layout {
  double left = 78;  // rank labels
  double top = 0;    // below the caption
  double row_height = 14;
  double row_gap = 4;
  double header = 20;  // each epoch's header line
  double group_gap = 10;
  double width = 1040;
  [[nodiscard]] double axis_width() const noexcept { return static_cast<double>(axis_pixels); }
};

// Spans of consecutive bins for which `on(bin)` holds, as [first, last] bin pairs.
template <class F>
std::vector<std::pair<std::size_t, std::size_t>> bin_runs(std::size_t count, F on) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < count;) {
    if (!on(i)) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j + 1 < count && on(j + 1)) ++j;
    runs.emplace_back(i, j);
    i = j + 1;
  }
  return runs;
}

std::string render_svg(const Picture& pic, const std::vector<std::string>& caption) {
  Layout l;
  std::size_t longest_note = 0;
  for (const Row& row : pic.rows) longest_note = std::max(longest_note, row.note.size());
  l.width = std::max(l.width, l.left + l.axis_width() + 14 + 6.8 * static_cast<double>(longest_note));
  const Bins& bins = pic.bins;
  const double scale = l.axis_width() / static_cast<double>(bins.axis.size());
  const auto x_of = [&](std::int64_t obs) { return l.left + static_cast<double>(obs - bins.axis.start) * scale; };
  // A span narrower than a pixel is widened to one, so that a lone chunk stays visible.
  const auto bin_x = [&](std::size_t bin) {
    const double x = x_of(bins.span(bin).start);
    return std::min(x, l.left + l.axis_width() - 1.0);
  };
  const auto bin_end = [&](std::size_t bin) { return std::max(x_of(bins.span(bin).stop), bin_x(bin) + 1.0); };

  const std::size_t n_ranks = pic.ranks.size();
  const double group_height =
      l.header + static_cast<double>(n_ranks) * l.row_height + static_cast<double>(n_ranks - 1) * l.row_gap;
  l.top = 30.0 + 16.0 * static_cast<double>(caption.size()) + 8.0;
  const double groups_bottom =
      l.top + static_cast<double>(pic.epochs.size()) * (group_height + l.group_gap) - l.group_gap;
  const double axis_y = groups_bottom + 8;

  bool any_loaded_only = false;
  bool any_repeated = false;
  bool any_left_out = false;
  for (const Row& row : pic.rows)
    for (std::size_t i = 0; i < row.loaded.size(); ++i) {
      any_loaded_only = any_loaded_only || (row.loaded[i] > 0 && row.read[i] * 2 < row.loaded[i]);
      any_repeated = any_repeated || row.repeated[i] > 0;
    }
  for (const auto& left : pic.left_out)
    for (const std::int64_t n : left) any_left_out = any_left_out || n > 0;

  // The legend: one swatch per drawn rank, then the marks that appear.
  struct Item {
    std::string kind;  // rank color, "loaded", "left", "repeated"
    std::string label;
  };
  std::vector<Item> legend;
  for (const std::int64_t rank : pic.ranks)
    legend.push_back({std::string(palette[static_cast<std::size_t>(rank) % palette.size()]), fmt::format("rank {}", rank)});
  if (any_loaded_only) legend.push_back({"loaded", "loaded, read by another rank (shared request) or by none"});
  if (any_left_out) legend.push_back({"left", "left out: read by no rank"});
  if (any_repeated) legend.push_back({"repeated", "underlined: read again in the epoch (padding)"});
  double legend_x = l.left;
  double legend_y = axis_y + 44;
  std::vector<std::pair<double, double>> legend_at;
  for (const Item& item : legend) {
    const double w = 22 + 6.3 * static_cast<double>(item.label.size()) + 18;
    if (legend_x + w > l.width - 10) {
      legend_x = l.left;
      legend_y += 20;
    }
    legend_at.emplace_back(legend_x, legend_y);
    legend_x += w;
  }
  const double height = legend_y + 24;

  std::string svg;
  svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" font-size=\"12\" shape-rendering=\"crispEdges\">\n",
      l.width, height, l.width, height);
  svg += fmt::format("<title>{}</title>\n", xml_escape(caption.front()));
  svg += "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#888888\" stroke-width=\"2\"/></pattern></defs>\n";
  svg += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#ffffff\"/>\n", l.width, height);
  for (std::size_t i = 0; i < caption.size(); ++i)
    svg += fmt::format("<text x=\"12\" y=\"{:.0f}\"{}>{}</text>\n", 22.0 + 16.0 * static_cast<double>(i),
                       i == 0 ? " font-size=\"15\" font-weight=\"bold\"" : " fill=\"#333333\"", xml_escape(caption[i]));

  for (std::size_t e = 0; e < pic.epochs.size(); ++e) {
    const double gy = l.top + static_cast<double>(e) * (group_height + l.group_gap);
    const double rows_y = gy + l.header;
    const double rows_h = group_height - l.header;
    svg += fmt::format("<text x=\"12\" y=\"{:.1f}\" font-weight=\"bold\">epoch {}</text>", gy + 13, pic.epochs[e]);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#333333\">{}</text>\n", l.left, gy + 13,
                       xml_escape(pic.headers[e]));
    // The axis's extent, faintly, so that empty stretches read as such.
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
                       "stroke=\"#dddddd\"/>\n",
                       l.left, rows_y - 2, l.axis_width(), rows_h + 4);
    const auto& left = pic.left_out[e];
    for (const auto& [a, b] : bin_runs(left.size(), [&](std::size_t i) { return left[i] > 0; }))
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"url(#hatch)\"/>\n",
                         bin_x(a), rows_y - 2, bin_end(b) - bin_x(a), rows_h + 4);
    for (std::size_t r = 0; r < n_ranks; ++r) {
      const Row& row = pic.rows[e * n_ranks + r];
      const double y = rows_y + static_cast<double>(r) * (l.row_height + l.row_gap);
      const std::string_view color = palette[static_cast<std::size_t>(pic.ranks[r]) % palette.size()];
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">rank {}</text>", l.left - 8, y + 11,
                         pic.ranks[r]);
      std::string path_light;
      std::string path_full;
      const auto read_bin = [&](std::size_t i) { return row.read[i] > 0 && row.read[i] * 2 >= row.loaded[i]; };
      for (const auto& [a, b] : bin_runs(row.loaded.size(), [&](std::size_t i) { return row.loaded[i] > 0 && !read_bin(i); }))
        path_light += fmt::format("M{:.2f} {:.1f}h{:.2f}v{:.0f}h{:.2f}z", bin_x(a), y, bin_end(b) - bin_x(a), l.row_height,
                                  bin_x(a) - bin_end(b));
      for (const auto& [a, b] : bin_runs(row.read.size(), read_bin))
        path_full += fmt::format("M{:.2f} {:.1f}h{:.2f}v{:.0f}h{:.2f}z", bin_x(a), y, bin_end(b) - bin_x(a), l.row_height,
                                 bin_x(a) - bin_end(b));
      if (!path_light.empty())
        svg += fmt::format("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.3\"/>", path_light, color);
      if (!path_full.empty()) svg += fmt::format("<path d=\"{}\" fill=\"{}\"/>", path_full, color);
      // Repeats underline the rows they repeat: a dark strip along the row's bottom.
      std::string path_repeated;
      for (const auto& [a, b] : bin_runs(row.repeated.size(), [&](std::size_t i) { return row.repeated[i] > 0; }))
        path_repeated += fmt::format("M{:.2f} {:.1f}h{:.2f}v{:.0f}h{:.2f}z", bin_x(a), y + l.row_height - 4,
                                     bin_end(b) - bin_x(a), 4.0, bin_x(a) - bin_end(b));
      if (!path_repeated.empty()) svg += fmt::format("<path d=\"{}\" fill=\"#111111\"/>", path_repeated);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#333333\">{}</text>\n", l.left + l.axis_width() + 8,
                         y + 11, xml_escape(row.note));
    }
  }

  // The axis: the range's ends and round numbers between them.
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333333\"/>\n", l.left,
                     axis_y, l.left + l.axis_width(), axis_y);
  const std::int64_t span = bins.axis.size();
  const double raw = static_cast<double>(span) / 6.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  double step_d = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step_d = m * magnitude;
      break;
    }
  const auto step = static_cast<std::int64_t>(std::min(step_d, static_cast<double>(span)));
  std::vector<std::int64_t> ticks{bins.axis.start};
  if (step > 0)
    for (std::int64_t t = (bins.axis.start / step + 1) * step; t < bins.axis.stop; t += step) {
      if (static_cast<double>(t - bins.axis.start) * scale < 36 || static_cast<double>(bins.axis.stop - t) * scale < 36)
        continue;
      ticks.push_back(t);
      if (t > bins.axis.stop - step) break;
    }
  ticks.push_back(bins.axis.stop);
  for (const std::int64_t t : ticks) {
    const double x = x_of(t);
    svg += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#333333\"/>"
                       "<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       x, axis_y, x, axis_y + 5, x, axis_y + 18, short_number(t));
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#333333\">observation</text>\n",
                     l.left + l.axis_width() / 2, axis_y + 33);

  for (std::size_t i = 0; i < legend.size(); ++i) {
    const auto [x, y] = legend_at[i];
    const Item& item = legend[i];
    if (item.kind == "loaded")
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\" fill-opacity=\"0.3\"/>",
                         x, y, palette[0]);
    else if (item.kind == "left")
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"url(#hatch)\"/>", x, y);
    else if (item.kind == "repeated")
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\"/><rect x=\"{:.1f}\" "
                         "y=\"{:.1f}\" width=\"18\" height=\"4\" fill=\"#111111\"/>",
                         x, y, palette[0], x, y + 8);
    else
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\"/>", x, y, item.kind);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x + 24, y + 10, xml_escape(item.label));
  }
  svg += "</svg>\n";
  return svg;
}

// Halves the picture's resolution: two bins become one.
void coarsen(Picture& pic) {
  const auto halve = [](std::vector<std::int64_t>& v) {
    const std::size_t n = (v.size() + 1) / 2;
    for (std::size_t i = 0; i < n; ++i) v[i] = v[2 * i] + (2 * i + 1 < v.size() ? v[2 * i + 1] : 0);
    v.resize(n);
  };
  for (Row& row : pic.rows) {
    halve(row.loaded);
    halve(row.read);
    halve(row.repeated);
  }
  for (auto& v : pic.left_out) halve(v);
  pic.bins.width *= 2;
  pic.bins.count = ceil_div(pic.bins.axis.size(), pic.bins.width);
}

void write_svg(const std::string& path, Picture& pic, const std::vector<std::string>& caption) {
  std::string svg = render_svg(pic, caption);
  while (svg.size() > max_svg_bytes && pic.bins.count > 50) {
    coarsen(pic);
    svg = render_svg(pic, caption);
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error(fmt::format("--svg: cannot open {:?} for writing", path));
  const bool written = std::fwrite(svg.data(), 1, svg.size(), file) == svg.size();
  if (std::fclose(file) != 0 || !written) throw std::runtime_error(fmt::format("--svg: cannot write {:?}", path));
  fmt::print("picture   {} ({} bytes): {}, {} of {}{}\n", path, svg.size(),
             pic.epochs.size() == 1 ? std::string("epoch 0") : fmt::format("epochs 0-{}", pic.epochs.back()),
             counted(std::ssize(pic.ranks), "rank", "ranks"), pic.ranks.back() + 1,
             pic.bins.width > 1 ? fmt::format(", {} observations per bin", pic.bins.width) : std::string{});
}

// ---------------------------------------------------------------------------------------------
// The planner.

// The epochs of one parity below `epochs`, as "0, 2, 4, ...".
std::string parity_list(std::uint64_t first, std::uint64_t epochs) {
  std::string text;
  std::uint64_t shown = 0;
  for (std::uint64_t e = first; e < epochs; e += 2) {
    if (shown == 3) return text + ", ...";
    text += fmt::format("{}{}", text.empty() ? "" : ", ", e);
    ++shown;
  }
  return text;
}

template <class Base>
int run(const Options& o, const Base& base) {
  using Dist = cs::DistributedSampler<Base>;
  const auto rank_sampler = [&](std::int64_t rank, std::uint64_t epoch) {
    Dist dist(base, cs::DistInfo{.rank = rank, .world_size = o.world_size},
              {.enforce_equal_batches = o.enforce, .mode = o.mode, .remainder = o.remainder});
    dist.set_epoch(epoch);
    return dist;
  };
  // The library validates n_obs, the mask and the share per rank first: its message is the error.
  (void)rank_sampler(0, 0).n_batches(o.n_obs);
  (void)rank_sampler(0, 1).n_batches(o.n_obs);
  if (o.world_size > max_world_size)
    bad_argument("--world-size ({}) must be <= {}: the planner checks every rank", o.world_size, max_world_size);

  const Contract contract(o);
  const cs::Slice range = contract.range();
  const std::int64_t world = o.world_size;
  const std::int64_t b = o.batch_size;
  const auto epochs = static_cast<std::uint64_t>(o.epochs);
  const JobEpoch even = contract.epoch(0);
  const JobEpoch odd = contract.epoch(1);
  const auto job_of = [&](std::uint64_t e) -> const JobEpoch& { return e % 2 == 0 ? even : odd; };
  const std::int64_t policy_left = range.size() - even.window.size();  // the policy leaves out, per epoch
  Checks checks;

  // How much to walk: whole epochs when that is quick, else a prefix of the first few.
  std::int64_t max_reads = 0;
  for (const JobEpoch* job : {&even, &odd})
    for (const std::int64_t r : {std::int64_t{0}, world - 1})
      max_reads = std::max(max_reads, contract.rank(*job, r).reads);
  const std::int64_t request_rows = std::min(o.chunk_size * o.preload, even.window.size());
  const bool walkable = request_rows <= max_walked_request;
  // What walking costs: each rank's reads and, at most, the two requests it shares with neighbours,
  // with their chunks and requests, plus setting the rank's sampler up.
  const auto walk_cost = [&](std::int64_t per_rank, std::uint64_t n_epochs, std::int64_t ranks) {
    const double rows = static_cast<double>(per_rank) + 2.0 * static_cast<double>(request_rows);
    const double chunks = rows / static_cast<double>(o.chunk_size) + 2.0 * static_cast<double>(o.preload);
    const double requests = rows / static_cast<double>(o.chunk_size * o.preload) + 2.0;
    return static_cast<double>(n_epochs) * static_cast<double>(ranks) * (rows + 8 * chunks + 32 * requests + 1000);
  };
  const bool whole = walkable && range.size() <= max_bitmap && walk_cost(max_reads, epochs, world) <= walk_budget;
  std::optional<std::int64_t> prefix;
  std::uint64_t walked_epochs = epochs;
  std::vector<std::int64_t> walked_ranks;
  if (whole) {
    for (std::int64_t r = 0; r < world; ++r) walked_ranks.push_back(r);
  } else if (walkable) {
    walked_epochs = std::min<std::uint64_t>(epochs, prefix_epochs);
    prefix = std::clamp<std::int64_t>(prefix_total / world, 1, prefix_per_rank);
    const bool all = walk_cost(*prefix, walked_epochs, world) <= walk_budget;
    for (std::int64_t r = 0; r < world; ++r)
      if (all || listed_rank(r, world, 2 * listed_at_each_end, listed_at_each_end)) walked_ranks.push_back(r);
  } else {
    walked_epochs = 0;
  }

  // The picture's rows, filled by the walk (or from the shards when it cannot see whole epochs).
  std::optional<Picture> picture;
  if (o.svg) {
    Picture& pic = picture.emplace();
    pic.bins = Bins::over(range, 2 * axis_pixels);  // half a pixel each: exact for up to 1600 observations
    for (std::uint64_t e = 0; e < std::min<std::uint64_t>(epochs, max_drawn_epochs); ++e) pic.epochs.push_back(e);
    for (std::int64_t r = 0; r < world; ++r)
      if (listed_rank(r, world, max_drawn_ranks, max_drawn_ranks / 2)) pic.ranks.push_back(r);
    const std::vector<std::int64_t> empty(static_cast<std::size_t>(pic.bins.count));
    pic.rows.assign(pic.epochs.size() * pic.ranks.size(), Row{empty, empty, empty, {}});
    pic.left_out.assign(pic.epochs.size(), empty);
    pic.headers.resize(pic.epochs.size());
  }

  // The library's shards and batch counts against the contract, for every rank of every checked
  // epoch (shards depend only on the epoch's parity, so two epochs cover them all).
  const std::uint64_t checked_epochs = std::max<std::uint64_t>(walked_epochs, std::min<std::uint64_t>(epochs, 2));
  std::vector<std::vector<cs::Slice>> covered(static_cast<std::size_t>(checked_epochs));
  for (std::uint64_t e = 0; e < checked_epochs; ++e) {
    const JobEpoch& job = job_of(e);
    auto& shards = covered[static_cast<std::size_t>(e)];
    std::optional<std::int64_t> first_batches;
    for (std::int64_t r = 0; r < world; ++r) {
      const RankShare want = contract.rank(job, r);
      const Dist dist = rank_sampler(r, e);
      const cs::Slice shard = dist.shard(o.n_obs, e);
      const std::int64_t n_batches = dist.n_batches(o.n_obs);
      if (shard != want.shard)
        checks.fail("epoch {} rank {}: the library's {} {} differs from the contract's {}", e, r,
                    o.global() ? "window" : "shard", slice_text(shard), slice_text(want.shard));
      if (shard.empty() || shard.start < range.start || shard.stop > range.stop)
        checks.fail("epoch {} rank {}: {} is empty or outside the range {}", e, r, slice_text(shard), slice_text(range));
      if (n_batches != want.n_batches)
        checks.fail("epoch {} rank {}: n_batches {} differs from the contract's {}", e, r, n_batches, want.n_batches);
      if (!first_batches) first_batches = n_batches;
      if (o.enforce && n_batches != *first_batches)
        checks.fail("epoch {} rank {}: n_batches {} differs from rank 0's {} (enforce_equal_batches)", e, r, n_batches,
                    *first_batches);
      if (!o.enforce && std::abs(n_batches - *first_batches) > 1)
        checks.fail("epoch {} rank {}: n_batches {} differs from rank 0's {} by more than one", e, r, n_batches,
                    *first_batches);
      if (!o.global() || r == 0) shards.push_back(shard);
    }
    std::sort(shards.begin(), shards.end(), [](cs::Slice x, cs::Slice y) { return x.start < y.start; });
    for (std::size_t i = 1; i < shards.size(); ++i)
      if (shards[i].start < shards[i - 1].stop)
        checks.fail("epoch {}: shards {} and {} overlap", e, slice_text(shards[i - 1]), slice_text(shards[i]));
  }
  // The policy's promise on the shards alone (the walk checks it on the observations).
  const auto merged = [](std::vector<cs::Slice> slices) {
    std::sort(slices.begin(), slices.end(), [](cs::Slice x, cs::Slice y) { return x.start < y.start; });
    std::vector<cs::Slice> out;
    for (const cs::Slice& s : slices)
      if (!out.empty() && s.start <= out.back().stop) out.back().stop = std::max(out.back().stop, s.stop);
      else out.push_back(s);
    return out;
  };
  const std::vector<cs::Slice> whole_range{range};
  for (std::uint64_t e = 0; e < checked_epochs; ++e) {
    const auto& now = covered[static_cast<std::size_t>(e)];
    if (o.remainder == cs::Remainder::drop && merged(now) != merged(covered[0]))
      checks.fail("epoch {}: drop, yet the shards cover {}, not epoch 0's {}", e, slices_text(merged(now), 0),
                  slices_text(merged(covered[0]), 0));
    if (o.pad() && merged(now) != whole_range)
      checks.fail("epoch {}: pad, yet the shards cover {}, not the range {}", e, slices_text(merged(now), 0),
                  slice_text(range));
    if (o.rotate() && e >= 1) {
      std::vector<cs::Slice> both = now;
      const auto& before = covered[static_cast<std::size_t>(e - 1)];
      both.insert(both.end(), before.begin(), before.end());
      if (merged(both) != whole_range)
        checks.fail("epochs {}-{}: rotate, yet their shards cover only {} of the range {}", e - 1, e,
                    slices_text(merged(both), 0), slice_text(range));
    }
  }

  // The walk: every walked rank's epoch, one epoch after another, all ranks' reads in one record.
  std::map<std::pair<std::uint64_t, std::int64_t>, RankWalk> kept;  // what the tables and epoch lines show
  std::vector<Gaps> left_seen;                                      // per walked epoch, whole walks only
  EpochReads reads;
  Bits first_read;     // epoch 0's reads: with drop, every epoch leaves out the same observations
  Bits previous_read;  // the last epoch's: with rotate, any two consecutive epochs read everything
  std::int64_t total_requests = 0;
  std::int64_t total_batches = 0;
  std::int64_t total_reads = 0;
  const bool promise_walked = whole && even.trimmed == 0 && odd.trimmed == 0;
  const Bins no_bins = Bins::over(range, 1);
  for (std::uint64_t e = 0; e < walked_epochs; ++e) {
    const JobEpoch& job = job_of(e);
    reads.reset(range, whole);
    std::optional<std::int64_t> first_walked_batches;
    std::vector<std::pair<std::int64_t, std::vector<cs::Slice>>> repeating;  // ranks with repeats, their last request
    std::vector<cs::Slice> last_rank_final;
    std::int64_t epoch_repeats = 0;
    for (const std::int64_t r : walked_ranks) {
      const RankShare want = contract.rank(job, r);
      Dist dist = rank_sampler(r, e);
      const std::int64_t n_batches = dist.n_batches(o.n_obs);
      // Contiguous rows come from the shards when only prefixes are walked; global ones from what is walked.
      Row* row = picture && (whole || o.global()) ? picture->row(e, r) : nullptr;
      RankWalk w = walk_rank(dist, WalkSetup{o, e, prefix}, want.shard, reads, row, picture ? picture->bins : no_bins,
                             checks);
      if (dist.epoch() != e + 1)
        checks.fail("epoch {} rank {}: after sample() the sampler's epoch is {}, not {}", e, r, dist.epoch(), e + 1);
      total_requests += w.requests;
      total_batches += w.batches;
      total_reads += w.reads;
      epoch_repeats += w.repeated;
      if (r == world - 1) last_rank_final = w.final_chunks;
      if (w.whole) {
        if (w.batches != n_batches)
          checks.fail("epoch {} rank {}: yielded {} batches, n_batches says {}", e, r, w.batches, n_batches);
        if (w.reads != want.reads)
          checks.fail("epoch {} rank {}: read {} observations, the contract says {}", e, r, w.reads, want.reads);
        if (w.batches > 0 && w.last_batch != want.last_batch)
          checks.fail("epoch {} rank {}: the last batch has {} positions, the contract says {}", e, r, w.last_batch,
                      want.last_batch);
        if (w.chunks != want.chunks)
          checks.fail("epoch {} rank {}: its requests list {} chunks, the contract says {}", e, r, w.chunks,
                      want.chunks);
        if (whole && !o.global() && w.repeated != want.repeated)
          checks.fail("epoch {} rank {}: repeated {} observations, the contract says {}", e, r, w.repeated,
                      want.repeated);
        if (w.misplaced_repeats > 0)
          checks.fail("epoch {} rank {}: {} repeats outside its last request", e, r, w.misplaced_repeats);
        if (w.repeated > 0) repeating.emplace_back(r, w.final_chunks);
        if (!first_walked_batches) first_walked_batches = w.batches;
        if (o.enforce && w.batches != *first_walked_batches)
          checks.fail("epoch {} rank {}: yielded {} batches, rank {} yielded {}", e, r, w.batches,
                      walked_ranks.front(), *first_walked_batches);
      }
      w.final_chunks.clear();
      if (e < static_cast<std::uint64_t>(max_listed_epochs) &&
          (listed_rank(r, world, max_listed_ranks, listed_at_each_end) ||
           listed_rank(r, world, max_epoch_lines_ranks, max_epoch_lines_ranks / 2)))
        kept.emplace(std::pair{e, r}, std::move(w));
    }
    if (!whole) {
      const std::int64_t twice = reads.list_repeats();
      if (!o.pad() && twice > 0)
        checks.fail("epoch {}: {} observations of the walked prefixes are read more than once", e, twice);
      continue;
    }
    // The whole epoch, over all ranks.
    const Bits& read = reads.read();
    const std::int64_t distinct = read.count();
    left_seen.push_back(clear_runs(read, range.start, 4));
    if (distinct != job.distinct)
      checks.fail("epoch {}: {} distinct observations read, the contract says {}", e, distinct, job.distinct);
    if (epoch_repeats != job.repeated)
      checks.fail("epoch {}: {} reads repeat an observation, the contract says {}", e, epoch_repeats, job.repeated);
    // Global padding repeats rows of the plan's last request, the one the last rank ends on.
    if (o.global())
      for (const auto& [r, chunks] : repeating)
        if (chunks != last_rank_final) checks.fail("epoch {} rank {}: repeats rows outside the plan's last request", e, r);
    if (promise_walked) {
      if (e == 0) first_read = read;
      if (o.remainder == cs::Remainder::drop && read != first_read)
        checks.fail("epoch {}: drop, yet the observations left out differ from epoch 0's", e);
      if (o.rotate() && e >= 1 && !read.covers_with(previous_read))
        checks.fail("epochs {}-{}: rotate, yet some observations are read in neither", e - 1, e);
      if (o.pad() && distinct != range.size())
        checks.fail("epoch {}: pad, yet {} observations are left out", e, range.size() - distinct);
      previous_read = read;
    }
    if (picture) {
      const auto at = std::find(picture->epochs.begin(), picture->epochs.end(), e);
      if (at != picture->epochs.end()) {
        auto& left = picture->left_out[static_cast<std::size_t>(at - picture->epochs.begin())];
        for (std::size_t bin = 0; bin < left.size(); ++bin) {
          const cs::Slice s = picture->bins.span(bin);
          left[bin] = s.size() - read.count(s.start - range.start, s.stop - range.start);
        }
      }
    }
  }
  const auto measured = [&](std::uint64_t e, std::int64_t r) -> const RankWalk* {
    const auto it = kept.find({e, r});
    return it != kept.end() && it->second.whole ? &it->second : nullptr;
  };

  // ---- The report: the configuration and how the policy shares it out.
  fmt::print("{} over {} ranks, {} mode, remainder {}, {}\n", Base::name, world, mode_name(o.mode),
             remainder_name(o.remainder), counted(o.epochs, "epoch", "epochs"));
  fmt::print("  sampler   chunk_size {}, preload_nchunks {} ({} rows per request), batch_size {}, drop_last {}, "
             "seed {}\n",
             o.chunk_size, o.preload, o.chunk_size * o.preload, b, o.drop_last ? "on" : "off", o.seed);
  fmt::print("  range     {} = {}\n", slice_text(range),
             o.mask ? fmt::format("{} of the {} observations (the mask)", range.size(), o.n_obs)
                    : fmt::format("all {} observations (no mask)", o.n_obs));
  if (o.global()) {
    std::string over;
    if (!o.enforce) over = fmt::format("all {} (enforce_equal_batches off: nothing left out or padded)", range.size());
    else if (o.pad())
      over = fmt::format("all {}, padded to {} = a multiple of {} ranks x batch {}", range.size(), even.budget, world, b);
    else if (policy_left == 0)
      over = fmt::format("all {} = a multiple of {} ranks x batch {}", range.size(), world, b);
    else
      over = fmt::format("{} of {} = a multiple of {} ranks x batch {}; {} left out{}", even.window.size(),
                         range.size(), world, b, policy_left,
                         o.rotate() ? ", the tail in even epochs and the head in odd ones" : ", the same every epoch");
    fmt::print("  plan      one {} plan per epoch, shared by all ranks, over {}\n",
               base.shuffle() ? "shuffled" : "sequential", over);
    fmt::print("            {} dealt in contiguous blocks{}{}\n", batches(even.plan_batches),
               o.enforce ? fmt::format(" of {} per rank", contract.rank(even, 0).n_batches)
                         : std::string(" differing by at most one"),
               even.repeated > 0 ? fmt::format("; {} positions repeat rows of the plan's last request", even.repeated)
                                 : std::string{});
  } else if (o.pad()) {
    const std::int64_t small = range.size() / world;
    fmt::print("  per rank  {} / {} = {}{}: shards of {}{} observations; every rank's epoch holds {} positions{} "
               "({}), the missing ones repeating rows of its last request\n",
               range.size(), world, small, range.size() % world != 0 ? fmt::format(" rem {}", range.size() % world) : "",
               range.size() % world != 0 ? fmt::format("{} or ", small + 1) : std::string{}, small, even.budget,
               even.used != even.budget ? fmt::format(", {} after drop_last", even.used) : std::string{},
               batches(ceil_div(even.used, b)));
  } else {
    fmt::print("  per rank  {} / {} = {}{} observations (enforce_equal_batches {})\n", range.size(), world,
               range.size() / world,
               o.enforce ? fmt::format(", rounded down to a multiple of {} = {}", b, even.per_rank) : std::string{},
               o.enforce ? "on" : "off");
    if (o.rotate() && odd.window != even.window)
      fmt::print("  rotate    odd epochs shift every shard by {}: the left-out tail becomes the head\n",
                 odd.window.start - even.window.start);
  }
  fmt::print("\n");

  // The tables: the contiguous shards (per parity when they rotate), or the global blocks.
  std::vector<std::uint64_t> table_epochs{0};
  if (!o.global() && o.rotate() && epochs >= 2 && odd.window != even.window) table_epochs.push_back(1);
  bool shows_contract = false;
  for (const std::uint64_t e : table_epochs) {
    const JobEpoch& job = job_of(e);
    if (table_epochs.size() > 1)
      fmt::print("{} epochs ({})\n", e == 0 ? "even" : "odd", parity_list(e, epochs));
    if (o.global()) {
      std::vector<std::array<std::string, 6>> rows;
      rows.push_back({"rank", "plan batches", "batches", "last batch", "read", "chunks"});
      std::int64_t sum_batches = 0;
      std::int64_t sum_reads = 0;
      std::int64_t sum_chunks = 0;
      for (std::int64_t r = 0; r < world; ++r) {
        const RankShare want = contract.rank(job, r);
        const RankWalk* w = measured(e, r);
        const bool listed = listed_rank(r, world, max_listed_ranks, listed_at_each_end);
        shows_contract = shows_contract || (w == nullptr && listed);
        const std::int64_t n = w ? w->batches : want.n_batches;
        const std::int64_t read = w ? w->reads : want.reads;
        const std::int64_t chunks = w ? w->chunks : want.chunks;
        sum_batches += n;
        sum_reads += read;
        sum_chunks += chunks;
        if (listed)
          rows.push_back({fmt::format("{}", r), run_text(want.block), fmt::format("{}", n),
                          n == 0 ? "-" : fmt::format("{}", w ? w->last_batch : want.last_batch),
                          fmt::format("{}", read), fmt::format("{}", chunks)});
        else if (r == listed_at_each_end)
          rows.push_back({"...", fmt::format("({} more ranks)", world - 2 * listed_at_each_end), "", "", "", ""});
      }
      rows.push_back({"total", "", fmt::format("{}", sum_batches), "", fmt::format("{}", sum_reads),
                      fmt::format("{}", sum_chunks)});
      print_table(rows);
      continue;
    }
    std::vector<std::array<std::string, 8>> rows;
    rows.push_back({"rank", "shard", "observations", "batches", "last batch", "read", "left out", "repeated"});
    std::int64_t sum_obs = 0;
    std::int64_t sum_batches = 0;
    std::int64_t sum_reads = 0;
    std::int64_t sum_left = 0;
    std::int64_t sum_repeated = 0;
    for (std::int64_t r = 0; r < world; ++r) {
      const RankShare want = contract.rank(job, r);
      const RankWalk* w = measured(e, r);
      const bool listed = listed_rank(r, world, max_listed_ranks, listed_at_each_end);
      shows_contract = shows_contract || (w == nullptr && listed);
      const cs::Slice shard = listed ? rank_sampler(r, e).shard(o.n_obs, e) : want.shard;
      const std::int64_t n = w ? w->batches : want.n_batches;
      const std::int64_t read = w ? w->reads : want.reads;
      const std::int64_t repeated = w ? w->repeated : want.repeated;
      const std::int64_t left = shard.size() - (read - repeated);
      sum_obs += shard.size();
      sum_batches += n;
      sum_reads += read;
      sum_left += left;
      sum_repeated += repeated;
      if (listed)
        rows.push_back({fmt::format("{}", r), slice_text(shard), fmt::format("{}", shard.size()), fmt::format("{}", n),
                        n == 0 ? "-" : fmt::format("{}", w ? w->last_batch : want.last_batch),
                        fmt::format("{}", read), fmt::format("{}", left), fmt::format("{}", repeated)});
      else if (r == listed_at_each_end)
        rows.push_back({"...", fmt::format("({} more ranks)", world - 2 * listed_at_each_end), "", "", "", "", "", ""});
    }
    rows.push_back({"total", "", fmt::format("{}", sum_obs), fmt::format("{}", sum_batches), "",
                    fmt::format("{}", sum_reads), fmt::format("{}", sum_left), fmt::format("{}", sum_repeated)});
    print_table(rows);
    if (job.left_out.empty())
      fmt::print("left out  nothing: the shards cover the range\n");
    else
      fmt::print("left out  {} in no rank's shard: {}\n", observations(range.size() - job.window.size()),
                 slices_text(job.left_out, 0));
    if (e + 1 < table_epochs.size()) fmt::print("\n");
  }
  if (shows_contract) fmt::print("          (epochs too large to walk whole: the table shows the contract's numbers)\n");
  if (o.mask) fmt::print("outside   {} of n_obs outside the mask, never sampled\n", observations(o.n_obs - range.size()));
  if (!o.global() && even.trimmed + odd.trimmed > 0)
    fmt::print("drop_last leaves out the rows of each rank's short last batch, chosen anew every epoch\n");

  // Global mode: what each epoch leaves out and which chunks each rank reads, in reading order.
  if (o.global()) {
    fmt::print("\n");
    for (std::uint64_t e = 0; e < std::min<std::uint64_t>(epochs, max_listed_epochs); ++e) {
      const JobEpoch& job = job_of(e);
      std::string left = job.left_out.empty()
                             ? std::string("nothing")
                             : fmt::format("{}: {}", observations(policy_left), slices_text(job.left_out, 0));
      if (job.trimmed > 0) left += fmt::format(", and {} of the window (drop_last)", job.trimmed);
      fmt::print("epoch {}   left out {}{}\n", e, left,
                 job.repeated > 0 ? fmt::format("; {} positions repeat a row", job.repeated) : std::string{});
      for (std::int64_t r = 0; r < world; ++r) {
        if (!listed_rank(r, world, max_epoch_lines_ranks, max_epoch_lines_ranks / 2)) {
          if (r == max_epoch_lines_ranks / 2) fmt::print("  ...\n");
          continue;
        }
        const auto it = kept.find({e, r});
        if (it == kept.end()) continue;
        const RankWalk& w = it->second;
        fmt::print("  rank {:<{}}  {} {}{} from {}: {}\n", r, fmt::formatted_size("{}", world - 1),
                   w.whole ? "reads" : "begins with", observations(w.reads),
                   w.repeated > 0 ? fmt::format(" ({} repeated)", w.repeated) : std::string{},
                   counted(w.chunks, "chunk", "chunks"), slices_text(w.order, w.order_runs));
      }
    }
  }

  // How much was walked.
  fmt::print("\n");
  if (!walkable)
    fmt::print("check     requests of {} rows are too large to walk (limit {}): checked the shard arithmetic only\n",
               request_rows, max_walked_request);
  else if (prefix)
    fmt::print("check     epochs too large to walk quickly ({} observations per rank): checked the shard arithmetic "
               "of every rank and walked only the first {} of {}{} ({}, {}, {} in all)\n",
               max_reads, observations(*prefix),
               walked_epochs == epochs ? std::string("each epoch") : fmt::format("epochs 0-{}", walked_epochs - 1),
               std::ssize(walked_ranks) == world ? std::string(" on every rank")
                                                 : fmt::format(" on {} of the ranks", walked_ranks.size()),
               counted(total_requests, "request", "requests"), batches(total_batches), observations(total_reads));
  else
    fmt::print("check     walked every rank's whole epoch{}: {}, {}, {}\n",
               epochs > 1 ? fmt::format(", {} epochs", epochs) : std::string{},
               counted(total_requests, "request", "requests"), batches(total_batches), observations(total_reads));

  // The picture, from the walk or, for epochs too large to walk, from the contract's shards.
  if (picture) {
    Picture& pic = *picture;
    for (std::size_t i = 0; i < pic.epochs.size(); ++i) {
      const std::uint64_t e = pic.epochs[i];
      const JobEpoch& job = job_of(e);
      if (!whole) {
        for (const cs::Slice& s : job.left_out) pic.bins.add(pic.left_out[i], s);
        if (!o.global())
          for (const std::int64_t r : pic.ranks) {
            Row* row = pic.row(e, r);
            const cs::Slice shard = contract.rank(job, r).shard;
            pic.bins.add(row->loaded, shard);
            pic.bins.add(row->read, shard);
          }
      }
      const Gaps* seen = whole ? &left_seen[static_cast<std::size_t>(e)] : nullptr;
      const std::int64_t left = seen ? seen->total : policy_left + job.trimmed;
      std::string header = left == 0 ? std::string("nothing left out")
                           : seen    ? fmt::format("left out {}: {}", left, slices_text(seen->first, seen->runs))
                                     : fmt::format("left out {}", left);
      if (job.repeated > 0) header += fmt::format("  ·  {} positions repeat a row", job.repeated);
      pic.headers[i] = header;
      for (const std::int64_t r : pic.ranks) {
        Row* row = pic.row(e, r);
        const RankShare want = contract.rank(job, r);
        const auto it = kept.find({e, r});
        const RankWalk* w = it != kept.end() ? &it->second : nullptr;
        if (o.global() && w != nullptr && !w->whole) {
          row->note = fmt::format("first {} read, {}", short_number(w->reads), counted(w->chunks, "chunk", "chunks"));
          continue;
        }
        const bool walked = w != nullptr && w->whole;
        const std::int64_t read = walked ? w->reads : want.reads;
        const std::int64_t repeated = walked ? w->repeated : want.repeated;
        row->note = o.global() ? fmt::format("{} read, {}", short_number(read),
                                             counted(walked ? w->chunks : want.chunks, "chunk", "chunks"))
                               : fmt::format("{} read of {}", short_number(read), short_slice(want.shard));
        if (repeated > 0) row->note += fmt::format(", {} repeated", short_number(repeated));
      }
    }
    std::vector<std::string> caption;
    caption.push_back(fmt::format("{} mode, remainder {}: {} over {} ranks{}", mode_name(o.mode),
                                  remainder_name(o.remainder), Base::name, world,
                                  o.enforce ? "" : " (enforce_equal_batches off)"));
    const std::string drawn = pic.epochs.size() == 1 ? std::string("epoch 0")
                                                     : fmt::format("epochs 0-{}", pic.epochs.back());
    caption.push_back(fmt::format("n_obs {}{}  ·  chunk_size {}  ·  preload_nchunks {}  ·  batch_size {}{}  ·  seed {}"
                                  "  ·  {}{}",
                                  o.n_obs, o.mask ? fmt::format("  ·  mask {}", slice_text(range)) : std::string{},
                                  o.chunk_size, o.preload, b, o.drop_last ? "  ·  drop_last" : "", o.seed, drawn,
                                  std::ssize(pic.epochs) < o.epochs ? fmt::format(" of {}", o.epochs) : std::string{}));
    caption.push_back(o.global() ? fmt::format("one {} plan per epoch, its batches dealt to the ranks in contiguous "
                                               "blocks",
                                               base.shuffle() ? "shuffled" : "sequential")
                                 : fmt::format("each rank reads its own contiguous shard{}",
                                               base.shuffle() ? ", shuffled" : ", in order"));
    caption.push_back(policy_text(o, range, even, odd));
    if (std::ssize(pic.ranks) < world)
      caption.push_back(fmt::format("showing ranks {}-{} and {}-{} of {}", pic.ranks.front(),
                                    pic.ranks[pic.ranks.size() / 2 - 1], pic.ranks[pic.ranks.size() / 2],
                                    pic.ranks.back(), world));
    if (!whole)
      caption.push_back(o.global() ? fmt::format("epochs too large to walk: each row shows only the chunks of the first "
                                                 "{} the rank reads",
                                                 observations(prefix.value_or(0)))
                                   : "epochs too large to walk: rows show the shards as the contract computes them");
    write_svg(*o.svg, pic, caption);
  }

  if (!checks.passed()) {
    const auto shown = static_cast<std::int64_t>(checks.shown().size());
    fmt::print("FAIL      {} invariant violations{}\n", checks.failures(),
               checks.failures() > shown ? fmt::format(", the first {}:", shown) : std::string(":"));
    for (const std::string& failure : checks.shown()) fmt::print("          {}\n", failure);
    return 1;
  }
  // What was shown to hold, one clause per check.
  std::vector<std::string> held;
  held.push_back(o.global() ? "windows and batch blocks as the contract computes them"
                            : "shards disjoint, inside the range, as the contract computes them");
  if (walkable)
    held.push_back(fmt::format("every {} observation inside its {}{}", prefix ? "walked" : "yielded",
                               o.global() ? "epoch's window" : "rank's shard", o.pad() ? "" : ", read once per epoch"));
  held.push_back(o.enforce ? fmt::format("{} on every rank = n_batches", batches(contract.rank(even, 0).n_batches))
                           : std::string("every rank's batches = n_batches"));
  const std::string trimmed_note =
      even.trimmed > 0 ? fmt::format(" (drop_last leaves out {} more per epoch)", even.trimmed) : std::string{};
  switch (o.remainder) {
    case cs::Remainder::drop:
      if (policy_left == 0) break;
      held.push_back(promise_walked && epochs >= 2
                         ? fmt::format("drop: the same {} left out in all {} epochs", observations(policy_left), epochs)
                         : fmt::format("drop: the shards leave out the same {} every epoch{}",
                                       observations(policy_left), trimmed_note));
      break;
    case cs::Remainder::rotate:
      if (policy_left == 0) break;
      if (promise_walked && epochs >= 2)
        held.push_back(fmt::format("rotate: every observation read in any two consecutive epochs (of {})", epochs));
      else if (epochs >= 2)
        held.push_back(fmt::format("rotate: the shards of any two consecutive epochs cover the range{}", trimmed_note));
      else
        held.push_back("rotate: --epochs 2 checks that every observation is read in two consecutive epochs");
      break;
    case cs::Remainder::pad:
      held.push_back(promise_walked ? fmt::format("pad: nothing left out, {} positions per epoch repeat a row of {}",
                                                  even.repeated,
                                                  o.global() ? "the plan's last request" : "the rank's last request")
                                    : fmt::format("pad: the shards cover the range{}", trimmed_note));
      break;
  }
  fmt::print("PASS      {}\n", fmt::join(held, "; "));
  return 0;
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
