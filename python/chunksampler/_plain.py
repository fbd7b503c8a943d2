"""The samplers of chunks of a range: ``RandomSampler`` and ``SequentialSampler``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import _chunksampler
from ._base import _MaskedSampler, _shape
from ._convert import flag, mask_from, optional_index, seed_from

class RandomSampler(_MaskedSampler):
    """Shuffled chunk sampler, a drop-in for ``annbatch.samplers.RandomSampler``.

    Reads contiguous chunks of ``chunk_size`` observations in a random order, ``preload_nchunks`` per
    load request, and shuffles the positions within each request into batches of ``batch_size``.
    Without replacement an epoch reads every observation of ``mask`` exactly once (or the first
    ``num_samples``); with replacement it reads ``num_samples`` observations as chunks at random starts,
    or with ``grid_starts=True`` (not in annbatch) at the starts of uniformly drawn chunks of the
    storage grid (multiples of ``chunk_size``), so that full chunks never straddle two storage chunks.

    ``rng``: the sampler draws one uint64 from this ``numpy.random.Generator`` at construction and
    seeds the C++ sampler with it (``seed``); every later choice is a function of that seed and the
    epoch, so the generator is not used again. ``None`` draws from fresh entropy
    (``np.random.default_rng()``), as annbatch does; such a sampler adopts the seed of a state it
    restores, and a ``DistributedSampler`` of it uses the shared seed 0 on every rank. The random
    streams differ from annbatch's.

    >>> sampler = RandomSampler(chunk_size=64, preload_nchunks=32, batch_size=256, rng=np.random.default_rng(0))
    >>> sum(len(request["splits"]) for request in sampler.sample(20_000))
    79
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        replacement: bool = False,
        num_samples: int | None = None,
        drop_last: bool = False,
        mask: slice | Sequence[slice] | None = None,
        rng: np.random.Generator | None = None,
        grid_starts: bool = False,
    ) -> None:
        options = _shape(chunk_size, preload_nchunks, batch_size, drop_last)
        options["mask"] = mask_from(mask)
        options["replacement"] = flag("replacement", replacement)
        options["num_samples"] = optional_index("num_samples", num_samples)
        options["grid_starts"] = flag("grid_starts", grid_starts)
        self._rng, options["seed"] = seed_from(rng)
        self._seed_chosen = rng is not None
        self._impl = _chunksampler.RandomSampler(**options)

    @property
    def replacement(self) -> bool:
        """Whether chunks are drawn with replacement."""
        return self._impl.replacement

    @property
    def grid_starts(self) -> bool:
        """Whether chunks drawn with replacement start on the storage grid."""
        return self._impl.grid_starts

    @property
    def num_samples(self) -> int | None:
        """Observations per epoch, if fixed; otherwise the mask's size."""
        return self._impl.num_samples

    def __repr__(self) -> str:
        return (
            f"RandomSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, replacement={self.replacement}, num_samples={self.num_samples}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed}, grid_starts={self.grid_starts})"
        )


class SequentialSampler(_MaskedSampler):
    """In-order chunk sampler for evaluation, a drop-in for ``annbatch.samplers.SequentialSampler``:
    chunks in order, positions in order; every epoch is the same.

    >>> sampler = SequentialSampler(chunk_size=10, preload_nchunks=2, batch_size=5)
    >>> next(iter(sampler.sample(100)))["requests"]
    [slice(0, 10, None), slice(10, 20, None)]
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        drop_last: bool = False,
        mask: slice | Sequence[slice] | None = None,
    ) -> None:
        options = _shape(chunk_size, preload_nchunks, batch_size, drop_last)
        options["mask"] = mask_from(mask)
        self._impl = _chunksampler.SequentialSampler(**options)

    def __repr__(self) -> str:
        return (
            f"SequentialSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, drop_last={self.drop_last}, mask={self.mask})"
        )
