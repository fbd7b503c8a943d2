"""``state_dict()`` without ``batches_done`` names the batches the training loop received, not those
its loader took ahead: annbatch's ``Loader`` takes a whole request and then yields its splits one
by one, and torch's ``DataLoader`` sends ``num_workers * prefetch_factor`` batches ahead to its
workers. A state taken after ``k`` batches resumes at batch ``k + 1``, never later."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import observations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import as_lists, configs, servable

import chunksampler as cs

N_OBS = 203


def sampler(seed: int = 0) -> cs.RandomSampler:
    return cs.RandomSampler(chunk_size=10, preload_nchunks=3, batch_size=10, rng=np.random.default_rng(seed))


def rest_after_restore(state, make=sampler) -> list[list[int]]:
    resumed = make()
    resumed.load_state_dict(state)
    return as_lists(b for request in resumed.sample(N_OBS) for b in observations(request))


def whole_epoch(make=sampler) -> list[list[int]]:
    return as_lists(b for request in make().sample(N_OBS) for b in observations(request))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7])
def test_annbatch_loader_the_issues_reproduction(k):
    ad = pytest.importorskip("anndata")
    annbatch = pytest.importorskip("annbatch")
    live = sampler()
    loader = annbatch.Loader(batch_sampler=live, preload_to_gpu=False, to=None, return_index=True)
    loader.add_adata(ad.AnnData(X=np.arange(N_OBS, dtype=np.float32)[:, None]))
    batches = iter(loader)
    trained = [next(batches)["index"].tolist() for _ in range(k)]
    state = live.state_dict()
    assert state["batches_done"] == k  # the Loader holds a request of 3 batches: 3, 6 or 9 were taken
    full = whole_epoch()
    assert trained == full[:k]
    assert rest_after_restore(state) == full[k:]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs(distributed=True, workers=True), st.data())
def test_a_loop_that_takes_splits_one_by_one_resumes_after_the_last_it_took(config, data):
    live = servable(config)  # at config.epoch, which it checks with the next
    if live is None:
        return
    total = live.n_batches(config.n_obs, worker=config.worker)
    k = data.draw(st.integers(0, total))
    taken: list[list[int]] = []
    iterator = live.sample(config.n_obs, worker=config.worker)
    for request in iterator if k else ():
        rows = np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])
        for split in request["splits"]:
            taken.append(rows[split].tolist())
            if len(taken) == k:
                break
        if len(taken) == k:
            break
    state = live.state_dict()
    assert state["batches_done"] == k
    reference = config.make()
    reference.set_epoch(config.epoch)
    full = as_lists(b for r in reference.sample(config.n_obs, worker=config.worker) for b in observations(r))
    assert taken == full[:k]
    resumed = config.make()
    resumed.load_state_dict(state)
    assert as_lists(b for r in resumed.sample(config.n_obs, worker=config.worker) for b in observations(r)) == full[k:]


def test_indexing_splits_counts_as_taking_them_and_whole_requests_count_whole():
    live = sampler()
    iterator = live.sample(N_OBS)
    first = next(iterator)
    assert live.state_dict()["batches_done"] == 3  # not iterated: the request counts whole, as before
    first["splits"][0]
    assert live.state_dict()["batches_done"] == 1
    first["splits"][-2]
    assert live.state_dict()["batches_done"] == 2
    second = next(iterator)
    assert live.state_dict()["batches_done"] == 6
    for _ in zip(range(1), second["splits"]):
        pass
    assert live.state_dict()["batches_done"] == 4
    assert isinstance(second["splits"], list) and second["splits"] == list(second["splits"])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("k", [1, 3, 20, 21])
def test_torch_dataloader_with_workers_the_issues_reproduction(workers, k):
    torch_data = pytest.importorskip("torch.utils.data")
    from chunksampler.torch import BatchSampler

    batches = BatchSampler(sampler(), N_OBS)
    loader = torch_data.DataLoader(range(N_OBS), batch_sampler=batches, num_workers=workers)
    full = whole_epoch()
    assert len(full) == 21
    iterator = iter(loader)
    trained = [next(iterator).tolist() for _ in range(k)]
    state = batches.state_dict()
    assert trained == full[:k]
    if k < len(full):
        assert (state["epoch"], state["batches_done"]) == (0, k)  # not 3 + 4 ahead with 2 workers
        assert rest_after_restore(state) == full[k:]
    else:  # the epoch's last batch: the state is the next epoch's start
        assert (state["epoch"], state["batches_done"]) == (1, 0)
    del iterator


def test_the_splits_are_a_list_that_pickles_and_copies_as_a_plain_one():
    live = sampler()
    request = next(live.sample(N_OBS))
    splits = request["splits"]
    assert isinstance(splits, list) and type(splits) is not list
    for again in (pickle.loads(pickle.dumps(splits)), copy.copy(splits)):
        assert type(again) is list and len(again) == len(splits)
        assert all(np.array_equal(a, b) for a, b in zip(again, splits))
    # Slices are plain lists; a list of the same type made by hand counts nothing and works as a list.
    assert type(splits[1:]) is list and len(splits[1:]) == len(splits) - 1
    made = type(splits)([3, 4, 5])
    assert list(made) == [3, 4, 5] and made[-1] == 5 and made[1:] == [4, 5]
    assert live.state_dict()["batches_done"] == 3  # neither touched the request's count


def test_a_state_dict_names_the_batches_taken_after_the_sampler_is_copied():
    # A copy of the C++ sampler holds where the epoch stood when copied, not the epoch: the original's
    # consumer going on moves the original alone.
    live = sampler()
    iterator = live.sample(N_OBS)
    first = next(iterator)
    first["splits"][0]
    clone = copy.copy(live)
    next(iterator)
    assert clone.state_dict()["batches_done"] == 1
    assert live.state_dict()["batches_done"] == 6
