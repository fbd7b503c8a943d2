"""Lightning integration: ``ChunkDataLoader``, a loader over a chunk sampler that Lightning's
``Trainer`` takes as it is, and ``ChunkDataModule``, a ``LightningDataModule`` of them.

Imported only when used (``import chunksampler.lightning``); ``import chunksampler`` imports neither
Lightning nor torch. Lightning's default ``Trainer(use_distributed_sampler=True)`` rebuilds every
``torch.utils.data.DataLoader`` it is given under several devices to put its own
``DistributedSampler`` in, and refuses one whose ``batch_sampler`` is not PyTorch's ``BatchSampler``
(``TypeError: Lightning can't inject a (distributed) sampler into your batch sampler``); it passes
any other iterable through untouched. A ``ChunkDataLoader`` is such an iterable: it holds a
``DataLoader`` over a ``chunksampler.torch.BatchSampler`` and adds what Lightning asks of a loader,

- ``len()``: the batches of the epoch, counted from its start also when it resumes mid-epoch, as
  Lightning counts a resumed epoch's batches from its start;
- ``set_epoch``, through the ``sampler`` attribute Lightning calls it on at each epoch's start;
- ``state_dict``/``load_state_dict`` (Lightning's fit loop saves them in every checkpoint and
  restores them on ``Trainer.fit(ckpt_path=...)``), naming the batches the loader has handed to
  the training loop, not those its ``DataLoader`` workers have prefetched;
- a check, on every rank at once, that the sampler's rank and world size are the job's, and that
  every rank holds the same sampler with the same seed.

``ChunkDataModule`` makes them from datasets and plain samplers, and wraps each sampler in a
``DistributedSampler`` of the trainer's rank::

    data = ChunkDataModule(train, RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=256),
                           val_dataset=val, val_sampler=SequentialSampler(64, 8, 256), num_workers=2)
    Trainer(accelerator="gpu", devices=8, strategy="ddp").fit(model, datamodule=data)
    Trainer(...).fit(model, datamodule=data, ckpt_path="last.ckpt")  # continues the epoch exactly

A LightningModule that makes its own loaders returns a ``ChunkDataLoader`` from
``train_dataloader()``, made there (after the process group is up) with
``DistributedSampler(sampler, dist_info="torch")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Union

import lightning.pytorch as pl
import torch.utils.data

from ._errors import ConfigError, StateError
from ._integration import (
    BASES,
    SAMPLERS,
    AnySampler,
    Iteration,
    check_every_rank,
    check_sampler,
    job_ranks,
    read_state,
    write_state,
)
from ._samplers import DistributedSampler
from ._types import SamplerStateDict
from .torch import BatchSampler

__all__ = ["ChunkDataLoader", "ChunkDataModule"]

# DataLoader arguments that the chunk sampler decides: the batches, their size and order.
_SAMPLER_OWNS = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last")


class ChunkDataLoader:
    """A ``torch.utils.data.DataLoader`` over a chunk sampler that Lightning's ``Trainer`` uses as it
    is, with its default ``use_distributed_sampler=True`` too; usable without Lightning as well.

    ``dataset`` is a map-style dataset of ``n_obs`` observations (``len(dataset)`` by default) and
    ``sampler`` any chunksampler sampler; under several ranks a ``DistributedSampler`` whose rank and
    world size are the job's (made once the process group is up, e.g. with ``dist_info="torch"`` in
    ``train_dataloader()``). Each iteration plays the sampler's next epoch through
    ``chunksampler.torch.BatchSampler``: the DataLoader receives each batch as a list of global
    indices and fetches it (``dataloader_kwargs`` go to the DataLoader: ``num_workers``,
    ``collate_fn``, ``pin_memory``, ...; not ``batch_size``, ``shuffle``, ``sampler``,
    ``batch_sampler`` or ``drop_last``, which are the sampler's).

    Every rank must make its loaders at the same point of the program (as Lightning calls
    ``train_dataloader()`` and ``setup()`` on each): if ``torch.distributed`` is initialized, the
    ranks then compare their samplers (one ``all_gather_object``) and all raise ``ConfigError`` if
    a rank's sampler is no ``DistributedSampler`` under several ranks or its ``dist_info`` gave
    another rank or world size than the job's, if the ranks' samplers differ in a setting or in
    their seed (``rng=np.random.default_rng(SEED)``, the same SEED on every rank; a sampler made
    without ``rng`` takes the shared seed 0 in a ``DistributedSampler``), or, with
    ``equal_batches=True`` (the default: a training loader, whose gradient all-reduce waits for
    every rank), if the ranks' batch counts differ; a validation loader that reads every row once (``enforce_equal_batches=False``) passes
    ``equal_batches=False``. An error on one rank alone would leave the others waiting in their next
    collective. Made before the process group exists, a loader checks at its first iteration.

    Epochs: ``set_epoch(e)`` (Lightning calls it on ``loader.sampler`` at each epoch's start; each
    iteration plays the next epoch without it). Resume: ``state_dict()`` is the point after the
    batches this loader has handed out (to Lightning's training loop, which trains each batch
    before it asks for the next); ``load_state_dict`` makes the next iteration hand out exactly the
    rest of that epoch, also when the sampler's ``set_epoch`` is then called with that epoch's
    number, as Lightning does; a state taken at its epoch's end continues with the next epoch.
    ``len()`` is the whole epoch's batch count, from its start, also while a resumed epoch is
    handed out: Lightning counts the batches of a resumed epoch from its start.
    """

    def __init__(
        self,
        dataset: Any,
        sampler: AnySampler,
        *,
        n_obs: int | None = None,
        equal_batches: bool = True,
        **dataloader_kwargs: Any,
    ) -> None:
        check_sampler("ChunkDataLoader: sampler", sampler)
        given = sorted(key for key in _SAMPLER_OWNS if key in dataloader_kwargs)
        if given:
            raise ConfigError(
                f"ChunkDataLoader: {', '.join(given)} must not be given: the sampler decides the batches "
                f"(its batch_size is {sampler.batch_size}, its drop_last {sampler.drop_last})"
            )
        if n_obs is None:
            try:
                n_obs = len(dataset)
            except TypeError:
                raise TypeError(
                    f"ChunkDataLoader: n_obs must be given for a dataset without len(), got a {type(dataset).__name__}"
                ) from None
        self._batch_sampler = BatchSampler(sampler, n_obs)
        self._loader = torch.utils.data.DataLoader(dataset, batch_sampler=self._batch_sampler, **dataloader_kwargs)
        self._equal_batches = bool(equal_batches)
        # The batch sampler's pass that the current iteration hands out (None until its first batch:
        # the pass knows where its epoch began), and the batches handed to the loop from it.
        self._pass: Iteration | None = None
        self._handed = 0
        # The state load_state_dict() was given, until the next iteration begins from it.
        self._restore: SamplerStateDict | None = None
        self._checked = False
        self._check()

    def _check(self) -> None:
        if not self._checked:
            self._checked = check_every_rank(
                "ChunkDataLoader", self.sampler, self.n_obs, equal_batches=self._equal_batches
            )

    @property
    def sampler(self) -> AnySampler:
        """The chunk sampler (the object given). Lightning calls its ``set_epoch`` at each epoch's
        start; after ``load_state_dict``, ``set_epoch`` of the restored epoch's number keeps the restore."""
        return self._batch_sampler.sampler

    @property
    def batch_sampler(self) -> BatchSampler:
        """The ``chunksampler.torch.BatchSampler`` the DataLoader draws its batches from; it runs
        ahead of the loop by the batches DataLoader workers prefetch (its own ``state_dict()``
        counts those the DataLoader handed on; this loader's counts those it handed to Lightning)."""
        return self._batch_sampler

    @property
    def dataloader(self) -> torch.utils.data.DataLoader:
        """The ``torch.utils.data.DataLoader`` inside."""
        return self._loader

    @property
    def dataset(self) -> Any:
        """The dataset the batches index."""
        return self._loader.dataset

    @property
    def n_obs(self) -> int:
        """Observations in the dataset: each epoch covers the sampler's share of ``[0, n_obs)``."""
        return self._batch_sampler.n_obs

    @property
    def num_workers(self) -> int:
        """The DataLoader's worker processes."""
        return self._loader.num_workers

    def __len__(self) -> int:
        """Batches of the epoch being handed out, or else of the next iteration's epoch, counted from
        the epoch's start (also after ``load_state_dict``, when fewer remain)."""
        current = self._pass
        if current is not None and self._handed < current.total:
            return current.n_batches
        self._settle_restore()
        return self.sampler.n_batches(self.n_obs, worker=(0, 1))

    def __iter__(self) -> Iterator[Any]:
        """Hands out the batches of the sampler's next epoch (the rest of a restored one), as the
        DataLoader fetches them. Nothing starts before the first ``next()``: Lightning calls
        ``iter()`` before it sets the epoch."""
        self._check()
        self._settle_restore()
        self._restore = None
        self._pass, self._handed = None, 0
        for batch in self._loader:
            if self._pass is None:
                # The pass this batch came from, which the DataLoader's iterator has begun: it knows
                # where its epoch began (after a restore, the restored point) and how many it yields.
                self._pass = self._batch_sampler._iteration
            self._handed += 1
            yield batch

    def _settle_restore(self) -> None:
        """Puts a pending ``load_state_dict`` back if the sampler's ``set_epoch`` of the same epoch
        dropped it (Lightning calls it at every epoch's start, on ``loader.sampler``); another
        epoch's number drops it for good."""
        restore = self._restore
        if restore is None or self.sampler.restore_pending:
            return
        if self.sampler.epoch == restore["epoch"]:
            self._batch_sampler.load_state_dict(restore)
        else:
            self._restore = None

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration play epoch ``epoch`` from its start, as PyTorch's ``set_epoch``; after
        ``load_state_dict``, the restored epoch's own number keeps the restore."""
        self._batch_sampler.set_epoch(epoch)
        self._settle_restore()

    def state_dict(self) -> SamplerStateDict:
        """The sampler's state after the batches this loader has handed out in its current iteration
        (``{"state": text, "epoch": e, "batches_done": b}``, ``b`` counted from the epoch's start);
        after the last batch of an epoch, or before an iteration, where the next one begins."""
        self._settle_restore()
        if self._restore is not None:
            return self._restore
        current = self._pass
        # Where the next iteration begins if none has handed out a batch since the last set_epoch (the
        # sampler's, as Lightning calls it) or restore; else after the batches handed out, which is the
        # epoch's end after its last batch.
        if current is None or self.sampler._since in ("start", "restore"):
            return self.sampler._next_state()
        return current.state_dict(self._handed)

    def load_state_dict(self, state_dict: SamplerStateDict) -> None:
        """Makes the next iteration hand out exactly the batches that followed ``state_dict`` (from
        ``state_dict()`` of a loader over a sampler of the same configuration and seed): raises
        ``StateMismatchError`` (another configuration, seed, dataset size or world size) or
        ``StateFormatError`` here, not at the next iteration. A state at its epoch's end makes the
        next iteration play the epoch after. Loading the state this loader holds already (Lightning
        restores a ``ChunkDataModule``'s and its training loader's, the same) changes nothing."""
        if self._restore is not None and state_dict == self._restore:
            return
        try:
            self._batch_sampler.load_state_dict(state_dict)
            restored = self.sampler._next_state()
            # The restored epoch's batches from its start (n_obs and worker checked against the state's).
            whole = self.sampler.n_batches(self.n_obs, worker=(0, 1))
        except StateError as error:
            raise type(error)(
                f"ChunkDataLoader.load_state_dict: the state is not one of this loader's sampler (a checkpoint of "
                f"another configuration, seed, dataset size or world size?): {error}"
            ) from None
        self._pass = None
        if restored["batches_done"] >= whole:
            # At its epoch's end: nothing is left of it, so the next iteration plays the next epoch.
            self._batch_sampler.set_epoch(restored["epoch"] + 1)
            self._restore = None
        else:
            self._restore = state_dict

    def __repr__(self) -> str:
        return f"ChunkDataLoader({self.sampler!r}, n_obs={self.n_obs}, num_workers={self.num_workers})"


_SamplerArg = Union[AnySampler, Callable[[], AnySampler], None]


class ChunkDataModule(pl.LightningDataModule):
    """A ``LightningDataModule`` of ``ChunkDataLoader``s: give it datasets and samplers, and
    ``Trainer.fit``/``validate``/``test``/``predict`` run on them on any number of devices, with
    Lightning's default settings.

    Each split is a dataset and a sampler: a plain sampler (``RandomSampler``, ``SequentialSampler``,
    ...), which ``setup()`` wraps in a ``DistributedSampler`` of the trainer's rank and world size
    (one device too, so a checkpoint's configuration does not depend on the device count); a
    ``DistributedSampler``; or a function of no arguments returning one of those, called in
    ``setup()`` on every rank once the process group is up (for ``dist_info="torch"`` or options of
    your own). The wrap of a plain sampler: for training, ``DistributedSampler``'s defaults
    (``mode="contiguous"``, ``remainder="drop"``, equal batch counts, which DDP needs); for
    validation, test and prediction, ``mode="global"`` and ``enforce_equal_batches=False``, so that
    the ranks together read every observation exactly once (their batch counts may then differ by
    one; a ``validation_step`` that runs a collective per batch needs equal counts: pass a
    ``DistributedSampler`` of your own). ``loader_kwargs`` go to every ``ChunkDataLoader``
    (``num_workers``, ``collate_fn``, ...).

    ``state_dict()`` is ``{"format": "chunksampler.loaders/1", "train": <the training loader's
    state_dict()>, "world_size": n}``: the point after the batches handed to the training loop, in
    the envelope every chunksampler data module writes (0.3's ``{"train": ...}`` is read too);
    Lightning saves it in every checkpoint and, on ``Trainer.fit(ckpt_path=...)``, calls
    ``load_state_dict`` after ``setup()`` and before the first ``train_dataloader()``, which then
    continues exactly after that point. (Lightning also saves the
    training loader's own ``state_dict()``, the same point, and offers it back: the loader takes it
    once.) The epoch is set at each epoch's start by Lightning, through the loaders.
    """

    def __init__(
        self,
        train_dataset: Any = None,
        train_sampler: _SamplerArg = None,
        *,
        val_dataset: Any = None,
        val_sampler: _SamplerArg = None,
        test_dataset: Any = None,
        test_sampler: _SamplerArg = None,
        predict_dataset: Any = None,
        predict_sampler: _SamplerArg = None,
        **loader_kwargs: Any,
    ) -> None:
        super().__init__()
        self._splits: dict[str, tuple[Any, _SamplerArg]] = {}
        for split, dataset, sampler in (
            ("train", train_dataset, train_sampler),
            ("val", val_dataset, val_sampler),
            ("test", test_dataset, test_sampler),
            ("predict", predict_dataset, predict_sampler),
        ):
            if (dataset is None) != (sampler is None):
                given, missing = ("dataset", "sampler") if sampler is None else ("sampler", "dataset")
                raise ConfigError(f"ChunkDataModule: {split}_{given} is given without {split}_{missing}")
            if sampler is not None and not callable(sampler):
                check_sampler(f"ChunkDataModule: {split}_sampler: sampler", sampler)
            if dataset is not None:
                self._splits[split] = (dataset, sampler)
        given = sorted(key for key in _SAMPLER_OWNS if key in loader_kwargs)
        if given:
            raise ConfigError(
                f"ChunkDataModule: {', '.join(given)} must not be given: each split's sampler decides its batches"
            )
        self._loader_kwargs = loader_kwargs
        self._loaders: dict[str, ChunkDataLoader] = {}
        self._pending: dict[str, SamplerStateDict] = {}

    _STAGES = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("predict",)}

    def setup(self, stage: str) -> None:
        """Makes the loaders of ``stage``'s splits, on every rank (Lightning calls it on each)."""
        for split in self._STAGES.get(stage, ()):
            if split in self._splits:
                self._loaders[split] = self._make(split)
        if "train" in self._loaders and "train" in self._pending:
            self._loaders["train"].load_state_dict(self._pending.pop("train"))

    def _where(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return job_ranks()
        return trainer.global_rank, trainer.world_size

    def _make(self, split: str) -> ChunkDataLoader:
        dataset, sampler = self._splits[split]
        if callable(sampler) and not isinstance(sampler, SAMPLERS):
            sampler = check_sampler(f"ChunkDataModule: {split}_sampler(): sampler", sampler())
        if isinstance(sampler, BASES):
            rank, world_size = self._where()
            if split == "train":
                sampler = DistributedSampler(sampler, dist_info=lambda: (rank, world_size))
            else:
                sampler = DistributedSampler(
                    sampler, dist_info=lambda: (rank, world_size), mode="global", enforce_equal_batches=False
                )
        return ChunkDataLoader(dataset, sampler, equal_batches=split == "train", **self._loader_kwargs)

    def _loader(self, split: str) -> ChunkDataLoader:
        if split not in self._splits:
            raise ConfigError(f"ChunkDataModule: no {split}_dataset was given")
        if split not in self._loaders:
            self.setup({"train": "fit", "val": "validate"}.get(split, split))
        return self._loaders[split]

    def train_dataloader(self) -> ChunkDataLoader:
        """The training loader (made by ``setup("fit")``)."""
        return self._loader("train")

    def val_dataloader(self) -> ChunkDataLoader:
        """The validation loader: each observation once per run, across the ranks."""
        return self._loader("val")

    def test_dataloader(self) -> ChunkDataLoader:
        """The test loader: each observation once, across the ranks."""
        return self._loader("test")

    def predict_dataloader(self) -> ChunkDataLoader:
        """The prediction loader: each observation once, across the ranks."""
        return self._loader("predict")

    def state_dict(self) -> dict[str, Any]:
        """``{"format": "chunksampler.loaders/1", "train": state, "world_size": n}``: the training
        loader's point (``ChunkDataLoader.state_dict``) and the ranks it was taken on, in the envelope
        every chunksampler data module writes; empty before there is a training loader."""
        if "train" in self._loaders:
            return write_state(self._loaders["train"].state_dict())
        return write_state(self._pending.get("train"))

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Makes the training loader continue after ``state_dict["train"]``: at once if it exists (a
        state of another configuration raises ``StateMismatchError`` here, on every rank), else when
        ``setup("fit")`` makes it. Reads chunksampler 0.3's ``{"train": state}`` too; a format it does
        not know (a newer chunksampler's) raises ``StateFormatError`` naming it."""
        train = read_state("ChunkDataModule", state_dict)
        if train is None:
            return
        if "train" in self._loaders:
            self._loaders["train"].load_state_dict(train)
        else:
            self._pending["train"] = train
