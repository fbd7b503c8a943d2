"""Hugging Face Accelerate integration: ``prepare_loader``, a ``ChunkDataLoader`` handed to an
``Accelerator`` so that each process reads exactly its ``DistributedSampler`` shard.

Imported only when used (``import chunksampler.accelerate``); ``import chunksampler`` imports neither
Accelerate nor torch, and nothing here needs Lightning.

``accelerator.prepare(DataLoader(dataset, batch_sampler=...))`` rebuilds a torch DataLoader around
its batch sampler: under several processes Accelerate's ``BatchSamplerShard`` deals the batches
round-robin to the processes (on top of our shard: each process reads half of its own), its
``even_batches`` pads a short last round with repeated rows, ``split_batches`` splits every batch
and ``dispatch_batches`` reads every batch on the main process and broadcasts its slices. A
``chunksampler.torch.BatchSampler`` refuses that on every process, at ``prepare``, naming this
module. Objects that are not torch DataLoaders pass through ``prepare`` unchanged, so a
``ChunkDataLoader`` would keep its shard but lose what Accelerate adds to a loader. ``prepare_loader``
adds it with Accelerate's own extension points:

- device placement, with ``accelerate.utils.send_to_device`` (``accelerator.device``, its
  ``non_blocking``), as Accelerate's ``DataLoaderShard`` does;
- the gradient state (``DataLoaderStateMixin``): ``accelerator.accumulate`` syncs the gradients at
  the last batch of each epoch, and ``gather_for_metrics`` keeps every row (no padded rows to drop);
- ``accelerator.register_for_checkpointing``: ``save_state`` stores the loader's position (the
  batches handed to the training loop) and ``load_state`` restores it, so the next iteration
  continues exactly after it, mid-epoch too, without reading the skipped batches from storage,
  with or without ``DataLoaderConfiguration(use_stateful_dataloader=True)``;
- a check, on every process at once, that the accelerator neither splits nor dispatches batches and
  that the sampler's rank and world size are the accelerator's process index and count.

Tested with Accelerate 1.15 on torch 2.15 (CPU, gloo, ``accelerate launch --multi_gpu --num_processes 2``)::

    accelerator = Accelerator()
    sampler = DistributedSampler(RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=256,
                                               rng=np.random.default_rng(0)), dist_info="torch")
    loader = prepare_loader(accelerator, ChunkDataLoader(dataset, sampler, num_workers=2))
    model, optimizer = accelerator.prepare(model, optimizer)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader: ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderStateMixin
from accelerate.state import GradientState
from accelerate.utils import send_to_device

from . import _internals
from ._cursor import read_state, write_state
from ._dist import accelerate_hint
from ._errors import NotADataLoaderError, StateFormatError
from ._integration import AnySampler, agree_every_rank
from ._samplers import DistributedSampler
from ._types import SamplerStateDict
from .torch import BatchSampler, ChunkDataLoader

__all__ = ["AcceleratedLoader", "prepare_loader"]


def prepare_loader(
    accelerator: Accelerator, loader: ChunkDataLoader, *, device_placement: bool | None = None
) -> AcceleratedLoader:
    """Hands ``loader`` to ``accelerator``: returns an ``AcceleratedLoader`` over it that places each
    batch on ``accelerator.device`` (unless ``device_placement=False``; by default the
    accelerator's own ``device_placement``), takes part in the accelerator's gradient state, and is
    registered for ``accelerator.save_state``/``load_state``. Call it on every process at the same
    point, as ``accelerator.prepare`` (after ``Accelerator()`` has started the process group).

    Raises ``ConfigError`` on every process (so none waits in a collective) if the accelerator splits
    batches (``DataLoaderConfiguration(split_batches=True)``) or dispatches them
    (``dispatch_batches=True``), if the sampler is no ``DistributedSampler`` under several processes,
    or if its rank and world size are not the accelerator's ``process_index`` and ``num_processes``;
    and as ``ChunkDataLoader`` does, if the processes' samplers differ in a setting, a seed or a
    batch count. ``TypeError`` if ``loader`` is not a ``chunksampler.torch.ChunkDataLoader``.
    """
    if not isinstance(accelerator, Accelerator):
        raise TypeError(
            f"prepare_loader: accelerator must be an accelerate.Accelerator, got {type(accelerator).__name__}"
        )
    if not isinstance(loader, ChunkDataLoader):
        hint = ""
        if isinstance(loader, torch.utils.data.DataLoader) and isinstance(loader.batch_sampler, BatchSampler):
            hint = (
                " (a torch DataLoader over a chunksampler BatchSampler: make it "
                "ChunkDataLoader(dataset, sampler, **dataloader_kwargs) with the same sampler and arguments)"
            )
        raise TypeError(
            f"prepare_loader: loader must be a chunksampler.torch.ChunkDataLoader, got "
            f"{type(loader).__module__}.{type(loader).__qualname__}{hint}"
        )
    agree_every_rank("prepare_loader", _problem(accelerator, loader.sampler))
    loader._check()  # the processes hold the same sampler, seed and batch count
    if device_placement is None:
        device_placement = accelerator.device_placement
    prepared = AcceleratedLoader(
        loader, device=accelerator.device if device_placement else None, non_blocking=accelerator.non_blocking
    )
    accelerator.register_for_checkpointing(prepared)
    return prepared


def _problem(accelerator: Accelerator, sampler: AnySampler) -> str | None:
    """What keeps ``accelerator`` from serving ``sampler``'s shard on this process, or None."""
    if accelerator.split_batches:
        return (
            "the accelerator has split_batches=True, which splits each batch among the processes; the "
            "DistributedSampler gives each process batches of its own: make the Accelerator with "
            "DataLoaderConfiguration(split_batches=False)"
        )
    if accelerator.dispatch_batches:
        return (
            "the accelerator has dispatch_batches=True, which reads every batch on the main process and "
            "sends each process a slice; each process reads its own shard here: make the Accelerator with "
            "DataLoaderConfiguration(dispatch_batches=False)"
        )
    processes, index = accelerator.num_processes, accelerator.process_index
    if not isinstance(sampler, DistributedSampler):
        if processes > 1:
            return (
                f"the sampler is a {type(sampler).__name__}, not a DistributedSampler, so each of the "
                f"{processes} processes would read every observation: wrap it in "
                "DistributedSampler(sampler, dist_info='torch')"
            )
        return None
    if (sampler.rank, sampler.world_size) != (index, processes):
        problem = (
            f"the sampler's dist_info gave rank {sampler.rank} of world_size {sampler.world_size}, but this is "
            f"process {index} of the accelerator's {processes}"
        )
        launch = accelerate_hint() if processes == 1 else None
        if launch is not None:
            return f"{problem}. {launch}"
        return f"{problem}: use DistributedSampler(sampler, dist_info='torch'), made after Accelerator()"
    return None


class AcceleratedLoader(DataLoaderStateMixin):
    """A ``ChunkDataLoader`` prepared for an ``Accelerator`` (made by ``prepare_loader``): iterating
    it hands out the loader's batches, each placed on ``device`` (None: left where the DataLoader
    put them), and tells the accelerator's gradient state where the epoch ends.

    ``len()``, ``set_epoch``, ``state_dict`` and ``load_state_dict`` are the loader's (see
    ``ChunkDataLoader``): ``state_dict()`` names the point after the batches this object has handed
    to the training loop. It is registered for ``accelerator.save_state``/``load_state``, which call
    them. It is not a torch DataLoader: Accelerate's ``skip_first_batches``, which rebuilds one,
    raises ``NotADataLoaderError`` naming ``accelerator.load_state`` (nothing is skipped by
    reading: the restored point is where the next iteration begins).
    """

    def __init__(self, loader: ChunkDataLoader, *, device: torch.device | None, non_blocking: bool = False) -> None:
        self._loader = loader
        self.device = device
        self._non_blocking = non_blocking
        self.gradient_state = GradientState()
        # No padded last batch: DataLoaderStateMixin.begin() then leaves remainder at -1, so
        # gather_for_metrics keeps every gathered row.
        _internals.accelerate_no_remainder(self)

    @property
    def loader(self) -> ChunkDataLoader:
        """The ``ChunkDataLoader`` given to ``prepare_loader``."""
        return self._loader

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler."""
        return self._loader.sampler

    @property
    def dataset(self) -> Any:
        """The dataset the batches index."""
        return self._loader.dataset

    @property
    def n_obs(self) -> int:
        """Observations in the dataset."""
        return self._loader.n_obs

    @property
    def batch_size(self) -> int:
        """The sampler's batch size (the last batch of an epoch may be smaller, as its ``drop_last`` says)."""
        return self._loader.sampler.batch_size

    @property
    def batch_sampler(self) -> BatchSampler:
        """Not there: raises ``NotADataLoaderError`` (an ``AttributeError`` too), since Accelerate's
        ``skip_first_batches`` reads it to rebuild the loader; resume with ``load_state`` instead."""
        raise NotADataLoaderError(
            "AcceleratedLoader is not a torch DataLoader: Accelerate's skip_first_batches would rebuild one "
            "without device placement, without the gradient state and without this loader's position. Resume "
            "with accelerator.save_state()/load_state() (prepare_loader registered the loader for them), or "
            "with loader.state_dict()/load_state_dict(): the next iteration then begins after the saved point "
            "without reading the batches before it"
        )

    def __len__(self) -> int:
        """Batches of the epoch being handed out (else of the next), counted from the epoch's start."""
        return len(self._loader)

    def __iter__(self) -> Iterator[Any]:
        """Hands out the batches of the sampler's next epoch (the rest of a restored one), on ``device``."""
        loader = self._loader
        cursor = loader._cursor
        self.begin()
        try:
            for batch in loader:
                # The accelerator syncs accumulated gradients at the epoch's last batch.
                self.end_of_dataloader = cursor.current is not None and cursor.handed == cursor.current.total
                if self.device is not None:
                    batch = send_to_device(batch, self.device, non_blocking=self._non_blocking)
                yield batch
        finally:
            self.end()

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start; after ``load_state_dict``, the
        restored epoch's own number keeps the restore (``ChunkDataLoader.set_epoch``)."""
        self._loader.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The point after the batches handed out (``ChunkDataLoader.state_dict``) in the envelope
        every chunksampler loader saves, with its epoch and batch count beside it (``{"format":
        "chunksampler.loaders/1", "train": state, "world_size": n, "epoch": e, "batches_done": k}``);
        the same on every process, whose batch counts are equal."""
        return write_state(self._loader.state_dict(), summary=True)

    def load_state_dict(self, state_dict: dict[str, Any] | SamplerStateDict) -> None:
        """Makes the next iteration hand out exactly the batches after ``state_dict``
        (``ChunkDataLoader.load_state_dict``): an envelope of ``state_dict()``, or the bare state
        chunksampler 0.4 saved."""
        train = read_state("AcceleratedLoader", state_dict)
        if train is None:
            raise StateFormatError(
                f"AcceleratedLoader.load_state_dict: the state holds no loader state, got {state_dict!r:.200}"
            )
        self._loader.load_state_dict(train)

    def __repr__(self) -> str:
        return f"AcceleratedLoader({self._loader!r}, device={self.device})"
