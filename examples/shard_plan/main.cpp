// SPDX-License-Identifier: MIT
// shard_plan: plans how DistributedSampler splits a dataset over the ranks of a data-parallel
// job, in either shard mode and under any remainder policy, then proves the plan by walking every
// rank's epochs, and can draw it.
//
// The mask may be several ranges (--mask 0:1000,5000:8000), or a split chosen by categorical
// columns from a codes file (--codes FILE --select KEY, through cs::split_mask). For each rank it
// prints its shard (contiguous mode: its ranges) or its block of the shared plan (global mode),
// its batches per epoch, the observations it reads, and those left out or repeated, per epoch
// where they change, and the chunks it reads: grid chunks, the pieces requests list them in, and
// how many are off the storage grid (none, or the check fails). The check walks each rank's
// epochs with cs::DistributedSampler (a bounded prefix of them when epochs are too large to walk
// quickly), compares them with the contract computed here independently, checks the policy's
// promise, and prints PASS or FAIL.
// --svg FILE draws the first epochs: one row per (epoch, rank) over the observation axis.
//
//   shard_plan                       # annbatch's 2-GPU tutorial: 20000 obs, 2 ranks => 39 batches each
//   shard_plan --n-obs 107 --world-size 3 --chunk-size 10 --preload 1 --batch-size 10 --no-enforce
//   shard_plan --mode global --remainder rotate --epochs 2 --svg plan.svg
//   shard_plan --n-obs 30000 --mask 0:1000,5000:8000,20000:   # a mask of several ranges
//   shard_plan --codes obs.csv --select train,K562 --select train,HepG2 --max-short-share 0.1
//   shard_plan --help
//
// Exit status: 0 when every invariant holds, 1 when one fails, 2 on a bad argument.
//
// The files, by role: options (the command line), codes (--codes: the split's mask), mask (the
// sampled ranges and positions along their union), contract (the plan computed independently of
// the library), library (the samplers the plan is checked against), walk (a rank's epoch, as a
// loader reads it), planner (the checks, in order), report (the text), drawing and svg (--svg).

#include "codes.hpp"
#include "library.hpp"
#include "options.hpp"
#include "planner.hpp"

#include "common/parse.hpp"

#include <chunksampler.hpp>

#include <exception>
#include <optional>
#include <stdexcept>

namespace cs = chunksampler;

int main(int argc, char** argv) {
  using namespace shard_plan;
  try {
    const std::optional<Options> parsed = parse_options(argc, argv);
    if (!parsed) return 0;
    const Options o = parsed->codes ? with_split(*parsed) : *parsed;
    if (o.sequential)
      return plan(o, SamplersOf(o, cs::SequentialSampler({.chunk_size = o.chunk_size,
                                                          .preload_nchunks = o.preload,
                                                          .batch_size = o.batch_size,
                                                          .drop_last = o.drop_last,
                                                          .mask = o.mask})));
    return plan(o, SamplersOf(o, cs::RandomSampler({.chunk_size = o.chunk_size,
                                                    .preload_nchunks = o.preload,
                                                    .batch_size = o.batch_size,
                                                    .drop_last = o.drop_last,
                                                    .mask = o.mask,
                                                    .seed = o.seed})));
  } catch (const std::invalid_argument& error) {
    examples::print_error("shard_plan", error.what());
    return 2;
  } catch (const std::exception& error) {
    examples::print_error("shard_plan", error.what());
    return 1;
  }
}
