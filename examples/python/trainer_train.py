# SPDX-License-Identifier: MIT
"""Trains a small model with the Hugging Face Trainer on 2 CPU processes (DDP), its batches chosen
by chunksampler; a run stopped mid-epoch resumes from its checkpoint exactly where it saved.

    torchrun --standalone --nproc-per-node 2 examples/python/trainer_train.py work/trainer      # 3 epochs
    torchrun --standalone --nproc-per-node 2 examples/python/trainer_train.py work/trainer --stop-after 23
    torchrun --standalone --nproc-per-node 2 examples/python/trainer_train.py work/trainer \
        --resume work/trainer/checkpoint-20

ChunkTrainer wraps the RandomSampler in a DistributedSampler of each process: its own shard of the
2,048 rows (16 batches of 64 per process and epoch), a new order every epoch. A checkpoint is
saved every 20 steps into the directory given (the Trainer's output_dir, where it writes
everything); at each epoch's end process 0 prints what the processes trained, and at the end a
checksum of the model's weights. `--stop-after K` kills every process after step K, with no
clean-up (os._exit), as a crash between two checkpoints would; torchrun then exits non-zero.
"""

import argparse
import math
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import transformers

import chunksampler as cs
from chunksampler.transformers import ChunkTrainer


class Rows(torch.utils.data.Dataset):
    """Rows {"x", "labels", "idx"}: the Trainer hands each batch to the model as keyword arguments."""

    def __init__(self, n, seed):
        self.x = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
        self.y = self.x.sum(1, keepdim=True)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i], "idx": torch.tensor(i)}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.trained = []

    def forward(self, x, labels, idx):
        if self.training:
            self.trained.append(idx)
        return {"loss": F.mse_loss(self.layer(x), labels)}


class Report(transformers.TrainerCallback):
    """At each epoch's end, process 0 prints what every process trained, and at the end the
    weights; kills the processes at --stop-after."""

    def __init__(self, model, stop_after):
        self.model, self.stop_after, self.first = model, stop_after, 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        # A resumed epoch begins after the batches its checkpoint had trained.
        steps = state.global_step - math.floor(state.epoch or 0) * state.max_steps // state.num_train_epochs
        self.first, self.model.trained = steps, []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.stop_after:
            if args.process_index == 0:
                print(f"killed after step {state.global_step} (epoch {math.floor(state.epoch)}, "
                      f"batch {self.first + len(self.model.trained) - 1})", flush=True)
            os._exit(3)  # no clean-up, no save: a crash

    def on_train_end(self, args, state, control, **kwargs):
        weights = self.model.layer.weight.detach()
        if args.process_index == 0:
            print(f"{state.global_step} steps; weights {weights.sum().item():.6f} (sum), "
                  f"{weights.norm().item():.6f} (norm)", flush=True)

    def on_epoch_end(self, args, state, control, **kwargs):
        mine = torch.cat(self.model.trained)
        every = [None] * args.world_size
        dist.all_gather_object(every, mine.tolist())
        rows = [i for part in every for i in part]
        last = self.first + len(self.model.trained) - 1
        if args.process_index == 0:
            print(f"epoch {math.floor(state.epoch) - 1}: {args.world_size} processes trained batches "
                  f"{self.first}-{last}, {len(rows)} rows, {len(set(rows))} distinct; process 0's batch "
                  f"{self.first} begins {self.model.trained[0][:3].tolist()}, batch {last} ends "
                  f"{self.model.trained[-1][-3:].tolist()}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the Trainer's output_dir: DIR/checkpoint-K every 20 steps")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--stop-after", type=int, help="kill every process after this many steps, as a crash would")
    parser.add_argument("--resume", help="a checkpoint directory the Trainer wrote")
    args = parser.parse_args()

    transformers.set_seed(0)  # the same initial weights in every run, so that a resumed run can be compared
    model = Model()
    training = transformers.TrainingArguments(
        output_dir=args.dir, num_train_epochs=args.epochs, save_strategy="steps", save_steps=20, learning_rate=0.01,
        use_cpu=True, ddp_backend="gloo", ddp_find_unused_parameters=False, report_to="none",
        disable_tqdm=True, logging_strategy="no",
    )
    trainer = ChunkTrainer(
        model, training, train_dataset=Rows(2048, 0),
        train_sampler=cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64,
                                       rng=np.random.default_rng(0)),
        callbacks=[Report(model, args.stop_after)],
    )
    trainer.train(resume_from_checkpoint=args.resume)
    # Every process done before any tears its connections down (gloo can abort a process that exits
    # while its peer still talks to it).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
