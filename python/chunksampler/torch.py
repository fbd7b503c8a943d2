"""PyTorch integration: ``BatchSampler``, a chunk sampler as a ``torch.utils.data.DataLoader``'s
``batch_sampler``, and ``ChunkDataLoader``, a DataLoader over one that the trainers take as it is.

Imported only when used (``import chunksampler.torch``); ``import chunksampler`` does not import
torch. The rest of the PyTorch support lives in the samplers themselves: ``dist_info="torch"``
(``torch.distributed``), sharding by ``torch.utils.data.get_worker_info()`` where a sampler runs
in a DataLoader worker, and pickling (workers started with ``spawn``).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np  # the docstrings' examples use it (test_torch.py runs them with doctest)
import torch.utils.data

from . import _internals
from ._convert import index, optional_index
from ._errors import ConfigError, NotADataLoaderError, StateError
from ._integration import AnySampler, Iteration, check_every_rank, check_sampler, request_rows
from ._samplers import _worker
from ._types import RequestArrays, SamplerStateDict
from .reader import ReadAhead, Reader, _copy as _copy_request, is_source, is_sparse

__all__ = ["BatchSampler", "ChunkDataLoader"]

# Accelerate's prepare() rebuilds a torch DataLoader around its batch sampler: its prepare_data_loader()
# reads the batch sampler's ``batch_size`` (under split_batches) and its get_sampler() the batch
# sampler's ``sampler``, on every process, before any collective; its wrappers deal the batches among
# the processes or broadcast them (chunksampler._internals.accelerate_prepares finds them).
_PLAIN_ACCELERATE = (
    "chunksampler.torch.BatchSampler: Accelerate's prepare() rebuilds a torch DataLoader around its batch "
    "sampler: under several processes it deals this sampler's batches round-robin on top of the "
    "DistributedSampler's shard (each process reads a fraction of its own) and pads a short last round with "
    "repeated rows, and split_batches/dispatch_batches split or broadcast each batch. Hand Accelerate a "
    "chunksampler loader instead: chunksampler.accelerate.prepare_loader(accelerator, "
    "chunksampler.torch.ChunkDataLoader(dataset, DistributedSampler(sampler, dist_info='torch'), "
    "**dataloader_kwargs))"
)


def _refuse_accelerate(frame: Any) -> None:
    """Raises ConfigError where ``frame`` (the caller of a BatchSampler member), or one of the few
    frames below it, belongs to Accelerate preparing or sharding a plain DataLoader over this batch
    sampler."""
    if _internals.accelerate_prepares(frame):
        raise ConfigError(_PLAIN_ACCELERATE)


def _to_device(batch: Any, device: torch.device, non_blocking: bool) -> Any:
    """``batch`` with each of its tensors (in tuples, lists and mappings, at any depth) moved to
    ``device``; anything else as it is."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, tuple):
        moved = [_to_device(item, device, non_blocking) for item in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    if isinstance(batch, list):
        return [_to_device(item, device, non_blocking) for item in batch]
    if isinstance(batch, Mapping):
        return type(batch)({key: _to_device(value, device, non_blocking) for key, value in batch.items()})
    return batch


class BatchSampler(torch.utils.data.BatchSampler):
    """A chunk sampler's epochs as batches of observation indices, for
    ``torch.utils.data.DataLoader(dataset, batch_sampler=...)`` over a map-style dataset.

    Each iteration plays the sampler's next epoch over ``n_obs`` observations and yields each batch
    as a list of global observation indices, in the sampler's order: the batches of one load request
    draw their rows from its ``preload_nchunks`` chunks, shuffled across the request's batches, so
    each batch touches nearly every chunk of its request. A dataset that reads from a chunked store
    (zarr, HDF5) then reads each chunk once per row it fetches row by row, or about once per batch
    with ``__getitems__`` (``preload_nchunks`` x ``chunk_size`` / ``batch_size`` times an epoch; once
    only where a batch holds a whole request): this path is for in-memory datasets. A list of ints is
    what DataLoader's ``batch_sampler`` contract expects, and the fastest batch for its default
    fetch, which indexes the dataset item by item (numpy int64 scalars or 0-d tensors cost more to
    make and to index with); a dataset with ``__getitems__`` receives the list whole
    (``np.asarray(batch)`` makes it an array). ``sampler`` (any chunksampler sampler,
    a ``DistributedSampler`` too) is kept, not copied: move it through this object (``set_epoch``,
    ``load_state_dict``) so that ``state_dict`` knows where it stands.

    Inside a DataLoader worker (a BatchSampler used there, not as the loader's batch_sampler) the
    iteration is that worker's share, as the sampler's own ``sample()`` is.

    >>> from chunksampler import RandomSampler
    >>> sampler = RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=128, rng=np.random.default_rng(0))
    >>> batches = BatchSampler(sampler, n_obs=1000)
    >>> len(batches), sorted(i for batch in batches for i in batch) == list(range(1000))
    (8, True)
    >>> loader = torch.utils.data.DataLoader(range(1000), batch_sampler=batches)
    >>> [len(batch) for batch in loader][-2:]
    [128, 104]
    """

    # Whether state_dict() counts the batches the torch DataLoader iterating it has handed on.
    _counts_loader = True

    def __init__(self, sampler: AnySampler, n_obs: int) -> None:
        # torch's BatchSampler is the base class (its __init__ is not called: the chunk sampler holds
        # the batch size and drop_last) because Lightning's Trainer, under its default
        # use_distributed_sampler=True, rebuilds a DataLoader's batch sampler of that class around its
        # own torch DistributedSampler: that call lands here and is refused naming the setting, where
        # Lightning would otherwise stop every rank with a TypeError about the class.
        if isinstance(sampler, torch.utils.data.DistributedSampler):
            raise ConfigError(
                "BatchSampler: sampler is a torch DistributedSampler, which Lightning's Trainer puts in place of the "
                "chunk sampler under its default use_distributed_sampler=True; give Lightning a "
                "chunksampler.lightning.ChunkDataLoader (or ChunkDataModule), which it leaves alone, or set "
                "Trainer(use_distributed_sampler=False) and keep DistributedSampler(sampler, dist_info='torch')"
            )
        check_sampler("BatchSampler: sampler", sampler)
        n_obs = index("n_obs", n_obs)
        sampler.validate(n_obs)
        self._sampler = sampler
        self._n_obs = n_obs
        self._iteration: Iteration | None = None
        self._tickets = 0  # __iter__ calls so far
        # The torch DataLoader iterator that made the latest iterator, if one did: (ticket, weakref).
        self._consumer: tuple[int, Any] | None = None

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler (the object given, not a copy)."""
        _refuse_accelerate(sys._getframe(1))
        return self._sampler

    @property
    def batch_size(self) -> int:
        """The sampler's batch size (as torch's BatchSampler has one); ``drop_last`` says whether an
        epoch's last, smaller batch is dropped."""
        _refuse_accelerate(sys._getframe(1))
        return self._sampler.batch_size

    @property
    def drop_last(self) -> bool:
        """The sampler's ``drop_last``."""
        return self._sampler.drop_last

    @property
    def n_obs(self) -> int:
        """Observations in the dataset; each epoch covers the sampler's share of ``[0, n_obs)``."""
        return self._n_obs

    @property
    def epoch(self) -> int:
        """The epoch the next iteration plays."""
        return self._sampler.epoch

    def __len__(self) -> int:
        """Batches of the epoch the next iteration plays, counted from the epoch's start: also after
        ``load_state_dict``, when the iteration yields only the ``len() - batches_done`` the
        restored epoch has left. The one meaning of ``len`` across chunksampler's loaders (as
        ``ChunkDataLoader``'s and scvi's), since Lightning, Accelerate and the Hugging Face
        Trainer count a resumed epoch from its start. During an iteration, the next one's."""
        return self._sampler.n_batches(self._n_obs, worker=_worker(None))

    def __iter__(self) -> Iterator[list[int]]:
        """Plays the sampler's next epoch (from a restored point if one is pending) and yields its
        batches. The epoch begins at the first ``next()``, not at ``iter()``, as with torch's own
        samplers: a DataLoader calls ``iter()`` on its batch sampler twice per epoch and advances
        only the second iterator."""
        caller = sys._getframe(1)
        _refuse_accelerate(caller)
        self._tickets += 1
        loader = _internals.torch_loader(caller) if self._counts_loader else None
        self._consumer = None if loader is None else (self._tickets, weakref.ref(loader))
        return self._play(self._tickets)

    def _play(self, ticket: int) -> Iterator[list[int]]:
        worker = _worker(None)  # the DataLoader worker this process is, else the whole rank
        requests = self._sampler.sample_arrays(self._n_obs, worker=worker)
        # The iterator knows where its epoch begins (after a restore, at the restored point).
        self._iteration = iteration = Iteration(requests, ticket)
        yield from self._batches(requests, iteration)
        iteration.ended = True

    def _current(self) -> Iteration | None:
        """The iteration whose next batch is the next one this BatchSampler serves, or None when that
        is the next iteration's first: none has begun since ``set_epoch``/``load_state_dict``, or the
        last one has ended (its iterator raised StopIteration), or a newer iterator was made after it
        began (a new DataLoader iterator, for the next epoch)."""
        iteration = self._iteration
        if iteration is None or iteration.ended or iteration.ticket != self._tickets:
            return None
        return iteration

    def _received(self) -> int | None:
        """The batches of the latest iteration that the torch DataLoader iterating it has handed to
        the training loop (its workers and prefetching run ahead of that), or None where no
        DataLoader of torch's own made the iterator, or it is gone."""
        iteration = self._iteration
        if self._consumer is None or iteration is None:
            return None
        ticket, ref = self._consumer
        loader = ref()
        received = None if loader is None else _internals.torch_handed_out(loader)
        if not ticket == iteration.ticket == self._tickets or received is None:
            return None
        return min(received, iteration.total)

    def _next_state(self) -> SamplerStateDict:
        """The state where the next iteration begins: a pending restore's point, else the start of the
        epoch the sampler plays next."""
        if self._iteration is None:
            return self._sampler.state_dict()
        return self._sampler._next_state()

    @staticmethod
    def _batches(requests: Iterator[RequestArrays], iteration: Iteration) -> Iterator[list[int]]:
        for request in requests:
            # One gather and one list per request; the request's arrays are not used after this.
            rows = request_rows(request).tolist()
            bounds = request.offsets.tolist()
            for begin, end in zip(bounds[:-1], bounds[1:]):
                iteration.yielded += 1
                yield rows[begin:end]

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``
        (each iteration plays the next epoch without it too). After ``load_state_dict`` the restored
        epoch's own number keeps the restore, so the usual ``set_epoch(epoch)`` at the top of a
        resumed loop continues it; to replay it from its start, call the sampler's ``set_epoch``."""
        epoch = index("epoch", epoch)
        if self._sampler.restore_pending and epoch == self._sampler.epoch:
            return
        self._sampler.set_epoch(epoch)
        self._iteration = None

    def state_dict(self, batches_done: int | None = None) -> SamplerStateDict:
        """The sampler's state after the batches of its current iteration that the training loop
        has received, or after ``batches_done`` of them (``0 <= batches_done <= `` the iteration's
        batches); ``load_state_dict`` of it makes the next iteration yield exactly the rest.

        A DataLoader runs ahead of the training loop (``num_workers * prefetch_factor`` batches with
        workers). Where torch's own ``DataLoader`` iterates this BatchSampler, the default is the
        batches that DataLoader has handed to the loop (its ``_num_yielded``), with or without
        workers, not those this BatchSampler has yielded to the workers. Elsewhere (iterated by
        hand, or by another loader) the default is the batches this BatchSampler has yielded, and
        a loop that lags behind passes the batches it has finished:
        ``for k, batch in enumerate(loader, 1): ...; state = batch_sampler.state_dict(batches_done=k)``.
        ``batches_done`` counts from where this iteration began (after a restore, the restored
        point), as ``enumerate`` does; the dict's own ``"batches_done"`` counts from the epoch's
        start.

        Where no iteration is under way, the state is where the next one begins: before the first
        iteration, after ``set_epoch``/``load_state_dict``, once the iteration's iterator has raised
        StopIteration (the start of the next epoch, which the next iteration plays), or once a newer
        iterator has been made. So a state taken between epochs resumes the next epoch, not the
        finished one's empty rest: torchdata's ``StatefulDataLoader`` (which calls this method and
        ``load_state_dict`` itself) resumes exactly, with or without workers, mid-epoch or between
        epochs."""
        done = optional_index("batches_done", batches_done)
        iteration = self._iteration
        if done is None:
            received = self._received()
            if received is not None and iteration is not None:
                # Inside torch's DataLoader: the batches the loop has received, not those the
                # DataLoader's workers have been sent.
                if received == iteration.total:
                    return self._next_state()
                return iteration.state_dict(received)
            current = self._current()
            if current is None:
                return self._next_state()
            return current.state_dict(current.yielded)
        # A count from the loop: a prefetching DataLoader may have ended the iterator while the loop
        # still has its last batches to finish, so an ended iteration still counts.
        if iteration is None or iteration.ticket != self._tickets:
            if done != 0:
                raise ConfigError(
                    f"BatchSampler.state_dict: batches_done ({done}) must be 0 before an iteration has begun"
                )
            return self._next_state()
        if not 0 <= done <= iteration.total:
            raise ConfigError(
                f"BatchSampler.state_dict: batches_done ({done}) must be in [0, {iteration.total}], the batches "
                "of the current iteration"
            )
        return iteration.state_dict(done)

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next iteration continue exactly after ``state_dict`` (from ``state_dict()`` of a
        BatchSampler, or a sampler, of the same configuration and seed); ``len()`` stays the
        whole epoch's count."""
        self._sampler.load_state_dict(state_dict)
        self._iteration = None

    def __getstate__(self) -> dict[str, Any]:
        # Its own settings, not its whole __dict__: the iteration holds the epoch's C++ iterator, and
        # so do the records Lightning keeps there of every attribute set (its patched __setattr__,
        # which outlives a Trainer.fit whose train_dataloader() raised).
        state: dict[str, Any] = {key: self.__dict__[key] for key in ("_sampler", "_n_obs", "_tickets")}
        # Where the copy's next iteration starts: where this one's current iteration stands (the
        # sampler alone knows only whole requests), or after it has yielded its batches or been
        # left for a newer iterator, at the next epoch's start.
        current = self._current()
        if self._iteration is None:
            state["_resume"] = None
        elif current is not None and current.yielded < current.total:
            state["_resume"] = ("state", self.state_dict())
        else:
            state["_resume"] = ("epoch", self._sampler.epoch)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        resume = state.pop("_resume")
        self.__dict__.update(state)
        self._iteration = None
        self._consumer = None
        if resume is not None:
            kind, value = resume
            if kind == "state":
                self._sampler.load_state_dict(value)
            else:
                self._sampler.set_epoch(value)

    def __repr__(self) -> str:
        return f"BatchSampler({self._sampler!r}, n_obs={self._n_obs})"


# --- a loader over a source: each request read whole ------------------------------------------------


class _Requests(BatchSampler):
    """The batch sampler of a ``ChunkDataLoader`` over a source: each of its items is one whole load
    request (copied: the sampler's arrays are views of its buffers), which one fetch reads at once, in
    a DataLoader worker or in the loader's process; its iteration still counts batches."""

    @staticmethod
    def _batches(requests: Iterator[RequestArrays], iteration: Iteration) -> Iterator[list[Any]]:
        for request in requests:
            iteration.yielded += len(request.offsets) - 1
            yield [_copy_request(request)]

    _counts_loader = False  # the DataLoader counts requests; the ChunkDataLoader counts the batches


def _tensors(rows: Any) -> Any:
    """A request's rows (numpy arrays, scipy CSR matrices, dicts of them) as torch tensors, without a
    copy: a dense array's buffer is shared; a CSR matrix becomes a sparse CSR tensor of its arrays."""
    if isinstance(rows, dict):
        return {key: _tensors(value) for key, value in rows.items()}
    if is_sparse(rows):
        return torch.sparse_csr_tensor(
            torch.from_numpy(rows.indptr.astype(np.int64, copy=False)),
            torch.from_numpy(rows.indices.astype(np.int64, copy=False)),
            torch.from_numpy(rows.data),
            size=rows.shape,
            check_invariants=False,
        )
    return torch.from_numpy(np.ascontiguousarray(rows))


def _not_forked(context: Any) -> Any:
    """DataLoader workers' start method for a reader under zarrs: ``spawn`` where none is given; a
    ``fork`` given is refused (zarrs' Rust thread pool does not survive it: a forked worker waits
    for it forever)."""
    if context is None:
        return "spawn"
    method = context if isinstance(context, str) else getattr(context, "get_start_method", lambda: None)()
    if method == "fork":
        raise ConfigError(
            "ChunkDataLoader: multiprocessing_context='fork' cannot start workers that read through zarrs (its thread "
            "pool does not survive fork: a forked worker would wait for it forever); leave multiprocessing_context "
            "unset (spawn), pass 'spawn' or 'forkserver', or read without zarrs: chunksampler.reader.Reader(source, "
            "zarrs=False)"
        )
    return context


def _first(items: list[Any]) -> Any:
    """The DataLoader's collate_fn over a source: each fetch is one request, read whole."""
    return items[0]


class _RequestReads(torch.utils.data.Dataset):
    """What a DataLoader fetches from for a ``ChunkDataLoader`` over a source: a request, read through
    the reader into tensors, with its batches' bounds."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def __getitems__(self, requests: list[RequestArrays]) -> list[tuple[Any, list[int]]]:
        return [(_tensors(self.reader.read(request)), request.offsets.tolist()) for request in requests]

    def __getitem__(self, request: RequestArrays) -> tuple[Any, list[int]]:
        return self.__getitems__([request])[0]

    def __len__(self) -> int:
        return self.reader.n_obs


def _pinned(rows: Any) -> Any:
    if isinstance(rows, dict):
        return {key: _pinned(value) for key, value in rows.items()}
    return rows.pin_memory()


def _whole_to_device(rows: Any, device: torch.device, non_blocking: bool) -> Any:
    """A request's dense tensors moved to ``device`` whole (one copy each; its batches are then views
    there); sparse ones stay, to be cut first."""
    if isinstance(rows, dict):
        return {key: _whole_to_device(value, device, non_blocking) for key, value in rows.items()}
    return rows if rows.layout == torch.sparse_csr else rows.to(device, non_blocking=non_blocking)


def _cut(rows: Any, begin: int, end: int, device: torch.device | None, non_blocking: bool) -> Any:
    """Rows ``[begin, end)`` of a request's tensors: a view of a dense one, a CSR tensor of a sparse
    one's rows (moved to ``device``: a request's sparse tensor stays where it was read)."""
    if isinstance(rows, dict):
        return {key: _cut(value, begin, end, device, non_blocking) for key, value in rows.items()}
    if rows.layout != torch.sparse_csr:
        return rows[begin:end]
    crow = rows.crow_indices()
    low, high = int(crow[begin]), int(crow[end])
    batch = torch.sparse_csr_tensor(
        crow[begin : end + 1] - low,
        rows.col_indices()[low:high],
        rows.values()[low:high],
        size=(end - begin, *rows.shape[1:]),
        check_invariants=False,
    )
    return batch if device is None else batch.to(device, non_blocking=non_blocking)


# DataLoader arguments that the chunk sampler decides: the batches, their size and order.
_SAMPLER_OWNS = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last")
# The inner DataLoader's other settings, readable on a ChunkDataLoader as on a DataLoader: Accelerate's
# skip_first_batches (how the Hugging Face Trainer resumes) copies them into the loader it makes.
_DATALOADER_SETTINGS = frozenset({
    "collate_fn", "pin_memory", "timeout", "worker_init_fn", "multiprocessing_context", "generator",
    "prefetch_factor", "persistent_workers", "pin_memory_device", "in_order",
})
# What Ray Train's prepare_data_loader() is told instead: the loader places its batches itself.
_RAY_INSTEAD = (
    "leave it out of ray.train.torch.prepare_data_loader() and make the loader in the training function as "
    "ChunkDataLoader(dataset, DistributedSampler(sampler, dist_info='torch'), "
    "device=ray.train.torch.get_device()), which places each batch on the worker's device"
)
_RAY_REBUILDS = (
    "ChunkDataLoader is not a torch DataLoader to rebuild: Ray Train's prepare_data_loader() would make a new "
    "DataLoader with torch's DistributedSampler and batch_size=None in place of the chunk sampler (single rows, "
    "no chunk locality); " + _RAY_INSTEAD
)
_RAY_WRAPS = (
    "ChunkDataLoader: Ray Train's prepare_data_loader(add_dist_sampler=False) wraps the loader in one that "
    "fetches a batch ahead of the training loop, so the loader's state_dict() would count a batch the loop has "
    "not trained and a resumed run would skip it; " + _RAY_INSTEAD
)


class ChunkDataLoader:
    """A ``torch.utils.data.DataLoader`` over a chunk sampler, for the trainers that take any iterable
    as a loader and rebuild a torch DataLoader around a sampler of their own: Lightning's
    ``Trainer`` uses it as it is (with its default ``use_distributed_sampler=True`` too),
    Accelerate through ``chunksampler.accelerate.prepare_loader``, the Hugging Face Trainer through
    ``chunksampler.transformers.ChunkTrainer``, Ray Train or a loop of your own. It is not a
    DataLoader subclass, so no trainer rebuilds it; it needs torch only (also importable from
    ``chunksampler.lightning``). ``device`` (None: none) is where each batch's tensors are moved,
    at any depth of tuples, lists and mappings: under Ray Train ``ray.train.torch.get_device()``,
    in place of Ray's ``prepare_data_loader``, which it refuses (that would rebuild it with torch's
    DistributedSampler, or fetch a batch ahead of the loop and of ``state_dict()``).

    ``dataset`` is a source on disk, read a load request at a time, or a map-style dataset in
    memory. A source (a zarr array, an h5py dataset, a scipy CSR matrix, an ``anndata.AnnData`` or
    annbatch ``DatasetCollection`` with ``obs=[...]``/``layer=``, a ``chunksampler.reader.Reader``)
    is read through ``chunksampler.reader``: each request's chunks once, into one buffer, its
    batches views of it (tensors; a sparse source's are ``torch.sparse_csr_tensor``); in process the
    next request is read in a thread while this one's batches train, with ``num_workers`` each
    worker reads whole requests, handed back in the sampler's order (the same batches with any
    worker count; spawned under zarrs, whose thread pool does not survive fork). A read that fails
    raises ``chunksampler.ReadError`` and leaves the loader before that request: iterating again
    retries it. Any other ``dataset`` is map-style, of ``n_obs`` observations (``len(dataset)`` by
    default): the DataLoader receives each batch as a list of global indices from
    ``chunksampler.torch.BatchSampler`` and fetches it (reading each chunk of a store about once
    per batch: for datasets in memory). ``sampler`` is any chunksampler sampler; under several
    ranks a ``DistributedSampler`` whose rank and world size are the job's (made once the process
    group is up, e.g. with ``dist_info="torch"`` in ``train_dataloader()``). ``dataloader_kwargs``
    go to the DataLoader: ``num_workers``, ``collate_fn`` (over a source: applied to each batch),
    ``pin_memory``, ...; not ``batch_size``, ``shuffle``, ``sampler``, ``batch_sampler`` or
    ``drop_last``, which are the sampler's.

    Every rank must make its loaders at the same point of the program (as Lightning calls
    ``train_dataloader()`` and ``setup()`` on each): if ``torch.distributed`` is initialized, the
    ranks then compare their samplers (one ``all_gather_object``) and all raise ``ConfigError`` if
    a rank's sampler is no ``DistributedSampler`` under several ranks or its ``dist_info`` gave
    another rank or world size than the job's, if the ranks' samplers differ in a setting or in
    their seed (``rng=np.random.default_rng(SEED)``, the same SEED on every rank; a sampler made
    without ``rng`` takes the shared seed 0 in a ``DistributedSampler``), or, with
    ``equal_batches=True`` (the default: a training loader, whose gradient all-reduce waits for
    every rank), if the ranks' batch counts differ; a validation loader that reads every row once
    (``enforce_equal_batches=False``) passes ``equal_batches=False``. An error on one rank alone
    would leave the others waiting in their next collective. Made before the process group exists,
    a loader checks at its first iteration.

    Epochs: ``set_epoch(e)`` (Lightning calls it on ``loader.sampler`` at each epoch's start; each
    iteration plays the next epoch without it). Resume: ``state_dict()`` is the point after the
    batches this loader has handed out (to Lightning's training loop, which trains each batch
    before it asks for the next); ``load_state_dict`` makes the next iteration hand out exactly the
    rest of that epoch, also when the sampler's ``set_epoch`` is then called with that epoch's
    number, as Lightning does; a state taken at its epoch's end continues with the next epoch.
    ``len()`` is the whole epoch's batch count, from its start, also while a resumed epoch is
    handed out: Lightning counts the batches of a resumed epoch from its start.
    """

    def __init__(
        self,
        dataset: Any,
        sampler: AnySampler,
        *,
        n_obs: int | None = None,
        equal_batches: bool = True,
        device: torch.device | str | None = None,
        obs: list[str] | None = None,
        layer: str | None = None,
        **dataloader_kwargs: Any,
    ) -> None:
        check_sampler("ChunkDataLoader: sampler", sampler)
        given = sorted(key for key in _SAMPLER_OWNS if key in dataloader_kwargs)
        if given:
            raise ConfigError(
                f"ChunkDataLoader: {', '.join(given)} must not be given: the sampler decides the batches "
                f"(its batch_size is {sampler.batch_size}, its drop_last {sampler.drop_last})"
            )
        self._source = dataset
        self._reader: Reader | None = None
        self._collate: Any = None
        if is_source(dataset):
            reader = dataset if isinstance(dataset, Reader) else Reader._of(
                "ChunkDataLoader", dataset, obs=obs, layer=layer, sparse="csr"
            )
            if n_obs is not None:
                reader._check_n_obs("ChunkDataLoader", index("n_obs", n_obs))
            n_obs = reader.n_obs
            self._reader, self._collate = reader, dataloader_kwargs.pop("collate_fn", None)
            if dataloader_kwargs.get("num_workers", 0) and reader.under_zarrs:
                dataloader_kwargs["multiprocessing_context"] = _not_forked(dataloader_kwargs.get("multiprocessing_context"))
            self._batch_sampler: BatchSampler = _Requests(sampler, n_obs)
            self._loader = torch.utils.data.DataLoader(
                _RequestReads(reader), batch_sampler=self._batch_sampler, collate_fn=_first, **dataloader_kwargs
            )
        else:
            if obs is not None or layer is not None:
                raise TypeError(
                    "ChunkDataLoader: obs= and layer= are for an AnnData or an annbatch DatasetCollection read through "
                    f"chunksampler.reader, not a {type(dataset).__name__}"
                )
            if n_obs is None:
                try:
                    n_obs = len(dataset)
                except TypeError:
                    raise TypeError(
                        f"ChunkDataLoader: n_obs must be given for a dataset without len(), got a "
                        f"{type(dataset).__name__}"
                    ) from None
            self._batch_sampler = BatchSampler(sampler, n_obs)
            self._loader = torch.utils.data.DataLoader(dataset, batch_sampler=self._batch_sampler, **dataloader_kwargs)
        self._equal_batches = bool(equal_batches)
        try:
            self._device = None if device is None else torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ConfigError(f"ChunkDataLoader: device must name a torch device, got {device!r} ({error})") from None
        # The batch sampler's pass that the current iteration hands out (None until its first batch:
        # the pass knows where its epoch began), and the batches handed to the loop from it.
        self._pass: Iteration | None = None
        self._handed = 0
        # The state load_state_dict() was given, until the next iteration begins from it.
        self._restore: SamplerStateDict | None = None
        self._checked = False
        self._check()

    def _check(self) -> None:
        if not self._checked:
            self._checked = check_every_rank(
                "ChunkDataLoader", self.sampler, self.n_obs, equal_batches=self._equal_batches
            )

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler (the object given). Lightning calls its ``set_epoch`` at each epoch's
        start; after ``load_state_dict``, ``set_epoch`` of the restored epoch's number keeps the restore."""
        # Not BatchSampler.sampler, whose guard against Accelerate's prepare() of a DataLoader walks the
        # caller's frames: a ChunkDataLoader is no DataLoader that Accelerate rebuilds.
        return self._batch_sampler._sampler

    @property
    def batch_sampler(self) -> BatchSampler:
        """The ``chunksampler.torch.BatchSampler`` the DataLoader draws its batches from; it runs
        ahead of the loop by the batches DataLoader workers prefetch (its own ``state_dict()``
        counts those the DataLoader handed on; this loader's counts those it handed to Lightning)."""
        return self._batch_sampler

    @property
    def dataloader(self) -> torch.utils.data.DataLoader:
        """The ``torch.utils.data.DataLoader`` inside."""
        return self._loader

    @property
    def dataset(self) -> Any:
        """The dataset the batches index, or the source they are read from (as given)."""
        return self._source

    @property
    def reader(self) -> Reader | None:
        """The ``chunksampler.reader.Reader`` each load request is read through, where the dataset is a
        source (zarr, h5py, scipy CSR, AnnData, an annbatch DatasetCollection, a Reader); None for a
        map-style dataset, which the DataLoader fetches batch by batch."""
        return self._reader

    @property
    def n_obs(self) -> int:
        """Observations in the dataset: each epoch covers the sampler's share of ``[0, n_obs)``."""
        return self._batch_sampler.n_obs

    @property
    def num_workers(self) -> int:
        """The DataLoader's worker processes."""
        return self._loader.num_workers

    @property
    def device(self) -> torch.device | None:
        """Where each batch's tensors are moved (``Tensor.to(device)``, non-blocking where the
        DataLoader pins memory), or None: left where the DataLoader made them."""
        return self._device

    def __getattr__(self, name: str) -> Any:
        # The DataLoader's own settings (collate_fn, pin_memory, ...), read from the one inside, as
        # Accelerate's skip_first_batches reads them to make a DataLoader over the same batch sampler.
        loader = self.__dict__.get("_loader")
        if loader is None or name not in _DATALOADER_SETTINGS:
            raise AttributeError(f"'ChunkDataLoader' object has no attribute {name!r}")
        if name == "worker_init_fn" and _internals.ray_calls(sys._getframe(1)):
            raise NotADataLoaderError(_RAY_REBUILDS)
        return getattr(loader, name)

    def __len__(self) -> int:
        """Batches of the epoch being handed out, or else of the next iteration's epoch, counted from
        the epoch's start (also after ``load_state_dict``, when fewer remain)."""
        current = self._pass
        if current is not None and self._handed < current.total:
            return current.n_batches
        self._settle_restore()
        return self.sampler.n_batches(self.n_obs, worker=(0, 1))

    def __iter__(self) -> Iterator[Any]:
        """Hands out the batches of the sampler's next epoch (the rest of a restored one), as the
        DataLoader fetches them. Nothing starts before the first ``next()``: Lightning calls
        ``iter()`` before it sets the epoch."""
        if _internals.ray_calls(sys._getframe(1)):
            raise ConfigError(_RAY_WRAPS)
        self._check()
        self._settle_restore()
        self._restore = None
        self._pass, self._handed = None, 0
        device, non_blocking = self._device, self._loader.pin_memory
        if self._reader is not None:
            yield from self._read_requests(device, non_blocking)
            return
        for batch in self._loader:
            if self._pass is None:
                # The pass this batch came from, which the DataLoader's iterator has begun: it knows
                # where its epoch began (after a restore, the restored point) and how many it yields.
                self._pass = self._batch_sampler._iteration
            self._handed += 1
            yield batch if device is None else _to_device(batch, device, non_blocking)

    def _read_requests(self, device: torch.device | None, non_blocking: bool) -> Iterator[Any]:
        """The batches of each request read whole (by a DataLoader worker, or in this process with the
        next request read ahead), as views of its tensors. A failed read leaves the loader where it
        was before the request: its state, and the next iteration, continue after the batches
        handed out."""
        start = self.state_dict()
        collate = self._collate
        try:
            for rows, offsets in self._loader if self.num_workers > 0 else self._read_here():
                if self._pass is None:
                    self._pass = self._batch_sampler._iteration
                if device is not None:
                    rows = _whole_to_device(rows, device, non_blocking)
                for begin, end in zip(offsets[:-1], offsets[1:]):
                    batch = _cut(rows, begin, end, device, non_blocking)
                    if collate is not None:
                        batch = collate(batch)
                    self._handed += 1
                    yield batch
        except Exception:
            self.load_state_dict(start if self._pass is None else self._pass.state_dict(self._handed))
            raise

    def _read_here(self) -> Iterator[tuple[Any, list[int]]]:
        """Each request read in this process, the next one in a thread while this one's batches train."""
        pin = self._loader.pin_memory and torch.cuda.is_available()
        reads = ReadAhead(self._reader, (item[0] for item in self._batch_sampler))
        try:
            for request, rows in reads:
                tensors = _tensors(rows)
                yield (_pinned(tensors) if pin else tensors), request.offsets.tolist()
        finally:
            reads.close()

    def _settle_restore(self) -> None:
        """Puts a pending ``load_state_dict`` back if the sampler's ``set_epoch`` of the same epoch
        dropped it (Lightning calls it at every epoch's start, on ``loader.sampler``); another
        epoch's number drops it for good."""
        restore = self._restore
        if restore is None or self.sampler.restore_pending:
            return
        if self.sampler.epoch == restore["epoch"]:
            self._batch_sampler.load_state_dict(restore)
        else:
            self._restore = None

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``; after
        ``load_state_dict``, the restored epoch's own number keeps the restore."""
        self._batch_sampler.set_epoch(epoch)
        self._settle_restore()

    def state_dict(self, batches_done: int | None = None) -> SamplerStateDict:
        """The sampler's state after the batches this loader has handed out in its current iteration
        (``{"state": text, "epoch": e, "batches_done": b}``, ``b`` counted from the epoch's start);
        after the last batch of an epoch, or before an iteration, where the next one begins.

        A loop behind a wrapper that fetches batches ahead of it passes the batches it has
        finished of this iteration instead, ``0 <= batches_done <=`` those handed out (counted
        from where the iteration began, as ``enumerate`` counts)."""
        done = optional_index("batches_done", batches_done)
        if done is not None and (done > 0 or self._pass is not None):
            if self._pass is None or not done <= self._handed:
                raise ConfigError(
                    f"ChunkDataLoader.state_dict: batches_done ({done}) must be in [0, {self._handed}], the batches "
                    "this iteration has handed out"
                )
            return self._pass.state_dict(done)
        self._settle_restore()
        if self._restore is not None:
            return self._restore
        current = self._pass
        # Where the next iteration begins if none has handed out a batch since the last set_epoch (the
        # sampler's, as Lightning calls it) or restore; else after the batches handed out, which is the
        # epoch's end after its last batch.
        if current is None or self.sampler._since in ("start", "restore"):
            return self.sampler._next_state()
        return current.state_dict(self._handed)

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next iteration hand out exactly the batches that followed ``state_dict`` (from
        ``state_dict()`` of a loader over a sampler of the same configuration and seed): raises
        ``StateMismatchError`` (another configuration, seed, dataset size or world size) or
        ``StateFormatError`` here, not at the next iteration. A state at its epoch's end makes the
        next iteration play the epoch after. Loading the state this loader holds already (Lightning
        restores a ``ChunkDataModule``'s and its training loader's, the same) changes nothing."""
        if self._restore is not None and state_dict == self._restore:
            return
        try:
            self._batch_sampler.load_state_dict(state_dict)
            restored = self.sampler._next_state()
            # The restored epoch's batches from its start (n_obs and worker checked against the state's).
            whole = self.sampler.n_batches(self.n_obs, worker=(0, 1))
        except StateError as error:
            raise type(error)(
                f"ChunkDataLoader.load_state_dict: the state is not one of this loader's sampler (a checkpoint of "
                f"another configuration, seed, dataset size or world size?): {error}"
            ) from None
        self._pass = None
        if restored["batches_done"] >= whole:
            # At its epoch's end: nothing is left of it, so the next iteration plays the next epoch.
            self._batch_sampler.set_epoch(restored["epoch"] + 1)
            self._restore = None
        else:
            self._restore = state_dict

    def __repr__(self) -> str:
        return f"ChunkDataLoader({self.sampler!r}, n_obs={self.n_obs}, num_workers={self.num_workers})"
