# SPDX-License-Identifier: MIT
"""Trains a small model with Ray Train on 2 CPU workers, its batches chosen by chunksampler; a
worker that dies mid-epoch is started again by Ray and resumes from the last reported checkpoint
exactly where it was saved.

    python examples/python/ray_train.py work/ray                 # 3 epochs
    python examples/python/ray_train.py work/ray --fail-at 23    # the workers die at step 23; Ray restarts them

Each worker makes its loader in the training function, after Ray has started the process group:
a ChunkDataLoader over DistributedSampler(..., dist_info="torch") (its own shard of the 2,048 rows,
16 batches of 64 per worker and epoch, a new order every epoch) that places its batches on the
worker's device. Rank 0 reports a checkpoint (the model and the loader's state) every 20 steps; at
each epoch's end it prints what the workers trained. Ray keeps the run and its checkpoints under
the directory given (its RunConfig's storage_path).
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import ray
import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
import torch.nn.functional as F
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

import chunksampler as cs
from chunksampler.torch import ChunkDataLoader


def rows(n, seed):
    """A map-style dataset of rows (index, x, y)."""
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    return torch.utils.data.TensorDataset(torch.arange(n), x, x.sum(1, keepdim=True))


def train_loop(config):
    rank = ray.train.get_context().get_world_rank()
    base = cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(0))
    loader = ChunkDataLoader(rows(2048, 0), cs.DistributedSampler(base, dist_info="torch"),
                             device=ray.train.torch.get_device())
    model = ray.train.torch.prepare_model(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step, restored = 0, ray.train.get_checkpoint()
    if restored:  # Ray started this worker again: continue after the last checkpoint
        with restored.as_directory() as where:
            saved = json.loads((Path(where) / "state.json").read_text())
            model.load_state_dict(torch.load(Path(where) / "model.pt"))
        loader.load_state_dict(saved["loader"])
        step = saved["step"]
    for epoch in range(loader.sampler.epoch, config["epochs"]):  # after a restore, the restored epoch
        loader.set_epoch(epoch)
        first = loader.state_dict()["batches_done"]  # 0, or where a restored epoch goes on
        trained = []
        for ids, x, y in loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            trained.append(ids.tolist())
            step += 1
            if step % 20 == 0:
                with tempfile.TemporaryDirectory() as where:
                    if rank == 0:
                        state = {"loader": loader.state_dict(), "step": step}
                        (Path(where) / "state.json").write_text(json.dumps(state))
                        torch.save(model.state_dict(), Path(where) / "model.pt")
                    ray.train.report({"step": step}, checkpoint=Checkpoint.from_directory(where) if rank == 0 else None)
            if step == config["fail_at"] and not restored:
                if rank == 0:
                    print(f"the workers die at step {step} (epoch {epoch}, batch {first + len(trained) - 1})",
                          flush=True)
                raise RuntimeError(f"died at step {step}")
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, [i for batch in trained for i in batch])
        every = [i for part in every for i in part]
        if config["record"]:  # each worker's batches, for a test to check
            Path(config["record"], f"epoch{epoch}-rank{rank}.json").write_text(json.dumps(trained))
        if rank == 0:
            last = first + len(trained) - 1
            print(f"epoch {epoch}: {dist.get_world_size()} workers trained batches {first}-{last}, {len(every)} "
                  f"rows, {len(set(every))} distinct; worker 0's batch {first} begins {trained[0][:3]}, batch "
                  f"{last} ends {trained[-1][-3:]}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="where Ray keeps the run and its checkpoints (DIR/chunks)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--fail-at", type=int, help="the workers die after this step; Ray starts them again")
    parser.add_argument("--record", type=Path, help="a directory to write each worker's batches to, as JSON")
    args = parser.parse_args()

    if args.record:
        args.record.mkdir(parents=True, exist_ok=True)
        args.record = str(args.record.resolve())  # absolute: Ray need not start the workers in this directory
    fit(train_loop, {"epochs": args.epochs, "fail_at": args.fail_at, "record": args.record}, args.dir)


def fit(train_fn, config, storage):
    """One fit of ``train_fn(config)`` on 2 CPU workers of a local Ray cluster, which Ray starts
    again once if they die; the run and its checkpoints are kept under ``storage`` (made if missing)."""
    storage.mkdir(parents=True, exist_ok=True)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        result = TorchTrainer(
            train_fn, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
            run_config=RunConfig(storage_path=str(storage.resolve()), name="chunks",
                                 failure_config=FailureConfig(max_failures=1)),
        ).fit()
    finally:
        ray.shutdown()
    if result.error is not None:
        raise SystemExit(f"training failed: {result.error}")


if __name__ == "__main__":
    main()
