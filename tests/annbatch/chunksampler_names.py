"""The chunksampler names annbatch's rewritten tests import that the package may not have yet.

Each is chunksampler's own when the installed package has it. Otherwise it is a stand-in, so
that the test modules still import and every other test runs: a stand-in sampler class has the
annbatch name (pytest's test ids stay annbatch's) and raises when constructed, and the stand-in
``WorkerInfo`` is the ``(id, num_workers)`` NamedTuple chunksampler is to have, so a test that
fakes workers fails where it patches ``chunksampler._workers``, which says what is missing.
"""

from __future__ import annotations

from typing import NamedTuple

import chunksampler

__all__ = ["ClassSampler", "WeightedClassSampler", "WorkerInfo", "is_stand_in"]


class _StandIn:
    """A sampler class chunksampler does not have yet."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError(f"chunksampler has no {type(self).__name__} yet (a stand-in from tests/annbatch)")


def _sampler(name: str) -> type:
    found = getattr(chunksampler, name, None)
    return found if found is not None else type(name, (_StandIn,), {"__module__": __name__})


def is_stand_in(value: object) -> bool:
    """Whether ``value`` stands in for a name chunksampler lacks."""
    return isinstance(value, type) and (issubclass(value, _StandIn) or value is _StandInWorkerInfo)


class _StandInWorkerInfo(NamedTuple):
    id: int
    num_workers: int


try:
    from chunksampler._workers import WorkerInfo
except ImportError:
    WorkerInfo = _StandInWorkerInfo

ClassSampler = _sampler("ClassSampler")
WeightedClassSampler = _sampler("WeightedClassSampler")
