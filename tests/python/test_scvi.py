"""chunksampler.scvi.AnnbatchDataModule: scvi-tools trains scVI from an annbatch collection with
chunksampler's samplers, each DDP rank on its own shard, resuming exactly from a checkpoint.

The collection is examples/python/scvi_ddp.py's (4,000 cells x 100 genes; obs carries each cell's
id). scvi-tools' split with validation_size=0.08 puts validation on rows [0, 320) and training on
[320, 4000). Two DDP runs of the example on 2 CPU ranks: one killed (os._exit on every rank) once 18
steps are done, after a checkpoint at step 16, and one resumed from that checkpoint. The cells are
those of the batches scvi-tools trained on (the example's --record: each batch's obs cell ids, added
next to scvi-tools' tensors), not the sampler's. In-process runs on one device check the Lightning
restarts one by one against an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, assert_tree_clean, free_port, make_example_tree, shown_output
from launch import run_in_session

import chunksampler as cs

for _module in ("scvi", "annbatch", "lightning", "torch"):
    pytest.importorskip(_module)
import annbatch  # noqa: E402
import scvi  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import Callback  # noqa: E402

from chunksampler.scvi import AnnbatchDataModule  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "scvi_ddp.py"
N_OBS, N_VAL = 4000, 320  # validation_size=0.08 (scvi-tools' split: validation first)
BATCH = 128
RANKS = (0, 1)
# Global mode, remainder "drop", 2 ranks: the window [320, 320 + round_down(3680, 2 * 128)) is read
# every epoch, 14 batches per rank; its tail, the last 96 training rows, is left out.
TRAIN_READ = range(N_VAL, N_VAL + 3680 // (2 * BATCH) * 2 * BATCH)
LEFT_OUT = range(TRAIN_READ.stop, N_OBS)
STEPS_PER_EPOCH = 14
CHECKPOINT_EVERY, STOP_AFTER = 4, 18  # last checkpoint at step 16: epoch 1, 2 batches in
STATE_FORMAT = "chunksampler.loaders/1"
WORK = "work/scvi"  # the example's directory on its page, relative to the example tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The example tree the example's commands run in, with its page's relative paths."""
    return make_example_tree(tmp_path_factory.mktemp("scvi"))


@pytest.fixture(scope="module")
def work(tree):
    """The example's collection, written by its page's first command (no training)."""
    made = subprocess.run([sys.executable, str(EXAMPLE), WORK, "--make-data"], capture_output=True, text=True,
                          cwd=tree, timeout=JOB_TIMEOUT)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-5000:]
    assert made.stdout == f"wrote {WORK}/cells.zarr: 4000 cells x 100 genes in 2 datasets\n"
    return tree / WORK


@pytest.fixture(scope="module")
def cell_ids(work):
    """The cell id of each row of the collection, in row order (the sampler's indices)."""
    obs = annbatch.DatasetCollection(work / "cells.zarr", mode="r").obs(columns=["cell_id"])
    return obs["cell_id"].to_numpy()


def run_example(tree: Path, *args: object, timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess:
    """The example on 2 ranks (Lightning starts rank 1 itself) in the example tree, on WORK as its
    page shows; the whole process group is killed if it outlives ``timeout`` (rank 1 too, had rank 0
    left it behind)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return run_in_session([sys.executable, str(EXAMPLE), WORK, *map(str, args)], env, timeout, cwd=tree)


def records(directory: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (directory / f"rank{rank}.jsonl").read_text().splitlines()]


def module_state(checkpoint: dict) -> dict:
    """The data module's entry of a Lightning checkpoint, which Lightning keys by the data module
    class's qualified name (here the example's recording subclass)."""
    [state] = [v for v in checkpoint.values() if isinstance(v, dict) and v.get("format") == STATE_FORMAT]
    return state


@pytest.fixture(scope="module")
def runs(tree, work):
    crashed = run_example(tree, "--checkpoint-every", CHECKPOINT_EVERY, "--stop-after", STOP_AFTER,
                          "--record", f"{WORK}/crashed")
    assert crashed.returncode == 3, crashed.stdout[-3000:] + crashed.stderr[-5000:]
    checkpoint = f"{WORK}/checkpoints/last.ckpt"
    saved = torch.load(tree / checkpoint, weights_only=False)
    resumed = run_example(tree, "--resume", checkpoint, "--record", f"{WORK}/resumed")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-5000:]
    return {
        "crashed": {rank: records(work / "crashed", rank) for rank in RANKS},
        "resumed": {rank: records(work / "resumed", rank) for rank in RANKS},
        "saved": saved,
        "crashed_out": crashed.stdout,
        "resumed_out": resumed.stdout,
    }


def batches(rows: list[dict], phase: str, epoch: int) -> list[list[int]]:
    return [r["cells"] for r in rows if r["phase"] == phase and r["epoch"] == epoch]


def epoch_cells(runs, rank: int, phase: str, epoch: int) -> list[list[int]]:
    """A rank's batches of an epoch as the job kept them: the killed run's up to the checkpoint,
    then the resumed run's."""
    saved_step = runs["saved"]["global_step"]
    before = [r for r in runs["crashed"][rank] if r["phase"] == phase and r["epoch"] == epoch]
    if phase == "train":
        before = [r for r in before if r["step"] <= saved_step]
    elif any(r["epoch"] == epoch for r in runs["resumed"][rank]):
        before = []  # the validation of an epoch the resumed run ends
    after = [r for r in runs["resumed"][rank] if r["phase"] == phase and r["epoch"] == epoch]
    return [r["cells"] for r in before + after]


def test_the_checkpoint_holds_the_sampler_state_after_the_batches_trained(runs):
    saved = runs["saved"]
    assert saved["global_step"] == 16 and saved["epoch"] == 1
    state = module_state(saved)
    assert state["world_size"] == 2
    assert (state["train"]["epoch"], state["train"]["batches_done"]) == (1, 2)
    for rank in RANKS:
        assert f"rank {rank}: exiting after {STOP_AFTER} steps" in runs["crashed_out"]
        # Killed with 4 batches of epoch 1 trained, 2 of them after the checkpoint.
        assert len(batches(runs["crashed"][rank], "train", 1)) == 4


@pytest.mark.parametrize("epoch", [0, 1])
def test_ranks_train_disjoint_shards_that_together_hold_every_training_cell_once_less_the_drop(
    runs, cell_ids, epoch
):
    shards = []
    for rank in RANKS:
        got = epoch_cells(runs, rank, "train", epoch)
        assert [len(b) for b in got] == [BATCH] * STEPS_PER_EPOCH
        cells = np.concatenate(got)
        assert len(np.unique(cells)) == len(cells), f"rank {rank} trained on a cell twice in epoch {epoch}"
        shards.append(cells)
    assert not np.intersect1d(*shards).size, f"the ranks' shards overlap in epoch {epoch}"
    trained = np.concatenate(shards)
    assert sorted(trained) == sorted(cell_ids[TRAIN_READ])
    assert not np.isin(cell_ids[:N_VAL], trained).any(), "a validation cell was trained on"
    assert not np.isin(cell_ids[LEFT_OUT.start :], trained).any()


def test_global_mode_gives_each_rank_other_cells_every_epoch(runs):
    for rank in RANKS:
        first, second = (set(np.concatenate(epoch_cells(runs, rank, "train", e))) for e in (0, 1))
        assert len(first & second) < 0.75 * len(first)


@pytest.mark.parametrize("epoch", [0, 1])
def test_validation_reads_each_validation_cell_once_across_ranks_in_unequal_batch_counts(runs, cell_ids, epoch):
    got = {rank: epoch_cells(runs, rank, "validation", epoch) for rank in RANKS}
    # 320 rows, batches of 128: 128 + 128 on rank 0 and 64 on rank 1, and DDP's validation did not hang.
    assert {rank: [len(b) for b in got[rank]] for rank in RANKS} == {0: [128, 128], 1: [64]}
    cells = np.concatenate([c for rank in RANKS for c in got[rank]])
    assert sorted(cells) == sorted(cell_ids[:N_VAL])


def test_the_resumed_run_trains_exactly_the_cells_the_killed_run_had_not(runs, cell_ids):
    saved_step = runs["saved"]["global_step"]
    done = []
    for rank in RANKS:
        before = [r for r in runs["crashed"][rank] if r["phase"] == "train" and r["epoch"] == 1]
        trained = [r["cells"] for r in before if r["step"] <= saved_step]
        lost = [r["cells"] for r in before if r["step"] > saved_step]
        resumed = batches(runs["resumed"][rank], "train", 1)
        assert (len(trained), len(lost), len(resumed)) == (2, 2, STEPS_PER_EPOCH - 2)
        # The steps lost with the kill are trained again, on the same batches, in the same order.
        assert resumed[: len(lost)] == lost
        assert not np.intersect1d(np.concatenate(resumed), np.concatenate(trained)).size
        # The resumed run reads nothing of epoch 0.
        assert {r["epoch"] for r in runs["resumed"][rank]} == {1}
        done += [c for b in trained for c in b]
    resumed_cells = [c for rank in RANKS for b in batches(runs["resumed"][rank], "train", 1) for c in b]
    assert sorted(resumed_cells) == sorted(set(cell_ids[TRAIN_READ]) - set(done))


def test_the_loss_falls(runs):
    for rank in RANKS:
        losses = [r["loss"] for r in runs["crashed"][rank] + runs["resumed"][rank] if r["phase"] == "train"]
        assert np.mean(losses[-5:]) < 0.98 * np.mean(losses[:5]), f"rank {rank}: {losses[:5]} ... {losses[-5:]}"


def test_a_checkpoint_of_another_seed_stops_every_rank_with_state_mismatch_error(runs, tree, work):
    other = run_example(tree, "--resume", f"{WORK}/checkpoints/last.ckpt", "--seed", 8, "--record", f"{WORK}/other")
    assert other.returncode != 0
    for rank in RANKS:
        assert f"[rank{rank}]: chunksampler._errors.StateMismatchError: DistributedSampler: restore: the state's seed" \
            in other.stderr, other.stderr[-5000:]
    assert not (work / "other").exists(), "a rank trained on a batch"


def test_the_example_prints_each_ranks_batches(runs):
    assert "rank 0: epoch 0: trained on 14 batches (1792 cells), validated 2 (256 cells)" in runs["crashed_out"]
    assert "rank 1: epoch 0: trained on 14 batches (1792 cells), validated 1 (64 cells)" in runs["crashed_out"]
    assert "rank 1: epoch 1: trained on 12 batches (1536 cells), validated 1 (64 cells)" in runs["resumed_out"]
    # The documentation shows both runs' lines. The two ranks write to one pipe, so the order of their
    # lines differs from run to run, and the ELBO varies a little; but each line is written whole: each
    # shown line but the ELBO's is a line of the output.
    for name, out in (("scvi-crash", runs["crashed_out"]), ("scvi-resume", runs["resumed_out"])):
        printed = out.splitlines()
        for line in shown_output(name).splitlines():
            assert line.startswith("elbo_train by epoch: ") or line in printed, (name, line, out)
    assert sum(line.startswith("elbo_train by epoch: ") for line in runs["resumed_out"].splitlines()) == 1


def test_the_example_writes_only_under_its_directory(runs, tree):
    assert_tree_clean(tree, "scvi_ddp.py")


# --- in one process ------------------------------------------------------------------------------


def loader(work: Path, sampler=None):
    if sampler is None:
        sampler = cs.RandomSampler(64, 4, BATCH, rng=np.random.default_rng(7))
    collection = annbatch.DatasetCollection(work / "cells.zarr", mode="r")
    return annbatch.Loader(batch_sampler=sampler, preload_to_gpu=False).use_collection(collection)


def request_batches(request) -> list[np.ndarray]:
    rows = np.concatenate([np.arange(s.start, s.stop) for s in request["requests"]])
    return [rows[split] for split in request["splits"]]


def test_train_loader_serves_the_ranks_shard_where_scvi_tools_serves_every_cell(work, cell_ids):
    theirs = scvi.dataloaders.AnnbatchDataModule(loader(work), batch_key="batch", chunk_size=64, preload_nchunks=4)
    assert len(theirs.train_dataloader()) == 32  # 4,000 cells in batches of 128: every cell, on every rank
    ours = AnnbatchDataModule(loader(work), batch_key="batch", dist_info=lambda: (0, 2))
    train = ours.train_dataloader()
    assert len(train) == 15  # rank 0 of 2: round_down(2,000, 128) cells
    got = [batch["obs"]["cell_id"].to_numpy().tolist() for batch in train]
    expected = cs.DistributedSampler(cs.RandomSampler(64, 4, BATCH, rng=np.random.default_rng(7)),
                                     dist_info=lambda: (0, 2))
    assert got == [cell_ids[b].tolist() for r in expected.sample(N_OBS) for b in request_batches(r)]
    # scvi-tools' conversion, unchanged: its dict of tensors.
    tensors = ours.on_before_batch_transfer(next(iter(loader(work))), 0)
    assert set(tensors) == {"X", "batch", "labels", "sample", "size_factor"}
    assert tuple(tensors["X"].shape) == (BATCH, 100)


def test_scvi_tools_split_goes_onto_samplers_without_masks(work):
    dm = AnnbatchDataModule(loader(work), batch_key="batch")
    dm.set_split(None, 0.08, True, None)
    assert (dm.n_val, dm.n_train) == (N_VAL, N_OBS - N_VAL)
    assert dm.train_sampler.mask == slice(N_VAL, N_OBS)
    assert dm.validation_sampler.mask == slice(0, N_VAL)
    assert isinstance(dm.validation_sampler, cs.SequentialSampler)
    assert dm.validation_sampler.batch_size == BATCH


def test_masks_are_the_split_and_a_class_sampler_keeps_its_batches_of_one_class(work, cell_ids):
    classes = annbatch.DatasetCollection(work / "cells.zarr", mode="r").obs(columns=["batch"])["batch"].values
    codes = np.asarray(classes.codes)
    # chunk_size 1: the shuffled collection's class runs are short.
    sampler = cs.ClassSampler(1, 64, 32, classes=classes, num_samples=2048, mask=slice(1000, None),
                              rng=np.random.default_rng(3))
    validation = cs.SequentialSampler(64, 4, BATCH, mask=slice(0, 1000))
    dm = AnnbatchDataModule(loader(work), train_sampler=sampler, validation_sampler=validation, batch_key="batch",
                            dist_info=lambda: (1, 2))
    dm.set_split(0.9, None, True, None)  # what model.train passes by default
    assert (dm.n_train, dm.n_val) == (3000, 1000)
    train = dm.train_dataloader()
    assert len(train) == 32  # 2,048 draws over 2 ranks, batches of 32
    row_of = {cell: row for row, cell in enumerate(cell_ids)}
    for batch in train:
        rows = np.array([row_of[c] for c in batch["obs"]["cell_id"]])
        assert len(set(codes[rows])) == 1 and rows.min() >= 1000
    with pytest.raises(cs.ConfigError, match=r"validation_size \(0.2\) must be left"):
        dm.set_split(None, 0.2, True, None)


def test_bad_input_gets_our_errors(work):
    collection = annbatch.DatasetCollection(work / "cells.zarr", mode="r")
    with pytest.raises(TypeError, match="annbatch"):  # the Loader's own sampler: annbatch's
        AnnbatchDataModule(annbatch.Loader(batch_size=BATCH, chunk_size=64, preload_nchunks=4, preload_to_gpu=False)
                           .use_collection(collection))
    sharded = cs.DistributedSampler(cs.RandomSampler(64, 4, BATCH), dist_info=lambda: (0, 2))
    with pytest.raises(TypeError, match="not a DistributedSampler"):
        AnnbatchDataModule(loader(work), train_sampler=sharded)
    with pytest.raises(cs.ConfigError, match="mode"):
        AnnbatchDataModule(loader(work), mode="spread")
    dm = AnnbatchDataModule(loader(work))
    with pytest.raises(cs.ConfigError, match=r"batch_size \(256\) must equal train_sampler.batch_size \(128\)"):
        dm.set_split(0.9, None, True, 256)
    with pytest.raises(cs.ConfigError, match="train_sampler"):
        AnnbatchDataModule(loader(work, cs.RandomSampler(64, 4, BATCH, mask=slice(500, None))),
                           validation_sampler=cs.SequentialSampler(64, 4, BATCH, mask=slice(0, 600)))
    few = AnnbatchDataModule(loader(work, cs.RandomSampler(64, 4, BATCH, mask=slice(100, None))),
                             validation_sampler=cs.SequentialSampler(64, 4, BATCH, mask=slice(0, 100)),
                             dist_info=lambda: (0, 2))
    with pytest.raises(cs.ConfigError, match="fewer than the 2 ranks"):
        few.val_dataloader()
    for bad in ({}, {"format": STATE_FORMAT, "train": "x"}, {"format": "chunksampler.scvi/1", "train": {}}, None):
        with pytest.raises(cs.StateFormatError):
            dm.load_state_dict(bad)


def lightning_at(epoch: int, batches_done: int) -> SimpleNamespace:
    """What the data module reads of Lightning's Trainer: the epoch and the batches its training loop
    has finished in it."""
    progress = SimpleNamespace(current=SimpleNamespace(processed=batches_done))
    return SimpleNamespace(current_epoch=epoch, fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)))


def module(work: Path) -> AnnbatchDataModule:
    dm = AnnbatchDataModule(loader(work), batch_key="batch")
    dm.set_split(None, 0.08, True, None)
    return dm


def cells(batches) -> list[list[int]]:
    return [batch["obs"]["cell_id"].to_numpy().tolist() for batch in batches]


def test_state_is_the_point_after_lightnings_count_read_from_the_live_sampler(work):
    dm = module(work)
    dm.trainer = trainer = lightning_at(0, 0)
    epochs = dm.train_dataloader()
    total = len(epochs)

    def replayed(epoch: int, done: int) -> dict:
        """The state a fresh copy of the sampler names after replaying the epoch (0.3's way)."""
        probe = epochs.batch_sampler._copy()
        probe.set_epoch(epoch)
        return probe.sample(N_OBS).state_dict(done) if done else probe.state_dict(0)

    def state_at(epoch: int, done: int) -> dict:
        trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed = epoch, done
        state = dm.state_dict()
        assert state["format"] == STATE_FORMAT and state["world_size"] == 1
        return state["train"]

    assert state_at(0, 0) == replayed(0, 0)
    batches = iter(epochs)
    for done in range(1, 6):
        next(batches)
        assert state_at(0, done) == replayed(0, done)
    # The Loader has handed out 5 batches (and read 6: a request holds 2); Lightning cannot have trained 7.
    with pytest.raises(cs.ConfigError, match=r"Lightning counts 7 batches in epoch 0, more than the [56] its loader"):
        state_at(0, 7)
    list(batches)
    assert state_at(0, total) == replayed(0, total)  # the epoch's end
    assert state_at(1, 0) == replayed(1, 0)  # the next one's start, before its first batch
    # In on_train_epoch_start, and after the last epoch, Lightning counts the next epoch with the
    # finished one's batches.
    assert state_at(1, total) == replayed(0, total)


def test_a_state_of_chunksampler_0_3_restores_and_an_unknown_format_is_refused_naming_it(work):
    dm = module(work)
    dm.trainer = lightning_at(0, 0)
    epochs = iter(dm.train_dataloader())
    for _ in range(5):
        next(epochs)
    dm.trainer.fit_loop.epoch_loop.batch_progress.current.processed = 5
    state = dm.state_dict()
    rest = cells(epochs)
    old = {"format": "chunksampler.scvi/1", "train": state["train"], "world_size": 1}  # what 0.3 wrote
    resumed = module(work)
    resumed.load_state_dict(old)
    resumed.trainer = lightning_at(0, 5)
    assert cells(resumed.train_dataloader()) == rest
    newer = {**state, "format": "chunksampler.loaders/2"}
    with pytest.raises(cs.StateFormatError, match=r"AnnbatchDataModule.load_state_dict: the state's format "
                                                  r"'chunksampler.loaders/2' is unknown \(a newer chunksampler wrote it"):
        module(work).load_state_dict(newer)


class Crashed(Exception):
    pass


class Harness(Callback):
    """Records each trained batch's cell ids as (epoch, batch index, cells), saves a checkpoint
    after step ``save_at`` (or at the end of epoch 0) and raises before step ``crash_at + 1``."""

    def __init__(self, directory: Path, save_at: int | None = None, crash_at: int | None = None,
                 save_at_epoch_end: bool = False):
        self.directory, self.save_at, self.crash_at, self.at_end = directory, save_at, crash_at, save_at_epoch_end
        self.trained: list[tuple[int, int, list[int]]] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.crash_at:
            raise Crashed

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.trained.append((trainer.current_epoch, batch_idx, batch["cell_id"].tolist()))
        if trainer.global_step == self.save_at:
            trainer.save_checkpoint(self.directory / "saved.ckpt")

    def on_train_epoch_end(self, trainer, module):
        if self.at_end and trainer.current_epoch == 0:
            trainer.save_checkpoint(self.directory / "saved.ckpt")


class Recording(AnnbatchDataModule):
    def on_before_batch_transfer(self, batch, dataloader_idx):
        tensors = super().on_before_batch_transfer(batch, dataloader_idx)
        tensors["cell_id"] = torch.tensor(batch["obs"]["cell_id"].to_numpy())
        return tensors


def train_in_process(work: Path, harness: Harness, ckpt_path: Path | None = None, seed: int | None = 7) -> Harness:
    """scVI on one device; ``seed=None`` makes the training sampler without rng."""
    rng = None if seed is None else np.random.default_rng(seed)
    dm = Recording(loader(work, cs.RandomSampler(64, 4, BATCH, rng=rng)), batch_key="batch")
    model = scvi.model.SCVI(registry=dm.registry, n_latent=4, n_hidden=16)
    try:
        model.train(datamodule=dm, max_epochs=2, accelerator="cpu", devices=1, validation_size=0.08,
                    check_val_every_n_epoch=1, enable_progress_bar=False, callbacks=[harness],
                    ckpt_path=None if ckpt_path is None else str(ckpt_path))
    except Crashed:
        pass
    return harness


@pytest.fixture(scope="module")
def uninterrupted(work, tmp_path_factory):
    return train_in_process(work, Harness(tmp_path_factory.mktemp("full"))).trained


# One rank: 3,680 training cells make 28 batches of 128 (drop). Saved in epoch 1, 5 batches in; after
# epoch 0's last batch (global_step 28, in on_train_batch_end, before Lightning ends the epoch); at
# the end of epoch 0 (on_train_epoch_end).
@pytest.mark.parametrize(("save_at", "crash_at", "at_end"), [(33, 36, False), (28, 30, False), (None, 31, True)])
def test_lightning_restarts_resume_exactly_where_the_checkpoint_was_taken(
    work, tmp_path, uninterrupted, save_at, crash_at, at_end
):
    assert [epoch for epoch, _, _ in uninterrupted] == [0] * 28 + [1] * 28
    crashed = train_in_process(work, Harness(tmp_path, save_at, crash_at, at_end)).trained
    assert len(crashed) == crash_at
    steps = torch.load(tmp_path / "saved.ckpt", weights_only=False)["global_step"]
    assert steps == (save_at or 28)
    resumed = train_in_process(work, Harness(tmp_path / "again"), tmp_path / "saved.ckpt").trained
    assert crashed[:steps] + resumed == uninterrupted


def test_a_checkpoint_of_another_seed_or_without_the_state_is_refused(work, tmp_path):
    train_in_process(work, Harness(tmp_path, save_at=5, crash_at=6))
    with pytest.raises(cs.StateMismatchError, match="seed"):
        train_in_process(work, Harness(tmp_path / "other"), tmp_path / "saved.ckpt", seed=8)
    checkpoint = torch.load(tmp_path / "saved.ckpt", weights_only=False)
    del checkpoint["Recording"]
    torch.save(checkpoint, tmp_path / "stateless.ckpt")
    with pytest.raises(cs.StateMismatchError, match="holds no sampler state"):
        train_in_process(work, Harness(tmp_path / "other"), tmp_path / "stateless.ckpt")


def test_a_run_of_samplers_made_without_rng_resumes_exactly(work, tmp_path):
    """Each process draws an unseeded sampler's seed from fresh entropy; the shards use the shared
    seed 0, so a restarted process continues the checkpoint's epoch exactly."""
    full = train_in_process(work, Harness(tmp_path / "full"), seed=None).trained
    crashed = train_in_process(work, Harness(tmp_path, save_at=33, crash_at=36), seed=None).trained
    resumed = train_in_process(work, Harness(tmp_path / "again"), tmp_path / "saved.ckpt", seed=None).trained
    assert crashed[:33] + resumed == full


def test_ranks_of_samplers_made_without_rng_read_disjoint_validation_and_training_cells(work):
    """The issue's reproduction, in scvi's module: validation is dealt among the ranks in global mode,
    and each rank's samplers, made without rng, drew their own seeds."""
    def rank_rows(rank: int) -> tuple[list[int], list[int]]:
        validation = cs.RandomSampler(64, 2, 64)  # made without rng on each rank
        dm = AnnbatchDataModule(loader(work, cs.RandomSampler(64, 4, BATCH)), validation_sampler=validation,
                                batch_key="batch", mode="global", dist_info=lambda: (rank, 2))
        dm.set_split(None, 0.08, True, None)
        rows = []
        for epochs in (dm.train_dataloader(), dm.val_dataloader()):
            rows.append([i for r in epochs.batch_sampler.sample(N_OBS) for b in request_batches(r) for i in b])
        return rows[0], rows[1]

    (train0, val0), (train1, val1) = rank_rows(0), rank_rows(1)
    assert not set(val0) & set(val1) and sorted(val0 + val1) == list(range(N_VAL))
    assert not set(train0) & set(train1) and set(train0 + train1) <= set(range(N_VAL, N_OBS))


def test_chunksampler_imports_scvi_tools_only_in_chunksampler_scvi():
    code = "import sys, chunksampler; print('scvi' in sys.modules, 'lightning' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert run.stdout == "False False\n"
