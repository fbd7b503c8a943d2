"""Which DataLoader worker a sampler runs in, when it runs inside one."""

from __future__ import annotations

import sys
from typing import NamedTuple

__all__ = ["WorkerInfo", "get_torch_worker_info"]


class WorkerInfo(NamedTuple):
    """Worker ``id`` of ``num_workers`` (annbatch's ``WorkerInfo``)."""

    id: int
    num_workers: int


def get_torch_worker_info() -> WorkerInfo | None:
    """The ``torch.utils.data`` worker this process is, or None outside a DataLoader worker.

    torch is not imported for this: a process that has not imported it is no DataLoader worker (nor
    is one that blocked it with ``sys.modules["torch"] = None``).
    """
    if sys.modules.get("torch") is None:
        return None
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    return None if info is None else WorkerInfo(int(info.id), int(info.num_workers))
