"""Grain integration: ``ChunkDataset``, a ``grain.IterDataset`` of batches read chunk by chunk.

Imported only when used (``import chunksampler.grain``); ``import chunksampler`` does not import
Grain or JAX.

Grain's own pipelines read one record at a time: ``MapDataset.source(...).shuffle()`` and
``IndexSampler`` order the records with an index shuffle that keeps no locality, and their
workers and processes take strided slices of the shuffled indices. On a chunked store (zarr,
AnnData/HDF5) every record is then a read of its own. A ``ChunkDataset`` plays a chunksampler
sampler's epochs instead: each of the sampler's load requests (``preload_nchunks`` chunks on the
store's chunk grid, one read group) is read once, in row order, with one call to a zarr array (an
orthogonal selection of the request's rows: each storage chunk and a shard's index read once a
request) and one contiguous read per chunk elsewhere, then shuffled into batches as the request's
splits say and handed out batch by batch. Its elements are batches (a pytree of numpy
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
import sys
from collections.abc import Mapping
from typing import Any

import grain
import numpy as np

from . import _chunksampler
from ._convert import index
from ._errors import ConfigError, StateFormatError
from ._integration import AnySampler, Iteration, check_sampler, request_rows
from ._ranks import check_ranks
from ._reader import Column
from ._samplers import DistributedSampler

__all__ = ["ChunkDataset", "ChunkDatasetIterator"]

_OWNER = "chunksampler.grain.ChunkDataset"
# The tag of the iterator's state, so that a state of another iterator is named as such.
FORMAT = "chunksampler.grain/1"


# --- what the batches are read from --------------------------------------------------------------


def _obs_column(frame: Any, key: str, owner: str) -> np.ndarray:
    """An ``obs`` column as numbers JAX takes: a categorical's codes (int32), a number or bool as it is."""
    if key not in frame.columns:
        raise ValueError(f"{owner}: obs has no column {key!r} (its columns: {list(frame.columns)})")
    series = frame[key]
    if hasattr(series, "cat"):
        return series.cat.codes.to_numpy().astype(np.int32)
    values = series.to_numpy()
    if values.dtype.kind not in "biuf":
        raise ValueError(
            f"{owner}: obs column {key!r} holds {values.dtype} values, which JAX cannot take; make it categorical "
            f"(obs[{key!r}].astype('category')) to read its codes, or numeric"
        )
    return values


def _anndata_fields(parts: list[Any], obs: list[str], layer: str | None) -> dict[str, Any]:
    """``{"X": column, "obs": {key: column}}`` of AnnData objects laid end to end."""
    if layer is None:
        x = [adata.X for adata in parts]
    else:
        missing = [i for i, adata in enumerate(parts) if layer not in adata.layers]
        if missing:
            raise ValueError(f"{_OWNER}: layer {layer!r} is missing (in AnnData {missing[0]} of {len(parts)})")
        x = [adata.layers[layer] for adata in parts]
    if any(part is None for part in x):
        raise ValueError(f"{_OWNER}: the AnnData has no X; pass layer= to read one of its layers")
    fields: dict[str, Any] = {"X": Column(_OWNER, "X", x)}
    if obs:
        fields["obs"] = {
            key: Column(_OWNER, f"obs[{key!r}]",
                        [np.concatenate([_obs_column(adata.obs, key, _OWNER) for adata in parts])])
            for key in obs
        }
    return fields


def _collection_parts(collection: Any) -> list[Any]:
    """The datasets of an annbatch ``DatasetCollection`` as AnnData objects whose X stays on disk (a
    zarr array, or a backed CSR dataset) and whose obs is read into memory, as annbatch's own
    ``Loader.use_collection`` opens them."""
    import anndata as ad

    parts = []
    for group in collection:
        x = group["X"]
        if not hasattr(x, "shape"):  # a sparse matrix is a group of its arrays
            x = ad.io.sparse_dataset(x)
        parts.append(ad.AnnData(X=x, obs=ad.io.read_elem(group["obs"])))
    if not parts:
        raise ValueError(f"{_OWNER}: the DatasetCollection is empty")
    return parts


def _fields(data: Any, obs: list[str] | None, layer: str | None) -> Any:
    """The batches' structure, each leaf a ``Column``: one column for an array-like, a dict of them
    for a mapping, ``{"X": ..., "obs": {...}}`` for AnnData or an annbatch DatasetCollection."""
    kind = type(data)
    module = kind.__module__
    if module.startswith("annbatch") and kind.__name__ == "DatasetCollection":
        return _anndata_fields(_collection_parts(data), list(obs or ()), layer)
    if module.startswith("anndata") and kind.__name__ == "AnnData":
        return _anndata_fields([data], list(obs or ()), layer)
    if obs is not None or layer is not None:
        raise TypeError(
            f"{_OWNER}: obs= and layer= are for AnnData or an annbatch DatasetCollection, not {kind.__name__}"
        )
    if isinstance(data, Mapping):
        if not data:
            raise ValueError(f"{_OWNER}: data is an empty mapping; give it at least one array")
        return {str(key): Column(_OWNER, str(key), [value]) for key, value in data.items()}
    return Column(_OWNER, "data", [data])


def _leaves(fields: Any) -> list[Column]:
    if isinstance(fields, Column):
        return [fields]
    return [leaf for value in fields.values() for leaf in _leaves(value)]


def _read(fields: Any, request: Any, needs_rows: bool) -> list[Any]:
    """The request's batches, each a pytree of ``fields``' shape."""
    rows = request_rows(request) if needs_rows else None
    offsets = request.offsets.tolist()

    def ordered(node: Any) -> Any:
        if isinstance(node, Column):
            return (node, node.ordered(request, rows))
        return {key: ordered(value) for key, value in node.items()}

    def cut(node: Any, begin: int, end: int) -> Any:
        if isinstance(node, tuple):
            return node[0].batch(node[1], begin, end)
        return {key: cut(value, begin, end) for key, value in node.items()}

    read = ordered(fields)
    return [cut(read, begin, end) for begin, end in zip(offsets[:-1], offsets[1:])]


# --- the processes of a jax.distributed job ------------------------------------------------------


def _jax_job() -> tuple[int, int] | None:
    """``(jax.process_index(), jax.process_count())`` of an initialized ``jax.distributed`` job, else None
    (JAX not imported, or not initialized: nothing in JAX is started to ask)."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized():
        return None
    return jax.process_index(), jax.process_count()


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
            sampler = DistributedSampler(sampler, dist_info=lambda: shard)
            sharded = True
    job = _jax_job()
    if job is None:
        return sampler
    if not sharded and job[1] > 1:
        sampler = DistributedSampler(sampler, dist_info="jax")
    check_ranks(_OWNER, sampler, n_obs, job=job, equal_batches=True, gather=_jax_gather, kind="jax")
    return sampler


# --- the dataset and its iterator ----------------------------------------------------------------


class ChunkDataset(grain.IterDataset):
    """A ``grain.IterDataset`` whose elements are the batches of a chunksampler sampler's epochs over
    ``data``, each read group read as contiguous chunks.

    ``data``: an array-like with row slicing (numpy, zarr, h5py, a scipy CSR matrix), a mapping of
    names to such arrays of one length (each batch a dict of the same names), an ``anndata.AnnData``
    or an annbatch ``DatasetCollection`` (each batch ``{"X": rows, "obs": {key: values}}`` with the
    ``obs`` columns named: a categorical's codes, a number as it is; ``layer`` reads a layer in place
    of X). Sparse rows come out dense.

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
        if obs is not None and (isinstance(obs, str) or not all(isinstance(key, str) for key in obs)):
            raise TypeError(f"{_OWNER}: obs must be a list of column names, got {obs!r}")
        self._fields = _fields(data, obs, layer)
        leaves = _leaves(self._fields)
        lengths = {leaf.name: leaf.n_obs for leaf in leaves}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"{_OWNER}: the arrays must have one row per observation each, but their lengths differ: {lengths}"
            )
        self._n_obs = leaves[0].n_obs
        self._needs_rows = any(leaf.in_memory for leaf in leaves)
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
        self._sampler = copy.deepcopy(dataset._sampler)
        self._group: list[Any] = []
        self._taken = 0  # batches of self._group handed out
        self._begin(dataset._first_epoch)

    def _begin(self, epoch: int) -> None:
        """Starts ``epoch`` from its first batch."""
        self._sampler.set_epoch(epoch)
        self._play(self._sampler)

    def _play(self, sampler: AnySampler) -> None:
        """Plays ``sampler`` from where it stands (an epoch's start, or a restored point); raises
        StateMismatchError, changing nothing, where a restored state is not of this worker share,
        process count or dataset size."""
        epoch = sampler.epoch  # sample_arrays() moves the sampler on to the next epoch
        requests = sampler.sample_arrays(self._dataset._n_obs, worker=self._dataset._worker)
        self._sampler, self._epoch = sampler, epoch
        self._requests = requests
        self._pass = Iteration(requests, 0)
        self._group, self._taken = [], 0

    def _ended(self, epoch: int) -> bool:
        end = self._dataset._num_epochs
        return end is not None and epoch >= self._dataset._first_epoch + end

    def __next__(self) -> Any:
        while self._taken == len(self._group):
            if self._ended(self._epoch):
                raise StopIteration
            request = next(self._requests, None)
            if request is None:
                if self._ended(self._epoch + 1):
                    self._epoch += 1
                    raise StopIteration
                self._begin(self._epoch + 1)
                continue
            self._group = _read(self._dataset._fields, request, self._dataset._needs_rows)
            self._taken = 0
        batch = self._group[self._taken]
        self._group[self._taken] = None  # handed out: the iterator keeps no reference to it
        self._taken += 1
        self._pass.yielded += 1
        return batch

    def get_state(self) -> dict[str, Any]:
        """``{"format": "chunksampler.grain/1", "state": text, "epoch": e, "batches_done": k}``: the
        sampler's state after the batches handed out (``k`` of epoch ``e``, counted over this
        iterator's worker share), which ``set_state`` continues from."""
        state = self._pass.state_dict(self._pass.total if self._ended(self._epoch) else self._pass.yielded)
        return {"format": FORMAT, **state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues exactly after the state's batches (from ``get_state()`` of an iterator of the same
        data, sampler settings and seed, worker count and processes): the in-flight read group is read
        again, the batches before the state's are not handed out again. Raises StateFormatError for
        anything else than such a state, StateMismatchError for a state of another run."""
        if not isinstance(state, Mapping) or not isinstance(state.get("state"), str):
            raise StateFormatError(
                f"{_OWNER}: set_state expects the dict get_state() returned ({{'format': {FORMAT!r}, 'state': ...}}), "
                f"got {state!r:.200}"
            )
        if state.get("format") != FORMAT:
            raise StateFormatError(
                f"{_OWNER}: the state's format {state.get('format')!r} is not {FORMAT!r}, this iterator's; it is the "
                "state of another iterator"
            )
        text = state["state"]
        fields = _chunksampler.state_fields(text)
        sampler = copy.deepcopy(self._dataset._sampler)
        sampler.load_state_dict({"state": text})  # StateMismatchError for another configuration or seed
        taken_on = (fields["worker"], fields["num_workers"])
        if taken_on != self._dataset._worker and fields["batches_done"] == 0:
            # Grain takes an mp_prefetch pipeline's first state in its main process, where the dataset is
            # not sliced: the start of an epoch, the same for every worker share. It still must be of
            # this run: the check runs the state on the worker share it was taken on.
            sampler.sample_arrays(self._dataset._n_obs, worker=taken_on)
            sampler.set_epoch(fields["epoch"])
        self._play(sampler)
        if self._pass.total == 0:  # the state is at the end of its epoch
            if self._ended(self._epoch + 1):
                self._epoch += 1
            else:
                self._begin(self._epoch + 1)

    def __str__(self) -> str:
        return f"ChunkDatasetIterator(epoch={self._epoch}, batches_done={self._pass.first + self._pass.yielded})"
