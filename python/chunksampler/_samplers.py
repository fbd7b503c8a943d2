"""The samplers, with annbatch's constructor keywords, methods and properties.

Each class holds a C++ sampler (one class of chunksampler._chunksampler per sampler type) and
converts types; every rule, check and number is the C++ library's, and every setting is read
from the C++ sampler, which copies and pickles itself (a class sampler with its runs, not its
codes). The Python side keeps only what C++ has no use for: the ``numpy`` generator a seed was
drawn from, whether the user chose it, and how far a consumer has taken the last request.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np

from . import _chunksampler, _workers
from ._convert import (
    class_codes,
    flag,
    floats,
    index,
    indices,
    mask_from,
    mask_to,
    optional_index,
    real,
    seed_from,
    worker_from,
)
from ._dist import DistInfo, resolve_dist_info
from ._errors import ConfigError, StateFormatError
from ._types import LoadRequest, RequestArrays, SamplerStateDict

__all__ = [
    "ClassSampler",
    "DistributedSampler",
    "MixtureSampler",
    "RandomSampler",
    "SequentialSampler",
    "WeightedClassSampler",
]

_MODES = {"contiguous": _chunksampler.ShardMode.contiguous, "global": _chunksampler.ShardMode.global_mode}
_REMAINDERS = {
    "drop": _chunksampler.Remainder.drop,
    "pad": _chunksampler.Remainder.pad,
    "rotate": _chunksampler.Remainder.rotate,
}
_COMPOSITIONS = {
    "independent": _chunksampler.Composition.independent,
    "stratified": _chunksampler.Composition.stratified,
}


# The seed of a DistributedSampler whose sampler was made without ``rng``. Global mode deals one
# permutation of the chunks among the ranks, so every rank must draw it from the same seed: a seed
# drawn from fresh entropy differs on each rank (and at each restart, so no state would restore).
# A fixed seed is the one every rank and every restart agrees on without communicating, whatever
# says the ranks (torch.distributed, JAX, the launcher's variables, a callable), as torch's own
# DistributedSampler (seed=0) does. Each epoch's order still changes with set_epoch.
_SHARED_DEFAULT_SEED = 0


def _worker(worker: object) -> tuple[int, int]:
    """An explicit ``(id, num_workers)``, else the DataLoader worker this process is, else ``(0, 1)``."""
    if worker is None:
        info = _workers.get_torch_worker_info()
        return (0, 1) if info is None else (info.id, info.num_workers)
    return worker_from(worker)


def _state_dict(text: str) -> SamplerStateDict:
    fields = _chunksampler.state_fields(text)
    return {"state": text, "epoch": fields["epoch"], "batches_done": fields["batches_done"]}


def _state_seed(text: str) -> int | None:
    """The seed a state text records, or None where the text is not a state (restore() then says
    why)."""
    try:
        return int(_chunksampler.state_fields(text)["seed"])
    except StateFormatError:
        return None


class _Progress:
    """How far the consumer of one ``sample()`` iterator has got into the request it took last:
    ``request`` is the ``id`` of that request's splits (not the list, which points here: no
    reference cycle per request), ``size`` their number, and ``taken`` how many of them the
    consumer has taken (None until it first iterates or indexes them)."""

    __slots__ = ("request", "size", "taken")

    def __init__(self) -> None:
        self.request = 0
        self.size = 0
        self.taken: int | None = None

    @property
    def untaken(self) -> int:
        """Batches of the last request the consumer has not taken yet: none until it begins on
        them (a consumer that never iterates nor indexes the splits counts whole requests)."""
        return 0 if self.taken is None else self.size - self.taken


class _Splits(list):  # type: ignore[type-arg]
    """A request's splits (a list, as annbatch's), which count the ones the consumer takes, so
    that ``state_dict()`` names the batches a loader handed on, not those of the whole request it
    took: annbatch's ``Loader`` takes a request, loads it, then yields its splits one by one."""

    __slots__ = ("_progress",)

    def __iter__(self) -> Iterator[np.ndarray]:
        progress = self._progress
        for taken, split in enumerate(list.__iter__(self), 1):
            if progress.request == id(self):
                progress.taken = taken
            yield split

    def __getitem__(self, key: Any) -> Any:
        item = list.__getitem__(self, key)
        progress = self._progress
        if isinstance(key, int) and progress.request == id(self):
            taken = (key if key >= 0 else key + len(self)) + 1
            progress.taken = max(progress.taken or 0, taken)
        return item

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(list.__iter__(self)),)


class _Requests:
    """``sample()``'s iterator: the C++ iterator's LoadRequest dicts, each request's splits a
    ``_Splits`` that reports to the sampler's ``_Progress``."""

    __slots__ = ("_inner", "_progress")

    def __init__(self, inner: Any, progress: _Progress) -> None:
        self._inner = inner
        self._progress = progress

    def __iter__(self) -> _Requests:
        return self

    def __next__(self) -> LoadRequest:
        request = next(self._inner)
        splits = _Splits(request["splits"])
        splits._progress = self._progress
        progress = self._progress
        progress.request, progress.size, progress.taken = id(splits), len(splits), None
        request["splits"] = splits
        return request

    def close(self) -> None:
        """Ends the iteration, as a generator's ``close()``: later ``next()`` calls stop."""
        self._inner.close()

    @property
    def n_batches(self) -> int:
        """Batches the iterator yields in all."""
        return self._inner.n_batches

    @property
    def batches_before(self) -> int:
        """The epoch's batches before the first this iterator yields: 0 for an epoch begun afresh,
        the restored ``batches_done`` after ``load_state_dict``."""
        return self._inner.batches_before

    def state_dict(self, yielded: int) -> SamplerStateDict:
        """The state after ``yielded`` of this iterator's batches (``0 <= yielded <= n_batches``),
        whatever the sampler has done since: ``{"state": text, "epoch": ..., "batches_done": ...}``,
        ``batches_done`` counted from the epoch's start."""
        return _state_dict(self._inner.state(index("yielded", yielded)))


class _Sampler:
    """What every sampler offers: annbatch's ``sample``/``n_batches``/``validate`` and properties,
    PyTorch's ``set_epoch``/``state_dict``/``load_state_dict``, workers, copies and pickling."""

    _impl: Any
    # The generator the seed was drawn from (None where the sampler was made without one).
    _rng: np.random.Generator | None = None
    # Whether the user chose the seed (gave ``rng``); a sampler that draws nothing counts as seeded.
    _seed_chosen: bool = True
    # What the consumer of the last sample() iterator has taken, while that iterator is the epoch's.
    _progress: _Progress | None = None

    @classmethod
    def _wrap(cls, impl: Any, rng: np.random.Generator | None, seed_chosen: bool) -> Any:
        """A sampler of this class around the C++ sampler ``impl``."""
        sampler = object.__new__(cls)
        sampler._impl = impl
        sampler._rng = rng
        sampler._seed_chosen = seed_chosen
        return sampler

    def _remade(self, **changes: Any) -> Any:
        """The C++ sampler of the current options with ``changes`` (a class sampler's from its runs),
        at the current epoch."""
        impl = type(self._impl)(**{**self._impl.options(), **changes})
        impl.set_epoch(self._impl.epoch)
        return impl

    def _copy(self) -> Any:
        """A new sampler of the same settings and seed, at epoch 0, that shares no mutable state with
        this one (a ClassSampler's runs, which nothing changes, are shared)."""
        impl = copy.copy(self._impl)
        impl.set_epoch(0)
        return type(self)._wrap(impl, self._rng, self._seed_chosen)

    def _adopt_seed(self, seed: int) -> None:
        """Makes the C++ sampler again with ``seed`` (a restored state's, where the user chose none)."""
        self._impl = self._remade(seed=seed)
        self._progress = None

    def sample(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> Iterator[LoadRequest]:
        """The load requests of the next epoch over ``n_obs`` observations, then moves to the epoch after.

        Validates first: raises ConfigError before anything is yielded. Each request is a dict
        ``{"requests": [slice, ...], "splits": [np.ndarray, ...]}`` (annbatch's ``LoadRequest``); the
        splits are int64 views into one positions array per request, which stays valid after the
        iterator moves on. ``worker=(i, k)`` yields worker ``i`` of ``k``'s share (requests ``i, i + k,
        ...``); by default, inside a ``torch.utils.data.DataLoader`` worker, that worker's share.

        The iterator knows where it stands in its epoch: ``n_batches`` (the batches it yields),
        ``batches_before`` (the epoch's batches before its first: a restored point's) and
        ``state_dict(k)`` (the state after ``k`` of its batches).
        """
        worker_id, num_workers = _worker(worker)
        inner = self._impl.sample(index("n_obs", n_obs), worker_id, num_workers)
        self._progress = progress = _Progress()
        return _Requests(inner, progress)

    def sample_arrays(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> Iterator[RequestArrays]:
        """As ``sample()``, each request as four read-only int64 arrays and no Python object per
        chunk or batch: ``(starts, stops, positions, offsets)``. Chunk ``c`` is ``[starts[c], stops[c])``;
        batch ``b`` is ``positions[offsets[b]:offsets[b + 1]]``, positions into the buffer the chunks
        make in order. The arrays view the sampler's own buffers: they are valid until the next
        request (``.copy()`` what you keep). The iterator has ``n_batches``, ``batches_before`` and
        ``state(k)`` (the state text after ``k`` of its batches)."""
        worker_id, num_workers = _worker(worker)
        requests = self._impl.sample_arrays(index("n_obs", n_obs), worker_id, num_workers)
        self._progress = None
        return requests

    def n_batches(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> int:
        """Batches one epoch over ``n_obs`` observations yields (worker ``worker``'s share, if given, or
        the DataLoader worker's), counted from the epoch's start."""
        worker_id, num_workers = _worker(worker)
        return self._impl.n_batches(index("n_obs", n_obs), worker_id, num_workers)

    def n_batches_left(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> int:
        """Batches the next ``sample()`` yields: ``n_batches`` less the batches a pending
        ``load_state_dict()`` has already consumed (equal to ``n_batches`` without one)."""
        worker_id, num_workers = _worker(worker)
        return self._impl.n_batches_left(index("n_obs", n_obs), worker_id, num_workers)

    def _next_state(self) -> SamplerStateDict:
        """Where the next ``sample()`` begins: a pending restore's point, else the start of the epoch
        it plays (what the framework integrations report before an iteration has handed anything out)."""
        return _state_dict(self._impl.next_state())

    @property
    def _since(self) -> str:
        """Where the sampler stands: ``"start"`` (no ``sample()`` since it was made, ``set_epoch`` or
        ``load_state_dict``), ``"restore"`` (a ``load_state_dict`` waits for the next ``sample()``),
        ``"sample"`` (the last ``sample()``'s iterator has batches left) or ``"end"`` (it has yielded
        them all)."""
        return str(self._impl.since)

    @property
    def restore_pending(self) -> bool:
        """Whether a ``load_state_dict()`` waits for the next ``sample()`` to continue its epoch."""
        return self._impl.since == "restore"

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
        self._progress = None

    def _consumed(self) -> int | None:
        """The batches of the current epoch the consumer of the last ``sample()`` iterator has taken,
        from the epoch's start, where it is partway through a request's splits; else None."""
        progress = self._progress
        if progress is None or progress.untaken == 0 or self._impl.since not in ("sample", "end"):
            return None
        return self._impl.batches_yielded - progress.untaken

    def state_dict(self, batches_done: int | None = None) -> SamplerStateDict:
        """The point after ``batches_done`` batches of the current epoch (the one the last ``sample()``
        played, counted from its start), as PyTorch's ``state_dict``: ``{"state": text, "epoch": ...,
        "batches_done": ...}``, where ``text`` is the C++ ``SamplerState``'s.

        By default the point after the batches that the consumer of the last ``sample()`` iterator
        has taken: the requests it took, the last one only as far as it has iterated (or indexed)
        that request's ``splits``. So with annbatch's ``Loader``, which takes a request and then
        yields its splits one by one, it is the point after the batches the Loader has yielded to
        the training loop. Pass ``batches_done`` where the loop lags further behind (a loader of
        your own that reads requests ahead)."""
        done = optional_index("batches_done", batches_done)
        text = self._impl.state(self._consumed() if done is None else done)
        return _state_dict(text)

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next ``sample()`` continue exactly after ``state_dict`` (from ``state_dict()`` of a
        sampler of the same configuration and seed): its batches equal the rest of the uninterrupted
        epoch's. Raises StateMismatchError for a state of another configuration, seed or world size
        (a global-mode DistributedSampler restores one of any world size: elastic), StateFormatError
        for text that is not a state.

        A sampler made without ``rng`` (whose seed nobody chose) adopts the state's seed, so that a
        run resumes from its checkpoint; a seed given with ``rng`` is checked like every setting."""
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), str):
            raise TypeError(f"state_dict must be a dict from state_dict() with a 'state' string, got {state_dict!r}")
        self._restore(state_dict["state"])

    def _restore(self, text: str) -> None:
        """Restores the state text, adopting its seed where the user chose none; on an error the
        sampler is left as it was."""
        seed = _state_seed(text)
        if self._seed_chosen or seed is None or seed == self.seed:
            self._impl.restore(text)
            self._progress = None
            return
        before = self._impl
        self._adopt_seed(seed)
        try:
            self._impl.restore(text)
        except BaseException:
            self._impl = before
            raise
        self._progress = None

    def __getstate__(self) -> dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items() if key != "_progress"}
        # The C++ sampler at the point the consumer has reached: within the last request it took,
        # as far as it has taken that request's splits; it pickles its options and that point.
        state["_impl"] = self._impl.at(self._consumed())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __copy__(self) -> Any:
        """A sampler of the same settings at the same point, independent of this one (as a pickled
        and unpickled copy is: what a spawned DataLoader worker gets)."""
        clone = object.__new__(type(self))
        clone.__setstate__(self.__getstate__())
        return clone

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return clone

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
    def rng(self) -> np.random.Generator | None:
        """The generator the seed was drawn from (None for a SequentialSampler, which draws nothing).
        Assigning a generator draws a new seed from it; the next epoch keeps its number."""
        return self._rng

    @rng.setter
    def rng(self, value: np.random.Generator | None) -> None:
        if "seed" not in self._impl.options():
            raise AttributeError(f"{type(self).__name__} draws nothing: it has no rng to assign")
        rng, seed = seed_from(value)
        self._impl = self._remade(seed=seed)
        self._rng, self._seed_chosen, self._progress = rng, value is not None, None

    @property
    def seed(self) -> int:
        """The uint64 seed every random choice of the C++ sampler descends from."""
        return self._impl.seed


class _MaskedSampler(_Sampler):
    """A sampler of the observations of ``mask``, one range or several, which may be assigned (as
    in annbatch)."""

    @property
    def mask(self) -> slice | list[slice]:
        """The observations sampled: ``slice(0, None)`` (all of ``[0, n_obs)``) by default, a slice
        for one range (``slice(start, None)`` ends at each epoch's ``n_obs``), a list of slices for
        several, in row order with adjacent ranges merged (``[slice(0, 10), slice(10, 20)]`` reads
        back as ``slice(0, 20)``). Assigning a slice, a list or tuple of slices, or None changes
        the observations of later epochs (checked as the constructor checks them); an epoch
        already being iterated keeps its own."""
        return mask_to(self._impl.mask)

    @mask.setter
    def mask(self, value: slice | Sequence[slice] | None) -> None:
        self._impl = self._remade(mask=mask_from(value))
        self._progress = None


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


class ClassSampler(_MaskedSampler):
    """Class-coherent sampler with replacement, a drop-in for ``annbatch.samplers.ClassSampler``:
    every batch holds observations of one class.

    ``classes`` is a ``pandas.Categorical`` with one entry per observation (annbatch's argument; its
    ``codes`` are read) or a 1-D integer array of class codes. Each ``lcm(chunk_size, batch_size)``
    block draws a class with probability proportional to ``class_weights`` (one per category;
    0 excludes a class; uniform by default) among the classes the range holds, and each of its
    chunks starts at a uniformly random valid start of that class: every start whose chunk lies in
    one run of the class and in ``mask`` is equally likely (annbatch draws a run first, which favours
    short runs). An epoch reads ``num_samples`` positions. Every run of a class with a positive
    weight must be at least ``chunk_size`` long. The codes are scanned once into runs, and the
    sampler keeps only the runs of the classes it samples (not the codes): a copy or a pickle
    carries those runs, and assigning ``mask`` or ``rng`` makes the C++ sampler again from them. Unlike annbatch's, it serves DataLoader workers (each its own share of the draws),
    restores exactly, and a ``DistributedSampler`` may wrap it.

    >>> codes = np.repeat(np.arange(4), 250)
    >>> sampler = ClassSampler(10, 4, 10, classes=codes, num_samples=400, rng=np.random.default_rng(0))
    >>> sampler.n_batches(1000)
    40
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        classes: Any,
        num_samples: int,
        class_weights: Any = None,
        mask: slice | Sequence[slice] | None = None,
        drop_last: bool = False,
        rng: np.random.Generator | None = None,
    ) -> None:
        self._make(_chunksampler.ClassSampler, chunk_size, preload_nchunks, batch_size, classes, num_samples,
                   class_weights, mask, drop_last, rng, {})

    def _make(
        self,
        native: Any,
        chunk_size: object,
        preload_nchunks: object,
        batch_size: object,
        classes: object,
        num_samples: object,
        class_weights: object,
        mask: object,
        drop_last: object,
        rng: Any,
        extra: dict[str, Any],
    ) -> None:
        """Checks the arguments both class samplers take and scans the codes into the C++ sampler."""
        options = _shape(chunk_size, preload_nchunks, batch_size, drop_last)
        options["mask"] = mask_from(mask)
        options["num_samples"] = index("num_samples", num_samples)
        categories = getattr(classes, "categories", None) if hasattr(classes, "codes") else None
        labels = None if categories is None else list(categories)
        options["class_weights"] = (
            [] if class_weights is None else _class_weights(type(self).__name__, class_weights, labels)
        )
        codes = class_codes(classes)
        self._rng, options["seed"] = seed_from(rng)
        self._seed_chosen = rng is not None
        try:
            self._impl = native(codes, **options, **extra)
        except ConfigError as error:
            raise _with_labels(error, labels) from None

    @property
    def replacement(self) -> bool:
        """Always True: chunks are drawn with replacement."""
        return True

    @property
    def num_samples(self) -> int:
        """Positions per epoch."""
        return self._impl.num_samples

    @property
    def class_weights(self) -> np.ndarray | None:
        """The weights as given (None: every class alike)."""
        weights = self._impl.class_weights
        return np.array(weights) if weights else None

    def __repr__(self) -> str:
        return (
            f"ClassSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, num_samples={self.num_samples}, n_obs={self._impl.n_obs}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed})"
        )


class WeightedClassSampler(ClassSampler):
    """Class-weighted sampler with replacement, a drop-in for ``annbatch.samplers.WeightedClassSampler``:
    every batch mixes the classes in proportion to ``class_weights``.

    Chunks are chosen as ``ClassSampler`` chooses them (a class by weight among the classes the range
    holds, then a uniformly random valid start of that class), with its arguments, rules and
    errors, but each chunk has its own class and a request's rows are shuffled together before they
    are cut into batches: a batch is a uniform sample without replacement of its request's rows.
    ``composition`` (not in annbatch) says how a request's chunks get their classes:
    ``"independent"`` (annbatch's) draws each chunk's class by weight, so a request matches the
    weights in expectation; ``"stratified"`` gives every request of ``n`` chunks ``floor(n * s)`` or
    ``ceil(n * s)`` chunks of a class of share ``s`` of the weights, and the epoch's chunks too. A
    subclass of ``ClassSampler``, as annbatch's is; unlike annbatch's, it serves DataLoader workers,
    restores exactly, and a ``DistributedSampler`` may wrap it.

    >>> codes = np.repeat([0, 1, 2], 200)
    >>> sampler = WeightedClassSampler(10, 10, 20, classes=codes, num_samples=1000, class_weights=[5, 3, 2],
    ...                                composition="stratified", rng=np.random.default_rng(0))
    >>> {tuple(np.bincount(codes[[c.start for c in r["requests"]]]).tolist()) for r in sampler.sample(600)}
    {(5, 3, 2)}
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        classes: Any,
        num_samples: int,
        class_weights: Any = None,
        mask: slice | Sequence[slice] | None = None,
        drop_last: bool = False,
        rng: np.random.Generator | None = None,
        composition: Literal["independent", "stratified"] = "independent",
    ) -> None:
        # Strings first: an unhashable value would raise a TypeError from the lookup that names nothing.
        if not isinstance(composition, str) or composition not in _COMPOSITIONS:
            raise ConfigError(
                f"WeightedClassSampler: composition ({composition!r}) must be one of {sorted(_COMPOSITIONS)}"
            )
        self._make(_chunksampler.WeightedClassSampler, chunk_size, preload_nchunks, batch_size, classes, num_samples,
                   class_weights, mask, drop_last, rng, {"composition": _COMPOSITIONS[composition]})

    @property
    def composition(self) -> str:
        """``"independent"`` (each chunk's class drawn by weight) or ``"stratified"`` (every request's
        class counts within one chunk of the weights)."""
        return self._impl.composition.name

    def __repr__(self) -> str:
        return (
            f"WeightedClassSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, num_samples={self.num_samples}, n_obs={self._impl.n_obs}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed}, composition={self.composition!r})"
        )


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


def _shape(chunk_size: object, preload_nchunks: object, batch_size: object, drop_last: object) -> dict[str, Any]:
    """The settings every sampler has, their types checked, as the C++ constructors' keywords."""
    return {
        "chunk_size": index("chunk_size", chunk_size),
        "preload_nchunks": index("preload_nchunks", preload_nchunks),
        "batch_size": index("batch_size", batch_size),
        "drop_last": flag("drop_last", drop_last),
    }


def _class_weights(sampler: str, weights: object, labels: list[Any] | None) -> list[float]:
    """``class_weights`` as floats in the order of the class codes; with a Categorical, one per
    category."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(weights, pandas.Series):
        raise TypeError(
            "class_weights must be a sequence in the order of classes.categories, not a pandas Series (its index "
            "may order the weights otherwise); pass series.reindex(classes.categories).to_numpy()"
        )
    values = floats("class_weights", weights)
    if labels is not None and len(values) != len(labels):
        raise ConfigError(
            f"{sampler}: class_weights has {len(values)} entries; it needs one weight per class in "
            f"classes.categories ({len(labels)})"
        )
    return values


_SHORT_RUN = re.compile(r"class (\d+) \(\d+ short runs?, shortest \d+\)")


def _with_labels(error: ConfigError, labels: list[Any] | None) -> ConfigError:
    """The C++ run-length error, which names class codes, with the Categorical's labels added."""
    codes = [int(code) for code in _SHORT_RUN.findall(str(error))]
    if labels is None or not codes or max(codes) >= len(labels):
        return error
    return ConfigError(f"{error} (by label: classes {[labels[code] for code in codes]!r})")


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
        self._progress = None

    @property
    def _wrapped(self) -> RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler:
        """A new copy of the wrapped sampler (with its weights as updated here)."""
        impl = self._impl.sampler
        return _PUBLIC[type(impl)]._wrap(impl, self._rng, self._seed_chosen)

    @property
    def sampler(self) -> RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler:
        """A copy of the wrapped sampler as it was when this one was made (with weights updated here)."""
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
