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

import importlib.metadata as _metadata

from ._annbatch import register_with_annbatch as _register_with_annbatch
from ._checkpoint import load_state, save_state, write_atomically
from ._chunksampler import SamplerState
from ._errors import (
    ConfigError,
    DistEnvironmentError,
    FragmentedSplitError,
    IntegrationError,
    NotADataLoaderError,
    ReadError,
    ShortRunsError,
    StateError,
    StateFileError,
    StateFormatError,
    StateMismatchError,
    StateWriteError,
)
from ._samplers import (
    ClassSampler,
    DistributedSampler,
    MixtureSampler,
    RandomSampler,
    SequentialSampler,
    WeightedClassSampler,
)
from ._split import SplitReport, check_disjoint, split_mask
from ._types import LoadRequest, RequestArrays, SamplerStateDict
from ._workers import WorkerInfo

try:
    __version__ = _metadata.version("chunksampler")
except _metadata.PackageNotFoundError:  # imported from a build tree, not installed
    __version__ = "unknown"

_register_with_annbatch(
    (RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler, MixtureSampler, DistributedSampler)
)

__all__ = [
    "ClassSampler",
    "ConfigError",
    "DistEnvironmentError",
    "DistributedSampler",
    "FragmentedSplitError",
    "IntegrationError",
    "LoadRequest",
    "MixtureSampler",
    "NotADataLoaderError",
    "RandomSampler",
    "ReadError",
    "RequestArrays",
    "SamplerState",
    "SequentialSampler",
    "ShortRunsError",
    "SplitReport",
    "StateError",
    "StateFileError",
    "StateFormatError",
    "SamplerStateDict",
    "StateMismatchError",
    "StateWriteError",
    "WeightedClassSampler",
    "WorkerInfo",
    "__version__",
    "check_disjoint",
    "load_state",
    "save_state",
    "split_mask",
    "write_atomically",
]


def __dir__() -> list[str]:
    # The public names only: not the private modules, nor what this file imports to build them.
    return sorted(__all__)
