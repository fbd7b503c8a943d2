"""``DistributedSampler``: each rank's share of any of the other samplers' epochs."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from . import _chunksampler
from ._base import _Sampler
from ._class import ClassSampler, WeightedClassSampler
from ._convert import flag, floats, index, mask_to, real
from ._dist import DistInfo, resolve_dist_info
from ._errors import ConfigError
from ._mixture import MixtureSampler
from ._plain import RandomSampler, SequentialSampler

_MODES = {"contiguous": _chunksampler.ShardMode.contiguous, "global": _chunksampler.ShardMode.global_mode}
_REMAINDERS = {
    "drop": _chunksampler.Remainder.drop,
    "pad": _chunksampler.Remainder.pad,
    "rotate": _chunksampler.Remainder.rotate,
}

# The seed of a DistributedSampler whose sampler was made without ``rng``. Global mode deals one
# permutation of the chunks among the ranks, so every rank must draw it from the same seed: a seed
# drawn from fresh entropy differs on each rank (and at each restart, so no state would restore).
# A fixed seed is the one every rank and every restart agrees on without communicating, whatever
# says the ranks (torch.distributed, JAX, the launcher's variables, a callable), as torch's own
# DistributedSampler (seed=0) does. Each epoch's order still changes with set_epoch.
_SHARED_DEFAULT_SEED = 0

_Wrappable = (RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler, MixtureSampler)
# The public class of each plain C++ sampler type, and the C++ DistributedSampler type of each.
_PUBLIC = {
    _chunksampler.RandomSampler: RandomSampler,
    _chunksampler.SequentialSampler: SequentialSampler,
    _chunksampler.ClassSampler: ClassSampler,
    _chunksampler.WeightedClassSampler: WeightedClassSampler,
    _chunksampler.MixtureSampler: MixtureSampler,
}
_DISTRIBUTED = {
    _chunksampler.RandomSampler: _chunksampler.DistributedRandomSampler,
    _chunksampler.SequentialSampler: _chunksampler.DistributedSequentialSampler,
    _chunksampler.ClassSampler: _chunksampler.DistributedClassSampler,
    _chunksampler.WeightedClassSampler: _chunksampler.DistributedWeightedClassSampler,
    _chunksampler.MixtureSampler: _chunksampler.DistributedMixtureSampler,
}
_MODE_NAMES = {value: name for name, value in _MODES.items()}


class DistributedSampler(_Sampler):
    """Gives each rank of a data-parallel job its disjoint share of a sampler's epochs, a drop-in
    for ``annbatch.samplers.DistributedSampler``.

    ``sampler`` (a RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler or
    MixtureSampler) is copied: later changes to it do not reach this one. ``dist_info`` gives rank
    and world size and is called once, here: ``"torch"`` (``torch.distributed``, which must be
    initialized), ``"jax"`` (an initialized ``jax.distributed``: ``jax.process_index()``,
    ``jax.process_count()``; refused before ``jax.distributed.initialize()``), ``"env"``
    (the launcher's variables: ``RANK``/``WORLD_SIZE`` as torchrun sets them, OpenMPI's, PMI's or
    Slurm's), or a callable returning ``(rank, world_size)``.

    Beyond annbatch: ``mode="global"`` deals one shared permutation of all chunks among the ranks
    (each rank sees different data every epoch, and a state restores on any number of ranks);
    ``remainder`` says what becomes of the observations that do not divide evenly: ``"drop"``
    (annbatch's), ``"pad"`` (repeat a few rows) or ``"rotate"`` (drop from the tail in even epochs
    and the head in odd ones).

    Seeds: every rank must use the same seed (in global mode the ranks share one permutation; and a
    checkpoint restores only under its own seed). A ``sampler`` made without ``rng`` therefore
    takes the fixed seed 0 here (as torch's DistributedSampler does), not the
    seed it drew from fresh entropy, which would differ on every rank and at every restart; pass
    ``rng=np.random.default_rng(SEED)`` (the same SEED on every rank) to choose another.

    >>> base = RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=10, rng=np.random.default_rng(0))
    >>> DistributedSampler(base, dist_info=lambda: (0, 3)).n_batches(107)
    3
    """

    def __init__(
        self,
        sampler: RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler,
        *,
        dist_info: DistInfo,
        enforce_equal_batches: bool = True,
        mode: Literal["contiguous", "global"] = "contiguous",
        remainder: Literal["drop", "pad", "rotate"] = "drop",
    ) -> None:
        if not isinstance(sampler, _Wrappable):
            raise TypeError(
                "sampler must be a chunksampler RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler "
                f"or MixtureSampler, got {type(sampler).__name__}"
            )
        # Strings first: an unhashable value would raise a TypeError from the lookup that names nothing.
        if not isinstance(mode, str) or mode not in _MODES:
            raise ConfigError(f"DistributedSampler: mode ({mode!r}) must be one of {sorted(_MODES)}")
        if not isinstance(remainder, str) or remainder not in _REMAINDERS:
            raise ConfigError(f"DistributedSampler: remainder ({remainder!r}) must be one of {sorted(_REMAINDERS)}")
        enforce = flag("enforce_equal_batches", enforce_equal_batches)
        rank, world_size = resolve_dist_info(dist_info)
        # The wrapped sampler as it is now, fresh (its epoch is this sampler's own); one made
        # without rng takes the seed every rank agrees on.
        wrapped = sampler._copy()
        self._seed_chosen = sampler._seed_chosen
        self._rng = sampler.rng if self._seed_chosen else None
        if not self._seed_chosen:
            wrapped._adopt_seed(_SHARED_DEFAULT_SEED)
        self._impl = _DISTRIBUTED[type(wrapped._impl)](
            wrapped._impl,
            rank=rank,
            world_size=world_size,
            enforce_equal_batches=enforce,
            mode=_MODES[mode],
            remainder=_REMAINDERS[remainder],
        )

    def _adopt_seed(self, seed: int) -> None:
        wrapped = self._wrapped
        wrapped._adopt_seed(seed)
        self._impl = self._remade(sampler=wrapped._impl)

    @property
    def _wrapped(self) -> RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler:
        """A new copy of the wrapped sampler (with its weights as updated here)."""
        impl = self._impl.sampler
        return _PUBLIC[type(impl)]._wrap(impl, self._rng, self._seed_chosen)

    @property
    def sampler(self) -> RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler:
        """A copy of the wrapped sampler's settings (with weights updated here), at epoch 0: the
        position in the epochs is this sampler's."""
        return self._wrapped

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
        return self._impl.enforce_equal_batches

    @property
    def mode(self) -> str:
        """``"contiguous"`` or ``"global"``."""
        return _MODE_NAMES[self._impl.mode]

    @property
    def remainder(self) -> str:
        """``"drop"``, ``"pad"`` or ``"rotate"``."""
        return self._impl.remainder.name

    @property
    def mask(self) -> slice | list[slice]:
        """The wrapped sampler's mask: what all ranks together cover (a slice for one range, a list
        of slices for several)."""
        return mask_to(self._impl.mask)

    @property
    def rng(self) -> np.random.Generator | None:
        """The wrapped sampler's generator (read-only here: every rank must keep one seed); None
        where it was made without ``rng``, and this sampler uses the shared default seed 0."""
        return self._rng

    def update_weights(self, weights: Any, temperature: float | None = None) -> None:
        """A wrapped MixtureSampler's new weights (call it on every rank, between epochs)."""
        if not hasattr(self._impl, "update_weights"):
            raise TypeError(f"update_weights needs a wrapped MixtureSampler, not a {type(self._wrapped).__name__}")
        new_weights = floats("weights", weights)
        new_temperature = None if temperature is None else real("temperature", temperature)
        self._impl.update_weights(new_weights, new_temperature)

    def shard(self, n_obs: int) -> slice | list[slice]:
        """The observations this rank reads in the next epoch (contiguous mode), or that all ranks
        read together (global mode): a slice for one range, a list of slices for several (a
        contiguous shard of a many-range mask is cut by observation count over the union of its
        ranges, so it may span several)."""
        return mask_to(self._impl.shard(index("n_obs", n_obs)))

    def __repr__(self) -> str:
        return (
            f"DistributedSampler(rank={self.rank}, world_size={self.world_size}, mode={self.mode!r}, "
            f"remainder={self.remainder!r}, enforce_equal_batches={self.enforce_equal_batches}, "
            f"sampler={self._wrapped!r})"
        )
