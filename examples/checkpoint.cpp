// SPDX-License-Identifier: MIT
// checkpoint: exact resume and elastic restarts, the way a training job uses them.
//
// A 4-rank job in global shard mode saves the sampler's state to a checkpoint file every few
// batches (cs::save_state: atomic, with a checksum) and is stopped in the middle of a request. It is restarted from the
// file twice: on 4 ranks, where every rank's remaining batches must equal the uninterrupted run's, and on 3 ranks,
// where the rest of the epoch must be read exactly once across the old and the new ranks.
//
//   checkpoint            # prints what it checked; exit status 1 if anything differs

#include "common/training.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cs = chunksampler;

namespace {

constexpr std::int64_t n_obs = 10'000;
using Batch = std::vector<std::int64_t>;  // the observations a batch trains on

const cs::RandomSampler base({.chunk_size = 16, .preload_nchunks = 8, .batch_size = 32, .seed = 3});
const cs::DistributedOptions options{.mode = cs::ShardMode::global};

enum class Checkpoints { none, save, restore };

// One rank's training loop. With `save` it writes its state to `state_file` every 5 batches
// (rank 0 only: all ranks are at the same point) and stops after `stop_at` batches of the epoch,
// as if the job were killed; with `restore` it continues from that file. The ranks run one after
// the other here, so a restarted rank does not save again (its file is the others' restart point).
// Returns the batches it trained on.
std::vector<Batch> train(std::int64_t rank, std::int64_t world_size, const std::string& state_file,
                         Checkpoints checkpoints, std::int64_t stop_at) {
  cs::DistributedSampler sampler(base, cs::DistInfo{.rank = rank, .world_size = world_size}, options);
  std::int64_t done = 0;
  if (checkpoints == Checkpoints::restore) done = cs::load_state(state_file, sampler).batches_done();
  std::vector<Batch> trained;
  std::vector<std::int64_t> rows;  // the buffer a loader would fill: here just the observation ids
  for (const cs::LoadRequest& request : sampler.sample(n_obs)) {
    examples::fill_buffer(request.chunks, rows);
    for (auto batch : request.splits) {
      if (done == stop_at) return trained;
      trained.push_back(examples::batch_rows(rows, batch));
      if (++done % 5 == 0 && rank == 0 && checkpoints == Checkpoints::save)
        cs::save_state(state_file, sampler.state(done));
    }
  }
  return trained;
}

}  // namespace

int main() {
  const std::string state_file = (std::filesystem::temp_directory_path() / "chunksampler-checkpoint.state").string();
  const std::int64_t never = -1;
  const std::int64_t stop_at = 37;  // 37 = 9 requests of 4 batches, and 1 batch into the 10th
  bool ok = true;

  std::filesystem::remove(state_file);
  std::vector<std::vector<Batch>> uninterrupted;
  for (std::int64_t r = 0; r < 4; ++r) uninterrupted.push_back(train(r, 4, state_file, Checkpoints::none, never));

  std::vector<std::vector<Batch>> before;
  for (std::int64_t r = 0; r < 4; ++r) before.push_back(train(r, 4, state_file, Checkpoints::save, stop_at));
  const cs::SamplerState saved = cs::load_state(state_file);
  fmt::print("stopped 4 ranks after {} batches; saved state: {}\n", stop_at, saved.to_string());

  const std::size_t resumed_at = 35;  // the last state saved before the stop
  for (std::size_t r = 0; r < 4; ++r) {
    const std::vector<Batch> rest = train(static_cast<std::int64_t>(r), 4, state_file, Checkpoints::restore, never);
    const std::vector<Batch> expected(uninterrupted[r].begin() + resumed_at, uninterrupted[r].end());
    const bool same = rest == expected;
    ok = ok && same;
    fmt::print("restart on 4 ranks, rank {}: {} batches from batch {}, {} the uninterrupted run's\n", r, rest.size(),
               resumed_at, same ? "equal to" : "DIFFERENT from");
  }

  std::map<std::int64_t, int> reads;
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t b = 0; b < resumed_at; ++b)
      for (const std::int64_t obs : before[r][b]) ++reads[obs];
  std::size_t new_batches = 0;
  for (std::int64_t r = 0; r < 3; ++r) {
    const std::vector<Batch> rest = train(r, 3, state_file, Checkpoints::restore, never);
    new_batches = rest.size();
    for (const Batch& b : rest)
      for (const std::int64_t obs : b) ++reads[obs];
  }
  std::int64_t twice = 0;
  for (const auto& [obs, count] : reads) twice += count > 1 ? 1 : 0;
  std::int64_t expected_reads = 0;
  for (const auto& rank : uninterrupted) expected_reads += static_cast<std::int64_t>(rank.size()) * base.batch_size();
  const auto missing = expected_reads - static_cast<std::int64_t>(reads.size());
  // Re-dealing the unread batches over 3 ranks leaves out fewer than 3 of them (drop policy).
  const bool elastic_ok = twice == 0 && missing >= 0 && missing < 3 * base.batch_size();
  ok = ok && elastic_ok;
  fmt::print("restart on 3 ranks: {} batches each; epoch read {} observations once, {} twice, {} left out "
             "(fewer than 3 batches: {})\n",
             new_batches, reads.size(), twice, missing, missing < 3 * base.batch_size() ? "yes" : "NO");
  std::filesystem::remove(state_file);
  fmt::print("{}\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
