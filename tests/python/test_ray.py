"""Ray Train over chunksampler.torch.ChunkDataLoader: one ``TorchTrainer`` fit on 2 workers of
examples/python/ray_train.py's training function (ray_job.py), which dies once mid-epoch and is
restored by Ray, checked against the sampler's own batches; and the refusals of Ray's
``prepare_data_loader``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_tree_clean, make_example_tree, shown_output
from launch import Launch, waited

import chunksampler as cs

torch = pytest.importorskip("torch")
pytest.importorskip("ray.train")
from chunksampler.torch import BatchSampler  # noqa: E402

JOB = Path(__file__).with_name("ray_job.py")
N_OBS = 2048
OUT = "work/ray"  # the example's directory on its page, relative to the example tree


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    # Run in an example tree, on the page's relative directory: Ray's storage is OUT/ray.
    tree = make_example_tree(tmp_path_factory.mktemp("ray"))
    with waited(Launch(tree, "ray_job.py", [sys.executable, str(JOB), OUT])) as (run,):
        yield run


def recorded(job: Launch, name: str):
    path = job.out / OUT / name
    assert path.exists(), f"ray_job.py wrote no {name}:\n{job.output[-3000:]}"
    return json.loads(path.read_text())


def expected(rank: int, epoch: int) -> list[list[int]]:
    """The example's sampler's batches of worker ``rank`` of 2 in ``epoch``."""
    base = cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(0))
    batches = BatchSampler(cs.DistributedSampler(base, dist_info=lambda: (rank, 2)), N_OBS)
    batches.set_epoch(epoch)
    return list(batches)


def test_each_worker_trains_its_shard_and_a_restored_run_goes_on_exactly(job):
    assert job.returncode == 0, job.output[-3000:]
    for rank in (0, 1):
        # Epoch 0 from the first attempt; epoch 1 from the restored one, after the step-20 checkpoint
        # (16 + 4 batches), although the first attempt had trained batches 4-6 of it; epoch 2 whole.
        assert recorded(job, f"epoch0-rank{rank}.json") == expected(rank, 0)
        assert recorded(job, f"epoch1-rank{rank}.json") == expected(rank, 1)[4:]
        assert recorded(job, f"epoch2-rank{rank}.json") == expected(rank, 2)
    for epoch in range(3):
        rows = [[i for b in recorded(job, f"epoch{epoch}-rank{r}.json") for i in b] for r in (0, 1)]
        assert len(set(rows[0])) == len(rows[0]) and not set(rows[0]) & set(rows[1])


def test_prepare_data_loader_stops_every_worker_with_what_to_do_instead(job):
    for rank in (0, 1):
        refusals = recorded(job, f"refusals-rank{rank}.json")
        default, kept = refusals["default"], refusals["no-dist-sampler"]
        # Its defaults would rebuild a DataLoader with torch's DistributedSampler: refused where it reads
        # the loader's worker_init_fn.
        assert default["error"] == "NotADataLoaderError" and "AttributeError" in default["mro"]
        assert "device=ray.train.torch.get_device()" in default["message"]
        # add_dist_sampler=False keeps the loader but fetches a batch ahead: the state would skip one.
        assert kept["error"] == "ConfigError" and "fetches a batch ahead" in kept["message"]


def test_the_example_prints_what_its_page_shows(job):
    # Ray prefixes a worker's lines with "(RayTrainWorker pid=N) " in color, and may echo a line twice.
    lines = [re.sub(r"^\([^)]*\) ", "", re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in job.output.splitlines()]
    printed = list(dict.fromkeys(line for line in lines if line.startswith(("epoch ", "the workers die"))))
    assert printed == shown_output("ray-train").splitlines()


def test_the_fit_writes_only_under_its_directory(job):
    assert job.returncode == 0, job.output[-3000:]
    assert (job.out / OUT / "ray" / "chunks").is_dir(), job.output[-3000:]
    assert_tree_clean(job.out, "ray_job.py (the example's training function and fit)")
