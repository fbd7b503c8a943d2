"""chunksampler.torch: the BatchSampler against the samplers it wraps (batches, len, state,
pickling), inside DataLoaders (workers, spawn), DataLoader-worker sharding of a sampler in an
IterableDataset, and dist_info="torch" under torchrun."""

from __future__ import annotations

import collections
import doctest
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, epoch_batches, free_port, rng
from hypothesis import given, settings
from hypothesis import strategies as st
from support import batch_sizes

import chunksampler as cs

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

import chunksampler.torch as cstorch  # noqa: E402
from chunksampler.torch import BatchSampler, ChunkDataLoader  # noqa: E402

N_OBS = 103


def random(**kwargs):
    return cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=5, rng=rng(3), **kwargs)


def distributed(rank, world_size=3, **kwargs):
    return cs.DistributedSampler(random(), dist_info=lambda: (rank, world_size), **kwargs)


CLASSES = np.repeat(np.arange(4), [30, 25, 28, 20])

# Fresh samplers of several kinds (each call a new one of the same seed), over N_OBS observations.
SAMPLERS = {
    "random": random,
    "random-drop-last": lambda: random(drop_last=True),
    "random-replacement": lambda: random(replacement=True, num_samples=64),
    "sequential-masked": lambda: cs.SequentialSampler(7, 3, 3, mask=slice(20, 90)),
    "class": lambda: cs.ClassSampler(4, 2, 4, classes=CLASSES, num_samples=40, rng=rng(1)),
    "weighted": lambda: cs.WeightedClassSampler(4, 4, 8, classes=CLASSES, num_samples=40, rng=rng(1),
                                                class_weights=[1, 2, 3, 4], composition="stratified"),
    "weighted-distributed-global": lambda: cs.DistributedSampler(
        cs.WeightedClassSampler(4, 4, 8, classes=CLASSES, num_samples=80, rng=rng(1)), dist_info=lambda: (1, 2),
        mode="global"),
    "mixture": lambda: cs.MixtureSampler(4, 2, 4, sizes=[60, 43], weights=[1, 2], rng=rng(2)),
    "distributed-contiguous-1": lambda: distributed(1),
    "distributed-global-2": lambda: distributed(2, mode="global", remainder="pad"),
}


def as_lists(batches):
    return [[int(i) for i in batch] for batch in batches]


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_yields_the_samplers_batches_as_lists_of_global_indices(make):
    batches = BatchSampler(make(), N_OBS)
    reference = make()
    for _ in range(2):  # each iteration is the next epoch, as the sampler's sample() is
        n = len(batches)
        got = list(batches)
        assert n == reference.n_batches(N_OBS) == len(got)
        assert all(type(batch) is list and all(type(i) is int for i in batch) for batch in got)
        assert got == as_lists(epoch_batches(reference, N_OBS))


@st.composite
def configs(draw):
    chunk_size = draw(st.integers(1, 12))
    preload_nchunks = draw(st.integers(1, 4))
    batch_size = draw(st.sampled_from(batch_sizes(chunk_size, preload_nchunks)))
    n_obs = draw(st.integers(1, 300))
    world_size = draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["contiguous", "global"]))
    return (chunk_size, preload_nchunks, batch_size), n_obs, world_size, mode, draw(st.integers(0, 2**32))


@settings(max_examples=40, deadline=None)
@given(configs())
def test_ranks_batch_samplers_partition_an_epoch_like_their_samplers(config):
    sizes, n_obs, world_size, mode, seed = config

    def make(rank):
        base = cs.RandomSampler(*sizes, rng=rng(seed))
        return cs.DistributedSampler(base, dist_info=lambda: (rank, world_size), mode=mode)

    try:
        make(0).validate(n_obs)
    except cs.ConfigError:  # too few observations for the ranks: the BatchSampler refuses alike
        with pytest.raises(cs.ConfigError):
            BatchSampler(make(0), n_obs)
        return
    shards = [list(BatchSampler(make(rank), n_obs)) for rank in range(world_size)]
    for rank, shard in enumerate(shards):
        assert shard == as_lists(epoch_batches(make(rank), n_obs))
    assert len({len(shard) for shard in shards}) == 1
    seen = [i for shard in shards for batch in shard for i in batch]
    assert len(seen) == len(set(seen)) and all(0 <= i < n_obs for i in seen)


def test_len_is_the_whole_epochs_also_after_a_restore():
    # Lightning and the HF Trainer count a resumed epoch from its start: len() is that count, and
    # the iteration yields the rest of it.
    for make in (random, lambda: distributed(0), lambda: distributed(1, mode="global")):
        whole = list(BatchSampler(make(), N_OBS))
        first = BatchSampler(make(), N_OBS)
        it = iter(first)
        for _ in range(3):
            next(it)
        resumed = BatchSampler(make(), N_OBS)
        resumed.load_state_dict(first.state_dict())
        assert len(resumed) == len(whole)
        assert list(resumed) == whole[3:]
        assert len(resumed) == len(whole)


@pytest.mark.parametrize("make", [random, lambda: distributed(2, mode="global")], ids=["random", "distributed-global"])
def test_state_after_every_batch_resumes_exactly_the_rest(make):
    reference = BatchSampler(make(), N_OBS)
    epoch0, epoch1 = list(reference), list(reference)
    assert epoch0 != epoch1
    for k in range(len(epoch0) + 1):
        first = BatchSampler(make(), N_OBS)
        it = iter(first)
        for _ in range(k):
            next(it)
        state = first.state_dict()
        assert state["epoch"] == 0 and state["batches_done"] == k
        resumed = BatchSampler(make(), N_OBS)
        resumed.load_state_dict(state)
        resumed.set_epoch(0)  # the usual call at the top of a resumed loop keeps the restore
        assert len(resumed) == len(epoch0)  # the epoch's count from its start, as trainers count it
        assert list(resumed) == epoch0[k:]
        assert list(resumed) == epoch1


def test_batches_done_is_the_loops_count_from_where_the_iteration_began():
    whole = list(BatchSampler(random(), N_OBS))
    first = BatchSampler(random(), N_OBS)
    for _ in zip(range(9), first):  # a prefetching loader ran ahead of the 4 batches the loop finished
        pass
    state = first.state_dict(batches_done=4)
    assert state["batches_done"] == 4
    resumed = BatchSampler(random(), N_OBS)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state  # a checkpoint before the resumed iteration begins
    for _ in zip(range(6), resumed):
        pass
    again = resumed.state_dict(batches_done=3)  # 3 batches of the resumed iteration: 7 of the epoch
    assert again["batches_done"] == 7
    last = BatchSampler(random(), N_OBS)
    last.load_state_dict(again)
    assert list(last) == whole[7:]


def test_set_epoch_other_than_the_restored_one_starts_that_epoch():
    epochs = BatchSampler(random(), N_OBS)
    epoch0, epoch1 = list(epochs), list(epochs)
    first = BatchSampler(random(), N_OBS)
    it = iter(first)
    next(it)
    resumed = BatchSampler(random(), N_OBS)
    resumed.load_state_dict(first.state_dict())
    resumed.set_epoch(1)
    assert len(resumed) == len(epoch1) and list(resumed) == epoch1
    resumed.set_epoch(0)
    assert list(resumed) == epoch0


def test_state_dict_refuses_a_count_outside_the_iteration():
    batches = BatchSampler(random(), N_OBS)
    assert batches.state_dict()["batches_done"] == 0
    with pytest.raises(cs.ConfigError, match="before an iteration"):
        batches.state_dict(batches_done=1)
    total = len(batches)
    next(iter(batches))
    with pytest.raises(cs.ConfigError, match=rf"\[0, {total}\]"):
        batches.state_dict(batches_done=total + 1)
    with pytest.raises(cs.ConfigError):
        batches.state_dict(batches_done=-1)
    with pytest.raises(TypeError):
        batches.state_dict(batches_done=1.0)


def test_pickled_copy_continues_where_the_original_stands():
    epochs = BatchSampler(random(), N_OBS)
    epoch0, epoch1 = list(epochs), list(epochs)

    fresh = BatchSampler(random(), N_OBS)
    assert list(pickle.loads(pickle.dumps(fresh))) == epoch0

    partway = BatchSampler(random(), N_OBS)
    it = iter(partway)
    for _ in range(7):  # inside the second request: the sampler alone would resume after it
        next(it)
    copy = pickle.loads(pickle.dumps(partway))
    assert len(copy) == len(epoch0) and list(copy) == epoch0[7:]

    done = BatchSampler(random(), N_OBS)
    list(done)
    copy = pickle.loads(pickle.dumps(done))
    assert len(copy) == len(epoch1) and list(copy) == epoch1


def test_dataloader_with_workers_covers_every_index_once_per_epoch():
    batches = BatchSampler(random(), N_OBS)
    expected = BatchSampler(random(), N_OBS)
    loader = DataLoader(range(N_OBS), batch_sampler=batches, num_workers=2)
    epochs = []
    for epoch in range(2):
        batches.set_epoch(epoch)
        expected.set_epoch(epoch)
        assert len(loader) == len(expected)
        got = [batch.tolist() for batch in loader]
        assert got == list(expected)
        assert sorted(i for batch in got for i in batch) == list(range(N_OBS))
        epochs.append(got)
    assert epochs[0] != epochs[1]


def test_a_prefetching_loader_resumes_from_the_loops_own_count():
    whole = list(BatchSampler(random(), N_OBS))
    batches = BatchSampler(random(), N_OBS)
    loader = DataLoader(range(N_OBS), batch_sampler=batches, num_workers=2, prefetch_factor=2)
    for k, _ in enumerate(loader, 1):
        if k == 5:
            break
    assert batches.state_dict()["batches_done"] > 5  # the workers were handed batches ahead of the loop
    state = batches.state_dict(batches_done=5)
    resumed = BatchSampler(random(), N_OBS)
    resumed.load_state_dict(state)
    loader = DataLoader(range(N_OBS), batch_sampler=resumed, num_workers=2)
    # len() is the epoch's, counted from its start, as Lightning and the HF Trainer count it.
    assert len(loader) == len(resumed) == len(whole)
    assert [batch.tolist() for batch in loader] == whole[5:]


class WorkerBatches(IterableDataset):
    """Each DataLoader worker iterates the sampler, which serves it that worker's share."""

    def __init__(self, sampler, n_obs):
        self.sampler, self.n_obs = sampler, n_obs

    def __iter__(self):
        worker = torch.utils.data.get_worker_info().id
        for request in self.sampler.sample(self.n_obs):
            rows = np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])
            for split in request["splits"]:
                yield worker, rows[split]


@pytest.mark.parametrize("make", [random, lambda: distributed(1, world_size=2)], ids=["random", "distributed"])
def test_iterable_dataset_workers_split_the_epoch(make):
    loader = DataLoader(WorkerBatches(make(), N_OBS), batch_size=None, num_workers=2)
    by_worker = {0: [], 1: []}
    for worker, batch in loader:
        by_worker[int(worker)].append(batch.tolist())
    for worker, got in by_worker.items():
        assert got == as_lists(epoch_batches(make(), N_OBS, worker=(worker, 2)))
    assert by_worker[0] and by_worker[1]
    seen = [i for got in by_worker.values() for batch in got for i in batch]
    assert sorted(seen) == sorted(i for batch in BatchSampler(make(), N_OBS) for i in batch)
    assert len(seen) == len(set(seen))


class BatchesInWorkers(IterableDataset):
    """Each DataLoader worker iterates its copy of a BatchSampler: its share of the epoch."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        worker = torch.utils.data.get_worker_info().id
        for batch in self.batches:
            yield worker, batch


def test_batch_sampler_pickles_into_spawned_workers_which_split_the_epoch():
    # A DataLoader keeps its batch_sampler in the main process and sends workers only the index
    # lists; here the BatchSampler and its sampler cross into spawned workers by pickling.
    batches = BatchSampler(distributed(0, world_size=2), N_OBS)
    batches.set_epoch(1)
    loader = DataLoader(BatchesInWorkers(batches), batch_size=None, num_workers=2, multiprocessing_context="spawn")
    by_worker = {0: [], 1: []}
    for worker, batch in loader:
        by_worker[int(worker)].append([int(i) for i in batch])

    def epoch1(**kwargs):
        reference = distributed(0, world_size=2)
        reference.set_epoch(1)
        return as_lists(epoch_batches(reference, N_OBS, **kwargs))

    for worker, got in by_worker.items():
        assert got and got == epoch1(worker=(worker, 2))
    seen = sorted(i for got in by_worker.values() for batch in got for i in batch)
    assert seen == sorted(i for batch in epoch1() for i in batch)


def test_torchrun_ranks_get_disjoint_shards_of_equal_batches_from_dist_info_torch(tmp_path):
    n_obs = 203
    script = Path(__file__).with_name("torch_ranks.py")
    # --monitor_interval: the agent polls its processes (every 5 s by default).
    # --redirects 1 --tee 1: torch 1.13's torchrun cannot parse its own default "0" under Python 3.11
    # (Std.from_str iterates an IntFlag, which no longer yields NONE); stdout to a file and the console.
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--monitor_interval", "0.1",
               "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path / "logs"),
               str(script), str(n_obs), str(tmp_path / "result.json")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "result.json").read_text())
    assert report["world_size"] == 2
    for mode in ("contiguous", "global"):
        ranks = report[mode]
        assert [r["rank"] for r in ranks] == [0, 1]
        for rank, r in enumerate(ranks):
            base = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=rng(7))
            expected = cs.DistributedSampler(base, dist_info=lambda rank=rank: (rank, 2), mode=mode)
            assert r["batches"] == as_lists(epoch_batches(expected, n_obs))
            assert r["len"] == len(r["batches"]) > 0
        assert len(ranks[0]["batches"]) == len(ranks[1]["batches"])
        assert not {i for b in ranks[0]["batches"] for i in b} & {i for b in ranks[1]["batches"] for i in b}
    # Bases made without rng draw their seeds from fresh entropy in each process; the ranks still
    # share one permutation (the shared seed 0), so their shares are disjoint and cover the range.
    unseeded = report["global-unseeded"]
    assert [r["seed"] for r in unseeded] == [0, 0]
    for rank, r in enumerate(unseeded):
        base = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4)
        expected = cs.DistributedSampler(base, dist_info=lambda rank=rank: (rank, 2), mode="global")
        assert r["batches"] == as_lists(epoch_batches(expected, n_obs))
    seen = sorted(i for r in unseeded for b in r["batches"] for i in b)
    assert len(seen) == len(set(seen)) == sum(len(b) for r in report["global"] for b in r["batches"])


def test_rejects_what_is_not_a_sampler_or_an_n_obs():
    with pytest.raises(TypeError, match="sampler must be"):
        BatchSampler(torch.utils.data.SequentialSampler(range(10)), 10)
    with pytest.raises(TypeError, match="n_obs must be an int"):
        BatchSampler(random(), 10.0)
    with pytest.raises(TypeError, match="n_obs must be an int"):
        BatchSampler(random(), True)
    for bad in (0, -5):
        with pytest.raises(cs.ConfigError, match="n_obs"):
            BatchSampler(random(), bad)
    with pytest.raises(cs.ConfigError, match="n_obs"):
        BatchSampler(random(mask=slice(10, 50)), 20)
    with pytest.raises(cs.ConfigError, match="every rank needs at least one whole batch"):
        BatchSampler(distributed(0), 5)


def test_is_a_torch_batch_sampler_that_refuses_lightnings_injected_sampler_naming_the_setting():
    # Lightning's default Trainer rebuilds a torch BatchSampler (subclass) around its own torch
    # DistributedSampler; that must stop with our error, which says what to do instead.
    assert isinstance(BatchSampler(random(), N_OBS), torch.utils.data.BatchSampler)
    injected = torch.utils.data.DistributedSampler(range(N_OBS), num_replicas=2, rank=0)
    with pytest.raises(cs.ConfigError, match=r"torch DistributedSampler.*use_distributed_sampler=True.*ChunkDataLoader"):
        BatchSampler(injected, N_OBS)


def test_docstring_example_runs():
    assert doctest.testmod(cstorch).failed == 0


def test_chunksampler_does_not_import_torch_until_asked():
    code = "import sys, chunksampler; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# --- ChunkDataLoader's device and a lagging loop's state (torch alone; Ray Train's way in) ---


def test_the_loader_places_every_tensor_of_a_batch_on_its_device():
    rows = torch.utils.data.TensorDataset(torch.arange(2048), torch.zeros(2048, 2))
    sampler = cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64)
    ids, x = next(iter(ChunkDataLoader(rows, sampler, device="meta")))
    assert ids.device.type == x.device.type == "meta"

    def as_dicts(batch):
        return {"pair": (torch.stack([r[0] for r in batch]), [torch.stack([r[1] for r in batch])]), "n": len(batch)}

    batch = next(iter(ChunkDataLoader(rows, sampler, device=torch.device("meta"), collate_fn=as_dicts)))
    assert batch["pair"][0].device.type == batch["pair"][1][0].device.type == "meta" and batch["n"] == 64
    Pair = collections.namedtuple("Pair", "ids x")
    pair = next(iter(ChunkDataLoader(rows, sampler, device="meta",
                                     collate_fn=lambda b: Pair(*torch.utils.data.default_collate(b)))))
    assert type(pair) is Pair and pair.ids.device.type == pair.x.device.type == "meta"
    with pytest.raises(cs.ConfigError, match="device must name a torch device"):
        ChunkDataLoader(rows, sampler, device="no-such-device")


def test_state_dict_after_the_batches_a_lagging_loop_finished():
    rows = torch.utils.data.TensorDataset(torch.arange(2048))

    def make():
        return cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(3))

    loader = ChunkDataLoader(rows, make())
    whole = [batch[0].tolist() for batch in ChunkDataLoader(rows, make())]
    it = iter(loader)
    for _ in range(6):
        next(it)
    state = loader.state_dict(batches_done=5)  # the loop finished 5 of the 6 it was handed
    assert state["batches_done"] == 5
    with pytest.raises(cs.ConfigError, match=r"batches_done \(7\) must be in \[0, 6\]"):
        loader.state_dict(batches_done=7)
    resumed = ChunkDataLoader(rows, make())
    resumed.load_state_dict(state)
    assert [batch[0].tolist() for batch in resumed] == whole[5:]
