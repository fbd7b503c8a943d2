"""The resuming half of test_stateful_dataloader.py, run in a new process: for each case of a
manifest, a fresh torchdata StatefulDataLoader over a fresh BatchSampler loads the state the test
saved with torch.save, then plays the rest of the job's epochs the usual way (``set_epoch(epoch)``
at the top of each epoch's loop, or not at all), and the batches it yields are written to RESULT as
JSON. The test imports this module for the samplers and loaders, so both halves build the same.

    python tests/python/stateful_resume.py MANIFEST RESULT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import chunksampler as cs
from chunksampler.torch import BatchSampler

N_OBS = 103
EPOCHS = 3
CLASSES = np.repeat(np.arange(4), [30, 25, 28, 20])  # a cell type per row, in runs; 103 rows


def _random() -> cs.RandomSampler:
    return cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=5, rng=np.random.default_rng(3))


# Each a fresh sampler of one seed: plain ones, a class sampler, and DistributedSamplers in both
# shard modes whose rank and world size come from a callable (a rank of a 2-rank job, no torchrun).
SAMPLERS = {
    "random": _random,
    "class": lambda: cs.ClassSampler(4, 2, 4, classes=CLASSES, num_samples=60, rng=np.random.default_rng(1)),
    "distributed-contiguous": lambda: cs.DistributedSampler(_random(), dist_info=lambda: (1, 2)),
    "distributed-global-weighted": lambda: cs.DistributedSampler(
        cs.WeightedClassSampler(4, 4, 4, classes=CLASSES, num_samples=80, class_weights=[1, 2, 3, 4],
                                composition="stratified", rng=np.random.default_rng(1)),
        dist_info=lambda: (0, 2), mode="global", remainder="pad"),
}


def loader(sampler: str, workers: int, snapshot_every: int = 1) -> tuple[BatchSampler, StatefulDataLoader]:
    """A BatchSampler of ``SAMPLERS[sampler]`` over ``N_OBS`` rows and a StatefulDataLoader over it."""
    batches = BatchSampler(SAMPLERS[sampler](), N_OBS)
    options: dict[str, Any] = {"prefetch_factor": 2} if workers else {}
    return batches, StatefulDataLoader(range(N_OBS), batch_sampler=batches, num_workers=workers,
                                       snapshot_every_n_steps=snapshot_every, **options)


def sampler_state(loader_state: dict[str, Any]) -> dict[str, Any]:
    """The BatchSampler's state inside a StatefulDataLoader's ``state_dict()``: at the top without
    workers, in the main process's snapshot with them."""
    if "_snapshot" in loader_state:
        return loader_state["_snapshot"]["_main_snapshot"]["_index_sampler_state"]
    return loader_state["_index_sampler_state"]


def resume(case: dict[str, Any]) -> dict[str, Any]:
    """Loads the case's saved state into a new loader and plays epochs ``start_epoch`` to the last."""
    batches, stateful = loader(case["sampler"], case["workers"], case["snapshot_every"])
    stateful.load_state_dict(torch.load(case["state"], weights_only=True))
    epochs, again = [], None
    for epoch in range(case["start_epoch"], EPOCHS):
        if case["set_epoch"]:
            batches.set_epoch(epoch)
        got = []
        for batch in stateful:
            got.append(batch.tolist())
            if again is None and len(got) == 2:  # a checkpoint of the resumed run counts on from the restore
                state = sampler_state(stateful.state_dict())
                again = {"epoch": state["epoch"], "batches_done": state["batches_done"]}
        epochs.append(got)
    return {"epochs": epochs, "again": again}


def main() -> None:
    manifest = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps({name: resume(case) for name, case in manifest.items()}))


if __name__ == "__main__":
    main()
