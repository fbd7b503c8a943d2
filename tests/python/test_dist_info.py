"""DistributedSampler's dist_info, set_epoch and workers."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import epoch_batches, rng

import chunksampler as cs


def test_dist_info_callable_is_called_once():
    calls = []

    def dist_info():
        calls.append(1)
        return (1, 2)

    base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=rng())
    sampler = cs.DistributedSampler(base, dist_info=dist_info)
    assert (sampler.rank, sampler.world_size) == (1, 2)
    sampler.n_batches(1000)
    list(sampler.sample(1000))
    list(sampler.sample(1000))
    assert len(calls) == 1


def test_torch_backend_needs_an_initialized_process_group():
    torch_distributed = pytest.importorskip("torch.distributed")
    assert not torch_distributed.is_initialized()
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5)
    # The environment is at fault, as with dist_info="env" outside a launcher: still a RuntimeError.
    with pytest.raises(cs.DistEnvironmentError, match="torch.distributed is not initialized"):
        cs.DistributedSampler(base, dist_info="torch")


def _accelerate(monkeypatch, state: dict | None, env: dict[str, str], trainer: bool = False) -> str | None:
    """What accelerate_hint says with Accelerate's state ``state`` (None: accelerate never imported)
    and the launcher's variables ``env``, without Accelerate itself."""
    from types import SimpleNamespace

    from chunksampler._dist import accelerate_hint

    for name in ("ACCELERATE_MIXED_PRECISION", "MASTER_ADDR", "MASTER_PORT", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(sys.modules, "accelerate.state", raising=False)
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    if state is not None:
        state_module = SimpleNamespace(PartialState=SimpleNamespace(_shared_state=state))
        monkeypatch.setitem(sys.modules, "accelerate.state", state_module)
    if trainer:
        monkeypatch.setitem(sys.modules, "transformers", SimpleNamespace())
    return accelerate_hint()


def test_the_accelerate_hint_names_what_accelerate_saw_and_the_launch(monkeypatch):
    launched = {"ACCELERATE_MIXED_PRECISION": "no"}
    one = {"distributed_type": "NO", "num_processes": 1}
    # Not in use: the plain torch message stands.
    assert _accelerate(monkeypatch, None, {}) is None
    assert _accelerate(monkeypatch, {}, {}) is None
    # Several processes: nothing to add.
    assert _accelerate(monkeypatch, {"distributed_type": "MULTI_GPU", "num_processes": 2}, launched) is None
    # One process, launched for several (MASTER_PORT set, no RANK), before and after Accelerator().
    hint = _accelerate(monkeypatch, None, {**launched, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert "asked for several processes" in hint and "--multi_gpu --num_processes N" in hint
    hint = _accelerate(monkeypatch, one, {**launched, "MASTER_PORT": "29500"})
    assert hint.startswith("Accelerate runs this program as 1 process (its state: distributed_type=NO, "
                           "num_processes=1)")
    assert "asked for several processes" in hint and "make the Accelerator() before the DistributedSampler" in hint
    # A launch of several (RANK set) before its Accelerator(): make that first.
    hint = _accelerate(monkeypatch, None, {**launched, "MASTER_PORT": "29500", "RANK": "0"})
    assert "no Accelerator() has been made yet" in hint and "--multi_gpu" not in hint
    # The Trainer under `python script.py`: no launcher, one process; torchrun is named too.
    hint = _accelerate(monkeypatch, one, {}, trainer=True)
    assert "asked for several" not in hint and "torchrun --nproc-per-node N script.py" in hint


def test_the_wrapped_sampler_is_copied():
    base = cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=rng(4))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (0, 2))
    before = epoch_batches(sampler, 400)
    base.set_epoch(9)
    sampler.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(before, epoch_batches(sampler, 400)))
    assert sampler.rng is base.rng and sampler.batch_size == 10 and sampler.shuffle


def test_set_epoch_replays_an_epoch_and_epochs_differ():
    sampler = cs.RandomSampler(chunk_size=8, preload_nchunks=4, batch_size=8, rng=rng(5))
    first = epoch_batches(sampler, 512)
    second = epoch_batches(sampler, 512)
    assert sampler.epoch == 2
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))
    sampler.set_epoch(1)
    assert all(np.array_equal(a, b) for a, b in zip(second, epoch_batches(sampler, 512)))
    sampler.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, epoch_batches(sampler, 512)))


@pytest.mark.parametrize("num_workers", [1, 2, 3, 5])
def test_workers_cover_the_epoch(num_workers):
    base = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=rng(6))
    sampler = cs.DistributedSampler(base, dist_info=lambda: (1, 2))
    whole = epoch_batches(sampler, 1000)
    seen = []
    for worker in range(num_workers):
        sampler.set_epoch(0)
        batches = epoch_batches(sampler, 1000, worker=(worker, num_workers))
        assert len(batches) == sampler.n_batches(1000, worker=(worker, num_workers))
        seen.extend(batches)
    assert sorted(np.concatenate(seen).tolist()) == sorted(np.concatenate(whole).tolist())
    assert len(seen) == len(whole)


@pytest.mark.parametrize("remainder", ["drop", "pad", "rotate"])
def test_global_mode_gives_equal_batch_counts(remainder):
    counts = set()
    for rank in range(3):
        base = cs.RandomSampler(chunk_size=7, preload_nchunks=2, batch_size=7, rng=rng(8))
        sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 3), mode="global", remainder=remainder)
        assert (sampler.mode, sampler.remainder) == ("global", remainder)
        counts.add(len(epoch_batches(sampler, 500)))
    assert len(counts) == 1


def test_rotate_reads_every_observation_in_two_epochs():
    seen = set()
    for rank in range(2):
        base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
        sampler = cs.DistributedSampler(base, dist_info=lambda: (rank, 2), remainder="rotate")
        for _ in range(2):
            seen.update(np.concatenate(epoch_batches(sampler, 105)).tolist())
    assert seen == set(range(105))
