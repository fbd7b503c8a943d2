"""The shape of what the samplers yield: annbatch's ``LoadRequest``."""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["LoadRequest"]


class LoadRequest(TypedDict):
    """One read plan, as annbatch's ``annbatch.types.LoadRequest``.

    ``requests`` are the contiguous observation ranges to read, in buffer order; ``splits`` are the
    batches as int64 positions into the buffer those ranges make when concatenated. The splits of
    one request are numpy views into one positions array.
    """

    requests: list[slice]
    splits: list[np.ndarray]
