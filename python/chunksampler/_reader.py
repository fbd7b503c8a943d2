"""How a load request's rows are read from an array-like: each chunk once, with as few calls to the
store as its kind allows, into one buffer. ``chunksampler.grain`` reads through it.

A request's chunks are row ranges in shuffled order (disjoint, but where a sampler draws with
replacement). They are read in row order, and the request's positions (which count rows in the
chunks' own order) are moved to that buffer's order once, so nothing is read twice and the store
sees one call per request where it can take one:

- zarr: one orthogonal selection of every row of the request (``oindex``), so zarr gathers the
  chunks' reads in one pass of its codec pipeline and reads a shard's index once for the request,
  not once per chunk (one blocking call per chunk did both, a round trip to zarr's event loop each);
- h5py: one ``read_direct`` per chunk into the buffer, without a copy;
- a scipy CSR matrix or a backed CSR dataset: one row slice per chunk, stacked; sparse stays sparse
  until a batch is cut;
- an in-memory numpy array: indexed at the rows directly;
- anything else with row slicing (a memmap, an array-like): one slice per chunk into the buffer.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._integration import request_rows
from ._types import RequestArrays

__all__ = ["Column", "is_sparse", "read_order"]


def is_sparse(array: Any) -> bool:
    """A scipy sparse matrix or array, or a backed sparse dataset (anndata's ``CSRDataset``/``CSCDataset``)."""
    scipy_sparse = sys.modules.get("scipy.sparse")
    if scipy_sparse is not None and scipy_sparse.issparse(array):
        return True
    return getattr(array, "format", None) in ("csr", "csc") and hasattr(array, "shape")


def _is_zarr(array: Any) -> bool:
    return type(array).__module__.startswith("zarr") and hasattr(array, "oindex")


def _is_h5py(array: Any) -> bool:
    return type(array).__module__.startswith("h5py") and hasattr(array, "read_direct")


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


class Column:
    """One field of the batches: an array-like with one row per observation (numpy, zarr, h5py, a
    memmap, a scipy CSR matrix or a backed CSR dataset), or several laid end to end (the datasets of
    an annbatch ``DatasetCollection``). Sparse rows come out dense, as JAX takes them."""

    __slots__ = ("_bounds", "_in_memory", "_parts", "_sparse", "name")

    def __init__(self, owner: str, name: str, parts: list[Any]) -> None:
        self.name = name
        for part in parts:
            shape = getattr(part, "shape", None)
            if shape is None or len(shape) < 1 or not hasattr(part, "__getitem__"):
                raise TypeError(
                    f"{owner}: {name} must be an array-like with a shape and row slicing (numpy, zarr, h5py, "
                    f"scipy.sparse CSR, ...), got {type(part).__module__}.{type(part).__qualname__}"
                )
            if is_sparse(part) and getattr(part, "format", "csr") != "csr":
                raise ValueError(
                    f"{owner}: {name} is a sparse {part.format.upper()} matrix, whose rows are not contiguous; "
                    "store it as CSR (scipy's .tocsr(), or anndata's write with X as a csr_matrix)"
                )
        self._parts = parts
        self._bounds = np.cumsum([0] + [int(part.shape[0]) for part in parts])
        self._sparse = any(is_sparse(part) for part in parts)
        self._in_memory = len(parts) == 1 and type(parts[0]) is np.ndarray

    @property
    def n_obs(self) -> int:
        return int(self._bounds[-1])

    @property
    def in_memory(self) -> bool:
        """One in-memory numpy array, read at the request's rows directly."""
        return self._in_memory

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
        groups: list[list[tuple[int, int, int]]] = []
        for piece in pieces:
            if groups and groups[-1][0][0] == piece[0]:
                groups[-1].append(piece)
            else:
                groups.append([piece])
        if len(groups) == 1 and _is_zarr(self._parts[pieces[0][0]]):
            return self._zarr_rows(groups[0])  # the buffer zarr fills, without another copy
        first = self._parts[pieces[0][0]]
        total = sum(stop - start for _, start, stop in pieces)
        buffer = np.empty((total, *first.shape[1:]), dtype=first.dtype)
        at = 0
        for group in groups:
            part = self._parts[group[0][0]]
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

    def _zarr_rows(self, group: list[tuple[int, int, int]]) -> np.ndarray:
        """The rows of one zarr array's chunks, in one call: one slice, or every row orthogonally."""
        part = self._parts[group[0][0]]
        if len(group) == 1:
            return np.asarray(part[group[0][1] : group[0][2]])
        return np.asarray(part.oindex[np.concatenate([np.arange(start, stop) for _, start, stop in group])])

    def ordered(self, request: RequestArrays, rows: np.ndarray | None) -> Any:
        """The request's rows in batch order: row ``i`` is buffer position ``positions[i]``."""
        if self._in_memory:
            return self._parts[0][request_rows(request) if rows is None else rows]
        starts, stops, positions = read_order(request)
        pieces = self._pieces(starts, stops)
        if self._sparse:
            import scipy.sparse

            stacked = [self._parts[part][start:stop] for part, start, stop in pieces]
            return scipy.sparse.vstack(stacked, format="csr")[positions]
        return self._read_dense(pieces)[positions]

    def batch(self, ordered: Any, begin: int, end: int) -> Any:
        """Rows ``[begin, end)`` of ``ordered``: a view of it, or a dense array of its sparse rows."""
        rows = ordered[begin:end]
        return rows.toarray() if self._sparse else rows
