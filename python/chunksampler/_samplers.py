"""The samplers, with annbatch's constructor keywords, methods and properties: the names the
package and its integrations import, from one module per family (``_base``: what every sampler
shares; ``_plain``: RandomSampler and SequentialSampler; ``_class``: ClassSampler and
WeightedClassSampler; ``_mixture``: MixtureSampler; ``_distributed``: DistributedSampler)."""

from __future__ import annotations

from ._base import _MaskedSampler as _MaskedSampler
from ._base import _Sampler as _Sampler
from ._base import _state_seed as _state_seed
from ._base import _worker as _worker
from ._class import ClassSampler, WeightedClassSampler
from ._distributed import DistributedSampler
from ._mixture import MixtureSampler
from ._plain import RandomSampler, SequentialSampler

__all__ = [
    "ClassSampler",
    "DistributedSampler",
    "MixtureSampler",
    "RandomSampler",
    "SequentialSampler",
    "WeightedClassSampler",
]
