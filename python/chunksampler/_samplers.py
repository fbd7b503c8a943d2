"""The samplers, with annbatch's constructor keywords, methods and properties.

Each class holds a C++ sampler (chunksampler._chunksampler) and converts types; every rule,
check and number is the C++ library's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np

from . import _chunksampler
from ._convert import flag, index, mask_from, mask_to, optional_index, seed_from, worker_from
from ._dist import DistInfo, resolve_dist_info
from ._errors import ConfigError
from ._types import LoadRequest

__all__ = ["DistributedSampler", "RandomSampler", "SequentialSampler"]

_MODES = {"contiguous": _chunksampler.ShardMode.contiguous, "global": _chunksampler.ShardMode.global_mode}
_REMAINDERS = {
    "drop": _chunksampler.Remainder.drop,
    "pad": _chunksampler.Remainder.pad,
    "rotate": _chunksampler.Remainder.rotate,
}


class _Sampler:
    """What every sampler offers: annbatch's ``sample``/``n_batches``/``validate`` and properties,
    and PyTorch's ``set_epoch``."""

    _impl: _chunksampler.Sampler
    _rng: np.random.Generator | None

    def sample(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> Iterator[LoadRequest]:
        """The load requests of the next epoch over ``n_obs`` observations, then moves to the epoch after.

        Validates first: raises ConfigError before anything is yielded. Each request is a dict
        ``{"requests": [slice, ...], "splits": [np.ndarray, ...]}`` (annbatch's ``LoadRequest``); the
        splits are int64 views into one positions array per request. With ``worker=(i, k)`` it
        yields worker ``i`` of ``k``'s share: requests ``i, i + k, ...`` of the epoch.
        """
        worker_id, num_workers = worker_from(worker)
        return self._impl.sample(index("n_obs", n_obs), worker_id, num_workers)

    def n_batches(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> int:
        """Batches one epoch over ``n_obs`` observations yields (worker ``worker``'s share, if given)."""
        worker_id, num_workers = worker_from(worker)
        return self._impl.n_batches(index("n_obs", n_obs), worker_id, num_workers)

    def validate(self, n_obs: int) -> None:
        """Raises ConfigError if an epoch over ``n_obs`` observations cannot be served."""
        self._impl.validate(index("n_obs", n_obs))

    def set_epoch(self, epoch: int) -> None:
        """Pins the next ``sample()`` to epoch ``epoch`` (from its start), as PyTorch's ``set_epoch``;
        later calls go on from there. Each epoch's order is a function of the seed and the epoch."""
        epoch = index("epoch", epoch)
        if epoch < 0:
            raise ConfigError(f"set_epoch: epoch ({epoch}) must be >= 0")
        self._impl.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The epoch the next ``sample()`` plays."""
        return self._impl.epoch

    @property
    def batch_size(self) -> int:
        """Observations per batch; the last batch of an epoch may have fewer unless ``drop_last``."""
        return self._impl.batch_size

    @property
    def chunk_size(self) -> int:
        """Observations per contiguous chunk read."""
        return self._impl.chunk_size

    @property
    def preload_nchunks(self) -> int:
        """Chunks per load request."""
        return self._impl.preload_nchunks

    @property
    def drop_last(self) -> bool:
        """Whether the epoch's last, short batch is dropped."""
        return self._impl.drop_last

    @property
    def shuffle(self) -> bool:
        """Whether chunk order and positions are random."""
        return self._impl.shuffle

    @property
    def mask(self) -> slice:
        """The observation range sampled: ``slice(0, None)`` (all of ``[0, n_obs)``) by default,
        ``slice(start, None)`` for a range that ends at each epoch's ``n_obs``."""
        return mask_to(self._impl.mask)

    @property
    def rng(self) -> np.random.Generator | None:
        """The generator the seed was drawn from (None for a SequentialSampler, which draws nothing)."""
        return self._rng

    @property
    def seed(self) -> int:
        """The uint64 seed every random choice of the C++ sampler descends from."""
        return self._impl.seed


class RandomSampler(_Sampler):
    """Shuffled chunk sampler, a drop-in for ``annbatch.samplers.RandomSampler``.

    Reads contiguous chunks of ``chunk_size`` observations in a random order, ``preload_nchunks`` per
    load request, and shuffles the positions within each request into batches of ``batch_size``.
    Without replacement an epoch reads every observation of ``mask`` exactly once (or the first
    ``num_samples``); with replacement it reads ``num_samples`` observations as chunks at random starts.

    ``rng``: the sampler draws one uint64 from this ``numpy.random.Generator`` at construction and
    seeds the C++ sampler with it (``seed``); every later choice is a function of that seed and the
    epoch, so the generator is not used again. ``None`` draws from fresh entropy
    (``np.random.default_rng()``), as annbatch does. The random streams differ from annbatch's.

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
        mask: slice | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        self._rng, seed = seed_from(rng)
        self._impl = _chunksampler.random_sampler(
            index("chunk_size", chunk_size),
            index("preload_nchunks", preload_nchunks),
            index("batch_size", batch_size),
            flag("drop_last", drop_last),
            mask_from(mask),
            seed,
            flag("replacement", replacement),
            optional_index("num_samples", num_samples),
        )
        self._replacement = bool(replacement)
        self._num_samples = optional_index("num_samples", num_samples)

    @property
    def replacement(self) -> bool:
        """Whether chunks are drawn with replacement."""
        return self._replacement

    @property
    def num_samples(self) -> int | None:
        """Observations per epoch, if fixed; otherwise the mask's size."""
        return self._num_samples

    def __repr__(self) -> str:
        return (
            f"RandomSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, replacement={self.replacement}, num_samples={self.num_samples}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed})"
        )


class SequentialSampler(_Sampler):
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
        mask: slice | None = None,
    ) -> None:
        self._rng = None
        self._impl = _chunksampler.sequential_sampler(
            index("chunk_size", chunk_size),
            index("preload_nchunks", preload_nchunks),
            index("batch_size", batch_size),
            flag("drop_last", drop_last),
            mask_from(mask),
        )

    def __repr__(self) -> str:
        return (
            f"SequentialSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, drop_last={self.drop_last}, mask={self.mask})"
        )


class DistributedSampler(_Sampler):
    """Gives each rank of a data-parallel job its disjoint share of a sampler's epochs, a drop-in
    for ``annbatch.samplers.DistributedSampler``.

    ``sampler`` (a RandomSampler or SequentialSampler) is copied: later changes to it do not reach
    this one. ``dist_info`` gives rank and world size and is called once, here: ``"torch"``
    (``torch.distributed``, which must be initialized), ``"jax"``, ``"env"`` (the launcher's
    variables: ``RANK``/``WORLD_SIZE`` as torchrun sets them, OpenMPI's, PMI's or Slurm's), or a
    callable returning ``(rank, world_size)``.

    Beyond annbatch: ``mode="global"`` deals one shared permutation of all chunks among the ranks
    (each rank sees different data every epoch); ``remainder`` says what becomes of the observations
    that do not divide evenly: ``"drop"`` (annbatch's), ``"pad"`` (repeat a few rows) or ``"rotate"``
    (drop from the tail in even epochs and the head in odd ones).

    >>> base = RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=10, rng=np.random.default_rng(0))
    >>> DistributedSampler(base, dist_info=lambda: (0, 3)).n_batches(107)
    3
    """

    def __init__(
        self,
        sampler: RandomSampler | SequentialSampler,
        *,
        dist_info: DistInfo,
        enforce_equal_batches: bool = True,
        mode: Literal["contiguous", "global"] = "contiguous",
        remainder: Literal["drop", "pad", "rotate"] = "drop",
    ) -> None:
        if not isinstance(sampler, (RandomSampler, SequentialSampler)):
            raise TypeError(
                "sampler must be a chunksampler.RandomSampler or chunksampler.SequentialSampler, "
                f"got {type(sampler).__name__}"
            )
        if mode not in _MODES:
            raise ConfigError(f"DistributedSampler: mode ({mode!r}) must be one of {sorted(_MODES)}")
        if remainder not in _REMAINDERS:
            raise ConfigError(f"DistributedSampler: remainder ({remainder!r}) must be one of {sorted(_REMAINDERS)}")
        enforce_equal_batches = flag("enforce_equal_batches", enforce_equal_batches)
        rank, world_size = resolve_dist_info(dist_info)
        self._rng = sampler.rng
        self._mode = mode
        self._remainder = remainder
        self._impl = _chunksampler.distributed_sampler(
            sampler._impl, rank, world_size, enforce_equal_batches, _MODES[mode], _REMAINDERS[remainder]
        )
        self._enforce_equal_batches = enforce_equal_batches

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self._impl.rank

    @property
    def world_size(self) -> int:
        """Processes in the job."""
        return self._impl.world_size

    @property
    def enforce_equal_batches(self) -> bool:
        """Whether every rank yields the same number of full batches."""
        return self._enforce_equal_batches

    @property
    def mode(self) -> str:
        """``"contiguous"`` or ``"global"``."""
        return self._mode

    @property
    def remainder(self) -> str:
        """``"drop"``, ``"pad"`` or ``"rotate"``."""
        return self._remainder

    @property
    def mask(self) -> slice:
        """The wrapped sampler's mask: the range all ranks together cover."""
        return mask_to(self._impl.mask)

    def shard(self, n_obs: int) -> slice:
        """The observations this rank reads in the next epoch (contiguous mode), or that all ranks
        read together (global mode)."""
        return mask_to(self._impl.shard(index("n_obs", n_obs)))

    def __repr__(self) -> str:
        return (
            f"DistributedSampler(rank={self.rank}, world_size={self.world_size}, mode={self.mode!r}, "
            f"remainder={self.remainder!r}, enforce_equal_batches={self.enforce_equal_batches}, "
            f"batch_size={self.batch_size}, mask={self.mask})"
        )
