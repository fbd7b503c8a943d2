"""transformers.Trainer jobs on chunksampler.transformers; test_transformers.py runs this script
under ``torchrun --nproc-per-node 2`` (CPU, gloo) and checks what each rank writes.

    torchrun --nproc-per-node 2 trainer_job.py OUT

Every rank plays the parts below in turn, each with a ChunkTrainer of its own, and writes
``OUT/<part>-rank<r>.json``: per epoch, the dataset rows of every batch the model trained on (the
dataset's ``idx`` column), and what ``evaluate()`` read; a part that fails writes the exception's
type and message instead.

- ``full``: 3 epochs, a checkpoint every 20 steps (16 batches of 64 an epoch per process);
- ``cut``: the same, stopped by a callback at the end of step 23 (3 steps after the checkpoint);
- ``resumed``: a new model and Trainer, ``train(resume_from_checkpoint=<cut>/checkpoint-20)``;
- ``other-seed``: a resume from that checkpoint with a sampler of another seed (refused);
- ``eval``: ``evaluate()`` over 1,000 rows;
- ``foreign-rank``: rank 0 passes a ``DistributedSampler`` of the job's ranks, rank 1 one that
  says it is rank 0 (refused on both: rank 1 alone raising would leave rank 0 waiting);
- ``plain-loader``: a plain Trainer whose ``get_train_dataloader`` prepares a torch DataLoader over
  ``chunksampler.torch.BatchSampler`` with the Trainer's accelerator, as the Trainer does its own
  (refused).
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import transformers

import chunksampler as cs
from chunksampler.torch import BatchSampler
from chunksampler.transformers import ChunkTrainer

N_OBS, N_EVAL, FEATURES = 2048, 1000, 4
EPOCHS, SAVE_EVERY, STOP_AT = 3, 20, 23


class Rows(torch.utils.data.Dataset):
    """Rows ``{"x", "labels", "idx"}``, as a Hugging Face model takes them."""

    def __init__(self, n: int, seed: int) -> None:
        self.x = torch.randn(n, FEATURES, generator=torch.Generator().manual_seed(seed))
        self.y = self.x.sum(1, keepdim=True)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i], "idx": torch.tensor(i)}


class Model(torch.nn.Module):
    """A linear model that records the rows of every batch it trains and evaluates."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(FEATURES, 1)
        self.epoch = 0
        self.trained: dict[int, list[list[int]]] = {}
        self.evaluated: list[list[int]] = []

    def forward(self, x, labels, idx):
        if self.training:
            self.trained.setdefault(self.epoch, []).append(idx.tolist())
        else:
            self.evaluated.append(idx.tolist())
        out = self.layer(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class Epochs(transformers.TrainerCallback):
    """Tells the model which epoch it trains; stops the run (as if it died) at ``stop_at``."""

    def __init__(self, model: Model, stop_at: int | None = None) -> None:
        self.model, self.stop_at = model, stop_at

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.model.epoch = math.floor(state.epoch or 0)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.stop_at:
            raise KeyboardInterrupt  # not an Exception: nothing in the Trainer catches it


def sampler(seed: int = 7) -> cs.RandomSampler:
    return cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(seed))


def trainer(out: Path, model: Model, *, seed: int = 7, stop_at: int | None = None,
            train_sampler: cs.DistributedSampler | None = None) -> ChunkTrainer:
    args = transformers.TrainingArguments(
        output_dir=str(out), num_train_epochs=EPOCHS, save_strategy="steps", save_steps=SAVE_EVERY,
        learning_rate=0.01, use_cpu=True, ddp_backend="gloo", report_to="none", disable_tqdm=True,
        logging_strategy="no", seed=0, ddp_find_unused_parameters=False,
    )
    return ChunkTrainer(
        model, args, train_dataset=Rows(N_OBS, 0), eval_dataset=Rows(N_EVAL, 1),
        train_sampler=train_sampler or sampler(seed), eval_sampler=cs.SequentialSampler(chunk_size=50, preload_nchunks=4, batch_size=50),
        callbacks=[Epochs(model, stop_at)],
    )


class PlainLoader(transformers.Trainer):
    """A Trainer that makes its training loader the Trainer's way, over our BatchSampler."""

    def get_train_dataloader(self):
        batches = BatchSampler(cs.DistributedSampler(sampler(), dist_info="torch"), N_OBS)
        loader = torch.utils.data.DataLoader(self.train_dataset, batch_sampler=batches, collate_fn=self.data_collator)
        return self.accelerator.prepare(loader)


def plain_loader(out: Path):
    def play() -> dict:
        model = Model()
        args = trainer(out, model).args
        PlainLoader(model, args, train_dataset=Rows(N_OBS, 0)).train()
        return {"trained": {str(e): b for e, b in model.trained.items()}}
    return play


def write(out: Path, part: str, rank: int, result: dict) -> None:
    (out / f"{part}-rank{rank}.json").write_text(json.dumps(result))


def attempt(out: Path, part: str, rank: int, play) -> None:
    try:
        result = play()
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 -- recorded and checked by the test
        result = {"error": type(error).__name__, "message": str(error),
                  "mro": [c.__name__ for c in type(error).__mro__], "traceback": traceback.format_exc()[-2000:]}
    write(out, part, rank, result)


def fit(out: Path, **kwargs):
    def play() -> dict:
        model = Model()
        trainer(out, model, **{k: v for k, v in kwargs.items() if k != "resume"}).train(
            resume_from_checkpoint=kwargs.get("resume"))
        return {"trained": {str(e): b for e, b in model.trained.items()}}
    return play


def foreign_rank(out: Path, rank: int):
    def play() -> dict:
        model = Model()
        ranks = "torch" if rank == 0 else (lambda: (0, 2))
        trainer(out, model, train_sampler=cs.DistributedSampler(sampler(), dist_info=ranks)).train()
        return {"trained": {str(e): b for e, b in model.trained.items()}}
    return play


def evaluate(out: Path):
    def play() -> dict:
        model = Model()
        metrics = trainer(out, model).evaluate()
        return {"evaluated": model.evaluated, "loss": metrics["eval_loss"]}
    return play


def main() -> None:
    out = Path(sys.argv[1])
    rank = int(os.environ["RANK"])
    attempt(out, "full", rank, fit(out / "full"))
    attempt(out, "cut", rank, fit(out / "cut", stop_at=STOP_AT))
    checkpoint = str(out / "cut" / f"checkpoint-{SAVE_EVERY}")
    attempt(out, "resumed", rank, fit(out / "resumed", resume=checkpoint))
    attempt(out, "other-seed", rank, fit(out / "other-seed", seed=8, resume=checkpoint))
    attempt(out, "eval", rank, evaluate(out / "eval"))
    attempt(out, "foreign-rank", rank, foreign_rank(out / "foreign-rank", rank))
    attempt(out, "plain-loader", rank, plain_loader(out / "plain-loader"))


if __name__ == "__main__":
    main()
