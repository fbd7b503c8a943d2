// SPDX-License-Identifier: MIT
#include "chaos/check.hpp"

#include "common/parse.hpp"
#include "common/promise.hpp"
#include "common/training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chaos {

namespace {

using Counts = std::map<Batch, std::int64_t>;  // batches as multisets of observations (sorted), and how often

Batch multiset(Batch batch) {
  std::ranges::sort(batch);
  return batch;
}

// One epoch as an uninterrupted job on `world_size` ranks reads it.
struct Reference {
  std::vector<std::vector<Batch>> ranks;  // each rank's batches, in order
  Counts counts;                          // all of them
  std::int64_t total = 0;                 // batches of the epoch's plan, over all ranks
};

// The references of a round, each computed once, by iterating the sampler of every rank in this
// process, and checked against the documented formulas (docs/concepts/shard-modes.md) before any run is compared with
// it: a reference that broke the library's promise would make every comparison with it meaningless.
class References {
 public:
  References(const Job& job, examples::Failures& failures) : job_(job), failures_(failures) {}

  const Reference& of(std::uint64_t epoch, std::int64_t world_size) {
    const auto key = std::make_pair(epoch, world_size);
    if (const auto found = cache_.find(key); found != cache_.end()) return found->second;
    Reference& ref = cache_[key];
    std::vector<std::int64_t> rows;
    for (std::int64_t r = 0; r < world_size; ++r) {
      Sampler sampler = make_sampler(job_, {.rank = r, .world_size = world_size});
      sampler.set_epoch(epoch);
      std::vector<Batch>& batches = ref.ranks.emplace_back();
      for (const cs::LoadRequest& request : sampler.sample(job_.n_obs)) {
        examples::fill_buffer(request.chunks, rows);
        for (const std::span<const std::int64_t> positions : request.splits) {
          batches.push_back(examples::batch_rows(rows, positions));
          ++ref.counts[multiset(batches.back())];
          ++ref.total;
        }
      }
    }
    check_promise(epoch, world_size, ref);
    return ref;
  }

 private:
  // Batches per rank and which observations an epoch reads, by the documented formulas (docs/concepts/shard-modes.md),
  // with equal full batches.
  void check_promise(std::uint64_t epoch, std::int64_t w, const Reference& ref) {
    const std::int64_t n = job_.n_obs;
    const std::int64_t b = job_.batch_size;
    const auto [per_rank, window] = examples::promise_of(job_.mode, job_.remainder, n, b, w, epoch);
    std::vector<std::int64_t> reads(static_cast<std::size_t>(n), 0);
    for (std::size_t r = 0; r < ref.ranks.size(); ++r) {
      if (std::ssize(ref.ranks[r]) != per_rank)
        failures_.fail("reference: epoch {} on {} ranks: rank {} reads {} batches, the documentation promises {}",
                       epoch, w, r, ref.ranks[r].size(), per_rank);
      for (const Batch& batch : ref.ranks[r]) {
        if (std::ssize(batch) != b)
          failures_.fail("reference: epoch {} on {} ranks: rank {} reads a batch of {}, not {}", epoch, w, r,
                         batch.size(), b);
        for (const std::int64_t obs : batch) {
          if (obs < 0 || obs >= n)
            failures_.fail("reference: epoch {}: observation {} is outside [0, {})", epoch, obs, n);
          else ++reads[static_cast<std::size_t>(obs)];
        }
      }
    }
    if (job_.remainder == cs::Remainder::pad) {
      const auto never = std::ranges::count(reads, 0);
      if (never > 0)
        failures_.fail("reference: epoch {} on {} ranks: {} observations never read (pad)", epoch, w, never);
      return;
    }
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) wrong += reads[static_cast<std::size_t>(i)] != (window.contains(i) ? 1 : 0);
    if (wrong > 0)
      failures_.fail("reference: epoch {} on {} ranks: {} observations not read exactly once inside [{}, {}) and "
                     "never outside",
                     epoch, w, wrong, window.start, window.stop);
  }

  const Job& job_;
  examples::Failures& failures_;
  std::map<std::pair<std::uint64_t, std::int64_t>, Reference> cache_;
};

// What one launch committed of one epoch: per rank, its batches before the checkpoint it left.
struct Part {
  std::size_t launch = 0;
  std::int64_t world_size = 0;
  std::vector<std::vector<LoggedBatch>> ranks;
  std::int64_t resumed_at = -1;  ///< where a launch that committed none of the epoch resumed inside it
};

Position position_of(const std::optional<cs::SamplerState>& state) {
  return state ? Position{state->epoch(), state->batches_done()} : Position{};
}

std::string text_of(Position at) { return fmt::format("epoch {} batch {}", at.epoch, at.index); }

// The fields of a kill marker: "killed step=S phase=P epoch=E batch=I".
std::optional<std::string_view> marker_field(std::string_view marker, std::string_view name) {
  const std::string key = fmt::format("{}=", name);
  const std::size_t at = marker.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = marker.substr(at + key.size());
  return rest.substr(0, std::min(rest.find_first_of(" \n"), rest.size()));
}

// The lines of one launch's ranks, checked for what a log of this harness must be. Returns the
// lines per rank (a rank without a log has none).
std::vector<std::vector<LoggedBatch>> checked_lines(const Job& job, const Launch& launch, std::size_t j,
                                                    examples::Failures& f) {
  const std::int64_t w = launch.world_size;
  const Position start = position_of(launch.start);
  std::vector<std::vector<LoggedBatch>> lines(static_cast<std::size_t>(w));
  for (std::int64_t r = 0; r < w; ++r) {
    const std::optional<RankLog>& log = launch.logs[static_cast<std::size_t>(r)];
    if (!log) {
      if (launch.completed) f.fail("launch {}: rank {} of a completed launch wrote no log", j, r);
      continue;
    }
    if (log->torn && launch.completed) f.fail("launch {}: rank {}'s log ends in a torn line, yet it completed", j, r);
    if (log->world_size != 0 && (log->rank != r || log->world_size != w))
      f.fail("launch {}: the log of rank {} of {} says rank {} of {}", j, r, w, log->rank, log->world_size);
    const std::vector<LoggedBatch>& batches = log->batches;
    for (std::size_t i = 0; i < batches.size(); ++i) {
      const Position at = batches[i].at;
      // The first batch is the checkpoint's point, or the next epoch's start when the checkpoint
      // closed its epoch; each later one follows the one before it.
      const bool follows = i == 0 ? at == start || (launch.start && at == Position{start.epoch + 1, 0})
                                  : at == Position{batches[i - 1].at.epoch, batches[i - 1].at.index + 1} ||
                                        at == Position{batches[i - 1].at.epoch + 1, 0};
      if (!follows) {
        f.fail("launch {}: rank {} trained {} {}", j, r, text_of(at),
               i == 0 ? fmt::format("first, but it started from {}", launch.start ? text_of(start) : "the start")
                      : fmt::format("right after {}", text_of(batches[i - 1].at)));
        break;
      }
      if (at.epoch >= job.epochs) {
        f.fail("launch {}: rank {} trained {}, past the job's {} epochs", j, r, text_of(at), job.epochs);
        break;
      }
    }
    lines[static_cast<std::size_t>(r)] = batches;
  }

  // Equal batch counts: every rank at the same point, but for the one step a kill can cut short.
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  std::int64_t most = 0;
  std::uint64_t last_epoch = 0;
  for (const auto& rank : lines) {
    least = std::min(least, std::ssize(rank));
    most = std::max(most, std::ssize(rank));
    if (!rank.empty()) last_epoch = std::max(last_epoch, rank.back().at.epoch);
  }
  if (most - least > (launch.completed ? 0 : 1))
    f.fail("launch {}: its ranks trained between {} and {} batches ({})", j, least, most,
           launch.completed ? "a completed launch's ranks train as many" : "a kill cuts short one step at most");
  for (std::uint64_t e = 0; e < last_epoch + (launch.completed ? 1 : 0); ++e) {
    std::vector<std::int64_t> counts;
    for (const auto& rank : lines)
      counts.push_back(std::ranges::count_if(rank, [e](const LoggedBatch& b) { return b.at.epoch == e; }));
    if (std::ranges::adjacent_find(counts, std::ranges::not_equal_to{}) != counts.end())
      f.fail("launch {}: epoch {} finished with unequal batch counts per rank: {}", j, e, fmt::join(counts, " "));
  }

  // The killed rank died where it was told: its log ends there, and around a save the checkpoint
  // is the one before the save (before-save) or the one it saved (after-save).
  if (launch.killed_rank && launch.kill) {
    const std::string_view marker = launch.kill_marker;
    const auto step_text = marker_field(marker, "step");
    const auto phase_text = marker_field(marker, "phase");
    std::int64_t step = 0;
    Phase phase = Phase::timed;
    try {
      if (!step_text || !phase_text) throw examples::BadArgument("a field is missing");
      step = examples::parse_integer<std::int64_t>("step", *step_text);
      phase = examples::parse_choice("phase", *phase_text, phases);
    } catch (const examples::BadArgument& e) {
      f.fail("launch {}: the kill marker {:?} is not one chaos_rank writes: {}", j, marker, e.what());
      return lines;
    }
    if (*launch.killed_rank != launch.kill->rank || phase != launch.kill->phase)
      f.fail("launch {}: rank {} died in phase {}, the plan was rank {} in {}", j, *launch.killed_rank,
             phase_name(phase), launch.kill->rank, phase_name(launch.kill->phase));
    if (phase != Phase::timed) {
      const auto& mine = lines[static_cast<std::size_t>(*launch.killed_rank)];
      const std::int64_t expected = phase == Phase::before_log ? step : step + 1;
      if (std::ssize(mine) != expected)
        f.fail("launch {}: rank {} died at step {} ({}) with {} batches in its log, not {}", j, *launch.killed_rank,
               step, phase_name(phase), mine.size(), expected);
      else if (saves(phase)) {
        const Position after{mine.back().at.epoch, mine.back().at.index + 1};
        const Position end = position_of(launch.end);
        if (phase == Phase::after_save ? end != after : end >= after)
          f.fail("launch {}: rank 0 died {} the checkpoint of {}, and left the checkpoint {}", j, phase_name(phase),
                 text_of(after), text_of(end));
      }
    }
  }
  return lines;
}

}  // namespace

RoundReport check_round(const Job& job, const std::vector<Launch>& launches, Break broken) {
  RoundReport report;
  examples::Failures& f = report.failures;
  References references(job, f);
  std::map<std::uint64_t, std::vector<Part>> chains;  // epoch -> what each launch committed of it, in order
  std::vector<std::vector<std::vector<LoggedBatch>>> all_lines;

  for (std::size_t j = 0; j < launches.size(); ++j) {
    const Launch& launch = launches[j];
    const bool last = j + 1 == launches.size();
    const Position start = position_of(launch.start);
    const Position end = position_of(launch.end);
    if (last && !launch.completed) f.fail("launch {}: the job's last launch did not complete", j);
    if (launch.end && launch.start ? *launch.end != *launch.start : launch.end.has_value()) {
      if (end <= start)
        f.fail("launch {}: it left the checkpoint {}, not past its start {}", j, text_of(end), text_of(start));
      if (launch.end->world_size() != launch.world_size)
        f.fail("launch {}: on {} ranks it left a checkpoint of world size {}", j, launch.world_size,
               launch.end->world_size());
    } else if (launch.start && !launch.end) {
      f.fail("launch {}: the checkpoint it started from is gone", j);
    }
    std::vector<std::vector<LoggedBatch>> lines = checked_lines(job, launch, j, f);

    // Committed: everything before the checkpoint it left; the completed last launch, everything.
    std::map<std::uint64_t, Part> parts;
    for (std::size_t r = 0; r < lines.size(); ++r) {
      std::int64_t committed = 0;
      for (const LoggedBatch& batch : lines[r]) {
        if (!last && batch.at >= end) break;
        Part& part = parts[batch.at.epoch];
        part.launch = j;
        part.world_size = launch.world_size;
        part.ranks.resize(lines.size());
        part.ranks[r].push_back(batch);
        ++committed;
      }
      // The checkpoint claims every batch before it: each rank must have logged the last one.
      const Position claimed_last{end.epoch, end.index - 1};
      if (!last && end > start &&
          (committed == 0 || lines[r][static_cast<std::size_t>(committed - 1)].at != claimed_last))
        f.fail("launch {}: its checkpoint claims {}, which rank {} never trained (lost)", j, text_of(claimed_last), r);
    }
    // The completed launch's final checkpoint closes the job's last epoch where its logs end.
    if (last && launch.completed && !lines.empty() && !lines.front().empty()) {
      const Position after{lines.front().back().at.epoch, lines.front().back().at.index + 1};
      if (end != after || after.epoch + 1 != job.epochs)
        f.fail("launch {}: the job ended at {} but its last checkpoint is {}", j, text_of(after), text_of(end));
    }
    // A launch that resumed inside an epoch and committed none of it still re-dealt it, when its
    // world size differs: 3 unread batches on 4 ranks are all left out, and the launch goes on to
    // the next epoch (or ends the job) without a batch of this one. That re-deal stands once the
    // launch has completed or checkpointed a later epoch; killed before, the next launch resumes
    // from the same checkpoint and deals again.
    const bool moved_on = (last && launch.completed) || end.epoch > start.epoch;
    if (launch.start && start.index > 0 && moved_on && !parts.contains(start.epoch)) {
      Part& part = parts[start.epoch];
      part.launch = j;
      part.world_size = launch.world_size;
      part.ranks.resize(lines.size());
      part.resumed_at = start.index;
    }
    for (auto& [epoch, part] : parts) chains[epoch].push_back(std::move(part));
    all_lines.push_back(std::move(lines));
  }

  // A deliberately broken history: the last batch each rank committed in the first killed launch
  // that committed any, trained twice (a restart one batch early) or never (one batch late).
  if (broken != Break::none) {
    Part* victim = nullptr;
    for (std::size_t j = 0; j + 1 < launches.size() && victim == nullptr; ++j)
      for (auto& [epoch, parts] : chains)
        for (Part& part : parts)
          if (part.launch == j && launches[j].killed_rank && part.resumed_at < 0)
            victim = &part;  // the last epoch it committed
    if (victim == nullptr) f.fail("--break: no killed launch committed a batch in this round, so nothing breaks");
    else
      for (auto& rank : victim->ranks) {
        if (rank.empty()) continue;
        if (broken == Break::twice) rank.push_back(LoggedBatch(rank.back()));
        else rank.pop_back();
      }
  }

  std::map<std::uint64_t, std::int64_t> plan_world;  // epoch -> the world size its plan was laid out on
  const std::int64_t b = job.batch_size;
  for (std::uint64_t e = 0; e < job.epochs; ++e) {
    const std::vector<Part>& parts = chains[e];
    if (parts.empty()) {
      f.fail("epoch {}: no batch of it was committed (lost)", e);
      continue;
    }
    const std::int64_t w0 = parts.front().world_size;
    plan_world[e] = w0;
    const Reference& ref = references.of(e, w0);
    bool same_world = true;
    Counts committed;
    // The documented re-deal, from the points where the restarts resumed: the old ranks each read
    // `at - dealt_at` batches of the `pool` they were dealt; the rest is dealt evenly among the
    // new ranks, and fewer than their number, left over, are left out.
    std::int64_t pool = ref.total;  // the batches the ranks were last dealt (all ranks)
    std::int64_t dealt_at = 0;      // the epoch's batch index where they were dealt
    std::int64_t left = 0;          // left out by the re-deals so far
    std::int64_t previous = w0;
    std::string story = fmt::format("{} ranks", w0);
    for (const Part& part : parts) {
      std::vector<std::int64_t> counts;
      std::vector<std::int64_t> firsts;
      for (const auto& rank : part.ranks) {
        counts.push_back(std::ssize(rank));
        firsts.push_back(rank.empty() ? -1 : rank.front().at.index);
      }
      if (std::ranges::adjacent_find(counts, std::ranges::not_equal_to{}) != counts.end())
        f.fail("epoch {}: launch {}'s ranks committed unequal batch counts: {}", e, part.launch,
               fmt::join(counts, " "));
      if (std::ranges::adjacent_find(firsts, std::ranges::not_equal_to{}) != firsts.end())
        f.fail("epoch {}: launch {}'s ranks began at different batches: {}", e, part.launch, fmt::join(firsts, " "));
      if (part.world_size != previous) {
        same_world = false;
        if (job.mode != cs::ShardMode::global || job.remainder == cs::Remainder::pad)
          f.fail("epoch {}: restarted from {} to {} ranks, which the library re-deals exactly only in global mode "
                 "with drop or rotate",
                 e, previous, part.world_size);
        const std::int64_t at = firsts.front() >= 0 ? firsts.front() : part.resumed_at;
        const std::int64_t unread = pool - previous * (at - dealt_at);
        const Redeal redeal{.epoch = e,
                            .from = previous,
                            .to = part.world_size,
                            .unread = unread,
                            .left_out = unread % part.world_size};
        left += redeal.left_out;
        pool = unread - redeal.left_out;
        dealt_at = at;
        report.redeals.push_back(redeal);
        story += fmt::format(", at batch {} re-dealt {} unread batches to {} ranks ({} left out)", at, unread,
                             part.world_size, redeal.left_out);
        previous = part.world_size;
      }
      for (const auto& rank : part.ranks)
        for (const LoggedBatch& batch : rank) {
          ++committed[multiset(batch.observations)];
          report.observations += std::ssize(batch.observations);
        }
    }

    // Every committed batch is one of the epoch's, no more often than the epoch has it, and all
    // of them are committed but those the re-deals leave out.
    std::int64_t excess = 0;
    std::int64_t excess_obs = 0;
    std::int64_t deficit = 0;
    std::int64_t deficit_obs = 0;
    for (const auto& [batch, count] : committed) {
      const auto found = ref.counts.find(batch);
      const std::int64_t promised = found == ref.counts.end() ? 0 : found->second;
      excess += std::max<std::int64_t>(0, count - promised);
      excess_obs += std::max<std::int64_t>(0, count - promised) * std::ssize(batch);
    }
    for (const auto& [batch, promised] : ref.counts) {
      const auto found = committed.find(batch);
      const std::int64_t count = found == committed.end() ? 0 : found->second;
      deficit += std::max<std::int64_t>(0, promised - count);
      deficit_obs += std::max<std::int64_t>(0, promised - count) * std::ssize(batch);
    }
    report.repeated += excess_obs;
    report.lost += std::max<std::int64_t>(0, deficit_obs - left * b);
    report.left_out_batches += left;
    if (excess > 0)
      f.fail("epoch {}: {} committed batches ({} observations) are not the epoch's or come more often than the "
             "uninterrupted epoch has them (repeated)",
             e, excess, excess_obs);
    if (deficit > left)
      f.fail("epoch {}: {} of the epoch's {} batches ({} observations) were never committed, {} left out as "
             "documented (lost)",
             e, deficit - left, ref.total, deficit_obs - left * b, left);
    else if (deficit < left)
      f.fail("epoch {}: the re-deals left out {} batches, the library documents {}", e, deficit, left);

    // Without a change of world size the job resumed exactly: each rank's batches equal the
    // uninterrupted rank's, batch for batch, in order.
    if (same_world) {
      for (std::size_t r = 0; r < ref.ranks.size(); ++r) {
        std::vector<const Batch*> trained;
        for (const Part& part : parts)
          for (const LoggedBatch& batch : part.ranks[r]) trained.push_back(&batch.observations);
        const std::vector<Batch>& expected = ref.ranks[r];
        std::size_t i = 0;
        while (i < trained.size() && i < expected.size() && *trained[i] == expected[i]) ++i;
        if (i < trained.size() || i < expected.size())
          f.fail("epoch {}: rank {} differs from the uninterrupted run at batch {} of {} (it trained {})", e, r, i,
                 expected.size(), trained.size());
      }
      story += parts.size() > 1 ? fmt::format(", {} launches, resumed exactly", parts.size()) : ", one launch";
    }
    report.epochs.push_back(fmt::format("epoch {}: {}", e, story));
  }

  // What a killed launch trained after its last checkpoint is trained again by the next launch:
  // on the same world size the very same batches at the same points; after an elastic restart,
  // batches of the epoch that were not committed before that checkpoint.
  for (std::size_t j = 0; j + 1 < launches.size(); ++j) {
    const Launch& launch = launches[j];
    if (!launch.killed_rank) continue;
    const Launch& next = launches[j + 1];
    const Position end = position_of(launch.end);
    for (std::size_t r = 0; r < all_lines[j].size(); ++r)
      for (const LoggedBatch& batch : all_lines[j][r]) {
        if (batch.at < end) continue;
        if (next.world_size == launch.world_size) {
          const std::vector<LoggedBatch>& again = all_lines[j + 1][r];
          const auto found = std::ranges::find(again, batch.at, &LoggedBatch::at);
          if (found == again.end()) {
            if (next.completed) f.fail("launch {}: rank {} never trained {} again (lost)", j + 1, r, text_of(batch.at));
          } else if (found->observations != batch.observations) {
            f.fail("launch {}: rank {} trained other observations at {} than the killed launch {} did", j + 1, r,
                   text_of(batch.at), j);
          } else {
            ++report.replayed_batches;
          }
          continue;
        }
        const std::uint64_t e = batch.at.epoch;
        const bool resumed_epoch = launch.start && e == launch.start->epoch();
        const std::int64_t world = resumed_epoch && plan_world.contains(e) ? plan_world[e] : launch.world_size;
        const Reference& ref = references.of(e, world);
        const Batch key = multiset(batch.observations);
        const auto found = ref.counts.find(key);
        if (found == ref.counts.end()) {
          f.fail("launch {}: rank {} trained at {} a batch that is not in epoch {}'s plan on {} ranks", j, r,
                 text_of(batch.at), e, world);
          continue;
        }
        if (plan_world.contains(e) && plan_world[e] == world) {
          std::int64_t before = 0;
          for (const Part& part : chains[e])
            if (part.launch <= j)
              for (const auto& rank : part.ranks)
                before +=
                    std::ranges::count(rank, key, [](const LoggedBatch& lb) { return multiset(lb.observations); });
          if (before >= found->second)
            f.fail("launch {}: rank {} trained at {}, after its last checkpoint, a batch already committed", j, r,
                   text_of(batch.at));
        }
        ++report.replayed_batches;
      }
  }
  return report;
}

}  // namespace chaos
