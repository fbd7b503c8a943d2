"""What the framework integrations share (``chunksampler.torch``, ``.lightning``, ``.scvi``, and the
ones to come), so that each keeps only what its framework asks for:

- the samplers they take, and the check of a sampler argument;
- where the job's ranks come from, and the check that every rank holds the same sampler;
- ``request_rows``, the observation of each of a request's positions;
- ``Iteration``, the count of the batches one pass over a ``sample_arrays()`` iterator has handed
  out: the iterator knows where its epoch stands (``batches_before``, ``n_batches``, its state
  after ``k`` of its batches), so an adapter counts only the batches it hands out;
- the envelope a data module's state is saved in: one shape with a format tag, written and read
  here, which also reads the shapes chunksampler 0.3 wrote.

Nothing here imports a framework: torch is imported only by the helpers that ask
``torch.distributed``, which only integrations over torch call.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np

from . import _chunksampler
from ._dist import torch_job
from ._errors import ConfigError, StateFormatError
from ._ranks import by_rank, check_ranks
from ._samplers import (
    ClassSampler,
    DistributedSampler,
    MixtureSampler,
    RandomSampler,
    SequentialSampler,
    WeightedClassSampler,
)
from ._types import RequestArrays, SamplerStateDict

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


# --- the batches one pass hands out --------------------------------------------------------------


def request_rows(request: RequestArrays) -> np.ndarray:
    """The observation index of each of the request's positions, in position order: the buffer is
    the chunks ``[starts[c], stops[c])`` laid end to end, so buffer row ``p`` of chunk ``c`` is
    observation ``starts[c] + p - begin[c]``."""
    starts, stops, positions, _ = request
    lengths = stops - starts
    begins = np.cumsum(lengths) - lengths
    return (np.repeat(starts - begins, lengths) + np.arange(int(lengths.sum()), dtype=np.int64))[positions]



class Iteration:
    """One pass over a ``sample_arrays()`` iterator: the epoch's ``first`` batches were behind it
    when it began (a restored point), it yields ``total`` batches and its adapter has yielded
    ``yielded`` of them; ``ticket`` numbers the adapter's ``__iter__`` call that made it, and
    ``ended`` says the adapter's iterator has raised StopIteration. The iterator itself names the
    state after any of its batches, whatever the sampler has done since (``state_dict``), so the
    pass is read, never laid out again."""

    __slots__ = ("_requests", "ended", "first", "ticket", "total", "yielded")

    def __init__(self, requests: Iterator[RequestArrays], ticket: int) -> None:
        self._requests = requests
        self.first: int = requests.batches_before  # type: ignore[attr-defined]
        self.total: int = requests.n_batches  # type: ignore[attr-defined]
        self.ticket = ticket
        self.yielded = 0
        self.ended = False

    @property
    def n_batches(self) -> int:
        """The epoch's batches counted from its start (``first + total``): what ``len()`` says."""
        return self.first + self.total

    def state_dict(self, done: int) -> SamplerStateDict:
        """The state after ``done`` of this pass's batches (``0 <= done <= total``); its
        ``batches_done`` counts from the epoch's start."""
        return self._requests.state_dict(done)  # type: ignore[attr-defined]


# --- the envelope of a data module's state -------------------------------------------------------

_FAMILY, _VERSION = "chunksampler.loaders", 1
FORMAT = f"{_FAMILY}/{_VERSION}"
# What chunksampler 0.3 wrote, read still: scvi's envelope (the same fields as FORMAT's) and, without
# a "format", ChunkDataModule's {"train": state}.
_OLD_FORMATS = ("chunksampler.scvi/1",)


class StateShapeError(StateFormatError, TypeError):
    """A data module's state that is not an envelope of ``write_state`` (or of chunksampler 0.3): a
    ``StateFormatError``, and a ``TypeError`` as ``ChunkDataModule`` raised for it in 0.3."""


def write_state(train: SamplerStateDict | None) -> dict[str, Any]:
    """The envelope of a data module's state: ``{"format": FORMAT, "train": state, "world_size": n}``,
    ``state`` the training loader's (a sampler state dict), ``n`` the ranks it was taken on (as its
    text records: for a reader); ``{}`` where there is no training state yet."""
    if train is None:
        return {}
    world_size = _chunksampler.SamplerState.parse(train["state"]).world_size
    return {"format": FORMAT, "train": train, "world_size": world_size}


def read_state(owner: str, state_dict: object) -> SamplerStateDict | None:
    """The training state an envelope holds (from ``write_state``, or chunksampler 0.3's
    ``{"format": "chunksampler.scvi/1", "train": ...}`` or unversioned ``{"train": ...}``), or None
    for one that holds none (``{}``). Raises ``StateFormatError`` naming a format it does not know
    (a newer chunksampler's, or none of chunksampler's), ``StateShapeError`` for anything else that
    is not such an envelope, and the sampler state's own ``StateFormatError`` for its text."""
    if not isinstance(state_dict, dict):
        _malformed(owner, state_dict)
    if "format" in state_dict:
        tag = state_dict["format"]
        if tag != FORMAT and tag not in _OLD_FORMATS:
            _unknown(owner, tag)
        if "train" not in state_dict:
            _malformed(owner, state_dict)
    elif set(state_dict) - {"train"}:
        _malformed(owner, state_dict)
    train = state_dict.get("train")
    if train is None and "format" not in state_dict:
        return None
    if not isinstance(train, dict) or not isinstance(train.get("state"), str):
        _malformed(owner, state_dict)
    _chunksampler.SamplerState.parse(train["state"])  # the text's own StateFormatError, now
    return train


def _malformed(owner: str, state_dict: object) -> NoReturn:
    raise StateShapeError(
        f"{owner}.load_state_dict: expected {{'train': state}} under 'format': {FORMAT!r}, as {owner}.state_dict() "
        f"writes it (state a sampler's state dict), got {state_dict!r:.200}"
    )


def _unknown(owner: str, tag: object) -> NoReturn:
    family, _, version = str(tag).partition("/")
    if family == _FAMILY and version.isdigit() and int(version) > _VERSION:
        why = "a newer chunksampler wrote it: upgrade chunksampler to resume from it"
    else:
        why = "it is not a format chunksampler writes"
    raise StateFormatError(
        f"{owner}.load_state_dict: the state's format {tag!r} is unknown ({why}); this chunksampler reads "
        f"{FORMAT!r} and chunksampler 0.3's {_OLD_FORMATS[0]!r} and unversioned {{'train': state}}"
    )
