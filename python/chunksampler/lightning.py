"""Lightning integration: ``ChunkDataLoader``, a loader over a chunk sampler that Lightning's
``Trainer`` takes as it is, and ``ChunkDataModule``, a ``LightningDataModule`` of them.

Imported only when used (``import chunksampler.lightning``); ``import chunksampler`` imports neither
Lightning nor torch. Lightning's default ``Trainer(use_distributed_sampler=True)`` rebuilds every
``torch.utils.data.DataLoader`` it is given under several devices to put its own
``DistributedSampler`` in, and refuses one whose ``batch_sampler`` is not PyTorch's ``BatchSampler``
(``TypeError: Lightning can't inject a (distributed) sampler into your batch sampler``); it passes
any other iterable through untouched. A ``ChunkDataLoader`` (``chunksampler.torch``'s, which needs
no Lightning) is such an iterable: it holds a
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

from collections.abc import Callable
from typing import Any, Union

import lightning.pytorch as pl
import torch.utils.data

from ._cursor import read_state, shard, write_state
from ._errors import ConfigError
from ._integration import BASES, SAMPLERS, AnySampler, check_sampler, job_ranks
from ._types import SamplerStateDict
from ._chunk_loader import _SAMPLER_OWNS
from .torch import ChunkDataLoader

# ChunkDataLoader (chunksampler.torch's) is importable from here too, as before it moved.
__all__ = ["ChunkDataModule"]

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
            where = self._where()
            sampler = shard("train" if split == "train" else "eval", sampler, lambda: where)
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
