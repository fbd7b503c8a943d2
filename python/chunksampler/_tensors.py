"""The tensors of chunksampler's torch loaders: a request's rows as tensors (without a copy), a
batch cut from them, moved to a device, pinned; and what a torch DataLoader fetches for a
``ChunkDataLoader`` over a source (``_RequestReads``: a whole request a fetch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch.utils.data

from ._errors import ConfigError
from ._types import RequestArrays
from .reader import Reader, is_sparse


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
