"""The Python samplers make the C++ library's requests: for the same configuration and seed, every
request (chunks, splits) and the state after it equal what a C++ program prints that uses the
headers directly (tests/python/oracle/plan_dump.cpp), for all five samplers (WeightedClassSampler
in both compositions), plain and distributed in both modes, with workers, over two epochs; a
configuration one refuses, the other refuses with the same message.

The program's path comes from CHUNKSAMPLER_PLAN_DUMP (scripts/test_python.sh builds it); without
it these tests are skipped."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from hypothesis import event, given, settings
from support import as_lists, configs

import chunksampler as cs

PLAN_DUMP = os.environ.get("CHUNKSAMPLER_PLAN_DUMP")
pytestmark = pytest.mark.skipif(
    not PLAN_DUMP,
    reason="CHUNKSAMPLER_PLAN_DUMP is not set: build the oracle (cmake -S tests/python/oracle -B build/oracle "
    "&& cmake --build build/oracle) and point it at build/oracle/chunksampler_plan_dump",
)
EPOCHS = 2


def oracle(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([PLAN_DUMP, *args], capture_output=True, text=True, timeout=60)


def python_requests(config, seed: int) -> list[dict]:
    """What the Python sampler yields, in the oracle's shape; raises ConfigError if refused."""
    sampler = config.make()
    if config.kind != "sequential":
        assert sampler.seed == seed
    sampler.set_epoch(config.epoch)
    lines = []
    for _ in range(EPOCHS):
        epoch = sampler.epoch
        for request in sampler.sample(config.n_obs, worker=config.worker):
            lines.append({
                "epoch": epoch,
                "chunks": [[s.start, s.stop] for s in request["requests"]],
                "splits": as_lists(request["splits"]),
                "state": sampler.state_dict()["state"],
            })
    return lines


def check_against_oracle(config) -> None:
    # The seed the sampler draws from its generator (one uint64); checked against it below.
    seed = int(np.random.default_rng(config.seed).integers(0, 2**64 - 1, dtype=np.uint64, endpoint=True))
    try:
        mine = python_requests(config, seed)
    except cs.ConfigError as error:
        event("refused by both")
        result = oracle(config.oracle_args(seed=seed, epochs=EPOCHS))
        assert result.returncode == 2, f"Python refused ({error}), C++ did not"
        assert result.stderr == f"plan_dump: {error}\n"
        return
    result = oracle(config.oracle_args(seed=seed, epochs=EPOCHS))
    assert result.returncode == 0, result.stderr
    theirs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(mine) == len(theirs)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"request {i}"


# One test draws every kind (not one per kind through parametrize: the parametrized tests would
# share one example database key, and each would replay the others' examples).
@settings(max_examples=100, deadline=None)
@given(configs(distributed=False))
def test_plain_samplers_make_the_cpp_requests(config):
    event(f"{config.kind}, mask of {len(config.ranges() or [])} ranges")
    check_against_oracle(config)


@settings(max_examples=160, deadline=None)
@given(configs(distributed="always"))
def test_distributed_samplers_make_the_cpp_requests(config):
    event(f"{config.kind} {config.mode}, mask of {len(config.ranges() or [])} ranges")
    check_against_oracle(config)


# Many-range masks alone: the draws above give them to a few configurations in a hundred.
@settings(max_examples=120, deadline=None)
@given(configs(kinds=("random", "sequential", "class", "weighted"), many_ranges=True))
def test_many_range_masks_make_the_cpp_requests(config):
    event(f"{config.kind}, {'distributed ' + config.mode if config.world_size else 'plain'}")
    check_against_oracle(config)


# WeightedClassSampler alone, plain and distributed: the draws above give it a fifth of theirs, and
# a composition passed wrongly shows only in the classes of a request's chunks.
@settings(max_examples=200, deadline=None)
@given(configs(kinds=("weighted",)))
def test_weighted_class_samplers_make_the_cpp_requests(config):
    event(f"{config.composition}, {'distributed ' + config.mode if config.world_size else 'plain'}")
    check_against_oracle(config)


def test_the_oracle_refuses_a_misspelt_key():
    result = oracle(["sampler=random", "chunk_sise=10"])
    assert result.returncode == 2 and "chunk_sise" in result.stderr
