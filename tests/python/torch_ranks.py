"""One process of a torchrun job (test_torch.py launches it): a DistributedSampler with
dist_info="torch" under a BatchSampler, in each shard mode, and in global mode over a base made
without rng. Every process all_gathers its rank,
batch count, len() and observation indices, checks the shards are disjoint with equal counts
(exiting non-zero if not), and rank 0 writes what all reported to RESULT as JSON (a file, not
stdout, which torchrun's redirects may prefix or drop).

    python -m torch.distributed.run --nproc_per_node 2 tests/python/torch_ranks.py N_OBS RESULT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch.distributed as dist

import chunksampler
from chunksampler.torch import BatchSampler


def main() -> None:
    n_obs = int(sys.argv[1])
    dist.init_process_group("gloo")
    report = {"world_size": dist.get_world_size()}
    # "global-unseeded": a base made without rng, whose seed each process draws from fresh entropy;
    # the DistributedSampler must still deal every rank its share of one permutation.
    for name in ("contiguous", "global", "global-unseeded"):
        mode = name.split("-")[0]
        rng = None if name.endswith("unseeded") else np.random.default_rng(7)
        base = chunksampler.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=rng)
        sampler = chunksampler.DistributedSampler(base, dist_info="torch", mode=mode)
        batches = BatchSampler(sampler, n_obs)
        expected = len(batches)
        mine = list(batches)
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, {"rank": sampler.rank, "len": expected, "batches": mine, "seed": sampler.seed})
        # The job's own check, so a failure shows in the exit code too.
        counts = {len(g["batches"]) for g in gathered}
        seen = [i for g in gathered for batch in g["batches"] for i in batch]
        ranks = [g["rank"] for g in gathered]
        if len(counts) != 1 or len(seen) != len(set(seen)) or ranks != list(range(len(gathered))):
            raise SystemExit(f"{name}: shards overlap, batch counts differ or ranks are wrong: {counts}, {ranks}")
        report[name] = gathered
    if dist.get_rank() == 0:
        Path(sys.argv[2]).write_text(json.dumps(report))
    dist.barrier()  # every rank done before any tears down (as examples/python/train.py)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
