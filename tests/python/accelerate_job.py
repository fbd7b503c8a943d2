"""Accelerate jobs on chunksampler.accelerate; test_accelerate.py launches this script with
``accelerate launch --cpu --num_processes 2`` and checks what each rank writes.

    accelerate launch --cpu --num_processes 2 accelerate_job.py OUT

Every rank plays the parts below in turn, each with an Accelerator of its own (gloo on the CPU), and
writes ``OUT/<part>-rank<r>.json``: per epoch, the dataset rows of every batch it received (the
first column of the dataset is the row's index) with ``len(loader)``, the device of the batch and,
``accelerator.sync_gradients`` after each batch (and, resumed, the rows read from the dataset); a part that fails
writes the exception's type and message instead, and the next part goes on (an error raised on
every rank leaves no collective waiting).

- ``full``: 3 epochs through ``prepare_loader``;
- ``cut``/``resumed`` (and ``stateful-cut``/``stateful-resumed`` under
  ``DataLoaderConfiguration(use_stateful_dataloader=True)``): epoch 0, then 5 batches of epoch 1,
  ``accelerator.save_state``, 3 batches more and a stop; then new objects and an Accelerator of their
  own, ``accelerator.load_state`` and the epochs to the end;
- ``accumulate``: one epoch under ``Accelerator(gradient_accumulation_steps=3)``;
- with ``--one-process`` (launched without ``--multi_gpu``: one process), ``one-process-torch``
  (``dist_info="torch"``) and ``one-process-prepare`` (``prepare_loader`` of a sampler of 2 ranks)
  instead of the parts here;
- the refusals: ``plain`` (``accelerator.prepare`` of a torch DataLoader over a BatchSampler),
  ``plain-split`` and ``plain-dispatch`` (the same with ``split_batches``/``dispatch_batches``),
  ``split``/``dispatch`` (``prepare_loader`` under those), ``not-distributed`` (a RandomSampler on 2
  processes), ``wrong-rank`` (``dist_info`` of rank 0 on both), ``skip`` (Accelerate's
  ``skip_first_batches`` on the prepared loader).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator, DataLoaderConfiguration

import chunksampler as cs
from chunksampler.accelerate import prepare_loader
from chunksampler.torch import BatchSampler, ChunkDataLoader

N_OBS, FEATURES = 2048, 4
EPOCHS = 3
CUT_EPOCH, CUT_AT, RAN_ON = 1, 5, 3  # saved after batch 5 of epoch 1; 3 batches more before the stop


class Rows(torch.utils.data.TensorDataset):
    """Rows ``(index, x, y)`` that count how many were read (the loaders here have no workers)."""

    def __init__(self) -> None:
        x = torch.randn(N_OBS, FEATURES, generator=torch.Generator().manual_seed(0))
        super().__init__(torch.arange(N_OBS), x, x.sum(1, keepdim=True))
        self.read = 0

    def __getitem__(self, index):
        self.read += 1
        return super().__getitem__(index)


def dataset() -> Rows:
    return Rows()


def base(seed: int = 7) -> cs.RandomSampler:
    """The issue's sampler: 64-row chunks, 4 per load, batches of 64."""
    return cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(seed))


def sampler() -> cs.DistributedSampler:
    return cs.DistributedSampler(base(), dist_info="torch")


class Run:
    """One part: an Accelerator, a model and optimizer prepared by it, and what the part records."""

    def __init__(self, **accelerator_kwargs) -> None:
        self.accelerator = Accelerator(cpu=True, **accelerator_kwargs)
        model = torch.nn.Linear(FEATURES, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.epochs: dict[int, dict] = {}

    def step(self, batch, record: dict) -> None:
        rows, x, y = batch
        with self.accelerator.accumulate(self.model):
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.accelerator.backward(loss)
            self.optimizer.step()
            self.optimizer.zero_grad()
        record["batches"].append(rows.tolist())
        record["sync"].append(self.accelerator.sync_gradients)
        record["devices"].add(str(rows.device))

    def epoch(self, loader, epoch: int, *, stop_after: int | None = None, save_at: int | None = None,
              save_to: str | None = None) -> None:
        loader.set_epoch(epoch)
        record = self.epochs.setdefault(epoch, {"len": len(loader), "batches": [], "sync": [], "devices": set()})
        for k, batch in enumerate(loader, 1):
            self.step(batch, record)
            if k == save_at:
                self.accelerator.save_state(save_to)
            if k == stop_after:
                break

    def written(self) -> dict:
        return {str(e): {**r, "devices": sorted(r["devices"])} for e, r in self.epochs.items()}


def write(out: Path, part: str, rank: int, result: dict) -> None:
    (out / f"{part}-rank{rank}.json").write_text(json.dumps(result))


def attempt(out: Path, part: str, rank: int, play) -> None:
    """Plays ``play()`` (it returns the part's record) and writes it, or the exception it raised."""
    try:
        result = play()
    except Exception as error:  # noqa: BLE001 -- recorded and checked by the test
        result = {"error": type(error).__name__, "message": str(error),
                  "mro": [c.__name__ for c in type(error).__mro__], "traceback": traceback.format_exc()[-2000:]}
    write(out, part, rank, result)


def full() -> dict:
    run = Run()
    loader = prepare_loader(run.accelerator, ChunkDataLoader(dataset(), sampler()))
    for epoch in range(EPOCHS):
        run.epoch(loader, epoch)
    return {"epochs": run.written()}


def cut_and_resume(out: Path, rank: int, prefix: str, checkpoint: str, **accelerator_kwargs) -> None:
    def cut() -> dict:
        run = Run(**accelerator_kwargs)
        loader = prepare_loader(run.accelerator, ChunkDataLoader(dataset(), sampler()))
        for epoch in range(CUT_EPOCH):
            run.epoch(loader, epoch)
        run.epoch(loader, CUT_EPOCH, save_at=CUT_AT, save_to=checkpoint, stop_after=CUT_AT + RAN_ON)
        return {"epochs": run.written()}

    def resumed() -> dict:
        run = Run(**accelerator_kwargs)
        rows = dataset()
        loader = prepare_loader(run.accelerator, ChunkDataLoader(rows, sampler()))
        run.accelerator.load_state(checkpoint)
        start = loader.sampler.epoch  # the restored epoch, which the next iteration continues
        for epoch in range(start, EPOCHS):
            run.epoch(loader, epoch)
        return {"start": start, "epochs": run.written(), "rows_read": rows.read}

    attempt(out, f"{prefix}cut", rank, cut)
    attempt(out, f"{prefix}resumed", rank, resumed)


def accumulate() -> dict:
    run = Run(gradient_accumulation_steps=3)
    loader = prepare_loader(run.accelerator, ChunkDataLoader(dataset(), sampler()))
    run.epoch(loader, 0)
    return {"epochs": run.written()}


def plain(**accelerator_kwargs) -> dict:
    run = Run(**accelerator_kwargs)
    loader = torch.utils.data.DataLoader(dataset(), batch_sampler=BatchSampler(sampler(), N_OBS))
    prepared = run.accelerator.prepare(loader)
    return {"len": len(prepared), "batches": [batch[0].tolist() for batch in prepared]}


def refused(make_sampler, **accelerator_kwargs) -> dict:
    run = Run(**accelerator_kwargs)
    loader = prepare_loader(run.accelerator, ChunkDataLoader(dataset(), make_sampler()))
    return {"len": len(loader)}


def skip() -> dict:
    run = Run()
    loader = prepare_loader(run.accelerator, ChunkDataLoader(dataset(), sampler()))
    skipped = run.accelerator.skip_first_batches(loader, 2)
    return {"len": len(skipped)}


def one_process(out: Path) -> None:
    """Under ``accelerate launch --num_processes 2`` without ``--multi_gpu``, which starts one process
    with no process group: what ``dist_info="torch"`` and ``prepare_loader`` say."""
    accelerator = Accelerator(cpu=True)
    attempt(out, "one-process-torch", accelerator.process_index,
            lambda: {"rank": cs.DistributedSampler(base(), dist_info="torch").rank})
    attempt(out, "one-process-prepare", accelerator.process_index,
            lambda: refused(lambda: cs.DistributedSampler(base(), dist_info=lambda: (0, 2))))


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:] == ["--one-process"]:
        one_process(out)
        return
    rank = Accelerator(cpu=True).process_index
    attempt(out, "full", rank, full)
    # Accelerate writes a checkpoint from the main process into a directory every rank reads.
    cut_and_resume(out, rank, "", str(out / "checkpoint"))
    cut_and_resume(out, rank, "stateful-", str(out / "stateful-checkpoint"),
                   dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=True))
    attempt(out, "accumulate", rank, accumulate)
    attempt(out, "plain", rank, plain)
    attempt(out, "plain-split", rank, lambda: plain(dataloader_config=DataLoaderConfiguration(split_batches=True)))
    attempt(out, "plain-dispatch", rank,
            lambda: plain(dataloader_config=DataLoaderConfiguration(dispatch_batches=True)))
    attempt(out, "split", rank,
            lambda: refused(sampler, dataloader_config=DataLoaderConfiguration(split_batches=True)))
    attempt(out, "dispatch", rank,
            lambda: refused(sampler, dataloader_config=DataLoaderConfiguration(dispatch_batches=True)))
    attempt(out, "not-distributed", rank, lambda: refused(base))
    attempt(out, "wrong-rank", rank, lambda: refused(lambda: cs.DistributedSampler(base(), dist_info=lambda: (0, 2))))
    attempt(out, "skip", rank, skip)


if __name__ == "__main__":
    main()
