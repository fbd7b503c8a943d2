# SPDX-License-Identifier: MIT
"""Trains a small PyTorch classifier on an .h5ad file, reading X chunk by chunk with chunksampler.

Every rank that torchrun starts gets its share of the epoch from a chunksampler.DistributedSampler,
reads each load request's chunks of the sparse matrix X (CSR) with h5py, one contiguous read per
chunk, and trains one step per batch; DistributedDataParallel averages the gradients (gloo, CPU).
Rank 0 checkpoints the model, the optimizer and the sampler's state every few batches, and
--resume continues the epoch exactly where that checkpoint stopped. It writes only the paths its
command line names (DATA with --make-data, the checkpoint, the --record directory), making their
folders.

    torchrun --standalone --nproc-per-node 2 examples/python/train.py work/train/cells.h5ad --make-data
    torchrun ... examples/python/train.py work/train/cells.h5ad --checkpoint work/train/ckpt.pt --stop-after 17
    torchrun ... examples/python/train.py work/train/cells.h5ad --checkpoint work/train/ckpt.pt \
        --resume work/train/ckpt.pt

The first writes the data (if missing) and then trains one uninterrupted epoch; the second
crashes after 17 batches (every rank exits at once, with status 3, and torchrun with 1); the third
ends that epoch. The checkpoints come every 5 batches, so the last one before the crash was taken
after batch 15 (counting from 1): the resumed run trains
batches 16 and 17 again, from the checkpoint's model and optimizer, and each batch is in the final
model once. torchrun is the one of the Python that has chunksampler, h5py and torch (and, for
--make-data, anndata); Debian's torch 1.13 needs `python3 -m torch.distributed.run --standalone
--nproc_per_node 2 --redirects 1 --tee 1` instead.

The task: predict which quartile of the cells' total counts (obs/row_sum, written by
examples/h5ad/make_h5ad.py) a cell is in, from its counts.
"""

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import chunksampler

MAKE_H5AD = Path(__file__).resolve().parents[1] / "h5ad" / "make_h5ad.py"
N_CLASSES = 4  # quartiles of the total counts


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Launch it with torchrun, which sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
    )
    parser.add_argument("data", help="the .h5ad file; its X must be a CSR matrix, its obs have row_sum")
    parser.add_argument("--make-data", action="store_true",
                        help="write DATA with examples/h5ad/make_h5ad.py first, if it does not exist; then train")
    parser.add_argument("--cells", type=int, default=4000, help="cells --make-data writes (%(default)s)")
    parser.add_argument("--genes", type=int, default=200, help="genes --make-data writes (%(default)s)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs to train (%(default)s)")
    parser.add_argument("--chunk-size", type=int, default=32, help="rows per contiguous read (%(default)s)")
    parser.add_argument("--preload-nchunks", type=int, default=4, help="chunks per load request (%(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="observations per batch (%(default)s)")
    parser.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate (%(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the data, the model and the sampler (%(default)s)")
    parser.add_argument("--checkpoint", metavar="PATH", help="where rank 0 saves model, optimizer and sampler")
    parser.add_argument("--checkpoint-every", type=int, default=5, metavar="K",
                        help="batches between checkpoints (%(default)s)")
    parser.add_argument("--resume", metavar="PATH", help="a checkpoint to continue from")
    parser.add_argument("--stop-after", type=int, metavar="K",
                        help="crash after K training steps of this run: every rank exits with status 3, without "
                             "clean-up (os._exit), once --record is written (the steps after the last checkpoint are "
                             "trained again on --resume)")
    parser.add_argument("--record", metavar="DIR", help="write each rank's consumed observations to DIR/rank<R>.npz")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        parser.error("no RANK in the environment: launch with torchrun --standalone --nproc-per-node N ... train.py")
    if min(args.epochs, args.checkpoint_every, args.stop_after or 1) < 1:
        parser.error("--epochs, --checkpoint-every and --stop-after must be >= 1")
    return args


# --- the data: an AnnData file whose X rows are read from disk, a chunk at a time ---------------


def make_data(args):
    """Rank 0 writes the fixture (if missing) while the other ranks wait at the barrier."""
    if dist.get_rank() == 0 and not os.path.exists(args.data):
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)
        subprocess.run([sys.executable, str(MAKE_H5AD), args.data, "--cells", str(args.cells),
                        "--genes", str(args.genes), "--density", "0.1", "--seed", str(args.seed)], check=True)
    dist.barrier()


class H5adRows:
    """The rows of an .h5ad file's X, read a load request at a time, and a label per cell.

    X stays on disk (its CSR datasets are read lazily); the labels, one small integer per cell,
    are held in memory, as obs usually is.
    """

    def __init__(self, path):
        self.file = h5py.File(path, "r")
        self.x = self.file["X"]
        if self.x.attrs.get("encoding-type") != "csr_matrix":
            sys.exit(f"{path}: X must be a CSR matrix (anndata's csr_matrix encoding)")
        self.n_obs, self.n_vars = (int(n) for n in self.x.attrs["shape"])
        row_sum = self.file["obs"]["row_sum"][:]
        self.labels = np.searchsorted(np.quantile(row_sum, [0.25, 0.5, 0.75]), row_sum, side="right")

    def read(self, request):
        """The rows of a LoadRequest's chunks, concatenated in order: a dense float32 block, and
        which cell each row is.

        A chunk is a range of rows, so its stored values are one contiguous range of X/data and
        X/indices: indptr[start:stop + 1] says where, and one read of each fetches them.
        """
        blocks = []
        for chunk in request["requests"]:
            indptr = self.x["indptr"][chunk.start:chunk.stop + 1]
            data = self.x["data"][indptr[0]:indptr[-1]]
            indices = self.x["indices"][indptr[0]:indptr[-1]]
            block = np.zeros((chunk.stop - chunk.start, self.n_vars), dtype=np.float32)
            block[np.repeat(np.arange(len(block)), np.diff(indptr)), indices] = data
            blocks.append(block)
        cells = np.concatenate([np.arange(chunk.start, chunk.stop) for chunk in request["requests"]])
        return np.concatenate(blocks), cells


# --- checkpoints ---------------------------------------------------------------------------------


def save_checkpoint(path, model, optimizer, sampler, batches_done):
    """Rank 0 writes; every rank's sampler is at the same point, so its state restores them all.

    batches_done is passed explicitly: the sampler's iterator has already yielded the whole
    current request, but only the batches trained on are done. chunksampler.write_atomically
    writes the file next to its destination, syncs it and renames it over it, so a crash mid-write
    leaves the previous checkpoint intact.
    """
    if dist.get_rank() != 0:
        return
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
             "sampler": sampler.state_dict(batches_done=batches_done)}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    chunksampler.write_atomically(path, buffer.getbuffer())


def load_checkpoint(path, model, optimizer, sampler):
    """Restores all three; returns the batches of the checkpoint's epoch already trained on.

    The sampler refuses a state of another configuration, seed or dataset size
    (chunksampler.StateMismatchError), so a resume cannot silently train on other batches.
    """
    state = torch.load(path)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    sampler.load_state_dict(state["sampler"])
    return state["sampler"]["batches_done"]


# --- training ------------------------------------------------------------------------------------


class Progress:
    """What this rank trained on in this run: printed at the end, and saved by --record."""

    def __init__(self):
        self.steps, self.chunks_read, self.losses, self.batches = 0, 0, [], []

    def add(self, epoch, batch, cells, loss):
        self.steps += 1
        self.losses.append(loss)
        self.batches.append((epoch, batch, cells))

    def summary(self):
        cells = sum(len(c) for _, _, c in self.batches)
        text = f"{self.steps} batches, {cells} observations, {self.chunks_read} chunks read"
        if self.losses:
            text += (f", loss {np.mean(self.losses[:5]):.3f} -> {np.mean(self.losses[-5:]):.3f}"
                     " (mean of the first and last 5 batches)")
        return text

    def save(self, path):
        """Per batch: its epoch, its number in the epoch, its size and loss; and the cells of all
        of them, concatenated."""
        np.savez(path,
                 epoch=np.array([e for e, _, _ in self.batches], dtype=np.int64),
                 batch=np.array([b for _, b, _ in self.batches], dtype=np.int64),
                 size=np.array([len(c) for _, _, c in self.batches], dtype=np.int64),
                 obs=np.concatenate([np.empty(0, np.int64)] + [c for _, _, c in self.batches]),
                 loss=np.array(self.losses, dtype=np.float64))


def train(args, data, sampler, model, optimizer, done, progress):
    """Trains until epoch args.epochs; done is the batches of the current epoch already trained
    on (after a resume). Returns False if --stop-after stopped it first."""
    for epoch in range(sampler.epoch, args.epochs):
        n_batches = sampler.n_batches(data.n_obs)  # the whole epoch's, also after a resume
        # After a resume, the first request is the checkpoint's, with only its remaining batches.
        for request in sampler.sample(data.n_obs):
            rows, cells = data.read(request)
            progress.chunks_read += len(request["requests"])
            for split in request["splits"]:  # a batch: positions into the request's rows
                inputs = torch.log1p(torch.from_numpy(rows[split]))
                targets = torch.from_numpy(data.labels[cells[split]])
                loss = nn.functional.cross_entropy(model(inputs), targets)
                optimizer.zero_grad()
                loss.backward()  # DDP averages the gradients over the ranks here
                optimizer.step()

                progress.add(epoch, done, cells[split], loss.item())
                done += 1
                if args.checkpoint and (done % args.checkpoint_every == 0 or done == n_batches):
                    save_checkpoint(args.checkpoint, model, optimizer, sampler, done)
                if progress.steps == args.stop_after:
                    return False
        done = 0
    return True


def main():
    args = parse_args()
    dist.init_process_group("gloo")  # reads torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank = dist.get_rank()
    if args.make_data:
        make_data(args)
    data = H5adRows(args.data)

    # Every rank builds the same sampler (same seed); dist_info="torch" gives each its shard.
    sampler = chunksampler.DistributedSampler(
        chunksampler.RandomSampler(args.chunk_size, args.preload_nchunks, args.batch_size,
                                   rng=np.random.default_rng(args.seed)),
        dist_info="torch",
    )
    torch.manual_seed(args.seed)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(data.n_vars, 64), nn.ReLU(), nn.Linear(64, N_CLASSES)))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    done = 0
    if args.resume:
        done = load_checkpoint(args.resume, model, optimizer, sampler)
        print(f"rank {rank}: resuming epoch {sampler.epoch} after batch {done} of {sampler.n_batches(data.n_obs)}",
              flush=True)

    progress = Progress()
    finished = train(args, data, sampler, model, optimizer, done, progress)
    print(f"rank {rank}: {progress.summary()}" + ("" if finished else "; killed by --stop-after"), flush=True)
    if args.record:
        os.makedirs(args.record, exist_ok=True)
        progress.save(os.path.join(args.record, f"rank{rank}.npz"))
    if not finished:
        # Every rank's record written (torchrun ends the others once one has failed), then the crash:
        # no checkpoint, no teardown, as a killed process.
        dist.barrier()
        os._exit(3)
    # Every rank done before any tears its connections down, as PyTorch's own tests wait: in a
    # loaded CI run one rank aborted in teardown while the other was still running.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
