"""The check every integration makes on the ranks of a torch.distributed job before serving a
sampler (chunksampler._ranks.check_ranks, used by ChunkDataLoader, ChunkDataModule and scvi's
AnnbatchDataModule): each rank gathers what every rank holds and decides alike. Here the gather is
played by hand for two ranks; the Lightning and scvi jobs run it across real processes."""

from __future__ import annotations

import numpy as np
import pytest

import chunksampler as cs
from chunksampler._ranks import _what, check_ranks

N_OBS = 1000


def sharded(rank: int, world_size: int = 2, seed: int | None = 7, **kwargs) -> cs.DistributedSampler:
    rng = None if seed is None else np.random.default_rng(seed)
    base = cs.RandomSampler(chunk_size=kwargs.pop("chunk_size", 10), preload_nchunks=2, batch_size=10, rng=rng)
    return cs.DistributedSampler(base, dist_info=lambda: (rank, world_size), **kwargs)


def outcome(samplers: list, equal_batches: bool = True) -> list[str]:
    """What each rank's check_ranks does when rank r holds samplers[r]: "" or the error's message."""
    held = [_what(s, N_OBS, r) for r, s in enumerate(samplers)]

    def gather(into: list, mine: dict) -> None:
        into[:] = held

    said = []
    for rank, sampler in enumerate(samplers):
        try:
            check_ranks("Owner", sampler, N_OBS, job=(rank, len(samplers)), equal_batches=equal_batches, gather=gather)
            said.append("")
        except cs.ConfigError as error:
            said.append(str(error))
    return said


def test_ranks_holding_one_sampler_pass():
    assert outcome([sharded(0), sharded(1)]) == ["", ""]
    assert outcome([sharded(0, seed=None), sharded(1, seed=None)]) == ["", ""]  # the shared seed 0
    assert outcome([sharded(0, mode="global"), sharded(1, mode="global")]) == ["", ""]


def test_ranks_with_other_seeds_all_stop_naming_the_seeds_and_the_fix():
    said = outcome([sharded(0, seed=1, mode="global"), sharded(1, seed=2, mode="global")])
    seeds = [sharded(0, seed=1).seed, sharded(0, seed=2).seed]
    assert said[0] == said[1]
    assert f"the seeds are {seeds[0]} on rank 0; {seeds[1]} on rank 1" in said[0]
    assert "rng=np.random.default_rng(SEED), the same SEED on every rank" in said[0]


def test_ranks_with_other_settings_all_stop():
    said = outcome([sharded(0), sharded(1, chunk_size=20)])
    assert said[0] == said[1] and "every rank must build the same sampler, but their settings differ" in said[0]
    assert "chunk_size=10" in said[0] and "chunk_size=20" in said[0]


def test_a_plain_sampler_or_a_wrong_rank_stops_every_rank():
    plain = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=np.random.default_rng(7))
    said = outcome([sharded(0), plain])
    assert said[0] == said[1] and "rank 1: a RandomSampler, not a DistributedSampler" in said[0]
    said = outcome([sharded(0), sharded(0)])
    assert said[0] == said[1] and "rank 1: dist_info gave rank 0 of world_size 2" in said[0]


def test_unequal_batch_counts_stop_training_and_pass_validation():
    # 1,001 rows in chunks of 10 over 2 ranks in global mode without equal batches: 51 and 50 batches
    n_obs = N_OBS + 1
    samplers = [sharded(r, mode="global", enforce_equal_batches=False) for r in (0, 1)]
    assert [s.n_batches(n_obs) for s in samplers] == [51, 50]
    held = [_what(s, n_obs, r) for r, s in enumerate(samplers)]

    def gather(into: list, mine: dict) -> None:
        into[:] = held

    for rank in (0, 1):
        with pytest.raises(cs.ConfigError, match=r"must have as many batches .* got \[51, 50\] batches"):
            check_ranks("Owner", samplers[rank], n_obs, job=(rank, 2), equal_batches=True, gather=gather)
        check_ranks("Owner", samplers[rank], n_obs, job=(rank, 2), equal_batches=False, gather=gather)
