"""chunksampler.lightning: ChunkDataLoader alone (epochs, len, state and resume as Lightning drives
them), ChunkDataModule, and Lightning's own Trainer on them: 2 ranks under the ddp strategy with its
default settings, and 1 device, in child jobs (lightning_job.py) whose records are checked here."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_tree_clean, make_example_tree, rng, shown_output
from launch import Launch

import chunksampler as cs

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")
from chunksampler.lightning import ChunkDataLoader, ChunkDataModule  # noqa: E402
from chunksampler.torch import BatchSampler  # noqa: E402

import lightning_job as job  # noqa: E402  (tests/python is on sys.path, as for conftest)

JOB = Path(__file__).with_name("lightning_job.py")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "lightning_train.py"


def random(**kwargs):
    return cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=5, rng=rng(3), **kwargs)


def ids(loader):
    """The batches one iteration of ``loader`` hands out, as lists of indices (the dataset is range(n))."""
    return [batch.tolist() for batch in loader]


def epochs(make, n_obs, count):
    """The first ``count`` epochs of a fresh BatchSampler over ``make()``, as lists of batches."""
    batches = BatchSampler(make(), n_obs)
    return [list(batches) for _ in range(count)]


# ChunkDataLoader without a Trainer.


def test_each_iteration_is_the_next_epoch_of_the_batch_sampler():
    expected = epochs(random, 103, 3)
    loader = ChunkDataLoader(range(103), random())
    assert len(loader) == len(expected[0]) == 21
    assert [ids(loader) for _ in range(2)] == expected[:2]
    loader.set_epoch(0)
    assert ids(loader) == expected[0]
    loader.sampler.set_epoch(2)  # where Lightning calls it
    assert ids(loader) == expected[2]


@pytest.mark.parametrize("workers", [0, 2])
def test_state_names_the_batches_handed_out_not_those_workers_prefetched(workers):
    expected = epochs(random, 103, 2)
    loader = ChunkDataLoader(range(103), random(), num_workers=workers)
    handed = iter(loader)
    for _ in range(7):
        next(handed)
    # The DataLoader's workers were sent workers * prefetch_factor batches more; the batch sampler's
    # state names those the DataLoader handed on.
    assert loader.batch_sampler._iteration.yielded == (7 if workers == 0 else 7 + 2 * 2)
    assert loader.batch_sampler.state_dict()["batches_done"] == 7
    assert len(loader) == 21  # the epoch's, while it is handed out
    state = loader.state_dict()
    assert (state["epoch"], state["batches_done"]) == (0, 7)

    resumed = ChunkDataLoader(range(103), random(), num_workers=workers)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state  # a checkpoint before the resumed iteration begins
    resumed.sampler.set_epoch(0)  # Lightning: the epoch's number at its start, which keeps the restore
    assert len(resumed) == 21  # counted from the epoch's start, as Lightning counts a resumed epoch
    rest = iter(resumed)
    first = next(rest)
    assert len(resumed) == 21
    assert resumed.state_dict()["batches_done"] == 8
    assert [first.tolist()] + [batch.tolist() for batch in rest] == expected[0][7:]
    resumed.sampler.set_epoch(1)
    assert ids(resumed) == expected[1]


def test_set_epoch_of_another_epoch_drops_a_restore():
    expected = epochs(random, 103, 2)
    first = ChunkDataLoader(range(103), random())
    handed = iter(first)
    next(handed)
    for set_epoch in (lambda loader: loader.set_epoch(1), lambda loader: loader.sampler.set_epoch(1)):
        resumed = ChunkDataLoader(range(103), random())
        resumed.load_state_dict(first.state_dict())
        set_epoch(resumed)
        assert resumed.state_dict()["epoch"] == 1 and resumed.state_dict()["batches_done"] == 0
        assert ids(resumed) == expected[1]


def test_a_state_at_the_epochs_end_continues_with_the_next_epoch():
    expected = epochs(random, 103, 2)
    loader = ChunkDataLoader(range(103), random())
    handed = iter(loader)
    for _ in range(21):  # Lightning stops asking at len(), without exhausting the iterator
        next(handed)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_done"]) == (0, 21)
    resumed = ChunkDataLoader(range(103), random())
    resumed.load_state_dict(state)
    assert len(resumed) == 21 and ids(resumed) == expected[1]


def test_a_state_of_another_configuration_is_refused_at_load():
    first = ChunkDataLoader(range(103), random())
    next(iter(first))
    other = ChunkDataLoader(range(103), cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=5, rng=rng(4)))
    with pytest.raises(cs.StateMismatchError, match=r"ChunkDataLoader.load_state_dict: .*seed"):
        other.load_state_dict(first.state_dict())
    bigger = ChunkDataLoader(range(104), random())
    with pytest.raises(cs.StateMismatchError, match="n_obs"):
        bigger.load_state_dict(first.state_dict())


def test_refuses_what_is_not_a_chunk_sampler_and_the_samplers_own_arguments():
    with pytest.raises(TypeError, match="ChunkDataLoader: sampler must be a chunksampler .* got torch"):
        ChunkDataLoader(range(10), torch.utils.data.RandomSampler(range(10)))
    with pytest.raises(cs.ConfigError, match="batch_size, shuffle must not be given.*batch_size is 5"):
        ChunkDataLoader(range(103), random(), batch_size=5, shuffle=True)
    with pytest.raises(TypeError, match="n_obs must be given"):
        ChunkDataLoader(iter(range(10)), random())
    with pytest.raises(cs.ConfigError, match="n_obs"):
        ChunkDataLoader(range(10), random(), n_obs=0)


def module():
    return ChunkDataModule(range(103), random(), val_dataset=range(40),
                           val_sampler=cs.SequentialSampler(chunk_size=10, preload_nchunks=2, batch_size=5))


def test_batch_sampler_pickles_while_lightning_records_its_attributes():
    """Lightning's Trainer patches BatchSampler's __setattr__ while it makes the loaders, to record every
    attribute set, and leaves it patched where train_dataloader() raised; a pickle of a BatchSampler
    partway through an epoch (whose iteration holds the epoch's C++ iterator) still works."""
    from lightning.fabric.utilities.data import _replace_dunder_methods

    expected = epochs(random, 103, 1)[0]
    with _replace_dunder_methods(torch.utils.data.BatchSampler):
        batches = BatchSampler(random(), 103)
        partway = iter(batches)
        for _ in range(7):
            next(partway)
        copy = pickle.loads(pickle.dumps(batches))
    assert list(copy) == expected[7:]


def test_data_module_wraps_plain_samplers_and_carries_the_training_point():
    data = module()
    assert data.state_dict() == {}
    data.setup("fit")
    train, val = data.train_dataloader(), data.val_dataloader()
    assert isinstance(train.sampler, cs.DistributedSampler) and (train.sampler.rank, train.sampler.world_size) == (0, 1)
    assert (val.sampler.mode, val.sampler.enforce_equal_batches) == ("global", False)
    assert sorted(i for batch in ids(val) for i in batch) == list(range(40))
    handed = iter(train)
    for _ in range(4):
        next(handed)
    state = data.state_dict()
    assert state["train"] == train.state_dict() and state["train"]["batches_done"] == 4
    rest = list(handed)

    again = module()
    again.load_state_dict(state)  # before setup: kept for the loader setup("fit") makes
    again.setup("fit")
    again.train_dataloader().load_state_dict(state["train"])  # Lightning offers the loader's own too
    again.train_dataloader().sampler.set_epoch(0)
    assert [batch.tolist() for batch in again.train_dataloader()] == [batch.tolist() for batch in rest]


def test_data_module_state_is_the_one_envelope_and_chunksampler_0_3s_shapes_still_restore():
    data = module()
    data.setup("fit")
    train = data.train_dataloader()
    handed = iter(train)
    for _ in range(4):
        next(handed)
    state = data.state_dict()
    assert state == {"format": "chunksampler.loaders/1", "train": train.state_dict(), "world_size": 1}
    rest = [batch.tolist() for batch in handed]
    # What 0.3 wrote: ChunkDataModule's unversioned {"train": state}, and scvi's envelope, whose fields
    # the one envelope kept.
    for old in ({"train": state["train"]}, {"format": "chunksampler.scvi/1", "train": state["train"], "world_size": 1}):
        again = module()
        again.load_state_dict(old)
        assert again.state_dict() == state  # held until setup("fit"), written in the one envelope
        again.setup("fit")
        again.train_dataloader().sampler.set_epoch(0)
        assert ids(again.train_dataloader()) == rest


def test_data_module_refuses_a_format_it_does_not_know_naming_it():
    train = ChunkDataLoader(range(103), random())
    next(iter(train))
    state = train.state_dict()
    refused = {
        "chunksampler.loaders/2": r"format 'chunksampler.loaders/2' is unknown \(a newer chunksampler wrote it",
        "chunksampler.scvi/2": r"format 'chunksampler.scvi/2' is unknown \(it is not a format chunksampler writes\)",
        "annbatch/1": r"format 'annbatch/1' is unknown .* reads 'chunksampler.loaders/1'",
    }
    for tag, message in refused.items():
        with pytest.raises(cs.StateFormatError, match=rf"ChunkDataModule.load_state_dict: the state's {message}"):
            module().load_state_dict({"format": tag, "train": state, "world_size": 1})
    for malformed in ({"format": "chunksampler.loaders/1"}, {"format": "chunksampler.loaders/1", "train": "x"}, None):
        with pytest.raises(cs.StateFormatError, match="expected {'train': state} under 'format'"):
            module().load_state_dict(malformed)
    garbled = {"format": "chunksampler.loaders/1", "train": {**state, "state": "chunksampler-state/99 epoch=0"}}
    with pytest.raises(cs.StateFormatError, match="99"):
        module().load_state_dict(garbled)


def test_data_module_refuses_half_splits_and_foreign_state():
    with pytest.raises(cs.ConfigError, match="val_dataset is given without val_sampler"):
        ChunkDataModule(range(10), random(), val_dataset=range(10))
    with pytest.raises(TypeError, match="train_sampler: sampler must be a chunksampler"):
        ChunkDataModule(range(10), torch.utils.data.RandomSampler(range(10)))
    with pytest.raises(cs.ConfigError, match="shuffle must not be given"):
        ChunkDataModule(range(10), random(), shuffle=True)
    data = ChunkDataModule(range(103), random())
    with pytest.raises(TypeError, match="expected {'train': state}"):
        data.load_state_dict({"loader": {}})
    with pytest.raises(cs.ConfigError, match="no test_dataset"):
        data.test_dataloader()


def test_chunksampler_does_not_import_lightning():
    code = "import sys, chunksampler; print('lightning' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# Lightning's Trainer in child jobs: 2 ranks (ddp, gloo, Lightning's own launcher) and 1 device.


def _launch(out: Path, scenario: str, *args: str, script: Path = JOB) -> Launch:
    """``python lightning_job.py OUT SCENARIO ARGS`` (or ``python SCRIPT ARGS``) in OUT."""
    command = [sys.executable, str(script), *([str(out), scenario] if script == JOB else []), *args]
    return Launch(out, f"{script.name} {scenario}", command)


class Jobs:
    """The launches: ``main`` (2 ranks), ``single`` (1 device) and the example (1 device) at once,
    then ``resume`` (2 ranks), which needs main's and single's checkpoints."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.main = _launch(root / "main", "main")
        self.single = _launch(root / "single", "single")
        # The example as its page shows it: in an example tree, writing under work/lightning.
        self.example = _launch(make_example_tree(root / "example"), "example", "work/lightning", "--devices", "2",
                               "--epochs", "2", "--workers", "0", script=EXAMPLE)
        self._resume: Launch | None = None

    @property
    def resume(self) -> Launch:
        if self._resume is None:
            self.main.wait(), self.single.wait()
            died = self.root / "main" / "die" / f"step={job.CKPT_STEP}.ckpt"
            single = self.root / "single" / "single-cut" / f"step={job.CKPT_STEP}.ckpt"
            assert died.exists() and single.exists(), self.main.output[-3000:] + self.single.output[-3000:]
            self._resume = _launch(self.root / "resume", "resume", "--ckpt", str(died), str(single))
        return self._resume.wait()

    def kill(self) -> None:
        for launch in (self.main, self.single, self.example, self._resume):
            if launch is not None:
                launch.kill()


@pytest.fixture(scope="module", autouse=True)
def jobs(tmp_path_factory):
    """Started before this module's first test, so that the tests without a Trainer run meanwhile."""
    jobs = Jobs(tmp_path_factory.mktemp("lightning"))
    yield jobs
    jobs.kill()


def train_epochs(world_size: int) -> list[list[list[list[int]]]]:
    """Per rank, the batches of the job's 3 epochs as the samplers give them, without Lightning."""
    def make(rank):
        return lambda: cs.DistributedSampler(job.train_sampler(), dist_info=lambda: (rank, world_size))

    return [epochs(make(rank), job.N_TRAIN, job.EPOCHS) for rank in range(world_size)]


def trained(result: dict, epoch: int) -> list[list[int]]:
    return [indices for _, indices in result["train"][str(epoch)]]


def batch_idx(result: dict, epoch: int) -> list[int]:
    return [i for i, _ in result["train"][str(epoch)]]


def test_default_ddp_trainer_trains_each_rank_its_shard_with_a_new_order_each_epoch(jobs):
    main = jobs.main.wait()
    assert main.returncode == 3, main.output[-3000:]  # the crash at its end; every fit before it wrote
    full = [main.result("full", rank) for rank in (0, 1)]
    expected = train_epochs(2)
    for epoch in range(job.EPOCHS):
        for rank in (0, 1):
            assert trained(full[rank], epoch) == expected[rank][epoch]
            assert batch_idx(full[rank], epoch) == list(range(15))
        rows = [{i for batch in trained(full[rank], epoch) for i in batch} for rank in (0, 1)]
        # contiguous shards, drop: 15 batches of 32 rows each, [0, 480) and [480, 960); [960, 1000) left out
        assert rows == [set(range(480)), set(range(480, 960))]
    for rank in (0, 1):  # the epoch is set every epoch: each one another order of the same shard
        orders = [trained(full[rank], epoch) for epoch in range(job.EPOCHS)]
        assert orders[0] != orders[1] != orders[2] != orders[0]


def test_validation_reads_every_row_once_across_the_ranks(jobs):
    main = jobs.main.wait()
    full = [main.result("full", rank) for rank in (0, 1)]
    for epoch in range(job.EPOCHS):
        batches = [full[rank]["val"][str(epoch)] for rank in (0, 1)]
        assert [len(b) for b in batches] == [4, 4]  # 250 rows: 7 batches of 32 and one of 26, 4 a rank
        rows = [i for b in batches for batch in b for i in batch]
        assert sorted(rows) == list(range(job.N_VAL))


@pytest.mark.parametrize("fit", ["resumed", "own-resumed"])
def test_a_fit_resumed_mid_epoch_trains_exactly_the_batches_after_its_checkpoint(jobs, fit):
    main = jobs.main.wait()
    for rank in (0, 1):
        full = main.result("full", rank)
        cut = main.result(fit.replace("resumed", "cut"), rank)
        resumed = main.result(fit, rank)
        assert cut["interrupted"] and trained(cut, 1) == trained(full, 1)[:8]  # 3 batches past the checkpoint
        assert sorted(resumed["train"]) == ["1", "2"]
        assert trained(resumed, 1) == trained(full, 1)[5:] and batch_idx(resumed, 1) == list(range(5, 15))
        assert trained(resumed, 2) == trained(full, 2) and batch_idx(resumed, 2) == list(range(15))
        assert resumed["val"] == {str(e): full["val"][str(e)] for e in (1, 2)}


def test_a_fit_resumed_from_an_epochs_end_trains_the_next_epochs(jobs):
    main = jobs.main.wait()
    for rank in (0, 1):
        full, resumed = main.result("full", rank), main.result("resumed-at-epoch-end", rank)
        at_end = [c for c in main.result("cut", rank)["checkpoints"] if c["epoch"] == 0]
        # saved after epoch 0's validation: every batch handed out, a state at the epoch's end
        assert [(c["ready"], c["loader_state"]["epoch"], c["loader_state"]["batches_done"]) for c in at_end] == [
            (15, 0, 15)]
        assert sorted(resumed["train"]) == ["1", "2"]
        assert [trained(resumed, e) for e in (1, 2)] == [trained(full, e) for e in (1, 2)]


def test_a_checkpoint_holds_the_batches_the_training_loop_finished(jobs):
    main = jobs.main.wait()
    for rank in (0, 1):
        (at,) = [c for c in main.result("cut", rank)["checkpoints"] if c["epoch"] == 1]
        # ModelCheckpoint(every_n_train_steps=20) saves in on_train_batch_end of epoch 1's 5th batch,
        # where Lightning's counters read ready=5, completed=4 (completed counts on after the hook)
        assert (at["epoch"], at["global_step"], at["ready"], at["completed"], at["trained"]) == (1, 20, 5, 4, 5)
        assert (at["loader_state"]["epoch"], at["loader_state"]["batches_done"]) == (1, 5)
        assert at["handed_out_by_batch_sampler"] == 5  # no DataLoader workers: nothing fetched ahead
        (died,) = [c for c in main.result("die", rank)["checkpoints"] if c["epoch"] == 1]
        assert (died["ready"], died["loader_state"]["batches_done"]) == (5, 5)
        # 2 workers x prefetch_factor 2 run 4 batches ahead of the loop, but the batch sampler's own
        # state names the batches torch's DataLoader handed to the loop
        assert died["handed_out_by_batch_sampler"] == 5


def test_a_crashed_job_with_workers_resumes_in_new_processes_batch_for_batch(jobs):
    resume = jobs.resume
    assert resume.returncode == 0, resume.output[-3000:]
    for rank in (0, 1):
        full = jobs.main.result("full", rank)
        died = jobs.main.result("die", rank)
        revived = resume.result("revived", rank)
        assert trained(died, 0) == trained(full, 0) and trained(died, 1) == trained(full, 1)[:8]
        assert trained(revived, 1) == trained(full, 1)[5:] and batch_idx(revived, 1) == list(range(5, 15))
        assert trained(revived, 2) == trained(full, 2)


def test_bad_input_raises_our_error_on_every_rank(jobs):
    main = jobs.main.wait()
    seed = r"ChunkDataLoader.load_state_dict: .*seed \(\d+\) is not this sampler's"
    cases = {
        "bad-seed": ("StateMismatchError", seed),  # a checkpoint of another seed, through the data module
        "own-bad-seed": ("StateMismatchError", seed),  # and through Lightning's restore of the loader
        "bad-dist-info": ("ConfigError", r"world_size 2\); rank 1: dist_info gave rank 0 of world_size 2\. "),
        "bad-sampler": ("TypeError", r"train_sampler\(\): sampler must be a chunksampler .* got torch\.utils\.data\."),
        "own-plain-sampler": ("ConfigError", r"ranks 0, 1: a RandomSampler, not a DistributedSampler"),
        "bad-seeds-differ": ("ConfigError", r"every rank must use the same seed, but the seeds are \d+ on rank 0; "
                             r"\d+ on rank 1: .*rng=np\.random\.default_rng\(SEED\)"),
    }
    for fit, (error, message) in cases.items():
        for rank in (0, 1):
            result = main.result(fit, rank)
            assert result.get("error") == error, (fit, rank, result)
            assert re.search(message, result["message"]), (fit, rank, result["message"])
    for rank in (0, 1):  # the torch DataLoader: stopped on every rank by an error naming the setting
        result = main.result("plain-dataloader", rank)
        assert result["error"] == "ConfigError", result
        assert "chunksampler.lightning.ChunkDataLoader" in result["message"]
        assert "Trainer(use_distributed_sampler=False)" in result["message"]
    for rank in (0, 1):  # a 1-device checkpoint on 2 ranks (contiguous mode restores on its own world size)
        result = jobs.resume.result("bad-world-size", rank)
        assert result["error"] == "StateMismatchError" and "world_size" in result["message"], result


def test_one_device_trains_every_window_row_and_resumes_exactly(jobs):
    single = jobs.single.wait()
    assert single.returncode == 0, single.output[-3000:]
    full, cut, resumed = (single.result(fit, 0) for fit in ("single", "single-cut", "single-resumed"))
    (expected,) = train_epochs(1)
    for epoch in range(job.EPOCHS):
        assert trained(full, epoch) == expected[epoch] and len(expected[epoch]) == 31  # 992 of 1000 rows
        assert sorted(i for batch in full["val"][str(epoch)] for i in batch) == list(range(job.N_VAL))
    assert trained(cut, 0) == expected[0][:23]
    assert trained(resumed, 0) == expected[0][20:] and batch_idx(resumed, 0) == list(range(20, 31))
    assert [trained(resumed, epoch) for epoch in (1, 2)] == expected[1:]


def test_the_example_prints_what_each_epoch_trained_and_validated(jobs):
    example = jobs.example.wait()
    assert example.returncode == 0, example.output[-3000:]
    printed = [line for line in example.output.splitlines() if line.startswith("epoch ")]
    base = cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=32, rng=np.random.default_rng(0))
    expected = epochs(lambda: cs.DistributedSampler(base, dist_info=lambda: (0, 2)), 1000, 2)
    assert printed == [
        f"epoch {e}: 2 ranks trained batches 0-14, 960 rows, 960 distinct; rank 0's batch 0 begins "
        f"{expected[e][0][:3]}, batch 14 ends {expected[e][14][-3:]}; validation read 250 rows, 250 distinct "
        "(4 + 4 batches)"
        for e in range(2)
    ]
    # The documentation shows the 3-epoch run: its first two epochs are these.
    assert printed == shown_output("lightning-train").splitlines()[:2]
    assert (example.out / "work" / "lightning" / "ckpt" / "step=20.ckpt").exists(), example.output[-3000:]
    assert_tree_clean(example.out, "lightning_train.py")


def test_unseeded_samplers_validate_every_row_once_and_resume_exactly(jobs):
    """The issue's reproduction: a validation sampler made without rng, which ChunkDataModule deals
    among the ranks in global mode, read 650 of 2,000 rows on both ranks and 650 on neither; and a
    training sampler made without rng stopped the resumed fit with StateMismatchError."""
    main = jobs.main.wait()
    val = [main.result("unseeded-val", rank)["val"] for rank in (0, 1)]
    for epoch in range(job.EPOCHS):
        rows = [[i for batch in val[rank][str(epoch)] for i in batch] for rank in (0, 1)]
        assert not set(rows[0]) & set(rows[1])
        assert sorted(rows[0] + rows[1]) == list(range(job.N_VAL))

    def expected(rank: int) -> list[list[list[int]]]:
        # The shared seed 0 of a DistributedSampler over a sampler made without rng, as every rank has.
        return epochs(lambda: cs.DistributedSampler(job.unseeded(16, 4, 32), dist_info=lambda: (rank, 2)),
                      job.N_TRAIN, job.EPOCHS)

    for rank in (0, 1):
        cut, resumed = main.result("unseeded-cut", rank), main.result("unseeded-resumed", rank)
        assert "error" not in resumed, resumed
        full = expected(rank)
        assert cut["interrupted"] and trained(cut, 0) == full[0] and trained(cut, 1) == full[1][:8]
        assert trained(resumed, 1) == full[1][5:] and batch_idx(resumed, 1) == list(range(5, 15))
        assert trained(resumed, 2) == full[2]
