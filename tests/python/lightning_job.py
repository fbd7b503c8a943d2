"""Lightning jobs on chunksampler.lightning; test_lightning.py runs them and checks what they write.

    python lightning_job.py OUT main     # 2 ranks: fits, resumed fits, bad input, then a crash
    python lightning_job.py OUT single   # 1 device: a fit, and one interrupted and resumed
    python lightning_job.py OUT resume --ckpt DIED SINGLE   # 2 ranks: resumes the crash; SINGLE's
                                                            # 1-device checkpoint must be refused

Each fit is ``Trainer(accelerator="cpu", devices=D, strategy="ddp")`` (``"auto"`` for one device)
with Lightning's default settings (``use_distributed_sampler=True``) on a ``ChunkDataModule``, or
on a LightningModule whose ``train_dataloader()`` makes a ``ChunkDataLoader`` ("own-" fits).
Lightning's ddp launcher starts rank 1 by running this script again, with the same arguments, and
every rank plays the same fits in turn (the process group stays up between them). Each rank writes
``OUT/<fit>-rank<r>.json``: per epoch, the global indices of every batch it trained (with
Lightning's ``batch_idx``) and validated, and at each checkpoint Lightning's batch counters and the
loader's state; a fit that fails writes the exception's type and message instead. "-cut" fits
raise on every rank 3 steps after their checkpoint and are resumed in the same processes from the
checkpoint file, with new objects; the crash ends the processes with ``os._exit`` mid-epoch, with
DataLoader workers, and ``resume`` continues it in new processes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

import chunksampler as cs
from chunksampler.lightning import ChunkDataLoader, ChunkDataModule
from chunksampler.torch import BatchSampler

N_TRAIN, N_VAL, FEATURES = 1000, 250, 4
EPOCHS = 3
CKPT_STEP = 20  # every 20 steps: 15 batches an epoch per rank on 2 ranks, so step 20 is batch 5 of epoch 1
STOP_STEP = 23  # the interrupted fits stop at the start of step 23: 3 batches after the checkpoint

# Lightning's own warnings about a small job (few workers, a short epoch) are not ours.
warnings.filterwarnings("ignore", message=".*does not have many workers.*")
warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")


def dataset(n: int, seed: int) -> torch.utils.data.TensorDataset:
    """Rows ``(index, x, y)``: the index is what the checks read."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    return torch.utils.data.TensorDataset(torch.arange(n), x, x.sum(1, keepdim=True))


def train_sampler(seed: int = 7) -> cs.RandomSampler:
    return cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=32, rng=np.random.default_rng(seed))


def unseeded(chunk_size: int, preload_nchunks: int, batch_size: int) -> cs.RandomSampler:
    """A RandomSampler made without rng, as annbatch's default: its seed comes from fresh entropy."""
    return cs.RandomSampler(chunk_size=chunk_size, preload_nchunks=preload_nchunks, batch_size=batch_size)


def val_sampler() -> cs.SequentialSampler:
    return cs.SequentialSampler(chunk_size=16, preload_nchunks=4, batch_size=32)


def datamodule(workers: int, seed: int = 7, **splits) -> ChunkDataModule:
    splits.setdefault("train_sampler", train_sampler(seed))
    splits.setdefault("val_sampler", val_sampler())
    return ChunkDataModule(dataset(N_TRAIN, 0), val_dataset=dataset(N_VAL, 1), num_workers=workers, **splits)


class Model(LightningModule):
    """A linear model that records every batch it trains and validates."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(FEATURES, 1)
        self.train_batches: dict[int, list] = {}
        self.val_batches: dict[int, list] = {}
        self.checkpoints: list[dict] = []

    def training_step(self, batch, batch_idx):
        ids, x, y = batch
        self.train_batches.setdefault(self.current_epoch, []).append([batch_idx, ids.tolist()])
        return F.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        ids, x, y = batch
        if not self.trainer.sanity_checking:
            self.val_batches.setdefault(self.current_epoch, []).append(ids.tolist())
        self.log("val_loss", F.mse_loss(self.layer(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_save_checkpoint(self, checkpoint) -> None:
        progress = self.trainer.fit_loop.epoch_loop.batch_progress.current
        loader = self.trainer.train_dataloader
        self.checkpoints.append({
            "epoch": self.current_epoch,
            "global_step": self.global_step,
            "ready": progress.ready,
            "completed": progress.completed,
            "trained": len(self.train_batches.get(self.current_epoch, [])),
            "loader_state": loader.state_dict(),
            "handed_out_by_batch_sampler": loader.batch_sampler.state_dict()["batches_done"],
        })

    def record(self) -> dict:
        return {
            "train": {str(e): b for e, b in self.train_batches.items()},
            "val": {str(e): b for e, b in self.val_batches.items()},
            "checkpoints": self.checkpoints,
        }


class OwnLoaderModel(Model):
    """A LightningModule that makes its own loaders (no data module)."""

    def __init__(self, workers: int, seed: int = 7, plain: bool = False) -> None:
        super().__init__()
        self.workers, self.seed, self.plain = workers, seed, plain

    def train_dataloader(self):
        sampler = train_sampler(self.seed)
        if not self.plain:
            sampler = cs.DistributedSampler(sampler, dist_info="torch")
        return ChunkDataLoader(dataset(N_TRAIN, 0), sampler, num_workers=self.workers)

    def val_dataloader(self):
        sampler = cs.DistributedSampler(val_sampler(), dist_info="torch", mode="global", enforce_equal_batches=False)
        return ChunkDataLoader(dataset(N_VAL, 1), sampler, num_workers=self.workers, equal_batches=False)


class PlainDataLoaderModel(Model):
    """The issue's setup: a torch DataLoader over chunksampler.torch.BatchSampler, which Lightning's
    default Trainer tries to rebuild around its own DistributedSampler."""

    def train_dataloader(self):
        sampler = cs.DistributedSampler(train_sampler(), dist_info="torch")
        return torch.utils.data.DataLoader(dataset(N_TRAIN, 0), batch_sampler=BatchSampler(sampler, N_TRAIN))


class Interrupted(Exception):
    pass


class Stop(Callback):
    """Stops the fit at the start of global step ``step`` on every rank: by raising, or by ending the
    process as a crash would (``os._exit``), after writing what was trained."""

    def __init__(self, step: int, write=None) -> None:
        self.step, self.write = step, write

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            if self.write is None:
                raise Interrupted(f"stopped at step {self.step}")
            self.write(pl_module.record())
            os._exit(3)


def trainer(out: Path, devices: int, *callbacks: Callback) -> Trainer:
    # Mid-epoch checkpoints every CKPT_STEP steps, and Lightning's usual one at each epoch's end.
    steps = ModelCheckpoint(dirpath=out, filename="{step}", every_n_train_steps=CKPT_STEP, save_top_k=-1)
    epochs = ModelCheckpoint(dirpath=out, filename="end-{epoch}", save_top_k=-1)
    return Trainer(
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        max_epochs=EPOCHS,
        callbacks=[steps, epochs, *callbacks],
        enable_progress_bar=False,
        logger=False,
        enable_model_summary=False,
    )


class Job:
    def __init__(self, out: Path, devices: int) -> None:
        self.out, self.devices = out, devices

    def write(self, name: str, rank: int, result: dict) -> None:
        (self.out / f"{name}-rank{rank}.json").write_text(json.dumps(result))

    def fit(self, name: str, model: Model, data=None, *, stop: int | None = None, ckpt: Path | None = None) -> None:
        """One fit; writes what the model recorded, or the exception that ended it."""
        callbacks = [] if stop is None else [Stop(stop)]
        t = trainer(self.out / name, self.devices, *callbacks)
        try:
            t.fit(model, datamodule=data, ckpt_path=ckpt)
            result = model.record()
        except Interrupted:
            result = {**model.record(), "interrupted": True}
        except Exception as error:  # a bad-input fit: what every rank raised
            result = {"error": type(error).__name__, "message": str(error)}
        self.write(name, t.global_rank, result)

    def checkpoint(self, name: str) -> Path:
        return self.out / name / f"step={CKPT_STEP}.ckpt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("scenario", choices=["main", "single", "resume"])
    parser.add_argument("--ckpt", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    job = Job(args.out, devices=1 if args.scenario == "single" else 2)

    if args.scenario == "main":
        job.fit("full", Model(), datamodule(0))
        job.fit("cut", Model(), datamodule(0), stop=STOP_STEP)
        job.fit("resumed", Model(), datamodule(0), ckpt=job.checkpoint("cut"))
        job.fit("resumed-at-epoch-end", Model(), datamodule(0), ckpt=job.out / "cut" / "end-epoch=0.ckpt")
        job.fit("own-cut", OwnLoaderModel(0), stop=STOP_STEP)
        job.fit("own-resumed", OwnLoaderModel(0), ckpt=job.checkpoint("own-cut"))
        # Bad input: every rank must raise, none may wait for the others.
        job.fit("bad-seed", Model(), datamodule(0, seed=8), ckpt=job.checkpoint("cut"))
        job.fit("own-bad-seed", OwnLoaderModel(0, seed=8), ckpt=job.checkpoint("own-cut"))
        # Both ranks' dist_info say rank 0: only rank 1's is wrong.
        rank0 = lambda: cs.DistributedSampler(train_sampler(), dist_info=lambda: (0, 2))  # noqa: E731
        job.fit("bad-dist-info", Model(), datamodule(0, train_sampler=rank0))
        not_ours = lambda: torch.utils.data.RandomSampler(range(N_TRAIN))  # noqa: E731
        job.fit("bad-sampler", Model(), datamodule(0, train_sampler=not_ours))
        job.fit("own-plain-sampler", OwnLoaderModel(0, plain=True))
        job.fit("plain-dataloader", PlainDataLoaderModel())
        # Each rank its own seed: their shards would overlap in global mode and no checkpoint would
        # restore on another rank, so every rank stops.
        def own_seed():
            return cs.DistributedSampler(train_sampler(7 + torch.distributed.get_rank()), dist_info="torch")

        job.fit("bad-seeds-differ", Model(), datamodule(0, train_sampler=own_seed))
        # Samplers made without rng (each rank's seed drawn from fresh entropy): validation in global
        # mode still reads every row once across the ranks, and training resumes from a checkpoint.
        job.fit("unseeded-val", Model(), datamodule(0, val_sampler=unseeded(16, 2, 16)))
        job.fit("unseeded-cut", Model(), datamodule(0, train_sampler=unseeded(16, 4, 32)), stop=STOP_STEP)
        job.fit("unseeded-resumed", Model(), datamodule(0, train_sampler=unseeded(16, 4, 32)),
                ckpt=job.checkpoint("unseeded-cut"))
        # Last, a crash: with DataLoader workers, the processes end mid-epoch 1 (os._exit).
        t = trainer(args.out / "die", job.devices)
        t.callbacks.append(Stop(STOP_STEP, write=lambda record: job.write("die", t.global_rank, record)))
        t.fit(Model(), datamodule=datamodule(2))
        sys.exit(f"the fit should have died at step {STOP_STEP}")
    elif args.scenario == "single":
        job.fit("single", Model(), datamodule(0))
        job.fit("single-cut", Model(), datamodule(0), stop=STOP_STEP)
        job.fit("single-resumed", Model(), datamodule(0), ckpt=job.checkpoint("single-cut"))
    else:
        died, single = args.ckpt
        job.fit("revived", Model(), datamodule(2), ckpt=died)
        job.fit("bad-world-size", Model(), datamodule(0), ckpt=single)


if __name__ == "__main__":
    main()
