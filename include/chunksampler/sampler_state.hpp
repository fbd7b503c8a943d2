// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/arith.hpp>
#include <chunksampler/detail/errors.hpp>
#include <chunksampler/plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace chunksampler {

/// A point inside an epoch, for exact resume: taken with `sampler.state(batches_done)`, given
/// back with `sampler.restore(state)`; it round-trips through text for a checkpoint file.
///
///     std::string text = sampler.state(step_in_epoch).to_string();   // save with the model
///     sampler.restore(cs::SamplerState::parse(text));                 // after the restart
///     for (const cs::LoadRequest& request : sampler.sample(n_obs)) { /* the rest of the epoch */ }
struct SamplerState {
  std::uint64_t fingerprint = 0;  ///< the configuration's hash; restore refuses any other
  std::uint64_t seed = 0;         ///< the seed every draw descends from
  std::uint64_t epoch = 0;        ///< the epoch the point lies in
  /// The dataset size the epoch was sampled over; restore refuses any other. `std::nullopt`
  /// only at the start of an epoch no `sample()` has played yet, which any size may begin.
  std::optional<std::int64_t> n_obs = std::nullopt;
  std::int64_t batches_done = 0;  ///< batches of the epoch consumed (of the worker's share, with workers)
  std::int64_t world_size = 1;    ///< ranks the epoch was being read by
  std::int64_t plan_world_size = 1;  ///< ranks the epoch's plan was laid out for (global mode)
  std::int64_t num_workers = 1;   ///< workers per rank the stream was split among
  std::int64_t worker = 0;        ///< the worker the state is of
  /// Global mode: the epoch's plan batches the ranks were dealt, after `dealt_at` batches of the
  /// epoch had been read (an elastic restart re-deals what is left); `std::nullopt`: all of them.
  std::optional<std::vector<BatchRun>> runs = std::nullopt;
  std::int64_t dealt_at = 0;      ///< batches of the epoch each rank had read when `runs` were dealt

  friend bool operator==(const SamplerState&, const SamplerState&) = default;

  /// The version of the text format `to_string()` writes and `parse()` reads. Older versions are
  /// refused by name: 1 did not record `n_obs`, and 2 was written before the epochs' chunk
  /// orders changed (chunksampler 0.2), so it would resume another order.
  static constexpr int text_version = 3;

  /// One line of text: `chunksampler-state/3 fingerprint=<hex> seed=.. epoch=.. n_obs=..
  /// batches=.. world_size=.. plan_world_size=.. workers=.. worker=.. runs=<b>-<e>,...
  /// dealt_at=..`, where `n_obs=any` is a state no size is tied to, `runs=all` is every batch
  /// and `runs=none` no batch.
  [[nodiscard]] std::string to_string() const {
    std::string runs_text = runs ? "" : "all";
    if (runs && runs->empty()) runs_text = "none";
    for (const BatchRun& run : runs.value_or(std::vector<BatchRun>{}))
      fmt::format_to(std::back_inserter(runs_text), "{}{}-{}", runs_text.empty() ? "" : ",", run.begin, run.end);
    return fmt::format(
        "chunksampler-state/{} fingerprint={:016x} seed={} epoch={} n_obs={} batches={} world_size={} "
        "plan_world_size={} workers={} worker={} runs={} dealt_at={}",
        text_version, fingerprint, seed, epoch, n_obs ? fmt::to_string(*n_obs) : "any", batches_done, world_size,
        plan_world_size, num_workers, worker, runs_text, dealt_at);
  }

  /// Reads `to_string()`'s text back; throws `std::invalid_argument` naming the first field
  /// that is missing, malformed or out of range. Every state it returns round-trips.
  [[nodiscard]] static SamplerState parse(std::string_view text) {
    Reader reader{text};
    reader.expect_header();
    SamplerState state;
    state.fingerprint = reader.field<std::uint64_t>("fingerprint", 16);
    state.seed = reader.field<std::uint64_t>("seed", 10);
    state.epoch = reader.field<std::uint64_t>("epoch", 10);
    state.n_obs = reader.optional_field("n_obs", "any");
    state.batches_done = reader.field<std::int64_t>("batches", 10);
    state.world_size = reader.field<std::int64_t>("world_size", 10);
    state.plan_world_size = reader.field<std::int64_t>("plan_world_size", 10);
    state.num_workers = reader.field<std::int64_t>("workers", 10);
    state.worker = reader.field<std::int64_t>("worker", 10);
    state.runs = reader.runs();
    state.dealt_at = reader.field<std::int64_t>("dealt_at", 10);
    reader.expect_end();
    state.check();
    return state;
  }

  /// Throws `std::invalid_argument` unless every field is in range and the runs are ordered.
  void check() const {
    if (n_obs && (*n_obs < 0 || *n_obs > detail::max_size))
      detail::throw_invalid("SamplerState: n_obs ({}) must be in [0, 2^62]", *n_obs);
    if (!n_obs && batches_done != 0)
      detail::throw_invalid(
          "SamplerState: batches ({}) must be 0 when n_obs=any: a point inside an epoch is tied to its dataset size",
          batches_done);
    if (batches_done < 0 || batches_done > detail::max_size)
      detail::throw_invalid("SamplerState: batches ({}) must be in [0, 2^62]", batches_done);
    if (world_size < 1 || world_size > detail::max_size)
      detail::throw_invalid("SamplerState: world_size ({}) must be in [1, 2^62]", world_size);
    if (plan_world_size < 1 || plan_world_size > detail::max_size)
      detail::throw_invalid("SamplerState: plan_world_size ({}) must be in [1, 2^62]", plan_world_size);
    if (num_workers < 1 || num_workers > detail::max_size)
      detail::throw_invalid("SamplerState: workers ({}) must be in [1, 2^62]", num_workers);
    if (worker < 0 || worker >= num_workers)
      detail::throw_invalid("SamplerState: worker ({}) must be in [0, workers) = [0, {})", worker, num_workers);
    if (dealt_at < 0 || dealt_at > batches_done)
      detail::throw_invalid("SamplerState: dealt_at ({}) must be in [0, batches] = [0, {}]", dealt_at, batches_done);
    if (!runs && dealt_at != 0)
      detail::throw_invalid("SamplerState: dealt_at ({}) must be 0 when runs=all", dealt_at);
    std::int64_t previous_end = 0;
    for (const BatchRun& run : runs.value_or(std::vector<BatchRun>{})) {
      if (run.begin < previous_end || run.begin >= run.end || run.end > detail::max_size)
        detail::throw_invalid("SamplerState: run {}-{} must be non-empty, ordered after {} and end <= 2^62",
                              run.begin, run.end, previous_end);
      previous_end = run.end;
    }
  }

 private:
  struct Reader {
    std::string_view rest;

    std::string_view word() {
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      const std::size_t end = rest.find(' ');
      const std::string_view w = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
      return w;
    }
    void expect_header() {
      const std::string expected = fmt::format("chunksampler-state/{}", text_version);
      const std::string_view w = word();
      if (w == "chunksampler-state/1")
        detail::throw_invalid(
            "SamplerState: the text is of format chunksampler-state/1, written by chunksampler 0.1, which did not "
            "record n_obs; this version reads {:?}: take a new state",
            expected);
      if (w == "chunksampler-state/2")
        detail::throw_invalid(
            "SamplerState: the text is of format chunksampler-state/2, written before chunksampler 0.2 changed the "
            "epochs' chunk orders (now a uniform permutation at every size): it would resume another order; this "
            "version reads {:?}: take a new state",
            expected);
      if (w != expected)
        detail::throw_invalid("SamplerState: text must start with {:?}, found {:?}", expected, std::string(w));
    }
    std::string_view value(std::string_view key) {
      const std::string_view w = word();
      if (w.size() <= key.size() || w.substr(0, key.size()) != key || w[key.size()] != '=')
        detail::throw_invalid("SamplerState: expected field {}=..., found {:?}", key, std::string(w));
      return w.substr(key.size() + 1);
    }
    template <class T>
    static T number(std::string_view key, std::string_view text, int base) {
      T result{};
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result, base);
      if (text.empty() || error != std::errc{} || end != text.data() + text.size())
        detail::throw_invalid("SamplerState: {} ({:?}) is not a {} integer in range", key, std::string(text),
                              base == 16 ? "hexadecimal" : "decimal");
      return result;
    }
    template <class T>
    T field(std::string_view key, int base) {
      return number<T>(key, value(key), base);
    }
    std::optional<std::int64_t> optional_field(std::string_view key, std::string_view absent) {
      const std::string_view text = value(key);
      if (text == absent) return std::nullopt;
      return number<std::int64_t>(key, text, 10);
    }
    std::optional<std::vector<BatchRun>> runs() {
      const std::string_view text = value("runs");
      if (text == "all") return std::nullopt;
      std::vector<BatchRun> result;
      if (text == "none") return result;
      std::size_t from = 0;
      while (from <= text.size()) {
        const std::size_t comma = std::min(text.find(',', from), text.size());
        const std::string_view item = text.substr(from, comma - from);
        const std::size_t dash = item.find('-');
        if (dash == std::string_view::npos)
          detail::throw_invalid("SamplerState: run {:?} must be <begin>-<end>", std::string(item));
        result.push_back({number<std::int64_t>("run begin", item.substr(0, dash), 10),
                          number<std::int64_t>("run end", item.substr(dash + 1), 10)});
        from = comma + 1;
      }
      return result;
    }
    void expect_end() {
      const std::string_view w = word();
      if (!w.empty()) detail::throw_invalid("SamplerState: unexpected text {:?} after the last field", std::string(w));
    }
  };
};

}  // namespace chunksampler
