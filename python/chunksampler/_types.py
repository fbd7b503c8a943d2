"""The plain data types of the package (what the samplers yield, annbatch's ``LoadRequest``; a
split's report), which depend on nothing else of it."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, TypedDict

import numpy as np

__all__ = ["LoadRequest", "RequestArrays", "SamplerStateDict", "SplitReport"]


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


@dataclasses.dataclass(frozen=True)
class SplitReport:
    """How well a selection of rows follows the order on disk (C++ ``chunksampler::SplitReport``):
    what ``split_mask`` returns beside the mask, and what ``FragmentedSplitError.report`` holds.

    Runs are maximal: adjacent selected rows of different keys form one run, as the mask merges
    adjacent ranges. A run shorter than ``chunk_size`` is read as short chunks: the larger
    ``short_share``, the more of the epoch's reads are short.
    """

    runs: int
    """Maximal runs of selected rows: the mask's ranges."""
    rows: int
    """Rows selected."""
    short_runs: int
    """Runs shorter than ``chunk_size``."""
    short_rows: int
    """Rows in those runs."""
    short_share: float
    """``short_rows / rows``."""
