"""What every sampler shares: the ``_Sampler`` base (annbatch's ``sample``/``n_batches``/``validate``,
PyTorch's ``set_epoch``/``state_dict``/``load_state_dict``, workers, copies and pickling) and the
helpers of the families' modules (``_plain``, ``_class``, ``_mixture``, ``_distributed``).

Each class holds a C++ sampler (one class of chunksampler._chunksampler per sampler type) and
converts types; every rule, check and number is the C++ library's, and every setting is read
from the C++ sampler, which copies and pickles itself (a class sampler with its runs, not its
codes), and knows where it stands: the phase of its epoch, the batches the last ``sample()`` has
yielded, and how far its consumer has taken the last request's splits (a list C++ counts the
iteration and indexing of). The Python side keeps only what C++ has no use for: the ``numpy``
generator a seed was drawn from and whether the user chose it."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _chunksampler, _workers
from ._convert import flag, index, mask_from, mask_to, optional_index, seed_from, worker_from
from ._errors import ConfigError, StateFormatError
from ._types import LoadRequest, RequestArrays, SamplerStateDict

def _worker(worker: object) -> tuple[int, int]:
    """An explicit ``(id, num_workers)``, else the DataLoader worker this process is, else ``(0, 1)``."""
    if worker is None:
        info = _workers.get_torch_worker_info()
        return (0, 1) if info is None else (info.id, info.num_workers)
    return worker_from(worker)


def _state_seed(text: str) -> int | None:
    """The seed a state text records, or None where the text is not a state (restore() then says
    why)."""
    try:
        return _chunksampler.SamplerState.parse(text).seed
    except StateFormatError:
        return None


def _state_text(state_dict: object) -> str:
    """The state text of a sampler state dict; TypeError for anything else."""
    if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), str):
        raise TypeError(f"state_dict must be a dict from state_dict() with a 'state' string, got {state_dict!r}")
    return state_dict["state"]


class _Sampler:
    """What every sampler offers: annbatch's ``sample``/``n_batches``/``validate`` and properties,
    PyTorch's ``set_epoch``/``state_dict``/``load_state_dict``, workers, copies and pickling."""

    _impl: Any
    # The generator the seed was drawn from (None where the sampler was made without one).
    _rng: np.random.Generator | None = None
    # Whether the user chose the seed (gave ``rng``); a sampler that draws nothing counts as seeded.
    _seed_chosen: bool = True

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
        return self._impl.sample(index("n_obs", n_obs), worker_id, num_workers)

    def sample_arrays(self, n_obs: int, *, worker: tuple[int, int] | None = None) -> Iterator[RequestArrays]:
        """As ``sample()``, each request as four read-only int64 arrays and no Python object per
        chunk or batch: ``(starts, stops, positions, offsets)``. Chunk ``c`` is ``[starts[c], stops[c])``;
        batch ``b`` is ``positions[offsets[b]:offsets[b + 1]]``, positions into the buffer the chunks
        make in order. The arrays view the sampler's own buffers: they are valid until the next
        request (``.copy()`` what you keep). The iterator has ``n_batches``, ``batches_before`` and
        ``state(k)`` (the state text after ``k`` of its batches)."""
        worker_id, num_workers = _worker(worker)
        return self._impl.sample_arrays(index("n_obs", n_obs), worker_id, num_workers)

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
        return self._impl.next_state()

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
        return self._impl.state_dict(optional_index("batches_done", batches_done))

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next ``sample()`` continue exactly after ``state_dict`` (from ``state_dict()`` of a
        sampler of the same configuration and seed): its batches equal the rest of the uninterrupted
        epoch's. Raises StateMismatchError for a state of another configuration, seed or world size
        (a global-mode DistributedSampler restores one of any world size: elastic), StateFormatError
        for text that is not a state.

        A sampler made without ``rng`` (whose seed nobody chose) adopts the state's seed, so that a
        run resumes from its checkpoint; a seed given with ``rng`` is checked like every setting."""
        self._restore(_state_text(state_dict))

    def _resume(self, state_dict: SamplerStateDict) -> None:
        """As ``load_state_dict``, the way a loader resumes (the C++ driver's ``resume``): a state at its
        epoch's end makes the next ``sample()`` play the next epoch from its start, not the finished
        epoch's empty rest."""
        self._restore(_state_text(state_dict), resume=True)

    def _restore(self, text: str, *, resume: bool = False) -> None:
        """Restores (or resumes) the state text, adopting its seed where the user chose none; on an
        error the sampler is left as it was."""
        seed = _state_seed(text)
        before = self._impl
        if not (self._seed_chosen or seed is None or seed == self.seed):
            self._adopt_seed(seed)
        try:
            (self._impl.resume if resume else self._impl.restore)(text)
        except BaseException:
            self._impl = before
            raise

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # The C++ sampler at the point the consumer has reached: within the last request it took,
        # as far as it has taken that request's splits; it pickles its options and that point.
        state["_impl"] = self._impl.at()
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
        self._rng, self._seed_chosen = rng, value is not None

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


def _shape(chunk_size: object, preload_nchunks: object, batch_size: object, drop_last: object) -> dict[str, Any]:
    """The settings every sampler has, their types checked, as the C++ constructors' keywords."""
    return {
        "chunk_size": index("chunk_size", chunk_size),
        "preload_nchunks": index("preload_nchunks", preload_nchunks),
        "batch_size": index("batch_size", batch_size),
        "drop_last": flag("drop_last", drop_last),
    }
