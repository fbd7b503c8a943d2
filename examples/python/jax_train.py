# SPDX-License-Identifier: MIT
"""Trains a small JAX model on an annbatch DatasetCollection, each jax.distributed process on its
own shard.

Every process joins the job with jax.distributed.initialize(), wraps a chunksampler.RandomSampler
in a DistributedSampler(dist_info="jax"), which gives it its disjoint shard with as many batches as
every other process, and reads its batches with annbatch's Loader. A 2-layer MLP in plain
jax.numpy is trained by SGD: each process takes jax.grad of the loss on its own batch, and
jax.lax.pmean averages the gradients over the processes (a shard_map over one CPU device per
process; on CPU JAX runs the collective over gloo), so every process keeps the same parameters.

    # one command: starts 2 processes on this machine, joined at a free port on 127.0.0.1
    python examples/python/jax_train.py work/jax/cells.zarr --make-data --launch 2

    # or the two processes yourself (--make-data: process 0 writes the collection, the other waits)
    python examples/python/jax_train.py work/jax/cells.zarr --make-data \
        --coordinator 127.0.0.1:12355 --num-processes 2 --process-id 0 &
    python examples/python/jax_train.py work/jax/cells.zarr --make-data \
        --coordinator 127.0.0.1:12355 --num-processes 2 --process-id 1

    # under Slurm or Open MPI, jax.distributed.initialize() finds the coordinator, count and id itself
    srun --ntasks 2 python examples/python/jax_train.py work/jax/cells.zarr --make-data

The task: tell three synthetic cell types apart from log1p counts of 20 genes (--make-data writes
them as two .h5ad "donor" files beside DATA, DATA's folder made if missing, and shuffles them into
the collection with annbatch's DatasetCollection.add_adatas; then the processes train on it).
Needs jax, annbatch (0.3) and chunksampler. --launch runs the processes on CPU (JAX_PLATFORMS=cpu)
with one thread each unless the environment says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

N_TYPES = 3


def make_parser(doc=__doc__):
    """The options of this script (grain_train.py adds its own), described by ``doc``'s first paragraph."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("data", help="the DatasetCollection (a .zarr directory)")
    parser.add_argument("--make-data", action="store_true",
                        help="write DATA (and its two .h5ad inputs beside it) first if it does not exist (process 0)")
    parser.add_argument("--cells", type=int, default=4000, help="cells --make-data writes (%(default)s)")
    parser.add_argument("--genes", type=int, default=20, help="genes --make-data writes (%(default)s)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs to train (%(default)s)")
    parser.add_argument("--chunk-size", type=int, default=32, help="rows per contiguous read (%(default)s)")
    parser.add_argument("--preload-nchunks", type=int, default=4, help="chunks per load request (%(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="cells per batch, per process (%(default)s)")
    parser.add_argument("--mode", choices=("contiguous", "global"), default="contiguous",
                        help="DistributedSampler's shard mode (%(default)s)")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD's learning rate (%(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the data, the model and the sampler (%(default)s)")
    parser.add_argument("--record", metavar="DIR", help="write what each process trained on to DIR/process<I>.json")
    group = parser.add_argument_group("the processes (none given: jax.distributed.initialize() detects them)")
    group.add_argument("--launch", type=int, metavar="N",
                       help="start N processes of this script on this machine and wait for them")
    group.add_argument("--timeout", type=float, default=600,
                       help="--launch: seconds before they are killed (%(default)s)")
    group.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address, which every process joins")
    group.add_argument("--num-processes", type=int, metavar="N")
    group.add_argument("--process-id", type=int, metavar="I")
    return parser


def check_args(parser, args):
    """Exits with the parser's usage message where ``args`` do not go together."""
    given = [args.coordinator is not None, args.num_processes is not None, args.process_id is not None]
    if any(given) and not all(given):
        parser.error("--coordinator, --num-processes and --process-id go together")
    if args.launch is not None and (any(given) or args.launch < 1):
        parser.error("--launch N (N >= 1) starts the processes itself: give it no --coordinator, --num-processes "
                     "or --process-id")
    if min(args.epochs, args.cells, args.genes, args.batch_size) < 1:
        parser.error("--epochs, --cells, --genes and --batch-size must be >= 1")
    return args


def parse_args(argv=None):
    parser = make_parser()
    return check_args(parser, parser.parse_args(argv))


# --- --launch: N processes of this script on this machine ----------------------------------------


def launch(args, argv, script=__file__):
    """Starts args.launch processes of ``script`` (this one by default), joined at a free port on
    127.0.0.1, and prints each one's standard output in process order once all have finished (less
    gloo's connection notice; standard error passes straight through). If one fails, or --timeout
    passes, kills the others: a process whose peer died would wait for it in a collective."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    forwarded = [a for i, a in enumerate(argv)
                 if not (a == "--launch" or a.startswith("--launch=") or (i > 0 and argv[i - 1] == "--launch"))]
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")  # one CPU device per process
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    processes, logs = [], []
    for i in range(args.launch):
        logs.append(tempfile.TemporaryFile("w+"))
        command = [sys.executable, script, *forwarded, "--coordinator", f"127.0.0.1:{port}",
                   "--num-processes", str(args.launch), "--process-id", str(i)]
        processes.append(subprocess.Popen(command, env=env, stdout=logs[-1]))
    deadline, timed_out = time.monotonic() + args.timeout, False
    while any(p.poll() is None for p in processes):
        timed_out = time.monotonic() > deadline
        if timed_out or any(p.poll() not in (None, 0) for p in processes):
            for p in processes:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.05)
    codes = [p.wait() for p in processes]
    for log in logs:
        log.seek(0)
        # gloo's C++ prints "[Gloo] Rank 0 is connected to 1 peer ranks. ..." to standard output.
        sys.stdout.write("".join(line for line in log if not line.startswith("[Gloo] ")))
    if any(codes):
        killed = f" (killed after --timeout {args.timeout:g} s)" if timed_out else ""
        sys.exit(f"{Path(script).name} --launch: exit codes {codes}{killed}")


# --- the data: a DatasetCollection of synthetic cells ---------------------------------------------


def make_collection(args):
    """Writes two .h5ad files of cells of three types (each type a Poisson profile over the genes,
    each cell its own size factor) and shuffles them into the DatasetCollection at args.data.
    obs["cell"] numbers the cells in the order written, so a record can say which were read."""
    import anndata as ad
    import pandas as pd
    from annbatch import DatasetCollection

    rng = np.random.default_rng(args.seed)
    Path(args.data).parent.mkdir(parents=True, exist_ok=True)
    # The types differ by about 30% in each gene's mean, and each cell's size factor blurs them.
    profiles = rng.gamma(2.0, 1.5, size=args.genes) * np.exp(0.3 * rng.normal(size=(N_TYPES, args.genes)))
    inputs, first = [], 0
    for donor, n in enumerate([args.cells // 2, args.cells - args.cells // 2]):
        kind = rng.integers(0, N_TYPES, size=n)
        counts = rng.poisson(profiles[kind] * rng.lognormal(0.0, 0.5, size=(n, 1)))
        obs = pd.DataFrame({"cell": np.arange(first, first + n),
                            "cell_type": pd.Categorical.from_codes(kind, ["A", "B", "C"])},
                           index=[f"cell{i}" for i in range(first, first + n)])
        path = Path(args.data).with_name(f"{Path(args.data).stem}_donor{donor}.h5ad")
        ad.AnnData(X=np.log1p(counts).astype(np.float32), obs=obs).write_h5ad(path)
        inputs.append(path)
        first += n
    DatasetCollection(args.data).add_adatas(inputs, n_obs_per_chunk=args.chunk_size, shard_size=8 * args.chunk_size,
                                            dataset_size=args.cells, rng=np.random.default_rng(args.seed))


# --- the model: a 2-layer MLP in plain jax.numpy --------------------------------------------------


def init_params(genes, hidden, seed):
    rng = np.random.default_rng(seed)
    return {"w1": (rng.normal(size=(genes, hidden)) / np.sqrt(genes)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": (rng.normal(size=(hidden, N_TYPES)) / np.sqrt(hidden)).astype(np.float32),
            "b2": np.zeros(N_TYPES, np.float32)}


def sgd_step(mesh, lr):
    """One SGD step of the MLP, jitted over ``mesh`` (one device per process): ``step(params, x, y)``
    takes each process's batch, the gradients averaged over the processes, and returns the new
    parameters with the mean loss and accuracy."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def loss_fn(params, x, y):
        hidden = jnp.tanh(x @ params["w1"] + params["b1"])
        log_p = jax.nn.log_softmax(hidden @ params["w2"] + params["b2"])
        return -jnp.mean(jnp.take_along_axis(log_p, y[:, None], axis=1)), jnp.mean(jnp.argmax(log_p, 1) == y)

    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=(P(), P("processes"), P("processes")), out_specs=(P(), P(), P()))
    def step(params, x, y):
        # Inside: this process's batch. jax.grad on it, then the mean over the processes.
        (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
        grads = jax.lax.pmean(grads, "processes")
        params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
        return params, jax.lax.pmean(loss, "processes"), jax.lax.pmean(accuracy, "processes")

    return step


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.launch is not None:
        return launch(args, argv)

    # Here, not at the top: --launch needs none of them. Importing them starts nothing in JAX.
    import jax
    from annbatch import DatasetCollection, Loader
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import chunksampler

    # Before any other JAX call. With no arguments JAX detects Slurm, Open MPI, TPU pods, ...
    try:
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    except ValueError as error:  # no arguments and no cluster JAX knows
        sys.exit(f"jax_train.py: jax.distributed.initialize(): {str(error).rstrip('.')}; outside Slurm, Open MPI "
                 "or a TPU pod, give --launch N, or --coordinator, --num-processes and --process-id")

    me, processes = jax.process_index(), jax.process_count()
    if args.make_data and me == 0 and not Path(args.data).exists():
        make_collection(args)
    multihost_utils.sync_global_devices("data written")  # the others wait for process 0's collection

    # The same sampler, from the same seed, in every process; dist_info="jax" asks the initialized
    # jax.distributed for this process's rank and the job's size, and the sampler reads its shard.
    sampler = chunksampler.DistributedSampler(
        chunksampler.RandomSampler(args.chunk_size, args.preload_nchunks, args.batch_size,
                                   rng=np.random.default_rng(args.seed)),
        dist_info="jax", mode=args.mode,
    )
    loader = Loader(batch_sampler=sampler, preload_to_gpu=False, to=None)
    loader.use_collection(DatasetCollection(args.data, mode="r"))
    n_batches = sampler.n_batches(loader.n_obs)  # the same in every process (enforce_equal_batches)

    # One CPU device per process; a batch is a global array whose rows are split over the processes.
    mesh = Mesh(np.array(jax.devices()), ("processes",))
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("processes"))
    params = jax.tree.map(lambda a: jax.make_array_from_process_local_data(replicated, a),
                          init_params(loader.n_var, 32, args.seed))

    step = sgd_step(mesh, args.lr)

    shard = sampler.shard(loader.n_obs)  # contiguous: this process's rows; global: all processes' window
    where = f"rows [{shard.start}, {shard.stop}) of the {loader.n_obs} cells"
    where = where if args.mode == "contiguous" else f"its share of {where}, dealt anew each epoch"
    print(f"process {me} of {processes}: {n_batches} batches of {args.batch_size} per epoch from {where}", flush=True)
    record = {"process": me, "num_processes": processes, "n_batches": n_batches, "epochs": []}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        losses, accuracies, cells = [], [], []
        for batch in loader:
            x = jax.make_array_from_process_local_data(split, batch["X"])
            y = jax.make_array_from_process_local_data(split, batch["obs"]["cell_type"].cat.codes.to_numpy(np.int32))
            params, loss, accuracy = step(params, x, y)
            losses.append(float(loss))
            accuracies.append(float(accuracy))
            cells.append(batch["obs"]["cell"].tolist())
        if me == 0:
            print(f"epoch {epoch}: loss {np.mean(losses):.4f}, accuracy {np.mean(accuracies):.3f} "
                  f"({len(losses)} steps, each on {processes} x {args.batch_size} cells)", flush=True)
        record["epochs"].append({"loss": float(np.mean(losses)), "cells": cells})
    record["params"] = {k: np.asarray(v).ravel().tolist() for k, v in params.items()}
    print(f"process {me} of {processes}: trained on {sum(len(c) for c in cells)} cells in {len(cells)} batches "
          "in the last epoch", flush=True)
    if args.record:
        os.makedirs(args.record, exist_ok=True)
        Path(args.record, f"process{me}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
