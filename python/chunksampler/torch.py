"""PyTorch integration: ``BatchSampler``, a chunk sampler as a ``torch.utils.data.DataLoader``'s
``batch_sampler``, and ``ChunkDataLoader``, a DataLoader over one that the trainers take as it is.

Imported only when used (``import chunksampler.torch``); ``import chunksampler`` does not import
torch. The rest of the PyTorch support lives in the samplers themselves: ``dist_info="torch"``
(``torch.distributed``), sharding by ``torch.utils.data.get_worker_info()`` where a sampler runs
in a DataLoader worker, and pickling (workers started with ``spawn``).
"""

from __future__ import annotations

import numpy as np  # noqa: F401  (the docstrings' examples use it: test_torch.py runs them with doctest)
import torch.utils.data  # noqa: F401  (the same)

from ._batch_sampler import BatchSampler
from ._chunk_loader import ChunkDataLoader

__all__ = ["BatchSampler", "ChunkDataLoader"]
