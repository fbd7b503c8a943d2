"""C++ exceptions arrive as Python ValueError/RuntimeError subclasses with their messages; bad
Python types raise TypeError saying what is expected."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rng

import chunksampler as cs


def test_error_hierarchy():
    assert issubclass(cs.ConfigError, ValueError)
    assert issubclass(cs.StateError, ValueError)
    assert issubclass(cs.StateMismatchError, cs.StateError)
    assert issubclass(cs.StateFormatError, cs.StateError)
    assert issubclass(cs.DistEnvironmentError, RuntimeError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 0, "preload_nchunks": 1, "batch_size": 1}, "chunk_size (0) must be >= 1"),
        ({"chunk_size": 10, "preload_nchunks": 1, "batch_size": 3}, "batch_size"),
        ({"chunk_size": 10, "preload_nchunks": 1, "batch_size": 5, "mask": slice(-1, 5)}, "mask.start must be >= 0 (got -1)"),
        ({"chunk_size": 10, "preload_nchunks": 1, "batch_size": 5, "mask": slice(5, 5)}, "mask.start must be < mask.stop (got mask.start 5, mask.stop 5)"),
        ({"chunk_size": 10, "preload_nchunks": 1, "batch_size": 5, "num_samples": 0}, "num_samples must be greater than 1 or equal to 1 (got 0)"),
    ],
)
def test_bad_configuration_is_a_config_error_with_the_cpp_message(kwargs, message):
    with pytest.raises(cs.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        cs.RandomSampler(**kwargs, rng=rng())
    # A mask is checked as it becomes a cs::Ranges, before the sampler sees it.
    prefix = "Ranges: " if "mask" in kwargs else "RandomSampler: "
    assert str(info.value).startswith(prefix)


def test_bad_n_obs_is_raised_by_sample_before_anything_is_yielded():
    sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=5, mask=slice(0, 50), rng=rng())
    with pytest.raises(cs.ConfigError, match=r"mask.stop \(50\) exceeds loader n_obs \(40\): it must be <= n_obs"):
        sampler.sample(40)
    with pytest.raises(cs.ConfigError):
        sampler.validate(40)
    with pytest.raises(cs.ConfigError):
        sampler.n_batches(40)
    sampler.validate(50)
    assert sampler.epoch == 0  # the refused sample() did not move to the next epoch


def test_rank_out_of_range_is_a_config_error():
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
    with pytest.raises(cs.ConfigError, match=r"rank \(3\) must be in \[0, world_size\)"):
        cs.DistributedSampler(base, dist_info=lambda: (3, 3))


def test_too_few_observations_per_rank_is_a_config_error():
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
    sampler = cs.DistributedSampler(base, dist_info=lambda: (0, 4))
    with pytest.raises(cs.ConfigError, match="every rank needs at least one whole batch"):
        sampler.validate(30)


def test_bad_worker_is_a_config_error():
    sampler = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
    with pytest.raises(cs.ConfigError, match=r"id \(2\) must be in \[0, num_workers\)"):
        sampler.sample(100, worker=(2, 2))


def test_env_without_launcher_variables_is_an_environment_error(monkeypatch):
    for name in ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"]:
        monkeypatch.delenv(name, raising=False)
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=10)
    with pytest.raises(cs.DistEnvironmentError, match="no launcher variables found"):
        cs.DistributedSampler(base, dist_info="env")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(cs.DistEnvironmentError, match="RANK is set but WORLD_SIZE is not"):
        cs.DistributedSampler(base, dist_info="env")
    monkeypatch.setenv("WORLD_SIZE", "x")
    with pytest.raises(cs.ConfigError, match="is not an integer"):
        cs.DistributedSampler(base, dist_info="env")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert cs.DistributedSampler(base, dist_info="env").rank == 1


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"mask": 3}, "mask must be a slice"),
        ({"mask": slice("a", None)}, "mask.start must be an int"),
        ({"rng": "x"}, "rng must be a numpy.random.Generator"),
        ({"num_samples": 1.5}, "num_samples must be an int"),
        ({"drop_last": "yes"}, "drop_last must be a bool"),
        ({"chunk_size": "10"}, "chunk_size must be an int"),
        ({"batch_size": None}, "batch_size must be an int"),
    ],
)
def test_bad_python_types_raise_type_error(kwargs, expected):
    args = {"chunk_size": 10, "preload_nchunks": 1, "batch_size": 5, **kwargs}
    with pytest.raises(TypeError, match=expected):
        cs.RandomSampler(**args)


def test_mask_with_a_step_is_refused():
    with pytest.raises(cs.ConfigError, match="mask.step"):
        cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5, mask=slice(0, 10, 2))


@pytest.mark.parametrize(
    ("dist_info", "expected"),
    [(lambda: 1, "must return a \\(rank, world_size\\) pair"), (lambda: (0, 1, 2), "pair"), (lambda: ("0", 2), "rank must be an int"), (3, "dist_info must be")],
)
def test_bad_dist_info_raises_type_error(dist_info, expected):
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5)
    with pytest.raises(TypeError, match=expected):
        cs.DistributedSampler(base, dist_info=dist_info)


def test_unknown_backend_and_options_are_config_errors():
    base = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5)
    # A ConfigError, as every other bad setting, and so a ValueError, as annbatch raises.
    with pytest.raises(cs.ConfigError, match=r"Unknown dist_info 'mpi': it must be one of \['env', 'jax', 'torch'\] or a callable"):
        cs.DistributedSampler(base, dist_info="mpi")
    with pytest.raises(cs.ConfigError, match="mode"):
        cs.DistributedSampler(base, dist_info=lambda: (0, 1), mode="shuffled")
    with pytest.raises(cs.ConfigError, match="remainder"):
        cs.DistributedSampler(base, dist_info=lambda: (0, 1), remainder="keep")


def test_bad_sampler_and_worker_types():
    with pytest.raises(TypeError, match="sampler must be a chunksampler"):
        cs.DistributedSampler(object(), dist_info=lambda: (0, 1))
    sampler = cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5)
    with pytest.raises(TypeError, match="worker must be a tuple"):
        sampler.sample(100, worker=1)
    with pytest.raises(TypeError, match="n_obs must be an int"):
        sampler.sample(np.float64(100))
    with pytest.raises(cs.ConfigError, match="epoch"):
        sampler.set_epoch(-1)


def test_integer_rng_is_deprecated_as_in_annbatch():
    with pytest.warns(FutureWarning, match="deprecated"):
        sampler = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=5, rng=7)
    assert sampler.seed == cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=5, rng=rng(7)).seed
