"""Grain integration: ``ChunkDataset``, a ``grain.IterDataset`` of batches read chunk by chunk.

Imported only when used (``import chunksampler.grain``); ``import chunksampler`` does not import
Grain or JAX.

Grain's own pipelines read one record at a time: ``MapDataset.source(...).shuffle()`` and
``IndexSampler`` order the records with an index shuffle that keeps no locality, and their
workers and processes take strided slices of the shuffled indices. On a chunked store (zarr,
AnnData/HDF5) every record is then a read of its own. A ``ChunkDataset`` plays a chunksampler
sampler's epochs instead: each of the sampler's load requests (``preload_nchunks`` chunks on the
store's chunk grid, one read group) is read once by ``chunksampler.reader`` (one call to a zarr
array: each storage chunk and a shard's index read once a request), the next request while the
current one's batches are used, then shuffled into batches as the request's splits say and handed
out batch by batch. Its elements are batches (a pytree of numpy
arrays with the batch as the leading axis), ready for ``jax.make_array_from_process_local_data``.

- Processes: under ``jax.distributed`` each process reads its own shard. A plain sampler is
  wrapped in ``DistributedSampler(sampler, dist_info="jax")``; a ``DistributedSampler`` must have
  this process's index and count. The processes check, together, that they hold the same sampler
  with equal batch counts (one ``process_allgather``), so a mistake fails on every process.
  ``shard_options`` takes Grain's ``ShardOptions`` (``ShardByJaxProcess``) in place of a
  ``DistributedSampler``, not on top of one.
- Workers: ``.mp_prefetch(grain.MultiprocessingOptions(num_workers=N))`` gives worker ``i`` the
  sampler's worker share ``(i, N)`` (whole read groups: each worker reads its chunks whole).
- Checkpoints: the iterator's ``get_state()``/``set_state()`` (and so Grain's
  ``grain.checkpoint.CheckpointHandler`` and Orbax's) hold the sampler's state after the batches
  handed out; a restored iterator continues exactly there, mid-epoch too, re-reading only the read
  group that was in flight. A state of another configuration, seed, dataset size, worker count or
  process count is refused with ``StateMismatchError``.
- Epochs: each epoch is a new order (the sampler's ``set_epoch``); ``num_epochs`` bounds them
  (``None``: the iterator never ends, as Grain's ``repeat()``).

Tested with Grain 0.2.18 and JAX 0.12 on CPU::

    jax.distributed.initialize()
    sampler = chunksampler.RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=256,
                                         rng=np.random.default_rng(0))
    dataset = chunksampler.grain.ChunkDataset(zarr.open_array("cells.zarr"), sampler, num_epochs=10)
    for batch in dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=2)):
        ...
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import grain
import numpy as np

from . import _chunksampler
from ._convert import index
from ._errors import ConfigError, ReadError, StateFormatError
from ._cursor import Cursor, StateShapeError, read_state, write_state
from ._cursor import shard as shard_sampler
from ._dist import jax_job
from ._integration import AnySampler, check_sampler
from ._ranks import check_ranks
from .reader import ReadAhead, Reader
from ._samplers import DistributedSampler

__all__ = ["ChunkDataset", "ChunkDatasetIterator"]

_OWNER = "chunksampler.grain.ChunkDataset"


# --- the processes of a jax.distributed job ------------------------------------------------------


def _jax_gather(out: list[Any], obj: Any) -> None:
    """``torch.distributed.all_gather_object`` for a ``jax.distributed`` job: ``out[i]`` becomes process
    ``i``'s ``obj`` (pickled, as bytes in two ``process_allgather`` calls)."""
    from jax.experimental import multihost_utils

    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.array([data.size], np.int32))).reshape(-1)
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: data.size] = data
    gathered = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(sizes), -1)
    for i, size in enumerate(sizes.tolist()):
        out[i] = pickle.loads(gathered[i, :size].tobytes())


def _shard(sampler: AnySampler, shard_options: Any, n_obs: int) -> AnySampler:
    """The sampler this process plays: ``sampler`` itself, or wrapped in a DistributedSampler of
    ``shard_options``' shard or of the ``jax.distributed`` job's process; checked with every other
    process of the job."""
    sharded = isinstance(sampler, DistributedSampler)
    if shard_options is not None:
        if not isinstance(shard_options, grain.sharding.ShardOptions):
            raise TypeError(
                f"{_OWNER}: shard_options must be a grain.sharding.ShardOptions (ShardByJaxProcess(), ...), got "
                f"{type(shard_options).__module__}.{type(shard_options).__qualname__}"
            )
        shard = (int(shard_options.shard_index), int(shard_options.shard_count))
        if shard[1] > 1 and sharded:
            raise ConfigError(
                f"{_OWNER}: shard_options={shard_options!r} would shard the DistributedSampler's shard again (rank "
                f"{sampler.rank} of {sampler.world_size}): each process would read a slice of its own share and "
                "leave the rest unread. Pass a plain sampler with shard_options, or the DistributedSampler alone"
            )
        if shard[1] > 1:
            sampler = shard_sampler("train", sampler, lambda: shard)
            sharded = True
    job = jax_job()
    if job is None:
        return sampler
    if not sharded and job[1] > 1:
        sampler = shard_sampler("train", sampler, "jax")
    check_ranks(_OWNER, sampler, n_obs, job=job, equal_batches=True, gather=_jax_gather, kind="jax")
    return sampler


# --- the dataset and its iterator ----------------------------------------------------------------


class ChunkDataset(grain.IterDataset):
    """A ``grain.IterDataset`` whose elements are the batches of a chunksampler sampler's epochs over
    ``data``, each read group read as contiguous chunks.

    ``data``: a ``chunksampler.reader.Reader``, or what one reads: an array-like with row slicing
    (numpy, zarr, h5py, a scipy CSR matrix), a mapping of names to such arrays of one length (each
    batch a dict of the same names), an ``anndata.AnnData`` or an annbatch ``DatasetCollection``
    (each batch ``{"X": rows, "obs": {key: values}}`` with the ``obs`` columns named: a
    categorical's codes, a number as it is; ``layer`` reads a layer in place of X). Sparse rows come
    out dense. A read that fails raises ``chunksampler.ReadError`` and leaves the iterator before
    that request's batches: the next ``next()`` reads it again.

    ``sampler``: any chunksampler sampler, or a DistributedSampler of one; it is copied, and each
    iterator plays its own copy from the sampler's current epoch. Under an initialized
    ``jax.distributed`` job a plain sampler is wrapped in ``DistributedSampler(sampler,
    dist_info="jax")``, and every process must construct its ChunkDataset at the same point (they
    check their samplers together). ``shard_options``: a Grain ``ShardOptions`` (say
    ``grain.sharding.ShardByJaxProcess()``) to shard a plain sampler with, instead of a
    DistributedSampler; ``None`` or a shard count of 1 shards nothing more.

    ``num_epochs``: the epochs an iterator plays before it ends; ``None`` (the default) plays them
    without end, each in a new order.
    """

    def __init__(
        self,
        data: Any,
        sampler: AnySampler,
        *,
        obs: list[str] | None = None,
        layer: str | None = None,
        num_epochs: int | None = None,
        shard_options: Any = None,
    ) -> None:
        super().__init__()
        check_sampler(f"{_OWNER}: sampler", sampler)
        self._reader = data if isinstance(data, Reader) else Reader._of(_OWNER, data, obs=obs, layer=layer)
        self._n_obs = self._reader.n_obs
        if num_epochs is not None:
            num_epochs = index("num_epochs", num_epochs)
            if num_epochs < 1:
                raise ConfigError(f"{_OWNER}: num_epochs ({num_epochs}) must be >= 1, or None for no end")
        self._num_epochs = num_epochs
        sampler = copy.deepcopy(sampler)
        sampler.validate(self._n_obs)
        self._sampler = _shard(sampler, shard_options, self._n_obs)
        self._first_epoch = self._sampler.epoch
        self._worker = (0, 1)

    @property
    def n_obs(self) -> int:
        """The observations ``data`` holds."""
        return self._n_obs

    @property
    def sampler(self) -> AnySampler:
        """The sampler this process plays (a DistributedSampler where it reads one shard of a job)."""
        return self._sampler

    @property
    def n_batches(self) -> int:
        """Batches per epoch of this process (every worker's together); the same in every process of a
        ``jax.distributed`` job."""
        return self._sampler.n_batches(self._n_obs)

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Grain's ``mp_prefetch`` gives worker ``i`` of ``n`` the slice ``slice(i, None, n)``: the worker
        then plays the sampler's worker share ``(i, n)``, whole read groups (``sequential_slice`` changes
        nothing: a share is read chunk by chunk either way). Other slices are refused."""
        del sequential_slice
        start, stop, step = sl.start or 0, sl.stop, sl.step or 1
        if stop is not None or not 0 <= start < step:
            raise ValueError(
                f"{_OWNER}: can only be sliced as Grain's workers slice it, slice(i, None, n) with 0 <= i < n; got {sl}"
            )
        self._worker = (start, step)

    def __iter__(self) -> ChunkDatasetIterator:
        return ChunkDatasetIterator(self)

    def __str__(self) -> str:
        epochs = "without end" if self._num_epochs is None else f"{self._num_epochs} epochs"
        return f"ChunkDataset(n_obs={self._n_obs}, sampler={self._sampler!r}, worker={self._worker}, {epochs})"


class ChunkDatasetIterator(grain.DatasetIterator):
    """The iterator of a ``ChunkDataset``: its batches in order, one read group at a time, with
    Grain's ``get_state()``/``set_state()``."""

    def __init__(self, dataset: ChunkDataset) -> None:
        super().__init__()
        self._dataset = dataset
        # Where the iterator stands, on its own copy of the sampler. A state at an epoch's end restores
        # that end (rolls_over=False): whether an epoch follows is num_epochs' to say (_play).
        self._cursor = Cursor(
            _OWNER, copy.deepcopy(dataset._sampler), dataset._n_obs, dataset._worker, rolls_over=False
        )
        self._group: list[Any] = []
        self._taken = 0  # batches of self._group handed out
        self._reads: ReadAhead | None = None  # the reads of the pass's requests, made at the first batch
        self._cursor.set_epoch(dataset._first_epoch)
        self._play()

    def _play(self) -> None:
        """Begins the cursor's next pass (an epoch's start, or a restored point); where a restored
        point is its epoch's end, the next epoch from its start, or the end of the iteration where
        ``num_epochs`` are played."""
        self._close_reads()
        self._epoch = self._cursor.sampler.epoch  # begin() moves the sampler on to the next epoch
        current = self._cursor.begin()
        self._group, self._taken = [], 0
        if current.total == 0 and current.first > 0:  # a restored point at its epoch's end
            if self._ended(self._epoch + 1):
                self._epoch += 1
            else:
                self._cursor.set_epoch(self._epoch + 1)
                self._play()

    def _close_reads(self) -> None:
        reads, self._reads = getattr(self, "_reads", None), None
        if reads is not None:
            reads.close()

    def _ended(self, epoch: int) -> bool:
        end = self._dataset._num_epochs
        return end is not None and epoch >= self._dataset._first_epoch + end

    def __next__(self) -> Any:
        cursor = self._cursor
        while self._taken == len(self._group):
            if self._ended(self._epoch):
                raise StopIteration
            if self._reads is None:  # the next request is read while this one's batches are used
                self._reads = ReadAhead(self._dataset._reader, cursor.current.requests)  # type: ignore[union-attr]
            try:
                item = next(self._reads, None)
            except ReadError:
                # Nothing of the failed request was handed out: the next call reads it again.
                self.set_state(self.get_state())
                raise
            if item is None:
                if self._ended(self._epoch + 1):
                    self._epoch += 1
                    self._close_reads()
                    raise StopIteration
                cursor.set_epoch(self._epoch + 1)
                self._play()
                continue
            self._group = self._dataset._reader.batches(*item)
            self._taken = 0
        batch = self._group[self._taken]
        self._group[self._taken] = None  # handed out: the iterator keeps no reference to it
        self._taken += 1
        cursor.handed += 1
        return batch

    def get_state(self) -> dict[str, Any]:
        """``{"format": "chunksampler.loaders/1", "train": state, "world_size": n, "epoch": e,
        "batches_done": k}``, the envelope every chunksampler loader writes: ``state`` the sampler's
        after the batches handed out (``k`` of epoch ``e``, counted over this iterator's worker
        share, repeated beside it), which ``set_state`` continues from."""
        cursor = self._cursor
        current = cursor.current
        assert current is not None  # _play began a pass
        done = current.total if self._ended(self._epoch) else cursor.handed
        return write_state(current.state_dict(done), summary=True)

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues exactly after the state's batches (from ``get_state()`` of an iterator of the same
        data, sampler settings and seed, worker count and processes; chunksampler 0.4's
        ``chunksampler.grain/1`` states too): the in-flight read group is read again, the batches
        before the state's are not handed out again. Raises StateFormatError for anything else than
        such a state, StateMismatchError for a state of another run; either leaves the iterator as
        it was."""
        try:
            train = read_state(_OWNER, state)
        except StateShapeError:
            raise StateFormatError(
                f"{_OWNER}: set_state expects the dict get_state() returned (the envelope "
                f"{{'format': 'chunksampler.loaders/1', 'train': ...}}), got {state!r:.200}"
            ) from None
        except StateFormatError as error:
            raise StateFormatError(f"{_OWNER}: set_state: {error}; it is the state of another iterator") from None
        if train is None:
            raise StateFormatError(f"{_OWNER}: set_state: the state holds no sampler state, got {state!r:.200}")
        fields = _chunksampler.SamplerState.parse(train["state"])
        taken_on = (fields.worker, fields.num_workers)
        cursor = self._cursor
        if taken_on != self._dataset._worker and fields.batches_done == 0:
            # Grain takes an mp_prefetch pipeline's first state in its main process, where the dataset is
            # not sliced: the start of an epoch, the same for every worker share. It still must be of
            # this run: it is checked on the worker share it was taken on.
            Cursor(_OWNER, cursor.sampler, cursor.n_obs, taken_on).check(train, f"{_OWNER}: set_state")
            cursor.set_epoch(fields.epoch)
        else:
            cursor.restore(train)
        self._play()

    def __str__(self) -> str:
        current = self._cursor.current
        done = 0 if current is None else current.first + self._cursor.handed
        return f"ChunkDatasetIterator(epoch={self._epoch}, batches_done={done})"
