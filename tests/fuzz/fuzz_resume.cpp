// SPDX-License-Identifier: MIT

// fuzz_resume: exact resume, differentially. One configuration (any sampler kind, small enough to
// walk whole) is played without a break and, in a fresh sampler of the same configuration,
// resumed from `state(k)` at an arbitrary batch k through to_string/parse/restore: the resumed
// stream must be the rest of the uninterrupted one, batch for batch (chunks and positions), and
// the next epoch must start from its beginning. Plain, with workers, and under DistributedSampler
// in both shard modes; a checkpoint taken right after restore, before the first step, must resume
// the same way. In global mode the job is then restarted on other numbers of ranks, up to twice:
// the new ranks' streams must be the old ranks' unread batches, in rank order, dealt in contiguous
// blocks (drop leaves out fewer than the new world size, pad wraps around to repeat as many, and
// without equal batches the blocks differ by at most one).

#include "fuzz_support.hpp"

#include <chunksampler.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fuzz {
namespace {

/// One batch as yielded: its request's chunks (shared by the request's batches) and its
/// positions in their buffer.
struct Batch {
  std::shared_ptr<const std::vector<cs::Slice>> chunks;
  std::vector<std::int64_t> positions;
  friend bool operator==(const Batch& a, const Batch& b) {
    return (a.chunks == b.chunks || *a.chunks == *b.chunks) && a.positions == b.positions;
  }
};
using Stream = std::vector<Batch>;

template <class Range>
[[nodiscard]] Stream record(Range&& range) {
  Stream out;
  for (const cs::LoadRequest& request : range) {
    const auto chunks = std::make_shared<const std::vector<cs::Slice>>(request.chunks.begin(), request.chunks.end());
    for (const std::span<const std::int64_t> batch : request.splits)
      out.push_back({chunks, {batch.begin(), batch.end()}});
  }
  return out;
}

void check_same(const Stream& got, std::span<const Batch> want, std::string_view what) {
  check(got.size() == want.size(), "{}: {} batches, expected {}", what, got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    check(got[i] == want[i], "{}: batch {} of {} differs", what, i, got.size());
}

/// How a configuration is run: plain, or one rank of a job.
struct Job {
  bool distributed = false;
  cs::DistributedOptions options;
  std::int64_t world_size = 1;
};

// Plays epoch `epoch` whole (as `worker`), or nothing when the configuration is refused.
template <class T>
[[nodiscard]] std::optional<Stream> play(T& sampler, std::int64_t n_obs, std::uint64_t epoch,
                                         const cs::WorkerInfo& worker) {
  sampler.set_epoch(epoch);
  std::optional<Stream> stream;
  (void)accepted([&] { stream = record(sampler.sample(n_obs, worker)); });
  return stream;
}

// A fresh sampler is in some state of its own before it restores: a pinned epoch or an epoch played.
template <class T>
void disturb(FuzzedDataProvider& in, T& sampler, std::int64_t n_obs) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: sampler.set_epoch(epoch_value(in)); break;
    case 1: (void)accepted([&] { (void)record(sampler.sample(n_obs)); }); break;
    default: break;
  }
}

// The uninterrupted stream of `made()` and its resumption at an arbitrary batch.
template <class Make>
void resume_once(FuzzedDataProvider& in, Make&& made, std::int64_t n_obs, std::uint64_t epoch,
                 const cs::WorkerInfo& worker) {
  auto first = made();
  const std::optional<Stream> whole = play(first, n_obs, epoch, worker);
  if (!whole) return;
  const auto length = std::ssize(*whole);
  const std::int64_t k = in.ConsumeIntegralInRange<std::int64_t>(0, length + 1);
  context() += fmt::format("; resumed at batch {} of {}", k, length);
  const cs::SamplerState state = first.state(k);
  const std::string text = state.to_string();
  const cs::SamplerState parsed = cs::SamplerState::parse(text);
  check(parsed == state, "state text {:?} parses to another state", text);

  auto resumed = made();
  disturb(in, resumed, n_obs);
  resumed.restore(parsed);
  if (in.ConsumeBool()) {
    // A checkpoint before the first step after a restore resumes the same point.
    auto again = made();
    again.restore(cs::SamplerState::parse(resumed.state(k).to_string()));
    resumed = std::move(again);
  }
  std::string why;
  std::optional<Stream> rest;
  const bool served = accepted([&] { rest = record(resumed.sample(n_obs, worker)); }, &why);
  if (k > length) {
    check(!served && why.find("restore") != std::string::npos,
          "a state past the stream's {} batches (at {}) was not refused", length, k);
    return;
  }
  check(served, "restoring a state at batch {} of {} was refused: {}", k, length, why);
  check_same(*rest, std::span<const Batch>(*whole).subspan(static_cast<std::size_t>(k)), "resumed stream");
  check(resumed.epoch() == epoch + 1, "the resumed sampler is not at the next epoch");
  // The next epoch plays from its start, as the uninterrupted sampler's does.
  std::optional<Stream> next_resumed;
  std::optional<Stream> next_first;
  (void)accepted([&] { next_resumed = record(resumed.sample(n_obs, worker)); });
  (void)accepted([&] { next_first = record(first.sample(n_obs, worker)); });
  check(next_resumed.has_value() == next_first.has_value(), "the next epoch is refused by one sampler only");
  if (next_first) check_same(*next_resumed, *next_first, "the epoch after the resumed one");
}

// --- elastic restarts in global mode -------------------------------------------------------------

struct Block {
  std::int64_t begin;
  std::int64_t end;
};

// Rank r's block of `total` batches dealt among `world` ranks (README: contiguous blocks; drop
// leaves the remainder out, pad wraps around, without equal batches the blocks differ by one).
[[nodiscard]] Block block(const cs::DistributedOptions& o, std::int64_t total, std::int64_t world, std::int64_t r) {
  if (!o.enforce_equal_batches) {
    const std::int64_t base = total / world;
    const std::int64_t extra = total % world;
    const std::int64_t start = r * base + std::min(r, extra);
    return {start, start + base + (r < extra ? 1 : 0)};
  }
  const std::int64_t each =
      o.remainder == cs::Remainder::pad ? total / world + (total % world != 0 ? 1 : 0) : total / world;
  return {r * each, (r + 1) * each};
}

// What each rank of `world` reads when `plan` (batches in dealt order) is dealt among them.
[[nodiscard]] std::vector<Stream> deal(const cs::DistributedOptions& o, const Stream& plan, std::int64_t world) {
  std::vector<Stream> streams(static_cast<std::size_t>(world));
  const auto total = std::ssize(plan);
  if (total == 0) return streams;
  for (std::int64_t r = 0; r < world; ++r) {
    const Block b = block(o, total, world, r);
    for (std::int64_t i = b.begin; i < b.end; ++i)
      streams[static_cast<std::size_t>(r)].push_back(plan[static_cast<std::size_t>(i % total)]);
  }
  return streams;
}

// The batches `world` ranks dealt `plan` have not read after `read` batches each, in rank order.
[[nodiscard]] Stream unread(const cs::DistributedOptions& o, const Stream& plan, std::int64_t world,
                            std::int64_t read) {
  Stream left;
  const auto total = std::ssize(plan);
  for (std::int64_t r = 0; r < world; ++r) {
    const Block b = block(o, total, world, r);
    for (std::int64_t i = b.begin + std::min(read, b.end - b.begin); i < std::min(b.end, total); ++i)
      left.push_back(plan[static_cast<std::size_t>(i)]);
  }
  return left;
}

template <class S>
void elastic(FuzzedDataProvider& in, const S& base, const Job& job, std::int64_t n_obs, std::uint64_t epoch) {
  const cs::DistributedOptions& o = job.options;
  std::int64_t world = job.world_size;
  // Every restart walks the whole job: keep it to a few hundred batches.
  std::int64_t job_batches = 0;
  for (std::int64_t r = 0; r < world; ++r) {
    cs::DistributedSampler<S> rank(base, cs::DistInfo{.rank = r, .world_size = world}, o);
    rank.set_epoch(epoch);
    std::int64_t mine = 0;
    if (!accepted([&] { mine = rank.n_batches(n_obs); })) return;
    job_batches += mine;
  }
  if (job_batches > 600) return;
  // The first deal: all ranks' streams in rank order are the plan's batches.
  std::vector<Stream> streams;
  Stream plan;
  for (std::int64_t r = 0; r < world; ++r) {
    cs::DistributedSampler<S> rank(base, cs::DistInfo{.rank = r, .world_size = world}, o);
    std::optional<Stream> s = play(rank, n_obs, epoch, {});
    if (!s) return;
    plan.insert(plan.end(), s->begin(), s->end());
    streams.push_back(std::move(*s));
  }
  const std::vector<Stream> first_deal = deal(o, plan, world);
  for (std::size_t r = 0; r < streams.size(); ++r) check_same(streams[r], first_deal[r], "a rank's block of the plan");

  std::int64_t dealt_at = 0;  // batches of the epoch each rank had read when `plan` was dealt
  std::int64_t reached = 0;   // batches every rank has read: a later state cannot go back
  std::string state_text;     // the state the current ranks were restored from (none: they started the epoch)
  for (int restart = 0; restart < 2 && in.remaining_bytes() > 0; ++restart) {
    const std::int64_t next_world = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
    // Ranks train in step, so all stop at the same batch; without equal batches a rank's block
    // may be one batch longer, and only an elastic restart can stop past the shorter ones.
    std::int64_t shortest = std::ssize(streams.front());
    std::int64_t longest = 0;
    for (const Stream& s : streams) {
      shortest = std::min(shortest, std::ssize(s));
      longest = std::max(longest, std::ssize(s));
    }
    const std::int64_t done =
        in.ConsumeIntegralInRange<std::int64_t>(reached, dealt_at + (next_world == world ? shortest : longest));
    context() += fmt::format("; restart at batch {} on {} ranks", done, next_world);
    // Every rank, played to `done`, states the same point; any of them restores the job.
    std::optional<cs::SamplerState> state;
    for (std::int64_t r = 0; r < world; ++r) {
      cs::DistributedSampler<S> rank(base, cs::DistInfo{.rank = r, .world_size = world}, o);
      if (state_text.empty()) rank.set_epoch(epoch);
      else rank.restore(cs::SamplerState::parse(state_text));
      (void)rank.sample(n_obs);
      const cs::SamplerState mine = rank.state(done);
      check(!state || mine == *state, "ranks {} and 0 of {} state different points at batch {}", r, world, done);
      if (!state) state = mine;
    }
    state_text = state->to_string();
    std::vector<Stream> next(static_cast<std::size_t>(next_world));
    for (std::int64_t r = 0; r < next_world; ++r) {
      cs::DistributedSampler<S> rank(base, cs::DistInfo{.rank = r, .world_size = next_world}, o);
      disturb(in, rank, n_obs);
      rank.restore(cs::SamplerState::parse(state_text));
      if (in.ConsumeBool()) {
        // A checkpoint before the first step after the restart resumes the same point.
        cs::DistributedSampler<S> again(base, cs::DistInfo{.rank = r, .world_size = next_world}, o);
        again.restore(cs::SamplerState::parse(rank.state(done).to_string()));
        rank = std::move(again);
      }
      std::string why;
      check(accepted([&] { next[static_cast<std::size_t>(r)] = record(rank.sample(n_obs)); }, &why),
            "rank {} of {} refused the restart from {} ranks at batch {}: {}", r, next_world, world, done, why);
    }
    reached = done;
    if (next_world == world) {
      // The same job restarted: every rank goes on where it stopped, in the same deal.
      for (std::size_t r = 0; r < next.size(); ++r)
        check_same(next[r], std::span<const Batch>(streams[r]).subspan(static_cast<std::size_t>(done - dealt_at)),
                   "a rank resumed on as many ranks");
      continue;
    }
    plan = unread(o, plan, world, done - dealt_at);
    const std::vector<Stream> want = deal(o, plan, next_world);
    for (std::size_t r = 0; r < next.size(); ++r)
      check_same(next[r], want[r], "a new rank's deal of the unread batches");
    streams = std::move(next);
    world = next_world;
    dealt_at = done;
  }
}

// Whether an epoch of `sampler` can be walked whole, several times, within the time budget: it
// yields few positions and fills no large request (a huge preload_nchunks with a small epoch
// still passes: the epoch bounds its requests).
template <class T>
[[nodiscard]] bool small_epoch(T sampler, std::int64_t n_obs) {
  std::int64_t batches = 0;
  if (!accepted([&] { batches = sampler.n_batches(n_obs); })) return true;  // refused: nothing to walk
  if (batches > 600 || (batches > 0 && sampler.batch_size() > 20'000 / batches)) return false;
  return sampler.sample(n_obs).plan().max_positions() <= 4096;  // nothing is filled before begin()
}

// --- configurations ------------------------------------------------------------------------------

template <class S>
void run(FuzzedDataProvider& in, const S& base, std::int64_t n_obs) {
  Job job;
  constexpr cs::Remainder policies[] = {cs::Remainder::drop, cs::Remainder::pad, cs::Remainder::rotate};
  const int mode = in.ConsumeIntegralInRange<int>(0, 2);
  job.distributed = mode != 0;
  job.options = {.enforce_equal_batches = in.ConsumeIntegralInRange<int>(0, 3) != 0,
                 .mode = mode == 2 ? cs::ShardMode::global : cs::ShardMode::contiguous,
                 .remainder = policies[in.ConsumeIntegralInRange<std::size_t>(0, 2)]};
  job.world_size = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
  const std::int64_t rank = in.ConsumeIntegralInRange<std::int64_t>(0, job.world_size - 1);
  const std::uint64_t epoch = epoch_value(in);
  cs::WorkerInfo worker{};
  if (in.ConsumeBool()) {
    worker.num_workers = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
    worker.id = in.ConsumeIntegralInRange<std::int64_t>(0, worker.num_workers - 1);
  }
  constexpr std::string_view policy_names[] = {"drop", "pad", "rotate"};
  context() += job.distributed ? fmt::format("; rank {} of {}, {}, {}, enforce_equal_batches {}", rank, job.world_size,
                                             job.options.mode == cs::ShardMode::global ? "global" : "contiguous",
                                             policy_names[static_cast<std::size_t>(job.options.remainder)],
                                             job.options.enforce_equal_batches)
                               : std::string("; plain");
  context() += fmt::format(", epoch {}, worker {} of {}", epoch, worker.id, worker.num_workers);
  if (!job.distributed) {
    if (!small_epoch(base, n_obs)) return;
    const auto fresh = [&] { return base; };
    resume_once(in, fresh, n_obs, epoch, worker);
    return;
  }
  std::optional<cs::DistributedSampler<S>> probe;
  if (!accepted([&] { probe.emplace(base, cs::DistInfo{.rank = rank, .world_size = job.world_size}, job.options); }))
    return;
  if (!small_epoch(*probe, n_obs)) return;
  const auto fresh = [&] {
    return cs::DistributedSampler<S>(base, cs::DistInfo{.rank = rank, .world_size = job.world_size}, job.options);
  };
  resume_once(in, fresh, n_obs, epoch, worker);
  if (job.options.mode == cs::ShardMode::global) elastic(in, base, job, n_obs, epoch);
}

void random_or_sequential(FuzzedDataProvider& in, bool random) {
  ChunkConfig c{.random = random, .shape = shape_value(in, 256)};
  c.n_obs = in.ConsumeIntegralInRange<std::int64_t>(0, 2000);
  if (in.ConsumeBool()) c.mask = slice_in(in, c.n_obs);
  c.drop_last = in.ConsumeBool();
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  c.replacement = random && in.ConsumeBool();
  if (random && in.ConsumeBool()) c.num_samples = in.ConsumeIntegralInRange<std::int64_t>(1, 2000);
  context() = c.text();
  with_sampler(c, [&](const auto& sampler) { run(in, sampler, c.n_obs); });
}

void class_sampler(FuzzedDataProvider& in) {
  const Shape s = shape_value(in, 128);
  std::vector<std::int32_t> codes;
  const auto n_codes = in.ConsumeIntegralInRange<std::int64_t>(1, 1500);
  while (std::ssize(codes) < n_codes) {
    const auto code = in.ConsumeIntegralInRange<std::int32_t>(0, 2);
    // Runs of at least one chunk (mostly: the shape may be invalid, then the sampler refuses).
    const std::int64_t length =
        std::clamp<std::int64_t>(s.chunk_size, 1, 256) + in.ConsumeIntegralInRange<std::int64_t>(0, 60);
    for (std::int64_t i = 0; i < length && std::ssize(codes) < n_codes; ++i) codes.push_back(code);
  }
  const bool drop_last = in.ConsumeBool();
  const auto seed = in.ConsumeIntegral<std::uint64_t>();
  const auto num_samples = in.ConsumeIntegralInRange<std::int64_t>(1, 2000);
  // Read last, so that inputs written before WeightedClassSampler still decode as they did.
  const bool weighted = in.ConsumeBool();
  const cs::Composition composition = in.ConsumeBool() ? cs::Composition::stratified : cs::Composition::independent;
  context() = fmt::format("{} over {} codes, chunk_size {}, preload_nchunks {}, batch_size {}",
                          weighted ? "WeightedClassSampler" : "ClassSampler", n_codes, s.chunk_size, s.preload_nchunks,
                          s.batch_size);
  with_class_sampler(
      codes,
      [&] {
        return cs::ClassOptions{.chunk_size = s.chunk_size,
                                .preload_nchunks = s.preload_nchunks,
                                .batch_size = s.batch_size,
                                .drop_last = drop_last,
                                .mask = std::nullopt,
                                .seed = seed,
                                .num_samples = num_samples,
                                .class_weights = {}};
      },
      weighted ? std::optional(composition) : std::nullopt, [&](const auto& sampler) { run(in, sampler, n_codes); });
}

void mixture_sampler(FuzzedDataProvider& in) {
  const Shape s = shape_value(in, 256);
  std::vector<std::int64_t> sizes(in.ConsumeIntegralInRange<std::size_t>(1, 3));
  for (std::int64_t& size : sizes)
    size = std::clamp<std::int64_t>(s.chunk_size, 1, 256) + in.ConsumeIntegralInRange<std::int64_t>(0, 600);
  std::vector<double> weights(sizes.size());
  for (double& w : weights) w = static_cast<double>(in.ConsumeIntegralInRange<int>(0, 4));
  if (std::ranges::all_of(weights, [](double w) { return w == 0.0; })) weights.clear();
  std::optional<std::int64_t> num_samples;
  if (in.ConsumeBool()) num_samples = in.ConsumeIntegralInRange<std::int64_t>(1, 2000);
  context() =
      fmt::format("MixtureSampler over {} datasets, chunk_size {}, preload_nchunks {}, batch_size {}, num_samples {}",
                  sizes.size(), s.chunk_size, s.preload_nchunks, s.batch_size, text_of(num_samples));
  const auto sampler = made([&] {
    return cs::MixtureSampler(sizes, cs::MixtureOptions{.chunk_size = s.chunk_size,
                                                        .preload_nchunks = s.preload_nchunks,
                                                        .batch_size = s.batch_size,
                                                        .drop_last = in.ConsumeBool(),
                                                        .seed = in.ConsumeIntegral<std::uint64_t>(),
                                                        .num_samples = num_samples,
                                                        .weights = weights,
                                                        .temperature = in.ConsumeBool() ? 1.0 : 2.0});
  });
  if (!sampler) return;
  run(in, *sampler, sampler->boundaries().back());
}

}  // namespace
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::by_kind(data, size, fuzz::random_or_sequential, fuzz::class_sampler, fuzz::mixture_sampler);
  return 0;
}
