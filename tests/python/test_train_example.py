"""examples/python/train.py runs under torchrun on 2 ranks as its page (docs/tutorials/annbatch-loader.md)
shows, in an example tree with the page's paths under work/train: once uninterrupted (--make-data
writes the file first), and once stopped mid-epoch and resumed from its checkpoint. Each run
records, per rank, the batches it trained on (--record), which the tests compare."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, assert_tree_clean, free_port, make_example_tree

for module in ("torch", "h5py", "anndata"):
    pytest.importorskip(module, reason=f"train.py and its fixture need {module} (python3-torch, python3-anndata)")
import torch  # noqa: E402

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "python" / "train.py"
RANKS = (0, 1)
# 4,000 cells: 2,000 per rank, 62 batches of 32 (drop leaves 16 out). Checkpoints every 5 batches
# and a crash after 17: the resumed run replays batches 15 and 16, trained on from the checkpoint's
# model again, so each batch is in the final model once.
CHECKPOINT_EVERY, STOP_AFTER = 5, 17


def torchrun(tree: Path, *args: object, crash: bool = False) -> str:
    """Runs train.py on 2 ranks with this interpreter in ``tree``; returns what they printed. With
    ``crash``, the job must fail as a killed one does: torchrun exits non-zero, each rank with status 3."""
    # Debian's torch 1.13 crashes on torchrun's default --redirects 0 --tee 0: tee stdout.
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--redirects", "1", "--tee", "1",
               str(TRAIN), *map(str, args)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT, cwd=tree)
    said = f"{' '.join(command)} exited with {run.returncode}:\n{run.stdout}\n{run.stderr}"
    if crash:
        # torchrun names the first rank that failed and its exit code.
        assert run.returncode != 0 and "exitcode  : 3" in run.stderr, said
    else:
        assert run.returncode == 0, said
    return run.stdout


def batches(record: dict) -> dict[tuple[int, int], np.ndarray]:
    """A rank's record as {(epoch, batch number): the batch's cells}, in training order."""
    cells = np.split(record["obs"], np.cumsum(record["size"])[:-1])
    return {(int(e), int(b)): c for e, b, c in zip(record["epoch"], record["batch"], cells)}


def load(directory: Path) -> dict[int, dict]:
    return {rank: dict(np.load(directory / f"rank{rank}.npz")) for rank in RANKS}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    # The page's commands, with their relative paths, in a git repository that has our .gitignore.
    tree = make_example_tree(tmp_path_factory.mktemp("train"))
    data, checkpoint = "work/train/cells.h5ad", "work/train/ckpt.pt"
    full_out = torchrun(tree, data, "--make-data", "--record", "work/train/full")
    crashed_out = torchrun(tree, data, "--checkpoint", checkpoint, "--checkpoint-every", CHECKPOINT_EVERY,
                           "--stop-after", STOP_AFTER, "--record", "work/train/crashed", crash=True)
    saved_at = torch.load(tree / checkpoint)["sampler"]["batches_done"]
    resumed_out = torchrun(tree, data, "--checkpoint", checkpoint, "--resume", checkpoint, "--record",
                           "work/train/resumed")
    work = tree / "work" / "train"
    return {"full": load(work / "full"), "crashed": load(work / "crashed"), "resumed": load(work / "resumed"),
            "saved_at": saved_at, "full_out": full_out, "crashed_out": crashed_out, "resumed_out": resumed_out,
            "tree": tree}


def test_ranks_train_equal_disjoint_shards(runs):
    full = runs["full"]
    assert len(full[0]["size"]) == len(full[1]["size"]) == 62
    assert all((full[rank]["size"] == 32).all() for rank in RANKS)
    cells = [full[rank]["obs"] for rank in RANKS]
    assert all(len(np.unique(c)) == len(c) for c in cells), "a rank trained on a cell twice"
    assert not np.intersect1d(*cells).size, "the ranks' shards overlap"
    for rank in RANKS:
        assert f"rank {rank}: 62 batches, 1984 observations" in runs["full_out"]


def test_loss_decreases(runs):
    for rank in RANKS:
        loss = runs["full"][rank]["loss"]
        assert loss[-5:].mean() < 0.7 * loss[:5].mean(), f"rank {rank}: loss {loss[:5]} ... {loss[-5:]}"


def resumed_epoch(crashed: dict, saved_at: int, resumed: dict) -> list[np.ndarray]:
    """The epoch the two runs trained into the final model: the crashed run's batches up to the
    checkpoint, then the resumed run's."""
    before = [cells for (_, b), cells in batches(crashed).items() if b < saved_at]
    return before + list(batches(resumed).values())


def test_resume_continues_where_the_checkpoint_stopped(runs):
    for rank in RANKS:
        assert f"rank {rank}: 17 batches" in runs["crashed_out"] and "killed by --stop-after" in runs["crashed_out"]
    saved_at = runs["saved_at"]
    assert saved_at == STOP_AFTER // CHECKPOINT_EVERY * CHECKPOINT_EVERY
    assert f"resuming epoch 0 after batch {saved_at} of 62" in runs["resumed_out"]
    for rank in RANKS:
        crashed, resumed, full = (batches(runs[run][rank]) for run in ("crashed", "resumed", "full"))
        assert list(crashed) == [(0, b) for b in range(STOP_AFTER)]
        assert list(resumed) == [(0, b) for b in range(saved_at, 62)]
        # Batch for batch the uninterrupted epoch, each cell once; the replayed batches are the same.
        epoch = resumed_epoch(runs["crashed"][rank], saved_at, runs["resumed"][rank])
        assert len(epoch) == len(full)
        assert all(np.array_equal(a, b) for a, b in zip(epoch, full.values())), f"rank {rank}: other batches"
        cells = np.concatenate(epoch)
        assert len(np.unique(cells)) == len(cells) == 1984
        for b in range(saved_at, STOP_AFTER):
            assert np.array_equal(crashed[(0, b)], resumed[(0, b)])
        # The checkpoint restored model and optimizer too: the resumed losses are the uninterrupted
        # run's (gloo on CPU is deterministic; the tolerance only allows for rounding).
        np.testing.assert_allclose(runs["resumed"][rank]["loss"], runs["full"][rank]["loss"][saved_at:], rtol=1e-4)


def test_the_check_sees_the_replayed_batches(runs):
    """Joining the crashed and resumed runs whole, ignoring where the checkpoint was, counts the
    replayed batches twice: the exactly-once check above can fail."""
    for rank in RANKS:
        naive = resumed_epoch(runs["crashed"][rank], STOP_AFTER, runs["resumed"][rank])
        cells = np.concatenate(naive)
        assert len(np.unique(cells)) == len(cells) - (STOP_AFTER - runs["saved_at"]) * 32


def test_the_runs_write_only_under_the_paths_they_name(runs):
    assert_tree_clean(runs["tree"], "train.py")


def test_help_runs_without_torchrun():
    env = {key: value for key, value in os.environ.items() if key != "RANK"}
    help_run = subprocess.run([sys.executable, str(TRAIN), "--help"], capture_output=True, text=True, env=env)
    assert help_run.returncode == 0 and "--resume PATH" in help_run.stdout and "--stop-after K" in help_run.stdout
    bare = subprocess.run([sys.executable, str(TRAIN), "cells.h5ad"], capture_output=True, text=True, env=env)
    assert bare.returncode == 2 and "launch with torchrun" in bare.stderr
