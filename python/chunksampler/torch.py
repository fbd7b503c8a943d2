"""PyTorch integration: ``BatchSampler``, a chunk sampler as a ``torch.utils.data.DataLoader``'s
``batch_sampler``.

Imported only when used (``import chunksampler.torch``); ``import chunksampler`` does not import
torch. The rest of the PyTorch support lives in the samplers themselves: ``dist_info="torch"``
(``torch.distributed``), sharding by ``torch.utils.data.get_worker_info()`` where a sampler runs
in a DataLoader worker, and pickling (workers started with ``spawn``).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch.utils.data
import torch.utils.data.dataloader

from ._convert import index, optional_index
from ._errors import ConfigError
from ._integration import AnySampler, Iteration, check_sampler
from ._samplers import _worker
from ._types import RequestArrays, SamplerStateDict

__all__ = ["BatchSampler"]

# torch's own DataLoader iterators, whose ``_num_yielded`` counts the batches handed to the training
# loop (torch 1.13 and 2.x). torchdata's StatefulDataLoader subclasses them, but takes a batch
# sampler's state_dict() when it sends a batch's indices to a worker and counts the rest itself:
# for it, the batches this sampler has yielded are the right count.
_TORCH_ITERATORS = tuple(
    getattr(torch.utils.data.dataloader, name)
    for name in ("_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter")
    if hasattr(torch.utils.data.dataloader, name)
)


def _calling_dataloader() -> Any:
    """The torch DataLoader iterator (of torch's own classes) whose ``__init__`` or ``_reset`` is
    calling ``iter()`` on the batch sampler, else None."""
    frame = sys._getframe(2)  # _calling_dataloader <- BatchSampler.__iter__ <- the caller
    caller = frame.f_locals.get("self")
    return caller if type(caller) in _TORCH_ITERATORS else None


def _rows(request: RequestArrays) -> np.ndarray:
    """The observation index of each of the request's positions, in position order: the buffer is
    the chunks ``[starts[c], stops[c])`` laid end to end, so buffer row ``p`` of chunk ``c`` is
    observation ``starts[c] + p - begin[c]``."""
    starts, stops, positions, _ = request
    lengths = stops - starts
    begins = np.cumsum(lengths) - lengths
    return (np.repeat(starts - begins, lengths) + np.arange(int(lengths.sum()), dtype=np.int64))[positions]


class BatchSampler(torch.utils.data.BatchSampler):
    """A chunk sampler's epochs as batches of observation indices, for
    ``torch.utils.data.DataLoader(dataset, batch_sampler=...)`` over a map-style dataset.

    Each iteration plays the sampler's next epoch over ``n_obs`` observations and yields each batch
    as a list of global observation indices, in the sampler's order: the batches of one load request
    come from its few contiguous chunks, so the dataset reads contiguous rows. A list of ints is
    what DataLoader's ``batch_sampler`` contract expects, and the fastest batch for its default
    fetch, which indexes the dataset item by item (numpy int64 scalars or 0-d tensors cost more to
    make and to index with); a dataset with ``__getitems__`` receives the list whole
    (``np.asarray(batch)`` makes it an array). ``sampler`` (any chunksampler sampler,
    a ``DistributedSampler`` too) is kept, not copied: move it through this object (``set_epoch``,
    ``load_state_dict``) so that ``state_dict`` knows where it stands.

    Inside a DataLoader worker (a BatchSampler used there, not as the loader's batch_sampler) the
    iteration is that worker's share, as the sampler's own ``sample()`` is.

    >>> from chunksampler import RandomSampler
    >>> sampler = RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=128, rng=np.random.default_rng(0))
    >>> batches = BatchSampler(sampler, n_obs=1000)
    >>> len(batches), sorted(i for batch in batches for i in batch) == list(range(1000))
    (8, True)
    >>> loader = torch.utils.data.DataLoader(range(1000), batch_sampler=batches)
    >>> [len(batch) for batch in loader][-2:]
    [128, 104]
    """

    def __init__(self, sampler: AnySampler, n_obs: int) -> None:
        # torch's BatchSampler is the base class (its __init__ is not called: the chunk sampler holds
        # the batch size and drop_last) because Lightning's Trainer, under its default
        # use_distributed_sampler=True, rebuilds a DataLoader's batch sampler of that class around its
        # own torch DistributedSampler: that call lands here and is refused naming the setting, where
        # Lightning would otherwise stop every rank with a TypeError about the class.
        if isinstance(sampler, torch.utils.data.DistributedSampler):
            raise ConfigError(
                "BatchSampler: sampler is a torch DistributedSampler, which Lightning's Trainer puts in place of the "
                "chunk sampler under its default use_distributed_sampler=True; give Lightning a "
                "chunksampler.lightning.ChunkDataLoader (or ChunkDataModule), which it leaves alone, or set "
                "Trainer(use_distributed_sampler=False) and keep DistributedSampler(sampler, dist_info='torch')"
            )
        check_sampler("BatchSampler: sampler", sampler)
        n_obs = index("n_obs", n_obs)
        sampler.validate(n_obs)
        self._sampler = sampler
        self._n_obs = n_obs
        self._iteration: Iteration | None = None
        self._tickets = 0  # __iter__ calls so far
        # The torch DataLoader iterator that made the latest iterator, if one did: (ticket, weakref).
        self._consumer: tuple[int, Any] | None = None

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler (the object given, not a copy)."""
        return self._sampler

    @property
    def n_obs(self) -> int:
        """Observations in the dataset; each epoch covers the sampler's share of ``[0, n_obs)``."""
        return self._n_obs

    @property
    def epoch(self) -> int:
        """The epoch the next iteration plays."""
        return self._sampler.epoch

    def __len__(self) -> int:
        """Batches of the epoch the next iteration plays, counted from the epoch's start: also after
        ``load_state_dict``, when the iteration yields only the ``len() - batches_done`` the
        restored epoch has left. The one meaning of ``len`` across chunksampler's loaders (as
        ``ChunkDataLoader``'s and scvi's), since Lightning, Accelerate and the Hugging Face
        Trainer count a resumed epoch from its start. During an iteration, the next one's."""
        return self._sampler.n_batches(self._n_obs, worker=_worker(None))

    def __iter__(self) -> Iterator[list[int]]:
        """Plays the sampler's next epoch (from a restored point if one is pending) and yields its
        batches. The epoch begins at the first ``next()``, not at ``iter()``, as with torch's own
        samplers: a DataLoader calls ``iter()`` on its batch sampler twice per epoch and advances
        only the second iterator."""
        self._tickets += 1
        loader = _calling_dataloader()
        self._consumer = None if loader is None else (self._tickets, weakref.ref(loader))
        return self._play(self._tickets)

    def _play(self, ticket: int) -> Iterator[list[int]]:
        worker = _worker(None)  # the DataLoader worker this process is, else the whole rank
        requests = self._sampler.sample_arrays(self._n_obs, worker=worker)
        # The iterator knows where its epoch begins (after a restore, at the restored point).
        self._iteration = iteration = Iteration(requests, ticket)
        yield from self._batches(requests, iteration)
        iteration.ended = True

    def _current(self) -> Iteration | None:
        """The iteration whose next batch is the next one this BatchSampler serves, or None when that
        is the next iteration's first: none has begun since ``set_epoch``/``load_state_dict``, or the
        last one has ended (its iterator raised StopIteration), or a newer iterator was made after it
        began (a new DataLoader iterator, for the next epoch)."""
        iteration = self._iteration
        if iteration is None or iteration.ended or iteration.ticket != self._tickets:
            return None
        return iteration

    def _received(self) -> int | None:
        """The batches of the latest iteration that the torch DataLoader iterating it has handed to
        the training loop (its workers and prefetching run ahead of that), or None where no
        DataLoader of torch's own made the iterator, or it is gone."""
        iteration = self._iteration
        if self._consumer is None or iteration is None:
            return None
        ticket, ref = self._consumer
        received = getattr(ref(), "_num_yielded", None)  # set after iter() in the iterator's __init__
        if not ticket == iteration.ticket == self._tickets or not isinstance(received, int):
            return None
        return min(received, iteration.total)

    def _next_state(self) -> SamplerStateDict:
        """The state where the next iteration begins: a pending restore's point, else the start of the
        epoch the sampler plays next."""
        if self._iteration is None:
            return self._sampler.state_dict()
        return self._sampler._next_state()

    @staticmethod
    def _batches(requests: Iterator[RequestArrays], iteration: Iteration) -> Iterator[list[int]]:
        for request in requests:
            # One gather and one list per request; the request's arrays are not used after this.
            rows = _rows(request).tolist()
            bounds = request.offsets.tolist()
            for begin, end in zip(bounds[:-1], bounds[1:]):
                iteration.yielded += 1
                yield rows[begin:end]

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``
        (each iteration plays the next epoch without it too). After ``load_state_dict`` the restored
        epoch's own number keeps the restore, so the usual ``set_epoch(epoch)`` at the top of a
        resumed loop continues it; to replay it from its start, call the sampler's ``set_epoch``."""
        epoch = index("epoch", epoch)
        if self._sampler.restore_pending and epoch == self._sampler.epoch:
            return
        self._sampler.set_epoch(epoch)
        self._iteration = None

    def state_dict(self, batches_done: int | None = None) -> SamplerStateDict:
        """The sampler's state after the batches of its current iteration that the training loop
        has received, or after ``batches_done`` of them (``0 <= batches_done <= `` the iteration's
        batches); ``load_state_dict`` of it makes the next iteration yield exactly the rest.

        A DataLoader runs ahead of the training loop (``num_workers * prefetch_factor`` batches with
        workers). Where torch's own ``DataLoader`` iterates this BatchSampler, the default is the
        batches that DataLoader has handed to the loop (its ``_num_yielded``), with or without
        workers, not those this BatchSampler has yielded to the workers. Elsewhere (iterated by
        hand, or by another loader) the default is the batches this BatchSampler has yielded, and
        a loop that lags behind passes the batches it has finished:
        ``for k, batch in enumerate(loader, 1): ...; state = batch_sampler.state_dict(batches_done=k)``.
        ``batches_done`` counts from where this iteration began (after a restore, the restored
        point), as ``enumerate`` does; the dict's own ``"batches_done"`` counts from the epoch's
        start.

        Where no iteration is under way, the state is where the next one begins: before the first
        iteration, after ``set_epoch``/``load_state_dict``, once the iteration's iterator has raised
        StopIteration (the start of the next epoch, which the next iteration plays), or once a newer
        iterator has been made. So a state taken between epochs resumes the next epoch, not the
        finished one's empty rest: torchdata's ``StatefulDataLoader`` (which calls this method and
        ``load_state_dict`` itself) resumes exactly, with or without workers, mid-epoch or between
        epochs."""
        done = optional_index("batches_done", batches_done)
        iteration = self._iteration
        if done is None:
            received = self._received()
            if received is not None and iteration is not None:
                # Inside torch's DataLoader: the batches the loop has received, not those the
                # DataLoader's workers have been sent.
                if received == iteration.total:
                    return self._next_state()
                return iteration.state_dict(received)
            current = self._current()
            if current is None:
                return self._next_state()
            return current.state_dict(current.yielded)
        # A count from the loop: a prefetching DataLoader may have ended the iterator while the loop
        # still has its last batches to finish, so an ended iteration still counts.
        if iteration is None or iteration.ticket != self._tickets:
            if done != 0:
                raise ConfigError(
                    f"BatchSampler.state_dict: batches_done ({done}) must be 0 before an iteration has begun"
                )
            return self._next_state()
        if not 0 <= done <= iteration.total:
            raise ConfigError(
                f"BatchSampler.state_dict: batches_done ({done}) must be in [0, {iteration.total}], the batches "
                "of the current iteration"
            )
        return iteration.state_dict(done)

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next iteration continue exactly after ``state_dict`` (from ``state_dict()`` of a
        BatchSampler, or a sampler, of the same configuration and seed); ``len()`` stays the
        whole epoch's count."""
        self._sampler.load_state_dict(state_dict)
        self._iteration = None

    def __getstate__(self) -> dict[str, Any]:
        # Its own settings, not its whole __dict__: the iteration holds the epoch's C++ iterator, and
        # so do the records Lightning keeps there of every attribute set (its patched __setattr__,
        # which outlives a Trainer.fit whose train_dataloader() raised).
        state: dict[str, Any] = {key: self.__dict__[key] for key in ("_sampler", "_n_obs", "_tickets")}
        # Where the copy's next iteration starts: where this one's current iteration stands (the
        # sampler alone knows only whole requests), or after it has yielded its batches or been
        # left for a newer iterator, at the next epoch's start.
        current = self._current()
        if self._iteration is None:
            state["_resume"] = None
        elif current is not None and current.yielded < current.total:
            state["_resume"] = ("state", self.state_dict())
        else:
            state["_resume"] = ("epoch", self._sampler.epoch)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        resume = state.pop("_resume")
        self.__dict__.update(state)
        self._iteration = None
        self._consumer = None
        if resume is not None:
            kind, value = resume
            if kind == "state":
                self._sampler.load_state_dict(value)
            else:
                self._sampler.set_epoch(value)

    def __repr__(self) -> str:
        return f"BatchSampler({self._sampler!r}, n_obs={self._n_obs})"
