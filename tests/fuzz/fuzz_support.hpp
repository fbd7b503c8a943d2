// SPDX-License-Identifier: MIT
#pragma once

// Shared by the fuzz targets: how a broken property is reported, how a rejection is told apart
// from a crash, how fuzz bytes become sizes and sampler configurations, and a walker that checks
// every request a sampler yields against the contract of `Sampler` (chunks, positions, batches)
// on a bounded prefix of the epoch, so an input over 2^62 observations costs what one over 100 does.

#include <chunksampler.hpp>

#include <fmt/format.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

namespace fuzz {

namespace cs = chunksampler;

inline constexpr std::int64_t max_size = std::int64_t{1} << 62;

/// What the input decoded to, printed with a broken property so that a report says which
/// configuration broke it without a debugger.
inline std::string& context() {
  static std::string text;
  return text;
}

/// Reports a broken property and aborts: libFuzzer saves the input and reports it as a crash.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "\nfuzz property broken: {}\n  input: {}\n", fmt::format(format, std::forward<Args>(args)...),
             context());
  std::fflush(stderr);
  std::abort();
}

/// `fail` unless `holds`.
template <class... Args>
void check(bool holds, fmt::format_string<Args...> format, Args&&... args) {
  if (!holds) fail(format, std::forward<Args>(args)...);
}

/// The subjects the library's messages open with: a message names the class or the step whose
/// rule was broken, then says which parameter, its value and the rule.
inline constexpr std::string_view subjects[] = {
    "RandomSampler: ", "SequentialSampler: ", "ClassSampler: ", "MixtureSampler: ", "DistributedSampler: ",
    "SamplerState: ",  "WorkerInfo: ",        "restore: ",      "Ranges: ",         "WeightedClassSampler: "};

/// The subject `message` opens with, or an empty view when it names none.
[[nodiscard]] inline std::string_view subject_of(std::string_view message) {
  for (const std::string_view subject : subjects)
    if (message.size() > subject.size() && message.starts_with(subject)) return subject;
  return {};
}

/// A clear rejection: one of the library's types, naming its subject and saying more than that.
inline void check_message(const std::invalid_argument& error) {
  const std::string_view message = error.what();
  check(dynamic_cast<const cs::ConfigError*>(&error) != nullptr ||
            dynamic_cast<const cs::StateError*>(&error) != nullptr,
        "a std::invalid_argument ({}) that is neither a ConfigError nor a StateError: {:?}", typeid(error).name(),
        std::string(message));
  check(!subject_of(message).empty(), "std::invalid_argument without a subject: {:?}", std::string(message));
}

/// Runs `f`. True when it returned; false when it threw a clear `cs::ConfigError` or
/// `cs::StateError` (the library's only ways to refuse input). Any other exception is a finding.
template <class F>
[[nodiscard]] bool accepted(F&& f, std::string* message = nullptr) {
  try {
    std::forward<F>(f)();
    return true;
  } catch (const std::invalid_argument& error) {
    check_message(error);
    if (message != nullptr) *message = error.what();
    return false;
  } catch (const std::exception& error) {
    fail("unexpected exception {}: {}", typeid(error).name(), error.what());
  } catch (...) {
    fail("unexpected exception of a non-standard type");
  }
}

/// `[start, stop)`, or "none".
[[nodiscard]] inline std::string text_of(const std::optional<cs::Slice>& s) {
  return s ? fmt::format("[{}, {})", s->start, s->stop) : std::string("none");
}
[[nodiscard]] inline std::string text_of(const std::optional<std::int64_t>& n) {
  return n ? fmt::format("{}", *n) : std::string("none");
}

/// Runs one input: an exception that escapes the library where none may (while a stream is
/// read, say) is reported with the input's configuration. With CHUNKSAMPLER_FUZZ_SHOW set in the
/// environment, every input's configuration is printed (to see what a slow input does).
template <class F>
void guard(F&& f) {
  static const bool show = std::getenv("CHUNKSAMPLER_FUZZ_SHOW") != nullptr;
  try {
    std::forward<F>(f)();
    if (show) fmt::print(stderr, "input: {}\n", context());
  } catch (const std::exception& error) {
    fail("uncaught exception {}: {}", typeid(error).name(), error.what());
  } catch (...) {
    fail("uncaught exception of a non-standard type");
  }
}

// --- decoding ---------------------------------------------------------------------------------

/// A size that is mostly small (the everyday case, where whole epochs can be walked) and
/// sometimes at the edges: up to 2^20, next to 2^62, just past it, or any 64-bit value.
[[nodiscard]] inline std::int64_t size_value(FuzzedDataProvider& in, std::int64_t small_max) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 6: return in.ConsumeIntegralInRange<std::int64_t>(0, std::int64_t{1} << 20);
    case 7: return max_size - in.ConsumeIntegralInRange<std::int64_t>(0, 4096);
    case 8: return max_size + in.ConsumeIntegralInRange<std::int64_t>(-2, 2);
    case 9: return in.ConsumeIntegral<std::int64_t>();
    default: return in.ConsumeIntegralInRange<std::int64_t>(0, small_max);
  }
}

/// An epoch: mostly the first few, sometimes any (odd and even matter to `Remainder::rotate`).
[[nodiscard]] inline std::uint64_t epoch_value(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>() : in.ConsumeIntegralInRange<std::uint64_t>(0, 3);
}

/// A divisor of `n` (>= 1) picked by the input, or, when `n` is too large to factor cheaply,
/// one of a few that always divide it.
[[nodiscard]] inline std::int64_t divisor_of(FuzzedDataProvider& in, std::int64_t n, std::int64_t factor) {
  std::vector<std::int64_t> divisors;
  if (n <= (std::int64_t{1} << 24)) {
    for (std::int64_t d = 1; d * d <= n; ++d)
      if (n % d == 0) {
        divisors.push_back(d);
        divisors.push_back(n / d);
      }
  } else {
    divisors = {1, factor, n, n / factor};
  }
  return divisors[in.ConsumeIntegralInRange<std::size_t>(0, divisors.size() - 1)];
}

/// `chunk_size`, `preload_nchunks` and `batch_size`: mostly a valid shape whose request fits
/// `max_request` rows, sometimes anything.
struct Shape {
  std::int64_t chunk_size = 1;
  std::int64_t preload_nchunks = 1;
  std::int64_t batch_size = 1;
};
[[nodiscard]] inline Shape shape_value(FuzzedDataProvider& in, std::int64_t max_request) {
  Shape s;
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    s.chunk_size = size_value(in, 64);
    s.preload_nchunks = size_value(in, 16);
    s.batch_size = size_value(in, 64);
    return s;
  }
  s.chunk_size = in.ConsumeIntegralInRange<std::int64_t>(1, std::min<std::int64_t>(max_request, 256));
  s.preload_nchunks = in.ConsumeIntegralInRange<std::int64_t>(1, std::max<std::int64_t>(max_request / s.chunk_size, 1));
  s.batch_size = divisor_of(in, s.chunk_size * s.preload_nchunks, s.chunk_size);
  return s;
}

/// A range inside `[0, n_obs]`, mostly valid, sometimes empty, reversed or outside.
[[nodiscard]] inline cs::Slice slice_in(FuzzedDataProvider& in, std::int64_t n_obs) {
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) return {size_value(in, 64), size_value(in, 64)};
  const std::int64_t top = std::clamp<std::int64_t>(n_obs, 1, max_size);
  const std::int64_t start = in.ConsumeIntegralInRange<std::int64_t>(0, top - 1);
  return {start, in.ConsumeIntegralInRange<std::int64_t>(start + 1, top)};
}

/// A worker: mostly the whole rank or a few workers, sometimes anything.
[[nodiscard]] inline cs::WorkerInfo worker_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
    case 1: {
      const auto count = in.ConsumeIntegralInRange<std::int64_t>(1, 5);
      return {.id = in.ConsumeIntegralInRange<std::int64_t>(0, count - 1), .num_workers = count};
    }
    case 2: {
      const std::int64_t count = size_value(in, 1'000);
      return {.id = in.ConsumeIntegralInRange<std::int64_t>(0, std::max<std::int64_t>(count, 1) - 1),
              .num_workers = count};
    }
    case 3: return {.id = in.ConsumeIntegral<std::int64_t>(), .num_workers = in.ConsumeIntegral<std::int64_t>()};
    default: return {};
  }
}

/// The size of `s`, or 0 when it is no valid range (its `size()` could overflow): the options
/// are decoded before the library has judged them.
[[nodiscard]] inline std::int64_t size_of(const cs::Slice& s) {
  return s.start >= 0 && s.stop > s.start ? s.size() : 0;
}

[[nodiscard]] inline bool valid_worker(const cs::WorkerInfo& w) {
  return w.num_workers >= 1 && w.num_workers <= max_size && w.id >= 0 && w.id < w.num_workers;
}

/// What `make()` returns: none when the library refuses it (clearly: see `accepted`). The
/// options are built inside `make` too: a bad mask is refused as its `cs::Ranges` is made, before
/// a sampler sees it.
template <class Make>
[[nodiscard]] auto made(Make&& make) -> std::optional<decltype(make())> {
  std::optional<decltype(make())> out;
  (void)accepted([&] { out.emplace(make()); });
  return out;
}

/// A RandomSampler's or a SequentialSampler's options as decoded (the sequential one ignores
/// `replacement` and `num_samples`).
struct ChunkConfig {
  bool random = true;
  Shape shape;
  std::int64_t n_obs = 0;
  std::optional<cs::Slice> mask;
  bool drop_last = false;
  std::uint64_t seed = 0;
  bool replacement = false;
  std::optional<std::int64_t> num_samples;

  /// The line a report gives for it.
  [[nodiscard]] std::string text() const {
    return fmt::format(
        "{}Sampler chunk_size {}, preload_nchunks {}, batch_size {}, n_obs {}, mask {}, drop_last {}, seed {}, "
        "replacement {}, num_samples {}",
        random ? "Random" : "Sequential", shape.chunk_size, shape.preload_nchunks, shape.batch_size, n_obs,
        text_of(mask), drop_last, seed, replacement, text_of(num_samples));
  }
};

/// Builds the sampler `c` configures and hands it to `use`; a configuration the library refuses
/// is dropped.
template <class F>
void with_sampler(const ChunkConfig& c, F&& use) {
  if (c.random) {
    if (const auto sampler = made([&] {
          return cs::RandomSampler(cs::RandomOptions{.chunk_size = c.shape.chunk_size,
                                                     .preload_nchunks = c.shape.preload_nchunks,
                                                     .batch_size = c.shape.batch_size,
                                                     .drop_last = c.drop_last,
                                                     .mask = c.mask,
                                                     .seed = c.seed,
                                                     .replacement = c.replacement,
                                                     .num_samples = c.num_samples});
        }))
      use(*sampler);
  } else if (const auto sampler = made([&] {
               return cs::SequentialSampler(cs::SequentialOptions{.chunk_size = c.shape.chunk_size,
                                                                  .preload_nchunks = c.shape.preload_nchunks,
                                                                  .batch_size = c.shape.batch_size,
                                                                  .drop_last = c.drop_last,
                                                                  .mask = c.mask});
             })) {
    use(*sampler);
  }
}

/// Builds a ClassSampler over `codes` with the options `options()` returns (called inside `made`,
/// as `with_sampler` builds its own), or with `weighted` a WeightedClassSampler of that
/// composition, and hands it to `use`; a configuration the library refuses is dropped.
template <class Codes, class Options, class F>
void with_class_sampler(const Codes& codes, Options&& options, std::optional<cs::Composition> weighted, F&& use) {
  if (weighted) {
    if (const auto sampler =
            made([&] { return cs::WeightedClassSampler(codes, cs::weighted_options_of(options(), *weighted)); }))
      use(*sampler);
  } else if (const auto sampler = made([&] { return cs::ClassSampler(codes, options()); })) {
    use(*sampler);
  }
}

/// A target's whole run of one input: the sampler kind the input's first byte picks
/// (RandomSampler in 4 inputs of 8, SequentialSampler in 2, ClassSampler and MixtureSampler in 1
/// each), then that kind's part of the target on the rest, under `guard`.
inline void by_kind(const std::uint8_t* data, std::size_t size, void (*chunk)(FuzzedDataProvider&, bool random),
                    void (*class_kind)(FuzzedDataProvider&), void (*mixture)(FuzzedDataProvider&)) {
  FuzzedDataProvider in(data, size);
  guard([&] {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 4:
      case 5: chunk(in, false); break;
      case 6: class_kind(in); break;
      case 7: mixture(in); break;
      default: chunk(in, true); break;
    }
  });
}

// --- walking ----------------------------------------------------------------------------------

/// What every request of one stream must satisfy.
struct Expect {
  std::int64_t batch_size = 1;
  std::int64_t chunk_size = 1;         ///< no chunk is longer
  std::int64_t max_chunks = 1;         ///< no request lists more chunks (pieces of chunks)
  cs::Slice bounds;                    ///< every chunk lies inside
  bool full_batches = false;           ///< no batch is short (drop_last, or equal batches enforced)
  bool distinct_positions = true;      ///< no request repeats a position (no padding)
  bool distinct_observations = false;  ///< no observation is read twice in the stream
  /// A further check of every chunk, with the request it belongs to (a sampler's own layout).
  std::function<void(const cs::LoadRequest&, const cs::Slice&)> on_chunk;
  /// A further check of every batch, given the observations it trains on.
  std::function<void(std::span<const std::int64_t>)> on_batch;
};

/// What a bounded walk saw.
struct Walk {
  std::int64_t batches = 0;
  std::int64_t positions = 0;
  bool complete = false;                   ///< the stream ended within the bounds
  std::vector<std::int64_t> observations;  ///< every position mapped to its observation, in order
};

/// The observation buffer row `position` (`0 <= position < ends.back()`) of a request holds,
/// given where in its buffer each of its chunks ends.
[[nodiscard]] inline std::int64_t observation_at(const cs::LoadRequest& request, std::span<const std::int64_t> ends,
                                                 std::int64_t position) {
  const auto chunk = static_cast<std::size_t>(std::ranges::upper_bound(ends, position) - ends.begin());
  return request.chunks[chunk].stop - (ends[chunk] - position);
}

/// The most chunks a request of a sampler over one range lists: `preload_nchunks` for a
/// ClassSampler or MixtureSampler; for a RandomSampler or SequentialSampler, whose requests are
/// filled to `chunk_size * preload_nchunks` rows of grid chunks, the chunks those rows touch: one
/// more for the piece cut at each end, one more for each of the range's short head and tail.
template <class S>
[[nodiscard]] std::int64_t max_chunks_of(const S& sampler) {
  if constexpr (std::is_same_v<S, cs::RandomSampler> || std::is_same_v<S, cs::SequentialSampler>)
    return sampler.preload_nchunks() + 3;
  else return sampler.preload_nchunks();
}

/// The one range of a shard of a one-range mask.
[[nodiscard]] inline cs::Slice only_range(const cs::Ranges& shard) {
  check(shard.size() == 1, "a shard of one range has {} ranges", shard.size());
  return shard[0];
}

/// No observation twice: sorts a copy.
inline void check_distinct(std::vector<std::int64_t> observations) {
  std::ranges::sort(observations);
  const auto twice = std::ranges::adjacent_find(observations);
  check(twice == observations.end(), "observation {} read twice in one stream without replacement or padding",
        twice == observations.end() ? 0 : *twice);
}

/// Walks `range` (a `sample()` result), checking every request against `expect`, until it ends
/// or `max_batches` batches or `max_positions` positions have been read.
template <class Range>
[[nodiscard]] Walk walk(Range&& range, const Expect& expect, std::int64_t max_batches, std::int64_t max_positions) {
  Walk seen;
  bool short_seen = false;
  const bool observe = expect.distinct_observations || static_cast<bool>(expect.on_batch);
  std::vector<std::int64_t> batch_observations;
  std::vector<std::int64_t> request_positions;
  std::vector<std::int64_t> ends;
  for (const cs::LoadRequest& request : range) {
    check(!request.chunks.empty(), "a request lists no chunk");
    check(std::ssize(request.chunks) <= expect.max_chunks, "a request lists {} chunks, at most {} expected",
          request.chunks.size(), expect.max_chunks);
    for (const cs::Slice& chunk : request.chunks) {
      check(!chunk.empty() && chunk.size() <= expect.chunk_size,
            "chunk [{}, {}) is empty or longer than chunk_size ({})", chunk.start, chunk.stop, expect.chunk_size);
      check(expect.bounds.start <= chunk.start && chunk.stop <= expect.bounds.stop,
            "chunk [{}, {}) is outside [{}, {})", chunk.start, chunk.stop, expect.bounds.start, expect.bounds.stop);
      if (expect.on_chunk) expect.on_chunk(request, chunk);
    }
    const std::int64_t buffer = request.buffer_size();
    ends.clear();
    for (const cs::Slice& chunk : request.chunks) ends.push_back((ends.empty() ? 0 : ends.back()) + chunk.size());
    check(!request.splits.empty(), "a request of {} rows yields no batch", buffer);
    check(request.splits.batch_size() == expect.batch_size, "splits of batch_size {}, the sampler's is {}",
          request.splits.batch_size(), expect.batch_size);
    request_positions.clear();
    for (const std::span<const std::int64_t> batch : request.splits) {
      const auto length = std::ssize(batch);
      check(!short_seen, "a batch follows a short batch: only the stream's last may be short");
      check(length >= 1 && length <= expect.batch_size, "a batch of {} positions, batch_size {}", length,
            expect.batch_size);
      if (length < expect.batch_size) {
        check(!expect.full_batches, "a short batch ({} of {}) where every batch must be full", length,
              expect.batch_size);
        short_seen = true;
      }
      batch_observations.clear();
      for (const std::int64_t position : batch) {
        check(position >= 0 && position < buffer, "position {} outside the buffer [0, {})", position, buffer);
        if (expect.distinct_positions) request_positions.push_back(position);
        if (observe) batch_observations.push_back(observation_at(request, ends, position));
      }
      if (expect.on_batch) expect.on_batch(batch_observations);
      if (expect.distinct_observations)
        seen.observations.insert(seen.observations.end(), batch_observations.begin(), batch_observations.end());
      ++seen.batches;
      seen.positions += length;
    }
    if (expect.distinct_positions) {
      std::ranges::sort(request_positions);
      check(std::ranges::adjacent_find(request_positions) == request_positions.end(),
            "a request repeats a position without padding");
    }
    if (seen.batches >= max_batches || seen.positions >= max_positions) {
      if (expect.distinct_observations) check_distinct(seen.observations);
      return seen;
    }
  }
  seen.complete = true;
  if (expect.distinct_observations) check_distinct(seen.observations);
  return seen;
}

}  // namespace fuzz
