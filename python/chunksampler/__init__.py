"""chunksampler: chunk samplers for distributed training on chunked data.

A drop-in for annbatch's samplers (same constructor keywords, methods, properties and
``LoadRequest`` dicts), compiled from the C++ library of the same name::

    import numpy as np
    import chunksampler

    sampler = chunksampler.DistributedSampler(
        chunksampler.RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=np.random.default_rng(7)),
        dist_info="env",
    )
    for request in sampler.sample(20_000):
        ...  # read request["requests"], then train on each of request["splits"]
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._errors import ConfigError, DistEnvironmentError, StateError, StateFormatError, StateMismatchError
from ._samplers import DistributedSampler, RandomSampler, SequentialSampler
from ._types import LoadRequest

try:
    __version__ = version("chunksampler")
except PackageNotFoundError:  # imported from a build tree, not installed
    __version__ = "unknown"

__all__ = [
    "ConfigError",
    "DistEnvironmentError",
    "DistributedSampler",
    "LoadRequest",
    "RandomSampler",
    "SequentialSampler",
    "StateError",
    "StateFormatError",
    "StateMismatchError",
    "__version__",
]
