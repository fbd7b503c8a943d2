# SPDX-License-Identifier: MIT
"""Trains a small JAX model on batches from a Grain pipeline that reads an annbatch DatasetCollection
chunk by chunk, each jax.distributed process on its own shard, and resumes it from a checkpoint.

The pipeline is a chunksampler.grain.ChunkDataset: a grain.IterDataset whose elements are batches,
each of the sampler's read groups read as contiguous chunks of the collection and shuffled into
batches (--workers N: Grain's mp_prefetch, each worker reading whole read groups). Every process
wraps the same RandomSampler in a DistributedSampler(dist_info="jax"), which gives it a disjoint
shard with as many batches as every other process. The model, the data and the launch are
jax_train.py's (beside this file): a 2-layer MLP in plain jax.numpy, trained by SGD with jax.grad,
the gradients averaged over the processes with jax.lax.pmean.

    # one command: 2 processes on this machine, joined at a free port on 127.0.0.1
    python examples/python/grain_train.py work/grain/cells.zarr --make-data --launch 2

    # a run stopped after 40 steps, then resumed from its checkpoint (the same command without --stop-after)
    python examples/python/grain_train.py work/grain/cells.zarr --make-data --launch 2 \
        --checkpoint work/grain/checkpoint --stop-after 40
    python examples/python/grain_train.py work/grain/cells.zarr --launch 2 --checkpoint work/grain/checkpoint

--checkpoint DIR saves, every --save-every steps and at --stop-after, the model's parameters and
each process's Grain iterator state with Orbax's CheckpointManager (DIR/<S>/params and
DIR/<S>/data/process_<I>-of-<N>.json, grain.checkpoint.CheckpointSave), and a run that finds DIR
restores the newest complete step and goes on from there. --stop-after kills every process right
after its checkpoint (exit status 3; --launch then exits non-zero). Needs jax, grain, orbax-checkpoint,
annbatch (0.3) and chunksampler.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

import jax_train  # beside this file: the collection, the model, the launch


def parse_args(argv=None):
    parser = jax_train.make_parser(__doc__)
    parser.add_argument("--workers", type=int, default=0,
                        help="Grain worker processes per process (mp_prefetch); 0 reads in the process (%(default)s)")
    parser.add_argument("--checkpoint", metavar="DIR", help="save to DIR, and resume from its newest checkpoint")
    parser.add_argument("--save-every", type=int, default=25, metavar="S",
                        help="steps between checkpoints (%(default)s)")
    parser.add_argument("--stop-after", type=int, metavar="S",
                        help="save a checkpoint after S steps in all, then kill every process (os._exit(3)), as a "
                             "crash right after a checkpoint would")
    args = jax_train.check_args(parser, parser.parse_args(argv))
    if args.workers < 0 or args.save_every < 1 or (args.stop_after is not None and args.stop_after < 1):
        parser.error("--workers must be >= 0, --save-every and --stop-after >= 1")
    if args.stop_after is not None and args.checkpoint is None:
        parser.error("--stop-after needs --checkpoint DIR to save to")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.launch is not None:
        return jax_train.launch(args, argv, script=__file__)

    # Before JAX's first use: Grain's workers read an absl flag, which only absl.app.run parses.
    from absl import flags

    flags.FLAGS.mark_as_parsed()
    import grain
    import jax
    import orbax.checkpoint as ocp
    from annbatch import DatasetCollection
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import chunksampler
    import chunksampler.grain

    try:
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    except ValueError as error:
        sys.exit(f"grain_train.py: jax.distributed.initialize(): {str(error).rstrip('.')}; outside Slurm, Open MPI "
                 "or a TPU pod, give --launch N, or --coordinator, --num-processes and --process-id")
    me, processes = jax.process_index(), jax.process_count()
    if args.make_data and me == 0 and not Path(args.data).exists():
        jax_train.make_collection(args)
    multihost_utils.sync_global_devices("data written")

    # The same sampler, from the same seed, in every process, sharded by JAX process; the batches are
    # {"X": rows of X, "obs": {"cell": ..., "cell_type": codes}}, X dense.
    sampler = chunksampler.DistributedSampler(
        chunksampler.RandomSampler(args.chunk_size, args.preload_nchunks, args.batch_size,
                                   rng=np.random.default_rng(args.seed)),
        dist_info="jax", mode=args.mode,
    )
    dataset = chunksampler.grain.ChunkDataset(DatasetCollection(args.data, mode="r"), sampler,
                                              obs=["cell", "cell_type"], num_epochs=args.epochs)
    n_batches = dataset.n_batches  # the same in every process
    if args.workers:
        dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=args.workers))
    batches = iter(dataset)

    mesh = Mesh(np.array(jax.devices()), ("processes",))
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("processes"))
    params = jax_train.init_params(args.genes, 32, args.seed)
    step = 0
    # Orbax's CheckpointManager keeps a step's items together: the parameters and every process's
    # Grain iterator state (data/process_<I>-of-<N>.json), and a step only once all are written.
    checkpoints = ocp.CheckpointManager(Path(args.checkpoint).absolute(), item_names=("params", "data")) \
        if args.checkpoint else None
    if checkpoints is not None and (found := checkpoints.latest_step()) is not None:
        restored = checkpoints.restore(found, args=ocp.args.Composite(
            params=ocp.args.StandardRestore(), data=grain.checkpoint.CheckpointRestore(batches)))
        params, step = dict(restored["params"]), found
        print(f"process {me} of {processes}: resumed at step {step} (epoch {step // n_batches}, batch "
              f"{step % n_batches} of {n_batches})", flush=True)
    else:
        print(f"process {me} of {processes}: {n_batches} batches of {args.batch_size} per epoch", flush=True)
    params = jax.tree.map(lambda a: jax.make_array_from_process_local_data(replicated, a), params)
    train = jax_train.sgd_step(mesh, args.lr)

    def save(at):
        checkpoints.save(at, args=ocp.args.Composite(
            params=ocp.args.StandardSave({k: np.asarray(v) for k, v in params.items()}),
            data=grain.checkpoint.CheckpointSave(batches)))
        checkpoints.wait_until_finished()

    losses, accuracies, cells = [], [], []
    for batch in batches:
        x = jax.make_array_from_process_local_data(split, batch["X"])
        y = jax.make_array_from_process_local_data(split, batch["obs"]["cell_type"])
        params, loss, accuracy = train(params, x, y)
        step += 1
        losses.append(float(loss))
        accuracies.append(float(accuracy))
        cells.append(batch["obs"]["cell"].tolist())
        if step % n_batches == 0 and me == 0:
            done = min(len(losses), n_batches)  # of the epoch's steps, those this run trained
            print(f"epoch {step // n_batches - 1}: loss {np.mean(losses[-done:]):.4f}, accuracy "
                  f"{np.mean(accuracies[-done:]):.3f} ({done} steps in this run)", flush=True)
        if checkpoints is not None and (step % args.save_every == 0 or step == args.stop_after):
            save(step)
        if step == args.stop_after:
            print(f"process {me} of {processes}: killed after step {step}, checkpoint saved", flush=True)
            record(args.record, me, step, cells, params)
            # Every process's record written (the launcher ends the others once one has failed), then
            # the crash: no clean-up, as a killed process.
            multihost_utils.sync_global_devices("recorded")
            os._exit(3)
    print(f"process {me} of {processes}: trained {step} steps in all, {len(cells)} in this run", flush=True)
    if hasattr(batches, "close"):
        batches.close()
    record(args.record, me, step, cells, params)


def record(directory, me, step, cells, params):
    """With --record DIR, writes what this process trained on in this run to DIR/process<I>-<step>.json."""
    if directory:
        os.makedirs(directory, exist_ok=True)
        written = {"process": me, "first_step": step - len(cells), "cells": cells,
                   "params": {k: np.asarray(v).ravel().tolist() for k, v in params.items()}}
        Path(directory, f"process{me}-{step}.json").write_text(json.dumps(written))


if __name__ == "__main__":
    main()
