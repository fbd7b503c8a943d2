# SPDX-License-Identifier: MIT
"""Trains a small model with Hugging Face Accelerate on 2 CPU processes, its batches chosen by
chunksampler; a run stopped mid-epoch resumes from `accelerator.save_state` exactly where it saved.

    accelerate launch --multi_gpu --num_processes 2 examples/python/accelerate_train.py work/accelerate   # 3 epochs
    accelerate launch --multi_gpu --num_processes 2 examples/python/accelerate_train.py work/accelerate --stop-after 21
    accelerate launch --multi_gpu --num_processes 2 examples/python/accelerate_train.py work/accelerate \
        --resume work/accelerate/step-20

(`--multi_gpu` starts the processes with torchrun, on a CPU machine too; `Accelerator(cpu=True)`
below runs them on the CPU with gloo, `--gpu` on the GPUs.) Each process reads its own
DistributedSampler shard: 2,048 rows, 16 batches of 64 per process and epoch, a new order every
epoch. The state (the model, the optimizer, the loader's position and the step count) is saved every
`--save-every` steps, as DIR/step-K, written under a temporary name and renamed once every process
has written its part, so a crash while saving leaves no DIR/step-K to resume from. `--stop-after K`
kills every process after step K, with no clean-up (os._exit), as a crash between two checkpoints
would; the launcher then exits non-zero. At each epoch's end process 0 prints what the processes
trained, and at the end a checksum of the model's weights.
"""

import argparse
import os
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator

import chunksampler as cs
from chunksampler.accelerate import prepare_loader
from chunksampler.torch import ChunkDataLoader


def rows(n, seed):
    """A map-style dataset of rows (index, x, y)."""
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    return torch.utils.data.TensorDataset(torch.arange(n), x, x.sum(1, keepdim=True))


class Steps:
    """The optimizer steps taken, saved and restored with the rest of the state: registered with
    accelerator.register_for_checkpointing, which asks for state_dict and load_state_dict."""

    def __init__(self):
        self.done = 0

    def state_dict(self):
        return {"done": self.done}

    def load_state_dict(self, state):
        self.done = state["done"]


def save(accelerator, directory):
    """accelerator.save_state(directory), complete or not there at all: every process writes into a
    temporary directory, which process 0 renames once all have finished."""
    partial = directory.with_name(directory.name + ".partial")
    accelerator.save_state(str(partial))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if directory.exists():  # an earlier run's checkpoint of the same step
            shutil.rmtree(directory)
        partial.rename(directory)
    accelerator.wait_for_everyone()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="where accelerator.save_state writes: DIR/step-K")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-every", type=int, default=20, help="accelerator.save_state every N steps")
    parser.add_argument("--stop-after", type=int, help="kill every process after this many steps, as a crash would")
    parser.add_argument("--resume", help="a directory accelerator.save_state wrote")
    parser.add_argument("--gpu", action="store_true", help="train on the GPU Accelerate finds (else the CPU)")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=not args.gpu)
    base = cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(0))
    # After Accelerator() has started the process group: dist_info="torch" reads this process's rank.
    sampler = cs.DistributedSampler(base, dist_info="torch")
    loader = prepare_loader(accelerator, ChunkDataLoader(rows(2048, 0), sampler))
    torch.manual_seed(0)  # the same initial weights in every run, so that a resumed run can be compared
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    steps = Steps()
    accelerator.register_for_checkpointing(steps)  # saved and restored with the model and the loader

    if args.resume:
        accelerator.load_state(args.resume)  # the model, the optimizer, the loader's position and the steps
    for epoch in range(loader.sampler.epoch, args.epochs):  # after load_state, the restored epoch
        loader.set_epoch(epoch)
        first = loader.state_dict()["batches_done"]  # 0, or where a restored epoch goes on
        trained = []
        for batch in loader:
            ids, x, y = batch
            loss = F.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            trained.append(ids)
            steps.done += 1
            if steps.done % args.save_every == 0:
                save(accelerator, args.dir / f"step-{steps.done}")
            if steps.done == args.stop_after:
                accelerator.print(f"killed after step {steps.done} (epoch {epoch}, batch {first + len(trained) - 1})",
                                  flush=True)
                os._exit(3)  # no clean-up, no save: a crash
        every = accelerator.gather(torch.cat(trained))  # every process's rows, in process order
        mine = trained[0][:3].tolist(), trained[-1][-3:].tolist()
        accelerator.print(
            f"epoch {epoch}: {accelerator.num_processes} processes trained batches {first}-{len(loader) - 1}, "
            f"{len(every)} rows, {len(set(every.tolist()))} distinct; process 0's batch {first} begins "
            f"{mine[0]}, batch {len(loader) - 1} ends {mine[1]}"
        )
    weights = accelerator.unwrap_model(model).weight.detach()
    accelerator.print(f"{steps.done} steps; weights {weights.sum().item():.6f} (sum), "
                      f"{weights.norm().item():.6f} (norm)")
    # Every process done before any tears its connections down (gloo can abort a process that exits
    # while its peer still talks to it).
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
