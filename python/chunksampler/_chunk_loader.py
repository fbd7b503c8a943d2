"""``chunksampler.torch.ChunkDataLoader``: a torch DataLoader over a chunk sampler, which the
trainers take as it is (see ``chunksampler.torch``, which exports it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch.utils.data

from . import _internals
from ._batch_sampler import BatchSampler
from ._convert import index, optional_index
from ._cursor import Pass
from ._errors import ConfigError, NotADataLoaderError
from ._integration import AnySampler, check_every_rank, check_sampler
from ._tensors import _cut, _first, _not_forked, _pinned, _RequestReads, _tensors, _to_device, _whole_to_device
from ._types import RequestArrays, SamplerStateDict
from .reader import ReadAhead, Reader, _copy as _copy_request, is_source


# --- a loader over a source: each request read whole ------------------------------------------------


class _Requests(BatchSampler):
    """The batch sampler of a ``ChunkDataLoader`` over a source: each of its items is one whole load
    request (copied: the sampler's arrays are views of its buffers), which one fetch reads at once, in
    a DataLoader worker or in the loader's process; its iteration still counts batches."""

    @staticmethod
    def _batches(requests: Iterator[RequestArrays], iteration: Pass) -> Iterator[list[Any]]:
        for request in requests:
            iteration.yielded += len(request.offsets) - 1
            yield [_copy_request(request)]

    _counts_loader = False  # the DataLoader counts requests; the ChunkDataLoader counts the batches


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
        # Where the loader stands: the batch sampler's cursor (its pass, a restore waiting for the
        # next), counting the batches this loader hands to the loop, not those its workers fetch.
        self._cursor = self._batch_sampler._cursor
        # The whole rank's (the batch sampler runs in this process) and a state at an epoch's end
        # continues with the next epoch.
        self._cursor.owner, self._cursor.worker, self._cursor.rolls_over = "ChunkDataLoader", (0, 1), True
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
        return self._cursor.n_batches()

    def __iter__(self) -> Iterator[Any]:
        """Hands out the batches of the sampler's next epoch (the rest of a restored one), as the
        DataLoader fetches them. Nothing starts before the first ``next()``: Lightning calls
        ``iter()`` before it sets the epoch."""
        if _internals.ray_calls(sys._getframe(1)):
            raise ConfigError(_RAY_WRAPS)
        self._check()
        device, non_blocking = self._device, self._loader.pin_memory
        if self._reader is not None:
            yield from self._read_requests(device, non_blocking)
            return
        # The DataLoader's iterator begins the cursor's pass (before its first batch reaches the loop).
        cursor = self._cursor
        for batch in self._loader:
            cursor.handed += 1
            yield batch if device is None else _to_device(batch, device, non_blocking)

    def _read_requests(self, device: torch.device | None, non_blocking: bool) -> Iterator[Any]:
        """The batches of each request read whole (by a DataLoader worker, or in this process with the
        next request read ahead), as views of its tensors. A failed read leaves the loader where it
        was before the request: its state, and the next iteration, continue after the batches
        handed out."""
        cursor = self._cursor
        start, before = cursor.state_dict(), cursor.current
        collate = self._collate
        try:
            for rows, offsets in self._loader if self.num_workers > 0 else self._read_here():
                if device is not None:
                    rows = _whole_to_device(rows, device, non_blocking)
                for begin, end in zip(offsets[:-1], offsets[1:]):
                    batch = _cut(rows, begin, end, device, non_blocking)
                    if collate is not None:
                        batch = collate(batch)
                    cursor.handed += 1
                    yield batch
        except Exception:
            current = cursor.current
            cursor.restore(start if current is None or current is before else current.state_dict(cursor.handed))
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

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``; after
        ``load_state_dict``, the restored epoch's own number keeps the restore."""
        self._cursor.set_epoch(epoch)

    def state_dict(self, batches_done: int | None = None) -> SamplerStateDict:
        """The sampler's state after the batches this loader has handed out in its current iteration
        (``{"state": text, "epoch": e, "batches_done": b}``, ``b`` counted from the epoch's start);
        after the last batch of an epoch, or before an iteration, where the next one begins.

        A loop behind a wrapper that fetches batches ahead of it passes the batches it has
        finished of this iteration instead, ``0 <= batches_done <=`` those handed out (counted
        from where the iteration began, as ``enumerate`` counts)."""
        return self._cursor.state_dict(optional_index("batches_done", batches_done))

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next iteration hand out exactly the batches that followed ``state_dict`` (from
        ``state_dict()`` of a loader over a sampler of the same configuration and seed): raises
        ``StateMismatchError`` (another configuration, seed, dataset size or world size) or
        ``StateFormatError`` here, not at the next iteration. A state at its epoch's end makes the
        next iteration play the epoch after. Loading the state this loader holds already (Lightning
        restores a ``ChunkDataModule``'s and its training loader's, the same) changes nothing."""
        self._cursor.restore(state_dict)

    def __repr__(self) -> str:
        return f"ChunkDataLoader({self.sampler!r}, n_obs={self.n_obs}, num_workers={self.num_workers})"


ChunkDataLoader.__module__ = "chunksampler.torch"  # where users import it from, and pickles find it
