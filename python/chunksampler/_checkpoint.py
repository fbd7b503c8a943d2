"""Checkpoint files from Python, in the C++ library's format (``cs::save_state``): written
atomically and durably, checked when read, so that a crash at any moment leaves the previous
checkpoint or the new one, and a torn or corrupted file is an error, never another state. A Python
job and a C++ job read each other's files."""

from __future__ import annotations

import os
from typing import Any

from . import _chunksampler
from ._types import SamplerStateDict

__all__ = ["load_state", "save_state", "write_atomically"]


def _path(path: Any) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fsdecode(os.fspath(path))


def save_state(path: str | os.PathLike[str], state: SamplerStateDict | str) -> None:
    """Writes ``state`` (a ``state_dict()``, or its ``"state"`` text) to the checkpoint file at
    ``path``, atomically and durably: a header line ``chunksampler-checkpoint/1 bytes=<n>
    crc32c=<hex>`` and the state's text go to a new file beside ``path``, which is synced and
    renamed over it, and the directory synced. Raises ``StateFormatError`` for text that is not a
    state and ``StateWriteError`` (an ``OSError``) when the file cannot be written, the previous one
    then still in place. The GIL is released while the file is written::

        if rank == 0 and step % 100 == 0:
            chunksampler.save_state("job.state", sampler.state_dict())
    """
    if isinstance(state, dict):
        text = state.get("state")
    else:
        text = state
    if not isinstance(text, str):
        raise TypeError(f"state must be a state_dict() (a dict with a 'state' string) or its text, got {state!r:.200}")
    _chunksampler.save_state(_path(path), text)


def load_state(path: str | os.PathLike[str]) -> SamplerStateDict:
    """The state in the checkpoint file at ``path`` (from ``save_state``, or the C++
    ``cs::save_state``), as ``state_dict()`` gives it: pass it to ``load_state_dict``. Raises,
    naming the file and what is wrong: ``StateFileError`` when it is missing or unreadable,
    ``StateFormatError`` when it is truncated or corrupted (its size or CRC-32C differs from its
    header's), ``StateMismatchError`` when another version of chunksampler wrote it; all three are
    ``StateError``s, so ``except StateError`` starts a job afresh on any of them::

        try:
            sampler.load_state_dict(chunksampler.load_state("job.state"))
        except chunksampler.StateFileError:
            pass  # no checkpoint yet: start at the beginning
    """
    return _chunksampler.load_state(_path(path))


def write_atomically(path: str | os.PathLike[str], data: Any) -> None:
    """Replaces the file at ``path`` with ``data`` (``bytes`` or any contiguous buffer: a
    ``bytearray``, ``io.BytesIO.getbuffer()``, a uint8 numpy array; read where it lies, not
    copied) so that a reader, even after a crash or a power cut, finds the old contents or the new
    ones, never a mix; as ``save_state`` writes, and raising ``StateWriteError`` likewise. For
    what is saved beside the sampler's state, a model's weights::

        buffer = io.BytesIO()
        torch.save({"model": model.state_dict(), "sampler": sampler.state_dict()}, buffer)
        chunksampler.write_atomically("checkpoint.pt", buffer.getbuffer())
    """
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"data must be bytes or a contiguous buffer, got {type(data).__name__}") from None
    if not view.c_contiguous:
        raise TypeError("data must be a contiguous buffer")
    _chunksampler.write_atomically(_path(path), view.cast("B"))
