// SPDX-License-Identifier: MIT

#include "drawing.hpp"

#include "svg.hpp"
#include "text.hpp"

#include "common/parse.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace shard_plan {

namespace {

// What the policy does, in one line, for the picture's caption.
std::string policy_text(const Job& job) {
  const Options& o = job.o;
  const JobEpoch& even = job.even;
  const std::int64_t left = job.mask.count() - even.window.size();
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
                       left, slices_summary(even.left_out, 2), slices_summary(job.odd.left_out, 2));
  return fmt::format("{} left out, the same every epoch: {}", left, slices_summary(even.left_out));
}

// Epochs too large to walk: the rows the walk could not fill, from the contract's shards.
void fill_from_contract(const Job& job, Picture& pic, std::size_t i) {
  const std::uint64_t e = pic.epochs[i];
  for (const cs::Slice& s : job.of(e).left_out) pic.bins.add(pic.left_out[i], s);
  if (job.o.global()) return;
  for (const std::int64_t r : pic.ranks) {
    Row* row = pic.row(e, r);
    for (const cs::Slice& piece : job.contract.rank(job.of(e), r).shard) {
      pic.bins.add(row->loaded, piece);
      pic.bins.add(row->read, piece);
    }
  }
}

std::string epoch_header(const Job& job, const WalkExtent& x, const Walked& walked, std::uint64_t e) {
  const JobEpoch& epoch = job.of(e);
  const Gaps* seen = x.whole ? &walked.left_seen[static_cast<std::size_t>(e)] : nullptr;
  const std::int64_t left = seen ? seen->total : job.policy_left + epoch.trimmed;
  std::string header = left == 0 ? std::string("nothing left out")
                       : seen    ? fmt::format("left out {}: {}", left, slices_text(seen->first, seen->runs))
                                 : fmt::format("left out {}", left);
  if (epoch.repeated > 0) header += fmt::format("  ·  {} positions repeat a row", epoch.repeated);
  return header;
}

// The note right of a rank's row: what it read.
std::string row_note(const Job& job, const Walked& walked, std::uint64_t e, std::int64_t r) {
  const Options& o = job.o;
  const RankShare want = job.contract.rank(job.of(e), r);
  const RankWalk* w = walked.find(e, r);
  if (o.global() && w != nullptr && !w->whole)
    return fmt::format("first {} read, {}", short_number(w->reads), counted(w->chunks, "chunk", "chunks"));
  const bool measured = w != nullptr && w->whole;
  const std::int64_t read = measured ? w->reads : want.reads;
  const std::int64_t repeated = measured ? w->repeated : want.repeated;
  std::string note = o.global() && measured
                         ? fmt::format("{} read, {}", short_number(read), counted(w->chunks, "chunk", "chunks"))
                     : o.global() ? fmt::format("{} read", short_number(read))
                                  : fmt::format("{} read of {}", short_number(read), short_ranges(want.shard));
  if (repeated > 0) note += fmt::format(", {} repeated", short_number(repeated));
  return note;
}

std::vector<std::string> caption(const Job& job, const WalkExtent& x, const Picture& pic) {
  const Options& o = job.o;
  const bool shuffled = job.library.shuffled();
  std::vector<std::string> lines;
  lines.push_back(fmt::format("{} mode, remainder {}: {} over {} ranks{}", examples::mode_name(o.mode),
                              examples::remainder_name(o.remainder), job.library.sampler_name(), job.world,
                              o.enforce ? "" : " (enforce_equal_batches off)"));
  const std::string drawn =
      pic.epochs.size() == 1 ? std::string("epoch 0") : fmt::format("epochs 0-{}", pic.epochs.back());
  lines.push_back(fmt::format("n_obs {}{}  ·  chunk_size {}  ·  preload_nchunks {}  ·  batch_size {}{}  ·  seed {}"
                              "  ·  {}{}",
                              o.n_obs,
                              o.mask ? fmt::format("  ·  mask: {}", short_ranges(job.mask.ranges())) : std::string{},
                              o.chunk_size, o.preload, job.b, o.drop_last ? "  ·  drop_last" : "", o.seed, drawn,
                              std::ssize(pic.epochs) < o.epochs ? fmt::format(" of {}", o.epochs) : std::string{}));
  if (o.split)
    lines.push_back(fmt::format("split: {} selects {} by {}  ·  {} runs, {} rows, short_share {:.4g}", *o.codes,
                                keys_text(o.select), fmt::join(o.split_columns, ", "), o.split->runs, o.split->rows,
                                o.split->short_share));
  lines.push_back(
      o.global() ? fmt::format("one {} plan per epoch, its batches dealt to the ranks in contiguous "
                               "blocks",
                               shuffled ? "shuffled" : "sequential")
                 : fmt::format("each rank reads its own contiguous shard{}", shuffled ? ", shuffled" : ", in order"));
  lines.push_back(policy_text(job));
  if (std::ssize(pic.ranks) < job.world)
    lines.push_back(fmt::format("showing ranks {}-{} and {}-{} of {}", pic.ranks.front(),
                                pic.ranks[pic.ranks.size() / 2 - 1], pic.ranks[pic.ranks.size() / 2], pic.ranks.back(),
                                job.world));
  if (!x.whole)
    lines.push_back(o.global() ? fmt::format("epochs too large to walk: each row shows only the chunks of the first "
                                             "{} the rank reads",
                                             observations(x.prefix.value_or(0)))
                               : "epochs too large to walk: rows show the shards as the contract computes them");
  return lines;
}

}  // namespace

Picture make_picture(const Job& job) {
  Picture pic;
  // From the mask's first row to its last, half a pixel a bin: exact for up to 1600 rows.
  pic.bins = Bins::over(job.mask.hull(), 2 * axis_pixels);
  for (std::uint64_t e = 0; e < std::min<std::uint64_t>(job.epochs, max_drawn_epochs); ++e) pic.epochs.push_back(e);
  for (std::int64_t r = 0; r < job.world; ++r)
    if (listed_rank(r, job.world, max_drawn_ranks, max_drawn_ranks / 2)) pic.ranks.push_back(r);
  const std::vector<std::int64_t> empty(static_cast<std::size_t>(pic.bins.count));
  pic.rows.assign(pic.epochs.size() * pic.ranks.size(), Row{empty, empty, empty, {}});
  pic.masked = empty;
  for (const cs::Slice& range : job.mask.ranges()) pic.bins.add(pic.masked, range);
  pic.left_out.assign(pic.epochs.size(), empty);
  pic.headers.resize(pic.epochs.size());
  return pic;
}

void draw_picture(const Job& job, const WalkExtent& extent, const Walked& walked, Picture& pic) {
  for (std::size_t i = 0; i < pic.epochs.size(); ++i) {
    const std::uint64_t e = pic.epochs[i];
    if (!extent.whole) fill_from_contract(job, pic, i);
    pic.headers[i] = epoch_header(job, extent, walked, e);
    for (const std::int64_t r : pic.ranks) pic.row(e, r)->note = row_note(job, walked, e, r);
  }
  write_svg(*job.o.svg, pic, caption(job, extent, pic));
}

}  // namespace shard_plan
