// SPDX-License-Identifier: MIT
// The check of one round of the chaos test: the launches of one job, each killed or completed,
// against what an uninterrupted job reads. Nothing here takes a run's word for what it did: a
// launch's committed batches are those its logs hold before the checkpoint it left, and what
// they must be is computed anew, in this process, by iterating the sampler per rank.

#pragma once

#include "chaos/job.hpp"
#include "common/failures.hpp"

#include <chunksampler.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chaos {

/// One launch of the job, as the driver saw it.
struct Launch {
  std::int64_t world_size = 0;
  std::optional<Kill> kill;                  ///< the death planned for it
  std::optional<cs::SamplerState> start;     ///< the checkpoint it started from (none: the job's start)
  std::optional<cs::SamplerState> end;       ///< the checkpoint once it ended
  std::vector<std::optional<RankLog>> logs;  ///< by rank; nullopt: the rank wrote none
  std::optional<std::int64_t> killed_rank;   ///< the rank whose kill marker is there
  std::string kill_marker;                   ///< what that rank wrote before it died
  bool completed = false;                    ///< mpirun exited with status 0
};

/// A deliberately broken history, to show that the check fails on one (ctest chaos.catches_*).
enum class Break {
  none,
  twice,  ///< a killed launch's last committed batch is trained again on every rank (a restart one batch early)
  lose,   ///< a killed launch's last committed batch is never trained on any rank (a restart one batch late)
};

/// An elastic restart the check saw inside an epoch.
struct Redeal {
  std::uint64_t epoch = 0;
  std::int64_t from = 0;      ///< the world size before
  std::int64_t to = 0;        ///< after
  std::int64_t unread = 0;    ///< the epoch's batches no rank had trained, re-dealt among `to` ranks
  std::int64_t left_out = 0;  ///< what the library documents it leaves out: unread mod `to`
};

/// What one round's check found.
struct RoundReport {
  examples::Failures failures{12};
  std::int64_t observations = 0;      ///< committed observations checked against the reference
  std::int64_t lost = 0;              ///< promised observations never committed (beyond documented re-deals)
  std::int64_t repeated = 0;          ///< observations committed more often than promised
  std::int64_t left_out_batches = 0;  ///< left out by elastic re-deals, as documented
  std::int64_t replayed_batches = 0;  ///< trained after a kill's last checkpoint, then trained again
  std::vector<Redeal> redeals;        ///< the elastic restarts inside epochs
  std::vector<std::string> epochs;    ///< one line per epoch: how it was trained
};

/// Checks the launches of one round of `job` (the last one completed), after applying `broken`.
RoundReport check_round(const Job& job, const std::vector<Launch>& launches, Break broken);

}  // namespace chaos
