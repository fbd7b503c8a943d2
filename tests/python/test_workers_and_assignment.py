"""Workers from torch's get_worker_info when no worker is given; mask and rng assignment rebuild the
sampler for later epochs, keeping the next epoch's number, while an epoch being iterated goes on."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import epoch_batches, observations
from support import as_lists

import chunksampler as cs
from chunksampler import _workers


def random(**kwargs):
    return cs.RandomSampler(**{"chunk_size": 8, "preload_nchunks": 2, "batch_size": 4, "rng": np.random.default_rng(2), **kwargs})


def test_outside_a_dataloader_worker_the_sampler_is_the_whole_rank():
    pytest.importorskip("torch")
    assert _workers.get_torch_worker_info() is None
    assert random().n_batches(500) == random().n_batches(500, worker=(0, 1))


@pytest.mark.parametrize("num_workers", [2, 3])
def test_the_torch_worker_is_used_when_no_worker_is_given(monkeypatch, num_workers):
    torch_data = pytest.importorskip("torch.utils.data")
    whole = as_lists(epoch_batches(random(), 500))
    seen = []
    for worker in range(num_workers):
        info = type("Info", (), {"id": worker, "num_workers": num_workers})()
        monkeypatch.setattr(torch_data, "get_worker_info", lambda info=info: info)
        assert _workers.get_torch_worker_info() == cs.WorkerInfo(worker, num_workers)
        sampler = random()
        assert sampler.n_batches(500) == sampler.n_batches(500, worker=(worker, num_workers))
        mine = as_lists(epoch_batches(sampler, 500))
        assert mine == as_lists(epoch_batches(random(), 500, worker=(worker, num_workers)))
        # An explicit worker wins over the DataLoader's.
        assert as_lists(epoch_batches(random(), 500, worker=(0, 1))) == whole
        seen.extend(mine)
    assert sorted(seen) == sorted(whole)


def test_a_real_dataloader_splits_the_epoch_among_its_workers():
    torch_data = pytest.importorskip("torch.utils.data")
    sampler = random()

    class Batches(torch_data.IterableDataset):
        def __iter__(self):
            for request in sampler.sample(500):  # no worker given: each DataLoader worker its share
                yield from (b.tolist() for b in observations(request))

    loader = torch_data.DataLoader(Batches(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    got = [b.tolist() if hasattr(b, "tolist") else b for b in loader]
    whole = as_lists(epoch_batches(random(), 500))
    assert len(got) == len(whole)
    assert sorted(map(tuple, got)) == sorted(map(tuple, whole))


def test_mask_assignment_keeps_the_next_epoch_and_the_epoch_being_iterated():
    sampler = random()
    sampler.set_epoch(3)
    iterator = sampler.sample(500)
    first = as_lists(observations(next(iterator)))
    sampler.mask = slice(100, 300)
    assert sampler.epoch == 4 and sampler.mask == slice(100, 300)
    rest = as_lists(b for r in iterator for b in observations(r))
    reference = random()
    reference.set_epoch(3)
    assert first + rest == as_lists(epoch_batches(reference, 500))  # the old epoch goes on unchanged
    expected = random(mask=slice(100, 300))
    expected.set_epoch(4)
    assert as_lists(epoch_batches(sampler, 500)) == as_lists(epoch_batches(expected, 500))
    sampler.mask = None
    assert sampler.mask == slice(0, None)


def test_rng_assignment_draws_a_new_seed_and_keeps_the_next_epoch():
    sampler = random()
    epoch_batches(sampler, 500)
    sampler.rng = np.random.default_rng(42)
    assert sampler.epoch == 1
    expected = random(rng=np.random.default_rng(42))
    assert sampler.seed == expected.seed != random().seed
    expected.set_epoch(1)
    assert as_lists(epoch_batches(sampler, 500)) == as_lists(epoch_batches(expected, 500))


def test_a_class_sampler_mask_assignment_is_checked_against_its_codes():
    codes = np.repeat([0, 1], [60, 60])
    sampler = cs.ClassSampler(10, 1, 10, classes=codes, num_samples=50, rng=np.random.default_rng(0))
    sampler.mask = slice(60, 120)
    assert {int(codes[o]) for b in epoch_batches(sampler, 120) for o in b} == {1}
    with pytest.raises(cs.ConfigError, match="mask.stop"):
        sampler.mask = slice(0, 121)
    assert sampler.mask == slice(60, 120)
