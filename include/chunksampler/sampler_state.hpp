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

namespace detail {

/// Every field of a `SamplerState`, as the samplers build and read it; users see a state
/// through its accessors and its text.
struct StateFields {
  std::uint64_t fingerprint = 0;
  /// The generation of the sampler's order the state was taken in (its `order_generation`).
  std::uint32_t order_generation = 1;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::optional<std::int64_t> n_obs = std::nullopt;
  std::int64_t batches_done = 0;
  std::int64_t world_size = 1;
  /// Global mode: the ranks the epoch's plan was laid out for (a restore on another world size
  /// keeps that plan).
  std::int64_t plan_world_size = 1;
  std::int64_t num_workers = 1;
  std::int64_t worker = 0;
  /// Global mode: the epoch's plan batches the ranks were dealt, after `dealt_at` batches of the
  /// epoch had been read (an elastic restart re-deals what is left); `std::nullopt`: all of them.
  std::optional<std::vector<BatchRun>> runs = std::nullopt;
  std::int64_t dealt_at = 0;

  friend bool operator==(const StateFields&, const StateFields&) = default;
};

struct StateAccess;

}  // namespace detail

/// A point inside an epoch, for exact resume: taken with `sampler.state(batches_done)`, given
/// back with `sampler.restore(state)`; it round-trips through text for a checkpoint file. A
/// value: only the samplers make one (or `parse` reads one), and every one is in range.
///
///     std::string text = sampler.state(step_in_epoch).to_string();   // save with the model
///     sampler.restore(cs::SamplerState::parse(text));                 // after the restart
///     for (const cs::LoadRequest& request : sampler.sample(n_obs)) { /* the rest of the epoch */ }
class SamplerState {
 public:
  /// The start of epoch 0 of no configuration (fingerprint 0): every sampler refuses it.
  SamplerState() = default;

  /// The configuration's hash; `restore` refuses any other.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept { return fields_.fingerprint; }
  /// The generation of the sampler's order the state was taken in: its `order_generation`, which
  /// changes with the sampler's random stream; `restore` refuses any other.
  [[nodiscard]] std::uint32_t order_generation() const noexcept { return fields_.order_generation; }
  /// The seed every draw descends from.
  [[nodiscard]] std::uint64_t seed() const noexcept { return fields_.seed; }
  /// The epoch the point lies in.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return fields_.epoch; }
  /// The dataset size the epoch was sampled over; `restore` refuses any other. `std::nullopt`
  /// only at the start of an epoch no `sample()` has played yet, which any size may begin.
  [[nodiscard]] std::optional<std::int64_t> n_obs() const noexcept { return fields_.n_obs; }
  /// Batches of the epoch consumed, counted from its start (of the worker's share, with workers).
  [[nodiscard]] std::int64_t batches_done() const noexcept { return fields_.batches_done; }
  /// Ranks the epoch was being read by (1 for a sampler that is not distributed).
  [[nodiscard]] std::int64_t world_size() const noexcept { return fields_.world_size; }
  /// Workers per rank the epoch's stream was split among.
  [[nodiscard]] std::int64_t num_workers() const noexcept { return fields_.num_workers; }
  /// The worker the state is of, in `[0, num_workers())`.
  [[nodiscard]] std::int64_t worker() const noexcept { return fields_.worker; }

  friend bool operator==(const SamplerState&, const SamplerState&) = default;

  /// The version of the text format `to_string()` writes. It changes with the text alone: a
  /// change to one sampler's order changes that sampler's `order_generation`, which the text
  /// records. Version 5 (chunksampler 0.3) is read as of generation 1, the one every sampler's
  /// order had then. Older versions are refused by name: 1 did not record `n_obs`; 2 was written
  /// before the epochs' chunk orders changed (chunksampler 0.2); 3 and 4 before chunks moved onto
  /// the storage grid (chunksampler 0.3), which changed the epochs of masks and shards that start
  /// or end off it and of every range whose short tail chunk now takes a uniform place in the
  /// order: each would resume another order.
  static constexpr int text_version = 6;

  /// One line of text: `chunksampler-state/6` and then `key=value` fields, one per accessor in
  /// the accessors' order (`fingerprint` in hexadecimal, `n_obs=any` for a state no size is tied
  /// to), then the distributed layout a global-mode state needs (`plan_world_size`, `runs`:
  /// `all`, `none` or `<begin>-<end>,...`, and `dealt_at`).
  [[nodiscard]] std::string to_string() const {
    const detail::StateFields& f = fields_;
    std::string runs_text = f.runs ? "" : "all";
    if (f.runs && f.runs->empty()) runs_text = "none";
    for (const BatchRun& run : f.runs.value_or(std::vector<BatchRun>{}))
      fmt::format_to(std::back_inserter(runs_text), "{}{}-{}", runs_text.empty() ? "" : ",", run.begin, run.end);
    return fmt::format(
        "chunksampler-state/{} fingerprint={:016x} order_generation={} seed={} epoch={} n_obs={} batches_done={} "
        "world_size={} num_workers={} worker={} plan_world_size={} runs={} dealt_at={}",
        text_version, f.fingerprint, f.order_generation, f.seed, f.epoch, f.n_obs ? fmt::to_string(*f.n_obs) : "any",
        f.batches_done, f.world_size, f.num_workers, f.worker, f.plan_world_size, runs_text, f.dealt_at);
  }

  /// Reads `to_string()`'s text back; throws `StateFormatError` naming the first field that is
  /// missing, malformed or out of range, `StateMismatchError` for a format version this one
  /// refuses. Every state it returns round-trips. A text of format 5 (chunksampler 0.3, which
  /// had no `order_generation`) is read as of generation 1.
  [[nodiscard]] static SamplerState parse(std::string_view text) {
    Reader reader{text};
    const int version = reader.expect_header();
    detail::StateFields f;
    f.fingerprint = reader.field<std::uint64_t>("fingerprint", 16);
    f.order_generation = version == legacy_version ? 1U : reader.field<std::uint32_t>("order_generation", 10);
    f.seed = reader.field<std::uint64_t>("seed", 10);
    f.epoch = reader.field<std::uint64_t>("epoch", 10);
    f.n_obs = reader.optional_field("n_obs", "any");
    f.batches_done = reader.field<std::int64_t>("batches_done", 10);
    f.world_size = reader.field<std::int64_t>("world_size", 10);
    f.num_workers = reader.field<std::int64_t>("num_workers", 10);
    f.worker = reader.field<std::int64_t>("worker", 10);
    f.plan_world_size = reader.field<std::int64_t>("plan_world_size", 10);
    f.runs = reader.runs();
    f.dealt_at = reader.field<std::int64_t>("dealt_at", 10);
    reader.expect_end();
    return SamplerState(f);
  }

 private:
  friend struct detail::StateAccess;

  // The format before order generations; its samplers' orders are generation 1.
  static constexpr int legacy_version = 5;

  explicit SamplerState(const detail::StateFields& fields) : fields_(fields) { check(); }

  // Throws `StateFormatError` unless every field is in range and the runs are ordered.
  void check() const {
    const detail::StateFields& f = fields_;
    if (f.order_generation < 1)
      detail::throw_state_format("SamplerState: order_generation ({}) must be >= 1", f.order_generation);
    if (f.n_obs && (*f.n_obs < 0 || *f.n_obs > detail::max_size))
      detail::throw_state_format("SamplerState: n_obs ({}) must be in [0, 2^62]", *f.n_obs);
    if (!f.n_obs && f.batches_done != 0)
      detail::throw_state_format(
          "SamplerState: batches_done ({}) must be 0 when n_obs=any: a point inside an epoch is tied to its "
          "dataset size",
          f.batches_done);
    if (f.batches_done < 0 || f.batches_done > detail::max_size)
      detail::throw_state_format("SamplerState: batches_done ({}) must be in [0, 2^62]", f.batches_done);
    if (f.world_size < 1 || f.world_size > detail::max_size)
      detail::throw_state_format("SamplerState: world_size ({}) must be in [1, 2^62]", f.world_size);
    if (f.plan_world_size < 1 || f.plan_world_size > detail::max_size)
      detail::throw_state_format("SamplerState: plan_world_size ({}) must be in [1, 2^62]", f.plan_world_size);
    if (f.num_workers < 1 || f.num_workers > detail::max_size)
      detail::throw_state_format("SamplerState: num_workers ({}) must be in [1, 2^62]", f.num_workers);
    if (f.worker < 0 || f.worker >= f.num_workers)
      detail::throw_state_format("SamplerState: worker ({}) must be in [0, num_workers) = [0, {})", f.worker,
                                 f.num_workers);
    if (f.dealt_at < 0 || f.dealt_at > f.batches_done)
      detail::throw_state_format("SamplerState: dealt_at ({}) must be in [0, batches_done] = [0, {}]", f.dealt_at,
                                 f.batches_done);
    if (!f.runs && f.dealt_at != 0)
      detail::throw_state_format("SamplerState: dealt_at ({}) must be 0 when runs=all", f.dealt_at);
    std::int64_t previous_end = 0;
    for (const BatchRun& run : f.runs.value_or(std::vector<BatchRun>{})) {
      if (run.begin < previous_end || run.begin >= run.end || run.end > detail::max_size)
        detail::throw_state_format("SamplerState: run {}-{} must be non-empty, ordered after {} and end <= 2^62",
                                   run.begin, run.end, previous_end);
      previous_end = run.end;
    }
  }

  detail::StateFields fields_;

  struct Reader {
    std::string_view rest;

    std::string_view word() {
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      const std::size_t end = rest.find(' ');
      const std::string_view w = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
      return w;
    }
    // The format version of the text: the current one or 5; older ones are refused by name.
    int expect_header() {
      const std::string expected = fmt::format("chunksampler-state/{}", text_version);
      const std::string_view w = word();
      if (w == expected) return text_version;
      if (w == fmt::format("chunksampler-state/{}", legacy_version)) return legacy_version;
      if (w == "chunksampler-state/3" || w == "chunksampler-state/4")
        detail::throw_state_mismatch(
            "SamplerState: the text is of format {}, written before chunksampler 0.3 put every chunk on the storage "
            "grid (multiples of chunk_size from row 0): an epoch whose mask or shard starts or ends off the grid, or "
            "whose size is not a multiple of chunk_size, now reads another order; this version reads {:?}: take a "
            "new state",
            std::string(w), expected);
      if (w == "chunksampler-state/1")
        detail::throw_state_mismatch(
            "SamplerState: the text is of format chunksampler-state/1, written by chunksampler 0.1, which did not "
            "record n_obs; this version reads {:?}: take a new state",
            expected);
      if (w == "chunksampler-state/2")
        detail::throw_state_mismatch(
            "SamplerState: the text is of format chunksampler-state/2, written before chunksampler 0.2 changed the "
            "epochs' chunk orders (now a uniform permutation at every size): it would resume another order; this "
            "version reads {:?}: take a new state",
            expected);
      detail::throw_state_format("SamplerState: text must start with {:?}, found {:?}", expected, std::string(w));
    }
    std::string_view value(std::string_view key) {
      const std::string_view w = word();
      if (w.size() <= key.size() || w.substr(0, key.size()) != key || w[key.size()] != '=')
        detail::throw_state_format("SamplerState: expected field {}=..., found {:?}", key, std::string(w));
      return w.substr(key.size() + 1);
    }
    template <class T>
    static T number(std::string_view key, std::string_view text, int base) {
      T result{};
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result, base);
      if (text.empty() || error != std::errc{} || end != text.data() + text.size())
        detail::throw_state_format("SamplerState: {} ({:?}) is not a {} integer in range", key, std::string(text),
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
          detail::throw_state_format("SamplerState: run {:?} must be <begin>-<end>", std::string(item));
        result.push_back({number<std::int64_t>("run begin", item.substr(0, dash), 10),
                          number<std::int64_t>("run end", item.substr(dash + 1), 10)});
        from = comma + 1;
      }
      return result;
    }
    void expect_end() {
      const std::string_view w = word();
      if (!w.empty())
        detail::throw_state_format("SamplerState: unexpected text {:?} after the last field", std::string(w));
    }
  };
};

namespace detail {

/// How the samplers make states and read their fields; a state made here is checked as a parsed
/// one is (a field out of range throws `StateFormatError`).
struct StateAccess {
  [[nodiscard]] static SamplerState make(const StateFields& fields) { return SamplerState(fields); }
  [[nodiscard]] static const StateFields& fields(const SamplerState& state) noexcept { return state.fields_; }
};

}  // namespace detail

}  // namespace chunksampler
