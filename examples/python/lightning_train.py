# SPDX-License-Identifier: MIT
"""Trains a small model with Lightning's Trainer on 2 CPU processes (DDP), its batches chosen by
chunksampler, with Lightning's default settings; a crash mid-epoch resumes exactly where the
checkpoint stopped.

    python examples/python/lightning_train.py work/lightning                  # 3 epochs
    python examples/python/lightning_train.py work/lightning --stop-after 23  # "crashes" at step 23
    python examples/python/lightning_train.py work/lightning --resume work/lightning/ckpt/step=20.ckpt

Lightning's ddp launcher starts rank 1 by running this script again. ChunkDataModule wraps the
training RandomSampler in a DistributedSampler of each rank (its own shard, a new order every
epoch) and the validation SequentialSampler in one that reads each row once across the ranks.
At each epoch's end rank 0 prints what every rank trained and validated. Everything the job
writes goes under the directory it is given: the checkpoints in DIR/ckpt (every 20 steps), and
DIR is Lightning's default_root_dir.
"""

import argparse
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

import chunksampler as cs
from chunksampler.lightning import ChunkDataModule


def rows(n, seed):
    """A map-style dataset of rows (index, x, y)."""
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    return torch.utils.data.TensorDataset(torch.arange(n), x, x.sum(1, keepdim=True))


class Model(LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.trained, self.validated = [], []

    def training_step(self, batch, batch_idx):
        ids, x, y = batch
        self.trained.append((batch_idx, ids.tolist()))
        return F.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        ids, x, y = batch
        if not self.trainer.sanity_checking:
            self.validated.append(ids.tolist())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_epoch_end(self):  # after the epoch's validation
        mine = (self.trained, self.validated)
        every = [mine] * self.trainer.world_size
        if self.trainer.world_size > 1:
            dist.all_gather_object(every, mine)
        self.trained, self.validated = [], []
        if self.trainer.global_rank == 0:
            first, last = every[0][0][0][0], every[0][0][-1][0]
            train = [{i for _, batch in t for i in batch} for t, _ in every]
            val = [i for _, v in every for batch in v for i in batch]
            ranks = f"{len(every)} rank{'s' if len(every) > 1 else ''}"
            print(f"epoch {self.current_epoch}: {ranks} trained batches {first}-{last}, "
                  f"{sum(map(len, train))} rows, {len(set.union(*train))} distinct; rank 0's batch {first} "
                  f"begins {every[0][0][0][1][:3]}, batch {last} ends {every[0][0][-1][1][-3:]}; validation read "
                  f"{len(val)} rows, {len(set(val))} distinct ({' + '.join(str(len(v)) for _, v in every)} batches)",
                  flush=True)


class Crash(Callback):
    """Ends every rank at the start of global step ``step``, with no clean-up, as a crash would."""

    def __init__(self, step):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            if trainer.global_rank == 0:
                print(f"crash at step {self.step} (epoch {trainer.current_epoch}, batch {batch_idx})", flush=True)
            os._exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="where the job writes: DIR/ckpt/step=K.ckpt, Lightning's root directory")
    parser.add_argument("--devices", type=int, default=2, help="processes, one per device (%(default)s)")
    parser.add_argument("--accelerator", default="cpu", help="Lightning's accelerator: cpu or gpu (%(default)s)")
    parser.add_argument("--epochs", type=int, default=3, help="(%(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank (%(default)s)")
    parser.add_argument("--checkpoint-every", type=int, default=20, metavar="K", help="steps (%(default)s)")
    parser.add_argument("--stop-after", type=int, metavar="K", help="crash at the start of step K")
    parser.add_argument("--resume", metavar="CKPT", help="a checkpoint file to continue from")
    args = parser.parse_args()

    data = ChunkDataModule(
        rows(1000, 0), cs.RandomSampler(chunk_size=16, preload_nchunks=4, batch_size=32, rng=np.random.default_rng(0)),
        val_dataset=rows(250, 1), val_sampler=cs.SequentialSampler(chunk_size=16, preload_nchunks=4, batch_size=32),
        num_workers=args.workers,
    )
    checkpoints = ModelCheckpoint(args.dir / "ckpt", "{step}", every_n_train_steps=args.checkpoint_every,
                                  save_top_k=-1, enable_version_counter=False)  # a new step=20.ckpt replaces an old
    trainer = Trainer(
        accelerator=args.accelerator, devices=args.devices, strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs, callbacks=[checkpoints] + ([Crash(args.stop_after)] if args.stop_after else []),
        default_root_dir=args.dir, logger=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Model(), datamodule=data, ckpt_path=args.resume)


if __name__ == "__main__":
    main()
