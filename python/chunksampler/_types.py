"""The shape of what the samplers yield: annbatch's ``LoadRequest``."""

from __future__ import annotations

from typing import NamedTuple, TypedDict

import numpy as np

__all__ = ["LoadRequest", "RequestArrays", "SamplerStateDict"]


class LoadRequest(TypedDict):
    """One read plan, as annbatch's ``annbatch.types.LoadRequest``.

    ``requests`` are the contiguous observation ranges to read, in buffer order; ``splits`` are the
    batches as int64 positions into the buffer those ranges make when concatenated. The splits of
    one request are numpy views into one positions array.
    """

    requests: list[slice]
    splits: list[np.ndarray]


class RequestArrays(NamedTuple):
    """One load request as arrays (what ``sample_arrays()`` yields): read-only int64 views of the
    sampler's buffers, valid until the next request.

    Chunk ``c`` is the observations ``[starts[c], stops[c])``; the chunks, read in order, make one
    buffer, and batch ``b`` is its rows ``positions[offsets[b]:offsets[b + 1]]``.
    """

    starts: np.ndarray
    stops: np.ndarray
    positions: np.ndarray
    offsets: np.ndarray


class SamplerStateDict(TypedDict):
    """What ``state_dict()`` returns and ``load_state_dict()`` takes: the C++ ``SamplerState`` text,
    which alone is read back, and two of its fields for people reading a checkpoint."""

    state: str
    epoch: int
    batches_done: int
