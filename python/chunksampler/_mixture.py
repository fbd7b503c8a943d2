"""``MixtureSampler``: several datasets laid end to end, sampled as a weighted mixture."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _chunksampler
from ._base import _Sampler, _shape
from ._convert import floats, indices, mask_to, optional_index, real, seed_from

class MixtureSampler(_Sampler):
    """Samples several datasets laid end to end as a weighted mixture, each request of one dataset.

    Dataset ``d`` is the observations ``[b_d, b_d + sizes[d])`` with ``b_0 = 0``. Its share of an
    epoch's requests is proportional to ``weights[d] ** (1 / temperature)`` (equal weights by
    default; 0 excludes a dataset), to within one request, and a keyed permutation interleaves the
    datasets. An epoch holds ``num_samples`` positions (by default the sizes' sum). Not in annbatch:
    the C++ library's ``MixtureSampler``.

    >>> sampler = MixtureSampler(64, 4, 128, sizes=[60_000, 40_000], weights=[1, 3], rng=np.random.default_rng(0))
    >>> sampler.n_batches(100_000)
    782
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        sizes: Any,
        weights: Any = None,
        temperature: float = 1.0,
        num_samples: int | None = None,
        drop_last: bool = False,
        rng: np.random.Generator | None = None,
    ) -> None:
        options = _shape(chunk_size, preload_nchunks, batch_size, drop_last)
        options["sizes"] = indices("sizes", sizes)
        options["weights"] = [] if weights is None else floats("weights", weights)
        options["temperature"] = real("temperature", temperature)
        options["num_samples"] = optional_index("num_samples", num_samples)
        self._rng, options["seed"] = seed_from(rng)
        self._seed_chosen = rng is not None
        self._impl = _chunksampler.MixtureSampler(**options)

    def update_weights(self, weights: Any, temperature: float | None = None) -> None:
        """New weights (and temperature, if given; else the current one) for later epochs, checked as
        the constructor checks them. A state taken under other weights is refused afterwards."""
        new_weights = floats("weights", weights)
        new_temperature = None if temperature is None else real("temperature", temperature)
        self._impl.update_weights(new_weights, new_temperature)

    @property
    def mask(self) -> slice:
        """The range the datasets cover: ``slice(0, sum(sizes))``."""
        return mask_to(self._impl.mask)

    @property
    def sizes(self) -> list[int]:
        """The datasets' sizes."""
        return list(self._impl.sizes)

    @property
    def weights(self) -> list[float]:
        """The weights, one per dataset."""
        return list(self._impl.weights)

    @property
    def temperature(self) -> float:
        """The temperature the weights are raised to the inverse of."""
        return self._impl.temperature

    @property
    def num_samples(self) -> int | None:
        """Positions per epoch, if fixed; otherwise the sizes' sum."""
        return self._impl.num_samples

    def __repr__(self) -> str:
        return (
            f"MixtureSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, sizes={self.sizes}, weights={self.weights}, "
            f"temperature={self.temperature}, num_samples={self.num_samples}, drop_last={self.drop_last}, "
            f"seed={self.seed})"
        )
