// SPDX-License-Identifier: MIT
// What the planner asks of the library: every rank's DistributedSampler in every epoch. The
// planner sees the samplers through this interface, so that only SamplersOf depends on the base
// sampler's type and the rest of the planner is compiled once.

#pragma once

#include "options.hpp"
#include "walk.hpp"

#include <chunksampler.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace shard_plan {

class Library {
 public:
  // A rank's shard (or global window) and its batches in one epoch.
  struct Share {
    cs::Ranges shard;
    std::int64_t n_batches = 0;
  };

  Library() = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  virtual ~Library() = default;

  [[nodiscard]] virtual std::string_view sampler_name() const = 0;
  [[nodiscard]] virtual bool shuffled() const = 0;
  [[nodiscard]] virtual std::int64_t n_batches(std::int64_t rank, std::uint64_t epoch) const = 0;
  [[nodiscard]] virtual cs::Ranges shard(std::int64_t rank, std::uint64_t epoch) const = 0;
  [[nodiscard]] virtual Share share(std::int64_t rank, std::uint64_t epoch) const = 0;
  // Walks the rank's epoch with walk_rank().
  [[nodiscard]] virtual WalkedRank walk(std::int64_t rank, const WalkSetup& setup, std::span<const cs::Slice> bounds,
                                        const WalkSinks& sinks) const = 0;
};

// The samplers of a job whose ranks wrap `Base` in a DistributedSampler.
template <class Base>
class SamplersOf final : public Library {
 public:
  SamplersOf(const Options& o, Base base) : o_(o), base_(std::move(base)) {}

  [[nodiscard]] std::string_view sampler_name() const override { return Base::name; }
  [[nodiscard]] bool shuffled() const override { return base_.shuffle(); }
  [[nodiscard]] std::int64_t n_batches(std::int64_t rank, std::uint64_t epoch) const override {
    return rank_sampler(rank, epoch).n_batches(o_.n_obs);
  }
  [[nodiscard]] cs::Ranges shard(std::int64_t rank, std::uint64_t epoch) const override {
    return rank_sampler(rank, epoch).shard(o_.n_obs, epoch);
  }
  [[nodiscard]] Share share(std::int64_t rank, std::uint64_t epoch) const override {
    const Dist dist = rank_sampler(rank, epoch);
    return {dist.shard(o_.n_obs, epoch), dist.n_batches(o_.n_obs)};
  }
  [[nodiscard]] WalkedRank walk(std::int64_t rank, const WalkSetup& setup, std::span<const cs::Slice> bounds,
                                const WalkSinks& sinks) const override {
    Dist dist = rank_sampler(rank, setup.epoch);
    const std::int64_t planned = dist.n_batches(o_.n_obs);
    RankWalk w = walk_rank(dist, setup, bounds, sinks);
    return {std::move(w), planned, dist.epoch()};
  }

 private:
  using Dist = cs::DistributedSampler<Base>;

  [[nodiscard]] Dist rank_sampler(std::int64_t rank, std::uint64_t epoch) const {
    Dist dist(base_, cs::DistInfo{.rank = rank, .world_size = o_.world_size},
              {.enforce_equal_batches = o_.enforce, .mode = o_.mode, .remainder = o_.remainder});
    dist.set_epoch(epoch);
    return dist;
  }

  const Options& o_;
  Base base_;
};

}  // namespace shard_plan
