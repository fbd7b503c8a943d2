# SPDX-License-Identifier: MIT
"""Trains scVI (scvi-tools) on 2 CPU processes from an annbatch collection, each rank reading its own
shard through chunksampler's samplers, with checkpoints that resume exactly.

    python examples/python/scvi_ddp.py work/scvi --make-data      # work/scvi/cells.zarr: 4,000 cells x 100 genes
    python examples/python/scvi_ddp.py work/scvi                  # 2 epochs on 2 ranks (DDP, gloo)
    python examples/python/scvi_ddp.py work/scvi --checkpoint-every 4 --stop-after 18     # "crashes" after 18 steps
    python examples/python/scvi_ddp.py work/scvi --resume work/scvi/checkpoints/last.ckpt  # trains the rest

Run it as a script: Lightning's DDP launcher (``strategy="ddp"``) starts rank 1 by running this
file again with the same arguments, and each rank builds the same samplers from the same seed.
``chunksampler.scvi.AnnbatchDataModule`` gives each rank its shard of the training rows (global
mode: a new split of the chunks every epoch) and of the validation rows, and its state in every
checkpoint says how far the training loop got, so the resumed run reads exactly the batches the
interrupted one had not trained on. Everything it writes goes under WORK (the data, the
checkpoints, Lightning's default_root_dir and scvi-tools' training history), or into the --record
directory.

scvi-tools' Trainer adds its own SaveCheckpoint (scvi model directories, which fail for a model
built from a registry) whenever ``enable_checkpointing=True``, and Lightning refuses a
ModelCheckpoint without it; so the checkpoints here come from a small callback that calls
``trainer.save_checkpoint`` on every rank (rank 0 writes).
"""

import argparse
import json
import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np

N_FILES, CELLS_PER_FILE, N_GENES = 4, 1000, 100
CHUNK_SIZE, PRELOAD_NCHUNKS, BATCH_SIZE = 64, 4, 128


def say(line: str) -> None:
    """Prints ``line`` in one write of the whole line and its newline, flushed: the two ranks share
    the terminal (or a pipe), and ``print`` writes the text and the newline separately, so that a
    line of the other rank could come between them."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="directory of the collection (cells.zarr) and the checkpoints")
    parser.add_argument("--make-data", action="store_true", help="write WORK/cells.zarr and exit")
    parser.add_argument("--epochs", type=int, default=2, help="epochs to train (%(default)s)")
    parser.add_argument("--devices", type=int, default=2, help="CPU processes (%(default)s)")
    parser.add_argument("--checkpoint-every", type=int, metavar="K",
                        help="save WORK/checkpoints/last.ckpt every K training steps")
    parser.add_argument("--stop-after", type=int, metavar="K",
                        help="simulate a crash: every rank exits (os._exit) once K training steps are done")
    parser.add_argument("--resume", type=Path, metavar="CKPT", help="a checkpoint to continue from")
    parser.add_argument("--seed", type=int, default=7, help="the training sampler's seed (%(default)s)")
    parser.add_argument("--record", type=Path, metavar="DIR",
                        help="write the cell ids of every batch each rank trains and validates on to DIR/rank<R>.jsonl")
    return parser.parse_args()


def make_data(work: Path) -> None:
    """Four AnnData files of negative-binomial counts (a batch column, a cell_id column), shuffled
    into an annbatch DatasetCollection of two datasets."""
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp
    from annbatch import DatasetCollection

    warnings.filterwarnings("ignore", message="Consolidated metadata")  # zarr's, about annbatch's store
    rng = np.random.default_rng(0)
    work.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(N_FILES):
        mean = rng.gamma(2.0, 1.0, size=N_GENES) * (1.0 + 0.5 * (f % 2))  # two batches, two scales
        counts = rng.negative_binomial(2, 2 / (2 + mean), size=(CELLS_PER_FILE, N_GENES)).astype(np.float32)
        obs = pd.DataFrame(
            {"batch": pd.Categorical([f"batch{f % 2}"] * CELLS_PER_FILE),
             "cell_id": np.arange(f * CELLS_PER_FILE, (f + 1) * CELLS_PER_FILE)},
            index=[f"cell{f * CELLS_PER_FILE + i}" for i in range(CELLS_PER_FILE)],
        )
        var = pd.DataFrame(index=[f"gene{g}" for g in range(N_GENES)])
        paths.append(work / f"file{f}.h5ad")
        ad.AnnData(X=sp.csr_matrix(counts), obs=obs, var=var).write_h5ad(paths[-1])
    with ad.settings.override(zarr_write_format=3):  # annbatch's sharded arrays are zarr v3
        DatasetCollection(work / "cells.zarr", mode="w").add_adatas(
            paths, n_obs_per_chunk=CHUNK_SIZE, dataset_size=N_FILES * CELLS_PER_FILE // 2, rng=np.random.default_rng(1)
        )
    say(f"wrote {work / 'cells.zarr'}: {N_FILES * CELLS_PER_FILE} cells x {N_GENES} genes in 2 datasets")


def train(args) -> None:
    import annbatch
    import scvi
    import torch
    from lightning.pytorch.callbacks import Callback

    import chunksampler
    from chunksampler.scvi import AnnbatchDataModule

    class SaveEvery(Callback):
        """A Lightning checkpoint every `every` training steps; WORK/checkpoints/last.ckpt is replaced
        atomically, after every rank has passed the save."""

        def __init__(self, directory: Path, every: int) -> None:
            self.directory, self.every = directory, every

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if trainer.global_step % self.every == 0:
                partial = self.directory / "last.ckpt.partial"
                trainer.save_checkpoint(partial)  # every rank calls it; rank 0 writes, then all meet
                if trainer.is_global_zero:
                    os.replace(partial, self.directory / "last.ckpt")
                    say(f"step {trainer.global_step}: saved {self.directory / 'last.ckpt'}")

    class Report(Callback):
        """Counts each rank's batches and cells per epoch, prints them; with --record, writes every
        batch's cell ids (from the tensors scvi-tools trained on) and the training loss."""

        def __init__(self, record: Path | None, stop_after: int | None) -> None:
            self.record, self.stop_after, self.file = record, stop_after, None
            self.counts = {}

        def _write(self, trainer, phase, batch, batch_idx, loss=None):
            key = (phase, trainer.current_epoch)
            batches, cells = self.counts.get(key, (0, 0))
            self.counts[key] = (batches + 1, cells + len(batch["X"]))
            if self.record is None:
                return
            if self.file is None:
                self.record.mkdir(parents=True, exist_ok=True)
                self.file = open(self.record / f"rank{trainer.global_rank}.jsonl", "a")  # noqa: SIM115
            line = {"phase": phase, "epoch": trainer.current_epoch, "batch": batch_idx,
                    "step": trainer.global_step, "cells": batch["cell_id"].tolist()}
            if loss is not None:
                line["loss"] = float(loss)
            self.file.write(json.dumps(line) + "\n")
            self.file.flush()

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if self.stop_after is not None and trainer.global_step == self.stop_after:
                say(f"rank {trainer.global_rank}: exiting after {self.stop_after} steps")
                os._exit(3)  # no clean-up, as a killed process

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            self._write(trainer, "train", batch, batch_idx, loss.item())

        def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx, dataloader_idx=0):
            self._write(trainer, "validation", batch, batch_idx)

        def on_validation_epoch_end(self, trainer, module):
            epoch = trainer.current_epoch
            train, val = self.counts.get(("train", epoch)), self.counts.get(("validation", epoch))
            say(f"rank {trainer.global_rank}: epoch {epoch}: trained on {train[0]} batches "
                f"({train[1]} cells), validated {val[0]} ({val[1]} cells)")

    class Recording(AnnbatchDataModule):
        """Carries each batch's cell ids next to scvi-tools' tensors (which it leaves unchanged)."""

        def on_before_batch_transfer(self, batch, dataloader_idx):
            tensors = super().on_before_batch_transfer(batch, dataloader_idx)
            tensors["cell_id"] = torch.tensor(batch["obs"]["cell_id"].to_numpy())
            return tensors

    # Quieter: Lightning's banners and tips, and warnings about scvi-tools' own code.
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")
    warnings.filterwarnings("ignore", message="early_stopping was automatically disabled")
    warnings.filterwarnings("ignore", message=".*(Sparse CSR tensor support|Sparse invariant checks)")
    collection = annbatch.DatasetCollection(args.work / "cells.zarr", mode="r")
    # The same seed on every rank (and on a restart): one permutation of the chunks per epoch for all.
    sampler = chunksampler.RandomSampler(CHUNK_SIZE, PRELOAD_NCHUNKS, BATCH_SIZE, rng=np.random.default_rng(args.seed))
    loader = annbatch.Loader(batch_sampler=sampler, preload_to_gpu=False).use_collection(collection)
    module_class = Recording if args.record else AnnbatchDataModule
    datamodule = module_class(loader, batch_key="batch", mode="global")
    model = scvi.model.SCVI(registry=datamodule.registry, n_latent=4, n_hidden=16)

    callbacks = [Report(args.record, args.stop_after)]
    if args.checkpoint_every:
        (args.work / "checkpoints").mkdir(parents=True, exist_ok=True)
        callbacks.append(SaveEvery(args.work / "checkpoints", args.checkpoint_every))
    model.train(
        datamodule=datamodule,
        max_epochs=args.epochs,
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp_find_unused_parameters_true",
        validation_size=0.08,  # 320 cells: 3 batches, 2 on rank 0 and 1 on rank 1
        check_val_every_n_epoch=1,
        callbacks=callbacks,
        ckpt_path=str(args.resume) if args.resume else None,
        default_root_dir=str(args.work),  # Lightning's, else the working directory
        log_save_dir=str(args.work),  # scvi-tools' lightning_logs/ (its history, saved under DDP), else there too
        enable_progress_bar=False,
        log_every_n_steps=1,
    )
    if model.trainer.is_global_zero:
        elbo = model.history["elbo_train"]["elbo_train"].tolist()
        say("elbo_train by epoch: " + ", ".join(f"{value:.1f}" for value in elbo))


def main() -> None:
    args = parse_args()
    if args.make_data:
        make_data(args.work)
        return
    train(args)


if __name__ == "__main__":
    sys.exit(main())
