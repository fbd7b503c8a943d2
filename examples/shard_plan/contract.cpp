// SPDX-License-Identifier: MIT

#include "contract.hpp"

#include "common/arith.hpp"

#include <algorithm>
#include <span>

namespace shard_plan {

using examples::ceil_div;
using examples::round_down;

namespace {

// The ranges the job samples: the mask's, or all of [0, n_obs).
Mask sampled(const Options& o) {
  if (!o.mask) {
    const cs::Slice all{0, o.n_obs};
    return Mask(std::span(&all, 1));
  }
  return Mask(o.mask->resolve(o.n_obs).slices());
}

}  // namespace

Contract::Contract(const Options& o) : o_(o), mask_(sampled(o)), size_(mask_.count()), world_(o.world_size) {}

JobEpoch Contract::epoch(std::uint64_t e) const {
  JobEpoch job;
  job.epoch = e;
  const bool odd = e % 2 == 1;
  if (o_.global()) share_global(job, odd);
  else share_contiguous(job, odd);
  job.repeated = job.reads - job.distinct;
  job.trimmed = job.window.size() - job.distinct;
  job.left_out = mask_.rows(0, job.window.start);
  for (const cs::Slice& s : mask_.rows(job.window.stop, size_ - job.window.stop)) job.left_out.push_back(s);
  return job;
}

void Contract::share_global(JobEpoch& job, bool odd) const {
  const std::int64_t b = o_.batch_size;
  // One plan over the window; with equal batches it holds a multiple of world_size * batch_size.
  const std::int64_t unit = o_.enforce ? world_ * b : world_;
  job.window = {0, size_};
  job.budget = size_;
  if (o_.enforce && o_.pad()) {
    job.budget = ceil_div(size_, unit) * unit;
  } else if (o_.enforce) {
    const std::int64_t kept = round_down(size_, unit);
    const std::int64_t offset = o_.rotate() && odd ? size_ - kept : 0;
    job.window = {offset, offset + kept};
    job.budget = kept;
  }
  job.used = o_.drop_last ? round_down(job.budget, b) : job.budget;
  job.plan_batches = ceil_div(job.used, b);
  job.reads = job.used;
  job.distinct = std::min(job.used, job.window.size());
}

void Contract::share_contiguous(JobEpoch& job, bool odd) const {
  const std::int64_t b = o_.batch_size;
  const std::int64_t unit = o_.enforce ? b : 1;
  if (o_.pad()) {
    // Balanced shards, every rank padded to the largest's batches.
    job.window = {0, size_};
    job.budget = ceil_div(ceil_div(size_, world_), unit) * unit;
  } else {
    job.per_rank = round_down(size_ / world_, unit);
    const std::int64_t offset = o_.rotate() && odd ? size_ - world_ * job.per_rank : 0;
    job.window = {offset, offset + world_ * job.per_rank};
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

RankShare Contract::rank(const JobEpoch& job, std::int64_t r) const {
  if (!o_.global()) return contiguous_rank(job, r);
  RankShare share;
  const std::int64_t b = o_.batch_size;
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
  share.shard = mask_.rows(job.window);
  share.n_batches = share.block.size();
  const std::int64_t last_of_plan = job.used - (n - 1) * b;
  const bool holds_last = share.block.size() > 0 && share.block.end == n;
  share.reads = share.block.size() * b - (holds_last ? b - last_of_plan : 0);
  share.last_batch = share.block.size() == 0 ? 0 : holds_last ? last_of_plan : b;
  return share;
}

RankShare Contract::contiguous_rank(const JobEpoch& job, std::int64_t r) const {
  RankShare share;
  const std::int64_t b = o_.batch_size;
  cs::Slice shard;  // positions of the union
  if (o_.pad()) {
    const std::int64_t base = size_ / world_;
    const std::int64_t extra = size_ % world_;
    const std::int64_t start = r * base + std::min(r, extra);
    shard = {start, start + base + (r < extra ? 1 : 0)};
  } else {
    shard = {job.window.start + r * job.per_rank, job.window.start + (r + 1) * job.per_rank};
  }
  share.shard = mask_.rows(shard);
  share.n_batches = ceil_div(job.used, b);
  share.block = {0, share.n_batches};
  share.reads = job.used;
  share.last_batch = job.used - (share.n_batches - 1) * b;
  const std::int64_t distinct = std::min(job.used, shard.size());
  share.repeated = job.used - distinct;
  share.left_out = shard.size() - distinct;
  return share;
}

}  // namespace shard_plan
