"""The reading engine of chunksampler's loaders: a load request's rows read once, in one buffer,
then handed out batch by batch.

``Reader(source)`` reads the rows a load request names (a ``RequestArrays`` from
``sample_arrays()``, or annbatch's ``LoadRequest`` dict from ``sample()``) and cuts them into the
request's batches. ``chunksampler.torch.ChunkDataLoader`` and ``chunksampler.grain.ChunkDataset``
read through it; a loop of your own can too::

    reader = chunksampler.reader.Reader(zarr.open_array("cells.zarr"))
    for request in sampler.sample_arrays(reader.n_obs):
        for batch in reader.batches(request):
            ...

Each of a request's chunks is read once. The chunks are read in row order (the request's positions,
which count rows in the chunks' shuffled order, are moved to that order once), with as few calls to
the store as its kind allows:

- a zarr array (v2 or v3, plain or sharded): **one** call for the request. Under zarrs (used where
  installed, for a local store) the request's chunks are handed straight to zarrs's Rust pipeline,
  which reads and decodes them in parallel without the GIL; under zarr's own pipeline one orthogonal
  selection of every row of the request, which zarr fetches and decodes concurrently. Either way a
  shard's index is read once for the request, not once per chunk;
- an h5py dataset (and AnnData's backed dense X): one ``read_direct`` per chunk into the buffer,
  without a copy (HDF5 serializes every call in a process on one lock, so threads would not read
  them any faster: DataLoader workers do);
- a scipy CSR matrix in memory, or an in-memory numpy array: indexed at the request's rows at once;
- a backed CSR dataset (anndata's, AnnData's backed sparse X, zarr or HDF5): its row pointers read
  once (8 bytes a row, kept), then the request's non-zeros with one call per array (zarr, as
  above) or one ``read_direct`` per chunk and array (HDF5);
- anything else with row slicing (a memmap, an array-like): one slice per chunk into the buffer.

The rows are then put in the batches' order (one gather, the only copy), and each batch is a view
of that buffer (a numpy array), or its rows of the sparse buffer (``sparse="csr"``: a scipy CSR
matrix; ``"dense"``, the default: a dense array, as JAX takes them).

Sources: an array-like with one row per observation, a mapping of names to such arrays (each batch
a dict of the same names), an ``anndata.AnnData`` in memory or backed, or an annbatch
``DatasetCollection`` (each batch ``{"X": rows, "obs": {key: values}}``: ``obs`` names the columns
to read, a categorical's codes as int32 and numbers as they are; ``layer`` reads a layer in place of
X). A CSC matrix is refused (its rows are not contiguous), as is an array without rows.

A source that fails while a request is read raises ``chunksampler.ReadError`` (an ``OSError``)
naming the field and the rows, with the store's own exception as its cause; the loaders keep their
state where it was before that request, so iterating again retries it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import numpy as np

from ._integration import request_rows
from ._sources import (  # noqa: F401  (the private ones for the tests of how each kind of source reads)
    _Column,
    _is_zarr,
    _joined_reads,
    _lacking,
    _pipeline,
    _read_runs,
    _rust_pipeline,
    _under_zarrs,
    _zarrs_items,
    is_sparse,
    read_order,
)
from ._types import RequestArrays

__all__ = ["Reader", "ReadAhead", "as_request", "read_order"]

_OWNER = "chunksampler.reader.Reader"


# --- what a request is -----------------------------------------------------------------------------


def as_request(request: Any) -> RequestArrays:
    """``request`` as ``RequestArrays``: one already, or annbatch's ``LoadRequest`` dict (its
    ``requests`` slices and ``splits`` position arrays)."""
    if isinstance(request, RequestArrays):
        return request
    if isinstance(request, Mapping) and "requests" in request and "splits" in request:
        slices, splits = request["requests"], request["splits"]
        starts = np.fromiter((s.start for s in slices), dtype=np.int64, count=len(slices))
        stops = np.fromiter((s.stop for s in slices), dtype=np.int64, count=len(slices))
        sizes = [len(split) for split in splits]
        positions = np.concatenate([np.asarray(split, dtype=np.int64) for split in splits]) if splits else (
            np.zeros(0, np.int64))
        return RequestArrays(starts, stops, positions, np.cumsum([0, *sizes], dtype=np.int64))
    raise TypeError(
        f"{_OWNER}: a request must be a RequestArrays (from sample_arrays()) or a LoadRequest dict (from sample(): "
        f"'requests' and 'splits'), got {type(request).__module__}.{type(request).__qualname__}"
    )


# --- what the fields are ---------------------------------------------------------------------------


def _obs_column(owner: str, frame: Any, key: str) -> np.ndarray:
    """An ``obs`` column as numbers a framework takes: a categorical's codes (int32), a number or bool as it is."""
    if key not in frame.columns:
        raise ValueError(f"{owner}: obs has no column {key!r} (its columns: {list(frame.columns)})")
    series = frame[key]
    if hasattr(series, "cat"):
        return series.cat.codes.to_numpy().astype(np.int32)
    values = series.to_numpy()
    if values.dtype.kind not in "biuf":
        raise ValueError(
            f"{owner}: obs column {key!r} holds {values.dtype} values, which a batch cannot carry; make it "
            f"categorical (obs[{key!r}].astype('category')) to read its codes, or numeric"
        )
    return values


def _anndata_fields(owner: str, parts: list[Any], obs: list[str], layer: str | None, zarrs: bool) -> dict[str, Any]:
    """``{"X": column, "obs": {key: column}}`` of AnnData objects laid end to end."""
    if layer is None:
        x = [adata.X for adata in parts]
    else:
        missing = [i for i, adata in enumerate(parts) if layer not in adata.layers]
        if missing:
            raise ValueError(f"{owner}: layer {layer!r} is missing (in AnnData {missing[0]} of {len(parts)})")
        x = [adata.layers[layer] for adata in parts]
    if any(part is None for part in x):
        raise ValueError(f"{owner}: the AnnData has no X; pass layer= to read one of its layers")
    fields: dict[str, Any] = {"X": _Column(owner, "X", x, zarrs)}
    if obs:
        fields["obs"] = {
            key: _Column(owner, f"obs[{key!r}]", [np.concatenate([_obs_column(owner, adata.obs, key) for adata in parts])])
            for key in obs
        }
    return fields


def _collection_parts(owner: str, collection: Any) -> list[Any]:
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
        raise ValueError(f"{owner}: the DatasetCollection is empty")
    return parts


def _fields(owner: str, data: Any, obs: list[str] | None, layer: str | None, zarrs: bool) -> Any:
    """The batches' structure, each leaf a ``_Column``."""
    kind = type(data)
    module = kind.__module__
    if module.startswith("annbatch") and kind.__name__ == "DatasetCollection":
        return _anndata_fields(owner, _collection_parts(owner, data), list(obs or ()), layer, zarrs)
    if module.startswith("anndata") and kind.__name__ == "AnnData":
        return _anndata_fields(owner, [data], list(obs or ()), layer, zarrs)
    if obs is not None or layer is not None:
        raise TypeError(f"{owner}: obs= and layer= are for AnnData or an annbatch DatasetCollection, not {kind.__name__}")
    if isinstance(data, Mapping):
        if not data:
            raise ValueError(f"{owner}: the source is an empty mapping; give it at least one array")
        return {str(key): _Column(owner, str(key), [value], zarrs) for key, value in data.items()}
    return _Column(owner, "data", [data], zarrs)


def _leaves(fields: Any) -> list[_Column]:
    if isinstance(fields, _Column):
        return [fields]
    return [leaf for value in fields.values() for leaf in _leaves(value)]


def is_source(data: Any) -> bool:
    """Whether ``data`` is a source a ``Reader`` reads from storage (zarr, h5py, a scipy sparse matrix,
    AnnData, an annbatch ``DatasetCollection``, a ``Reader``), not an in-memory dataset of rows to
    index one at a time."""
    if isinstance(data, Reader) or is_sparse(data):
        return True
    kind = type(data)
    module = kind.__module__.split(".")[0]
    return module in ("zarr", "h5py", "anndata", "annbatch") and kind.__name__ in (
        "Array", "Dataset", "AnnData", "DatasetCollection",
    )


# --- the reader ------------------------------------------------------------------------------------


class Reader:
    """Reads load requests' rows from ``source`` (see the module's docstring for the kinds), each
    chunk once, and cuts them into the requests' batches.

    ``obs`` and ``layer`` are for AnnData and an annbatch ``DatasetCollection``. ``sparse`` says what
    a sparse source's batches are: ``"dense"`` (numpy arrays, the default) or ``"csr"`` (scipy CSR
    matrices). ``zarrs``: where the zarrs package is installed, zarr arrays on a local store are
    reopened (read-only) under its codec pipeline, and each request's row ranges read in one call
    (annbatch's advice: several times zarr-python's own pipeline); False reads them with the
    pipeline they were opened with. A Reader pickles (HDF5 sources are reopened by each process from their file's path),
    so DataLoader workers started with ``spawn`` can take it.

    >>> import numpy as np, chunksampler
    >>> reader = Reader({"x": np.arange(20.0).reshape(10, 2), "y": np.arange(10)})
    >>> sampler = chunksampler.SequentialSampler(chunk_size=4, preload_nchunks=2, batch_size=4)
    >>> [batch["y"].tolist() for request in sampler.sample_arrays(reader.n_obs) for batch in reader.batches(request)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    __slots__ = ("_dense", "_fields", "_leaves", "_n_obs", "_needs_rows")

    def __init__(
        self,
        source: Any,
        *,
        obs: list[str] | None = None,
        layer: str | None = None,
        sparse: Literal["dense", "csr"] = "dense",
        zarrs: bool = True,
    ) -> None:
        self._open(_OWNER, source, obs, layer, sparse, zarrs)

    @classmethod
    def _of(cls, owner: str, source: Any, *, obs: Any = None, layer: Any = None, sparse: str = "dense") -> Reader:
        """A Reader whose errors name ``owner`` (a loader that makes it), not the Reader."""
        reader = cls.__new__(cls)
        reader._open(owner, source, obs, layer, sparse, True)
        return reader

    def _open(self, owner: str, source: Any, obs: Any, layer: Any, sparse: str, zarrs: bool) -> None:
        if obs is not None and (isinstance(obs, str) or not all(isinstance(key, str) for key in obs)):
            raise TypeError(f"{owner}: obs must be a list of column names, got {obs!r}")
        if layer is not None and not isinstance(layer, str):
            raise TypeError(f"{owner}: layer must be a layer's name, got {layer!r}")
        if sparse not in ("dense", "csr"):
            raise ValueError(f"{owner}: sparse must be 'dense' or 'csr', got {sparse!r}")
        if isinstance(source, Reader):
            raise TypeError(f"{owner}: the source is a Reader already; pass it to the loader as it is")
        self._fields = _fields(owner, source, obs, layer, bool(zarrs))
        self._leaves = _leaves(self._fields)
        lengths = {leaf.name: leaf.n_obs for leaf in self._leaves}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{owner}: the arrays must have one row per observation each, but their lengths differ: {lengths}")
        self._n_obs = self._leaves[0].n_obs
        self._needs_rows = any(leaf._in_memory for leaf in self._leaves)
        self._dense = sparse == "dense"

    @property
    def n_obs(self) -> int:
        """The observations the source holds: the ``n_obs`` a sampler plays over it."""
        return self._n_obs

    def __len__(self) -> int:
        """``n_obs``: a trainer that asks its dataset's ``len()`` (Hugging Face's) takes a ``Reader``."""
        return self._n_obs

    @property
    def under_zarrs(self) -> bool:
        """Whether it reads zarr arrays through the zarrs codec pipeline, whose thread pool a process
        made by ``fork`` cannot use: DataLoader workers are then started by ``spawn``."""
        return any(leaf.under_zarrs for leaf in self._leaves)

    @property
    def sparse(self) -> bool:
        """Whether any field is sparse (its batches are then CSR matrices under ``sparse="csr"``)."""
        return any(leaf._sparse for leaf in self._leaves)

    def _check_n_obs(self, owner: str, n_obs: int) -> None:
        """Raises ValueError naming ``owner`` where ``n_obs`` (a loader's) is not this source's length."""
        if n_obs != self._n_obs:
            raise ValueError(
                f"{owner}: n_obs ({n_obs}) must be the source's length, {self._n_obs} rows: a sampler over more rows "
                "would read past its end, over fewer would never read the rest"
            )

    def read(self, request: Any) -> Any:
        """The request's rows in its batches' order (``positions`` order), with the source's
        structure: batch ``b`` is rows ``offsets[b]:offsets[b + 1]``. Raises ``ReadError`` if the
        source fails."""
        request = as_request(request)
        rows = request_rows(request) if self._needs_rows else None

        def ordered(node: Any) -> Any:
            if isinstance(node, _Column):
                return node.ordered(request, rows)
            return {key: ordered(value) for key, value in node.items()}

        return ordered(self._fields)

    def cut(self, rows: Any, begin: int, end: int) -> Any:
        """Rows ``[begin, end)`` of ``read()``'s result: views of a dense buffer, the rows of a sparse
        one (dense under ``sparse="dense"``)."""

        def cut(node: Any, rows: Any) -> Any:
            if isinstance(node, _Column):
                return node.batch(rows, begin, end, self._dense)
            return {key: cut(value, rows[key]) for key, value in node.items()}

        return cut(self._fields, rows)

    def batches(self, request: Any, rows: Any = None) -> list[Any]:
        """The request's batches, each with the source's structure: cut from ``rows`` (``read()``'s
        result for this request, as ``ReadAhead`` hands it out), else read in one ``read()``."""
        request = as_request(request)
        if rows is None:
            rows = self.read(request)
        offsets = np.asarray(request.offsets).tolist()
        return [self.cut(rows, begin, end) for begin, end in zip(offsets[:-1], offsets[1:])]

    def __repr__(self) -> str:
        return f"Reader(n_obs={self._n_obs}, fields={[leaf.name for leaf in self._leaves]})"


# --- reading ahead ---------------------------------------------------------------------------------


def _copy(request: RequestArrays) -> RequestArrays:
    """The request's arrays copied (a sampler's are views of its buffers, valid until its next
    request) into read-only arrays of their own, which a second ``_copy`` keeps as they are."""

    def kept(array: Any) -> np.ndarray:
        if isinstance(array, np.ndarray) and array.base is None and not array.flags.writeable:
            return array
        copied = np.array(array, copy=True)
        copied.flags.writeable = False
        return copied

    return RequestArrays(*(kept(array) for array in request))


class ReadAhead:
    """The reads of ``requests`` with the next request read in a thread while the current one's
    batches are used: yields ``(request, rows)``, ``rows`` being ``reader.read(request)``. At most
    two requests' rows are held (the one handed out and the one being read). The requests are
    copied, so the sampler may move on. ``close()`` waits for a read in flight; a failed read raises
    at its turn, after the requests before it were handed out."""

    def __init__(self, reader: Reader, requests: Iterator[Any]) -> None:
        self._reader, self._requests = reader, requests
        self._thread: threading.Thread | None = None
        self._next: tuple[RequestArrays, Any, BaseException | None] | None = None
        self._start()

    def _start(self) -> None:
        request = next(self._requests, None)
        if request is None:
            self._thread = None
            return
        request = _copy(as_request(request))

        def read() -> None:
            try:
                self._next = (request, self._reader.read(request), None)
            except BaseException as error:  # handed to the consumer at its turn
                self._next = (request, None, error)

        self._thread = threading.Thread(target=read, name="chunksampler-read-ahead", daemon=True)
        self._thread.start()

    def __iter__(self) -> ReadAhead:
        return self

    def __next__(self) -> tuple[RequestArrays, Any]:
        thread = self._thread
        if thread is None:
            raise StopIteration
        thread.join()
        assert self._next is not None
        request, rows, error = self._next
        self._next = None
        if error is not None:
            self._thread = None
            raise error
        self._start()
        return request, rows

    def close(self) -> None:
        """Waits for the read in flight and reads nothing more."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self._next = None
