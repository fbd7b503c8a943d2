"""The kinds of source ``chunksampler.reader`` reads, and how each reads a request's rows: zarr (v2 or
v3, plain or sharded; under zarrs's Rust pipeline where installed, for a local store), h5py and
AnnData's backed arrays, backed CSR datasets, scipy CSR matrices, numpy and other row-sliceable
arrays. One ``_Column`` per field; ``Reader`` (in ``chunksampler.reader``) reads a request through
its columns and cuts the rows into batches. See ``chunksampler.reader``'s docstring for what each
kind costs."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._errors import ReadError
from ._integration import request_rows
from ._types import RequestArrays

# --- a request in row order -----------------------------------------------------------------------


def read_order(request: RequestArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, stops, positions)``: the request's chunks in row order, and its positions moved
    from the chunks' own order (the request's buffer) to the chunks laid end to end in row order."""
    starts, stops, positions, _ = request
    lengths = stops - starts
    begins = np.cumsum(lengths) - lengths  # where each chunk begins in the request's buffer
    order = np.argsort(starts, kind="stable")
    sorted_lengths = lengths[order]
    sorted_begins = np.empty_like(begins)
    sorted_begins[order] = np.cumsum(sorted_lengths) - sorted_lengths
    # Buffer row p of chunk c moves by (its begin in row order) - (its begin in the request's order).
    moved = positions + np.repeat(sorted_begins - begins, lengths)[positions]
    return starts[order], stops[order], moved


# --- the kinds of source ---------------------------------------------------------------------------


def _scipy_sparse(array: Any) -> bool:
    """A scipy sparse matrix or array (scipy is not imported to say so: a loaded one made it)."""
    scipy_sparse = sys.modules.get("scipy.sparse")
    return scipy_sparse is not None and scipy_sparse.issparse(array)


def is_sparse(array: Any) -> bool:
    """A scipy sparse matrix or array, or a backed sparse dataset (anndata's ``CSRDataset``/``CSCDataset``)."""
    return _scipy_sparse(array) or (getattr(array, "format", None) in ("csr", "csc") and hasattr(array, "shape"))


def _is_zarr(array: Any) -> bool:
    return type(array).__module__.startswith("zarr") and hasattr(array, "oindex")


def _is_h5py(array: Any) -> bool:
    return type(array).__module__.startswith("h5py") and hasattr(array, "read_direct")


_ZARRS = "zarrs.ZarrsCodecPipeline"


def _pipeline(array: Any) -> str:
    """The module of a zarr array's codec pipeline (``"zarrs"`` or ``"zarr..."``), ``""`` if unknown."""
    pipeline = getattr(getattr(array, "_async_array", None), "codec_pipeline", None)
    return "" if pipeline is None else type(pipeline).__module__


def _under_zarrs(array: Any) -> Any:
    """A zarr array reopened (read-only) under the zarrs codec pipeline where zarrs is installed and
    the array was opened under another and lies in a local store (annbatch's advice for local file
    systems: zarrs decodes a call's chunks in parallel, in Rust); as it is elsewhere."""
    pipeline = _pipeline(array)
    local = type(getattr(array, "store", None)).__name__ == "LocalStore"
    if not local or not pipeline or pipeline.startswith("zarrs") or importlib.util.find_spec("zarrs") is None:
        return array
    import zarr

    with zarr.config.set({"codec_pipeline.path": _ZARRS}):
        return zarr.open_array(array.store_path, mode="r")


@functools.cache
def _joined_reads() -> Any:
    """zarr's internals that read several row ranges of an array in one call into one buffer (its
    ``BasicIndexer``s joined, ``AsyncArray._get_selection``, as annbatch's Loader reads), checked
    once; None, with a warning, where this zarr lacks one: each call is then an orthogonal
    selection, much slower under zarrs."""
    import zarr

    try:
        from zarr.core import buffer, indexing, sync

        parts = (indexing.BasicIndexer, indexing.Indexer, indexing.ChunkProjection, sync.sync,
                 buffer.default_buffer_prototype, zarr.AsyncArray._get_selection)
    except (ImportError, AttributeError) as error:
        warnings.warn(
            f"chunksampler.reader: zarr {zarr.__version__} lacks {error.name if hasattr(error, 'name') else error} "
            f"({error}), which reading a request's chunks in one call under zarrs needs; each request is read with "
            "one orthogonal selection instead, several times slower under zarrs",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return parts


@functools.cache
def _zarrs_items() -> Any:
    """zarrs's ``ChunkItem`` (its Rust pipeline's description of one chunk's part of a read), checked
    once with the pipeline's ``retrieve_chunks_and_apply_index``; None, with a warning, where this zarrs
    lacks either: each request then goes through zarr's indexers, about half as fast."""
    import zarrs

    try:
        from zarrs._internal import ChunkItem, CodecPipelineImpl

        if not hasattr(CodecPipelineImpl, "retrieve_chunks_and_apply_index"):
            raise AttributeError("CodecPipelineImpl.retrieve_chunks_and_apply_index")
    except (ImportError, AttributeError) as error:
        warnings.warn(
            f"chunksampler.reader: zarrs {getattr(zarrs, '__version__', '?')} lacks {error}, which handing a request's "
            "chunks straight to its Rust pipeline needs; each request is read through zarr's indexers instead, "
            "about half as fast",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return ChunkItem


@functools.cache
def _lacking(what: str) -> None:
    """Says once that this zarr lacks ``what``, which ``_chunk_items`` reads."""
    import zarr

    warnings.warn(
        f"chunksampler.reader: zarr {zarr.__version__} lacks {what}, which handing a request's chunks straight to "
        "zarrs's pipeline needs; each request is read through zarr's indexers instead, about half as fast",
        RuntimeWarning,
        stacklevel=4,
    )


def _rust_pipeline(array: Any) -> Any:
    """The zarrs Rust pipeline of a zarr array under zarrs, where its reads can go to it straight:
    numbers in native byte order with a fill value (what zarrs's own pipeline hands to it), and the
    zarr internals that ``_chunk_items`` reads; else None."""
    inner = getattr(array, "_async_array", None)
    impl = getattr(getattr(inner, "codec_pipeline", None), "impl", None)
    dtype = np.dtype(array.dtype)
    if impl is None or dtype.kind not in "biufc" or not dtype.isnative or array.fill_value is None:
        return None
    for owner, name in ((inner, "store_path"), (getattr(inner, "metadata", None), "encode_chunk_key")):
        if not hasattr(owner, name):
            _lacking(f"{type(owner).__name__}.{name}")
            return None
    return impl if _zarrs_items() is not None else None


def _chunk_items(array: Any, runs: list[tuple[int, int]], out: np.ndarray) -> list[Any]:
    """Each storage chunk's (a shard's, where the array is sharded) part of rows ``[start, stop)`` of
    each run, with where it goes in ``out`` (the runs laid end to end): what zarrs's pipeline reads."""
    item = _zarrs_items()
    metadata = array._async_array.metadata
    path = array._async_array.store_path.path
    prefix = f"{path}/" if path else ""
    grid = tuple(getattr(array, "shards", None) or array.chunks)  # a shard is what a key names
    whole, into_shape = list(grid), list(out.shape)
    # The chunks across the axes after the first: coordinates, the part read, where it goes.
    axes = [
        [(j, slice(0, min(size, extent - j * size)), slice(j * size, min(extent, (j + 1) * size)))
         for j in range(-(-extent // size))]
        for extent, size in zip(array.shape[1:], grid[1:])
    ]
    across = [tuple(zip(*combo)) or ((), (), ()) for combo in itertools.product(*axes)]
    items, at, height = [], 0, grid[0]
    for start, stop in runs:
        row = start
        while row < stop:
            chunk = row // height
            end = min(stop, (chunk + 1) * height)
            inside, placed = slice(row - chunk * height, end - chunk * height), slice(at, at + end - row)
            for coords, parts, intos in across:
                key = prefix + metadata.encode_chunk_key((chunk, *coords))
                items.append(item(key, [inside, *parts], whole, [placed, *intos], into_shape))
            at, row = at + end - row, end
    return items


class _Joined:
    """Several ``BasicIndexer``s as one, each run's rows placed after the previous run's."""

    def __init__(self, indexers: list[Any]) -> None:
        self.indexers = indexers
        self.shape = (sum(indexer.shape[0] for indexer in indexers), *indexers[0].shape[1:])
        self.drop_axes = indexers[0].drop_axes

    def __iter__(self) -> Iterator[Any]:
        at = 0
        for indexer in self.indexers:
            for projection in indexer:
                rows = projection.out_selection[0]
                shifted = (slice(at + rows.start, at + rows.stop), *projection.out_selection[1:])
                yield projection._replace(out_selection=shifted)
            at += indexer.shape[0]


def _read_runs(reads: list[tuple[Any, list[tuple[int, int]], np.ndarray]]) -> None:
    """Fills each ``out`` with rows ``[start, stop)`` of each run of its zarr array (under zarrs),
    laid end to end: one call per array, straight to zarrs's Rust pipeline (which decodes the
    call's chunks in parallel, without the GIL), or through zarr's indexers where it cannot take it."""
    joined = []
    for array, runs, out in reads:
        impl = _rust_pipeline(array) if runs else None
        if impl is not None:
            impl.retrieve_chunks_and_apply_index(_chunk_items(array, runs, out), out)
        elif runs:
            joined.append((array, runs, out))
    if not joined:
        return
    import asyncio

    basic, _, _, sync, prototype_of, _ = _joined_reads()
    prototype = prototype_of()

    def selection(array: Any, runs: list[tuple[int, int]], out: np.ndarray) -> Any:
        grid = getattr(array, "_chunk_grid", None) or array.metadata.chunk_grid
        shape = array.metadata.shape
        indexers = [basic((slice(start, stop), Ellipsis), shape=shape, chunk_grid=grid) for start, stop in runs]
        return array._async_array._get_selection(_Joined(indexers), prototype=prototype, out=prototype.nd_buffer(out))

    async def gather() -> None:
        await asyncio.gather(*(selection(array, runs, out) for array, runs, out in joined))

    sync(gather())


def _joins(array: Any) -> bool:
    """Whether ``array``'s reads go through ``_read_runs``: under zarrs, which decodes one call's
    chunks in parallel (zarr's own pipeline reads an orthogonal selection faster)."""
    return _pipeline(array).startswith("zarrs") and (_rust_pipeline(array) is not None or _joined_reads() is not None)


def _runs(starts: Iterable[int], stops: Iterable[int]) -> list[tuple[int, int]]:
    """Ranges in order, adjacent ones merged."""
    runs: list[tuple[int, int]] = []
    for start, stop in zip(starts, stops):
        if stop <= start:
            continue
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], stop)
        else:
            runs.append((start, stop))
    return runs


def _kind(part: Any) -> str:
    return f"{type(part).__module__}.{type(part).__qualname__}"


class _Reopened:
    """An HDF5 dataset (an h5py ``Dataset``, or anndata's backed sparse dataset over an h5py group)
    that each process opens for itself: HDF5's handles are not to be shared across ``fork``, and
    h5py's objects do not pickle (DataLoader workers started with ``spawn`` receive a pickle)."""

    __slots__ = ("_name", "_opened", "_path", "_pid", "_sparse")

    def __init__(self, part: Any) -> None:
        node = part.group if hasattr(part, "group") else part
        self._path, self._name = node.file.filename, node.name
        self._sparse = hasattr(part, "group")
        self._opened, self._pid = part, os.getpid()

    def get(self) -> Any:
        if self._pid != os.getpid() or self._opened is None:
            import h5py

            node = h5py.File(self._path, "r")[self._name]
            if self._sparse:
                import anndata

                node = anndata.io.sparse_dataset(node)
            self._opened, self._pid = node, os.getpid()
        return self._opened

    def __getstate__(self) -> tuple[str, str, bool]:
        return self._path, self._name, self._sparse

    def __setstate__(self, state: tuple[str, str, bool]) -> None:
        self._path, self._name, self._sparse = state
        self._opened, self._pid = None, -1


def _on_hdf5(part: Any) -> bool:
    node = getattr(part, "group", part)
    return type(node).__module__.startswith("h5py") and hasattr(node, "file")


class _Column:
    """One field of the batches: an array-like with one row per observation, or several laid end to
    end (the datasets of an annbatch ``DatasetCollection``)."""

    __slots__ = ("_bounds", "_csr", "_in_memory", "_owner", "_parts", "_sparse", "_zarrs", "name")

    def __init__(self, owner: str, name: str, parts: list[Any], zarrs: bool = True) -> None:
        self.name, self._owner, self._zarrs = name, owner, zarrs
        for part in parts:
            shape = getattr(part, "shape", None)
            if shape is None or not hasattr(part, "__getitem__"):
                raise TypeError(
                    f"{self._owner}: {name} must be an array-like with a shape and row slicing (numpy, zarr, h5py, "
                    f"scipy.sparse CSR, ...), got {_kind(part)}"
                )
            if len(shape) < 1:
                raise ValueError(
                    f"{self._owner}: {name} is a 0-d {_kind(part)}, which has no rows; a source holds one row per "
                    "observation along its first axis"
                )
            if is_sparse(part) and getattr(part, "format", "csr") != "csr":
                raise ValueError(
                    f"{self._owner}: {name} is a sparse {part.format.upper()} matrix, whose rows are not contiguous; "
                    "store it as CSR (scipy's .tocsr(), or anndata's write with X as a csr_matrix)"
                )
        self._bounds = np.cumsum([0] + [int(part.shape[0]) for part in parts])
        self._sparse = any(is_sparse(part) for part in parts)
        self._in_memory = len(parts) == 1 and (type(parts[0]) is np.ndarray or _scipy_sparse(parts[0]))
        self._parts = [
            _Reopened(part) if _on_hdf5(part) else _under_zarrs(part) if zarrs and _is_zarr(part) else part
            for part in parts
        ]
        # A backed CSR part's data and indices arrays (under zarrs where it can) and its row pointers
        # (read at its first request), with the process that opened them.
        self._csr: dict[int, tuple[int, Any, Any, np.ndarray | None]] = {}

    @property
    def n_obs(self) -> int:
        return int(self._bounds[-1])

    @property
    def under_zarrs(self) -> bool:
        """Whether a zarr part reads through zarrs (whose thread pool a forked process cannot use)."""
        arrays = [part for part in self._parts if _is_zarr(part)]
        for at, part in enumerate(self._parts):
            group = getattr(part, "group", None)  # a backed CSR part: its data array, as it reads
            if not isinstance(part, _Reopened) and type(group).__module__.startswith("zarr"):
                arrays.append(self._csr_arrays(at)[1])
        return any(_pipeline(array).startswith("zarrs") for array in arrays)

    def _csr_arrays(self, at: int) -> tuple[int, Any, Any, np.ndarray | None]:
        """A backed CSR part's ``(process, data, indices, row pointers or None)``, opened once a
        process (an HDF5 part is reopened in each; zarr arrays under zarrs where it can)."""
        cached = self._csr.get(at)
        if cached is None or cached[0] != os.getpid():
            arrays = self._part(at).group
            data, indices = arrays["data"], arrays["indices"]
            if self._zarrs:
                data, indices = _under_zarrs(data), _under_zarrs(indices)
            cached = self._csr[at] = (os.getpid(), data, indices, None)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "_csr"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._csr = {}
        if self._zarrs:  # an unpickled zarr array takes the process's default pipeline: zarrs again
            self._parts = [_under_zarrs(part) if _is_zarr(part) else part for part in self._parts]

    def _part(self, at: int) -> Any:
        part = self._parts[at]
        return part.get() if isinstance(part, _Reopened) else part

    def _pieces(self, starts: np.ndarray, stops: np.ndarray) -> list[tuple[int, int, int]]:
        """``(part, first, stop)`` of each chunk, split where it crosses from one part into the next."""
        pieces = []
        bounds = self._bounds
        for start, stop in zip(starts.tolist(), stops.tolist()):
            part = int(np.searchsorted(bounds, start, side="right")) - 1
            while start < stop:
                end = min(stop, int(bounds[part + 1]))
                pieces.append((part, start - int(bounds[part]), end - int(bounds[part])))
                start, part = end, part + 1
        return pieces

    def _read_dense(self, pieces: list[tuple[int, int, int]]) -> np.ndarray:
        """The pieces' rows laid end to end, each part read with as few calls as its kind allows."""
        groups = _by_part(pieces)
        if len(groups) == 1 and _is_zarr(self._part(pieces[0][0])):
            return self._zarr_rows(groups[0])  # the buffer zarr fills, without another copy
        first = self._part(pieces[0][0])
        total = sum(stop - start for _, start, stop in pieces)
        buffer = np.empty((total, *first.shape[1:]), dtype=first.dtype)
        at = 0
        for group in groups:
            part = self._part(group[0][0])
            if _is_zarr(part):
                rows = self._zarr_rows(group)
                buffer[at : at + len(rows)] = rows
                at += len(rows)
                continue
            direct = _is_h5py(part)
            for _, start, stop in group:
                if direct:
                    part.read_direct(buffer, np.s_[start:stop], np.s_[at : at + stop - start])
                else:
                    buffer[at : at + stop - start] = part[start:stop]
                at += stop - start
        return buffer

    def _read_sparse(self, pieces: list[tuple[int, int, int]]) -> Any:
        """The pieces' rows laid end to end as one CSR matrix: a backed CSR part's non-zeros read
        with one call per array (zarr) or one ``read_direct`` per chunk and array (HDF5), through
        its row pointers (read once, 8 bytes a row); anything else one row slice per chunk."""
        import scipy.sparse

        blocks = []
        for group in _by_part(pieces):
            at = group[0][0]
            part = self._part(at)
            arrays = getattr(part, "group", None)
            if arrays is None or not hasattr(part, "shape"):
                blocks += [part[start:stop] for _, start, stop in group]
                continue
            pid, data, indices, indptr = self._csr_arrays(at)
            if indptr is None:
                indptr = np.asarray(arrays["indptr"][:], np.int64)
                self._csr[at] = (pid, data, indices, indptr)
            blocks.append(_csr_rows(data, indices, indptr, group, part.shape[1]))
        return blocks[0] if len(blocks) == 1 else scipy.sparse.vstack(blocks, format="csr")

    def _zarr_rows(self, group: list[tuple[int, int, int]]) -> np.ndarray:
        """The rows of one zarr array's chunks, in one call: one slice, the runs of rows joined
        (under zarrs), or every row orthogonally."""
        part = self._part(group[0][0])
        if len(group) == 1:
            return np.asarray(part[group[0][1] : group[0][2]])
        if _joins(part):
            out = np.empty((sum(stop - start for _, start, stop in group), *part.shape[1:]), dtype=part.dtype)
            _read_runs([(part, _runs((start for _, start, _ in group), (stop for _, _, stop in group)), out)])
            return out
        return np.asarray(part.oindex[np.concatenate([np.arange(start, stop) for _, start, stop in group])])

    def ordered(self, request: RequestArrays, rows: np.ndarray | None) -> Any:
        """The request's rows in batch order: row ``i`` is buffer position ``positions[i]``."""
        try:
            if self._in_memory:
                return self._parts[0][request_rows(request) if rows is None else rows]
            starts, stops, positions = read_order(request)
            if len(positions) == 0:
                return self._empty()
            pieces = self._pieces(starts, stops)
            if self._sparse:
                return self._read_sparse(pieces)[positions]
            return self._read_dense(pieces)[positions]
        except Exception as error:
            starts = np.asarray(request.starts)
            raise ReadError(
                f"{self._owner}: reading {self.name} ({', '.join(_kind(part) for part in self._parts)}) failed for a request "
                f"of {len(starts)} chunks in rows [{int(starts.min(initial=0))}, "
                f"{int(np.asarray(request.stops).max(initial=0))}): {type(error).__name__}: {error}"
            ) from error

    def _empty(self) -> Any:
        first = self._part(0)
        if self._sparse:
            import scipy.sparse

            return scipy.sparse.csr_matrix((0, *first.shape[1:]), dtype=first.dtype)
        return np.empty((0, *first.shape[1:]), dtype=first.dtype)

    def batch(self, ordered: Any, begin: int, end: int, dense: bool) -> Any:
        """Rows ``[begin, end)`` of ``ordered``: a view of it, or a sparse buffer's rows (dense if asked)."""
        rows = ordered[begin:end]
        return rows.toarray() if self._sparse and dense else rows


def _by_part(pieces: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """The pieces in runs of one part each (they are in row order, so a part's pieces are adjacent)."""
    groups: list[list[tuple[int, int, int]]] = []
    for piece in pieces:
        if groups and groups[-1][0][0] == piece[0]:
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return groups


def _csr_rows(data: Any, indices: Any, indptr: np.ndarray, group: list[tuple[int, int, int]], width: int) -> Any:
    """Rows ``[start, stop)`` of each piece of one backed CSR matrix, laid end to end, from its
    ``data`` and ``indices`` arrays (zarr or HDF5) and its row pointers in memory."""
    import scipy.sparse

    starts = np.array([start for _, start, _ in group], dtype=np.int64)
    stops = np.array([stop for _, _, stop in group], dtype=np.int64)
    low, high = indptr[starts], indptr[stops]
    counts = high - low
    total = int(counts.sum())
    if _is_zarr(data) and _joins(data):
        values, columns = np.empty(total, dtype=data.dtype), np.empty(total, dtype=indices.dtype)
        runs = _runs(low.tolist(), high.tolist())
        _read_runs([(data, runs, values), (indices, runs, columns)])
    elif _is_zarr(data):
        # Every non-zero of the pieces in one orthogonal selection per array: one pass of zarr's pipeline.
        at = np.repeat(low - (np.cumsum(counts) - counts), counts) + np.arange(total, dtype=np.int64)
        values, columns = np.asarray(data.oindex[at]), np.asarray(indices.oindex[at])
    else:
        values, columns = np.empty(total, dtype=data.dtype), np.empty(total, dtype=indices.dtype)
        begin = 0
        for first, last in zip(low.tolist(), high.tolist()):
            if last > first:
                data.read_direct(values, np.s_[first:last], np.s_[begin : begin + last - first])
                indices.read_direct(columns, np.s_[first:last], np.s_[begin : begin + last - first])
            begin += last - first
    row_counts = np.concatenate([np.diff(indptr[start : stop + 1]) for start, stop in zip(starts, stops)])
    pointers = np.zeros(len(row_counts) + 1, dtype=np.int64)
    np.cumsum(row_counts, out=pointers[1:])
    return scipy.sparse.csr_matrix((values, columns, pointers), shape=(len(row_counts), width))
