"""What the framework integrations share (``chunksampler.torch``, ``.lightning``, ``.scvi``, and the
ones to come), so that each keeps only what its framework asks for:

- the samplers they take, and the check of a sampler argument;
- where the job's ranks come from, and the check that every rank holds the same sampler;
- ``request_rows``, the observation of each of a request's positions.

Where a loader stands, and the state it saves, is ``chunksampler._cursor``'s.

Nothing here imports a framework: torch is imported only by the helpers that ask
``torch.distributed``, which only integrations over torch call.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._dist import torch_job
from ._errors import ConfigError
from ._ranks import by_rank, check_ranks
from ._samplers import (
    ClassSampler,
    DistributedSampler,
    MixtureSampler,
    RandomSampler,
    SequentialSampler,
    WeightedClassSampler,
)
from ._types import RequestArrays

# The samplers the integrations take: any base, or a DistributedSampler of one.
BaseSampler = RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler | MixtureSampler
AnySampler = BaseSampler | DistributedSampler
BASES = (RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler, MixtureSampler)
SAMPLERS = (*BASES, DistributedSampler)


def _names(kinds: tuple[type, ...]) -> str:
    """``A, B or C``: the class names of ``kinds``."""
    names = [kind.__name__ for kind in kinds]
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def check_sampler(what: str, sampler: object, kinds: tuple[type, ...] = SAMPLERS) -> Any:
    """Returns ``sampler`` if it is one of ``kinds``, else raises TypeError naming ``what`` (the
    argument, with its owner: ``"ChunkDataLoader: sampler"``), the kinds and the type given. A torch
    sampler is named as such: it belongs in a DataLoader of its own."""
    if isinstance(sampler, kinds):
        return sampler
    torch_data = sys.modules.get("torch.utils.data")  # a torch sampler exists only where torch is imported
    hint = (
        " (a torch sampler belongs in a torch DataLoader, which Lightning shards itself)"
        if torch_data is not None and isinstance(sampler, torch_data.Sampler)
        else ""
    )
    raise TypeError(
        f"{what} must be a chunksampler {_names(kinds)}, got {type(sampler).__module__}."
        f"{type(sampler).__qualname__}{hint}"
    )


# --- ranks ---------------------------------------------------------------------------------------


def job_ranks() -> tuple[int, int]:
    """``(rank, world_size)`` of this process's ``torch.distributed`` job, ``(0, 1)`` without one."""
    job = torch_job()
    return job if job is not None else (0, 1)


def check_every_rank(owner: str, sampler: Any, n_obs: int, *, equal_batches: bool) -> bool:
    """Where a ``torch.distributed`` job is up, checks on every rank at once that the ranks hold the
    same sampler sharded for this job (``check_ranks``, one collective: every rank must call it at
    the same point) and returns True; returns False, having checked nothing, where none is."""
    job = torch_job()
    if job is None:
        return False
    check_ranks(owner, sampler, n_obs, job=job, equal_batches=equal_batches)
    return True


def agree_every_rank(owner: str, problem: str | None) -> None:
    """Raises ConfigError on every rank of this process's ``torch.distributed`` job (on this process
    alone where there is none) if any rank found ``problem``, naming each rank's: a check whose
    outcome may differ between ranks (its settings come from each rank's own objects) must fail on
    all of them, or the others wait in their next collective. One ``all_gather_object``: every rank
    must call it at the same point."""
    job = torch_job()
    if job is None or job[1] == 1:
        problems: list[str | None] = [problem]
    else:
        import torch.distributed

        problems = [None] * job[1]
        torch.distributed.all_gather_object(problems, problem)
    if len(problems) == 1:
        if problem is not None:
            raise ConfigError(f"{owner}: {problem}")
        return
    found = by_rank(problems)
    if found is not None:
        raise ConfigError(f"{owner}: {found}")


# --- the rows of a request ----------------------------------------------------------------------


def request_rows(request: RequestArrays) -> np.ndarray:
    """The observation index of each of the request's positions, in position order: the buffer is
    the chunks ``[starts[c], stops[c])`` laid end to end, so buffer row ``p`` of chunk ``c`` is
    observation ``starts[c] + p - begin[c]``."""
    starts, stops, positions, _ = request
    lengths = stops - starts
    begins = np.cumsum(lengths) - lengths
    return (np.repeat(starts - begins, lengths) + np.arange(int(lengths.sum()), dtype=np.int64))[positions]
