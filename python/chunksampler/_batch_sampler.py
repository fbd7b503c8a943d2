"""``chunksampler.torch.BatchSampler``: a chunk sampler's epochs as a torch DataLoader's
``batch_sampler`` (see ``chunksampler.torch``, which exports it)."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from typing import Any

import torch.utils.data

from . import _internals
from ._convert import index, optional_index
from ._cursor import Cursor, Pass
from ._errors import ConfigError
from ._integration import AnySampler, check_sampler, request_rows
from ._types import RequestArrays, SamplerStateDict

# Accelerate's prepare() rebuilds a torch DataLoader around its batch sampler: its prepare_data_loader()
# reads the batch sampler's ``batch_size`` (under split_batches) and its get_sampler() the batch
# sampler's ``sampler``, on every process, before any collective; its wrappers deal the batches among
# the processes or broadcast them (chunksampler._internals.accelerate_prepares finds them).
_PLAIN_ACCELERATE = (
    "chunksampler.torch.BatchSampler: Accelerate's prepare() rebuilds a torch DataLoader around its batch "
    "sampler: under several processes it deals this sampler's batches round-robin on top of the "
    "DistributedSampler's shard (each process reads a fraction of its own) and pads a short last round with "
    "repeated rows, and split_batches/dispatch_batches split or broadcast each batch. Hand Accelerate a "
    "chunksampler loader instead: chunksampler.accelerate.prepare_loader(accelerator, "
    "chunksampler.torch.ChunkDataLoader(dataset, DistributedSampler(sampler, dist_info='torch'), "
    "**dataloader_kwargs))"
)


def _refuse_accelerate(frame: Any) -> None:
    """Raises ConfigError where ``frame`` (the caller of a BatchSampler member), or one of the few
    frames below it, belongs to Accelerate preparing or sharding a plain DataLoader over this batch
    sampler."""
    if _internals.accelerate_prepares(frame):
        raise ConfigError(_PLAIN_ACCELERATE)


class BatchSampler(torch.utils.data.BatchSampler):
    """A chunk sampler's epochs as batches of observation indices, for
    ``torch.utils.data.DataLoader(dataset, batch_sampler=...)`` over a map-style dataset.

    Each iteration plays the sampler's next epoch over ``n_obs`` observations and yields each batch
    as a list of global observation indices, in the sampler's order: the batches of one load request
    draw their rows from its ``preload_nchunks`` chunks, shuffled across the request's batches, so
    each batch touches nearly every chunk of its request. A dataset that reads from a chunked store
    (zarr, HDF5) then reads each chunk once per row it fetches row by row, or about once per batch
    with ``__getitems__`` (``preload_nchunks`` x ``chunk_size`` / ``batch_size`` times an epoch; once
    only where a batch holds a whole request): this path is for in-memory datasets. A list of ints is
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

    # Whether state_dict() counts the batches the torch DataLoader iterating it has handed on.
    _counts_loader = True

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
        # Where this batch sampler stands: its pass, a restore waiting for the next one, and its
        # __iter__ calls (which number the passes).
        self._cursor = Cursor("BatchSampler", sampler, n_obs, worker=None, rolls_over=False)
        # The torch DataLoader iterator that made the latest iterator, if one did: (ticket, weakref).
        self._consumer: tuple[int, Any] | None = None

    @property
    def _sampler(self) -> AnySampler:
        return self._cursor.sampler

    @property
    def _iteration(self) -> Pass | None:
        """The latest pass (None before the first and after ``set_epoch``/``load_state_dict``)."""
        return self._cursor.current

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler (the object given, not a copy)."""
        _refuse_accelerate(sys._getframe(1))
        return self._sampler

    @property
    def batch_size(self) -> int:
        """The sampler's batch size (as torch's BatchSampler has one); ``drop_last`` says whether an
        epoch's last, smaller batch is dropped."""
        _refuse_accelerate(sys._getframe(1))
        return self._sampler.batch_size

    @property
    def drop_last(self) -> bool:
        """The sampler's ``drop_last``."""
        return self._sampler.drop_last

    @property
    def n_obs(self) -> int:
        """Observations in the dataset; each epoch covers the sampler's share of ``[0, n_obs)``."""
        return self._cursor.n_obs

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
        return self._sampler.n_batches(self.n_obs, worker=self._cursor.share())

    def __iter__(self) -> Iterator[list[int]]:
        """Plays the sampler's next epoch (from a restored point if one is pending) and yields its
        batches. The epoch begins at the first ``next()``, not at ``iter()``, as with torch's own
        samplers: a DataLoader calls ``iter()`` on its batch sampler twice per epoch and advances
        only the second iterator."""
        caller = sys._getframe(1)
        _refuse_accelerate(caller)
        self._cursor.tickets += 1
        ticket = self._cursor.tickets
        loader = _internals.torch_loader(caller) if self._counts_loader else None
        self._consumer = None if loader is None else (ticket, weakref.ref(loader))
        return self._play(ticket)

    def _play(self, ticket: int) -> Iterator[list[int]]:
        # The pass knows where its epoch begins (after a restore, at the restored point).
        current = self._cursor.begin(ticket=ticket)
        yield from self._batches(current.requests, current)
        current.ended = True

    def _current(self) -> Pass | None:
        """The iteration whose next batch is the next one this BatchSampler serves, or None when that
        is the next iteration's first: none has begun since ``set_epoch``/``load_state_dict``, or the
        last one has ended (its iterator raised StopIteration), or a newer iterator was made after it
        began (a new DataLoader iterator, for the next epoch)."""
        iteration = self._iteration
        if iteration is None or iteration.ended or iteration.ticket != self._cursor.tickets:
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
        loader = ref()
        received = None if loader is None else _internals.torch_handed_out(loader)
        if not ticket == iteration.ticket == self._cursor.tickets or received is None:
            return None
        return min(received, iteration.total)

    def _next_state(self) -> SamplerStateDict:
        """The state where the next iteration begins: a pending restore's point, else the start of the
        epoch the sampler plays next."""
        if self._iteration is None:
            return self._sampler.state_dict()
        return self._cursor.next_state()

    @staticmethod
    def _batches(requests: Iterator[RequestArrays], iteration: Pass) -> Iterator[list[int]]:
        for request in requests:
            # One gather and one list per request; the request's arrays are not used after this.
            rows = request_rows(request).tolist()
            bounds = request.offsets.tolist()
            for begin, end in zip(bounds[:-1], bounds[1:]):
                iteration.yielded += 1
                yield rows[begin:end]

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``
        (each iteration plays the next epoch without it too). After ``load_state_dict`` the restored
        epoch's own number keeps the restore, so the usual ``set_epoch(epoch)`` at the top of a
        resumed loop continues it; to replay it from its start, call the sampler's ``set_epoch``."""
        self._cursor.set_epoch(epoch)

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
        if iteration is None or iteration.ticket != self._cursor.tickets:
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
        whole epoch's count. A state at its epoch's end makes the next iteration play the epoch
        after. Raises ``StateMismatchError`` (another configuration, seed, dataset size or world
        size) or ``StateFormatError`` here, the sampler untouched."""
        self._cursor.restore(state_dict)

    def __getstate__(self) -> dict[str, Any]:
        # Its own settings, not its whole __dict__: the iteration holds the epoch's C++ iterator, and
        # so do the records Lightning keeps there of every attribute set (its patched __setattr__,
        # which outlives a Trainer.fit whose train_dataloader() raised).
        cursor = self._cursor
        state: dict[str, Any] = {
            "_sampler": cursor.sampler, "_n_obs": cursor.n_obs, "_tickets": cursor.tickets, "_owner": cursor.owner,
            "_rolls_over": cursor.rolls_over, "_share": cursor.worker,
        }
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
        self._cursor = Cursor(
            state.pop("_owner", "BatchSampler"), state.pop("_sampler"), state.pop("_n_obs"),
            worker=state.pop("_share", None), rolls_over=state.pop("_rolls_over", False),
        )
        self._cursor.tickets = state.pop("_tickets")
        self.__dict__.update(state)
        self._consumer = None
        if resume is not None:
            kind, value = resume
            if kind == "state":
                self._sampler.load_state_dict(value)
            else:
                self._sampler.set_epoch(value)

    def __repr__(self) -> str:
        return f"BatchSampler({self._sampler!r}, n_obs={self.n_obs})"



BatchSampler.__module__ = "chunksampler.torch"  # where users import it from, and pickles find it
