"""Hugging Face ``transformers.Trainer`` integration: ``ChunkTrainer`` (and ``ChunkTrainerMixin``
for another ``Trainer`` subclass), whose training and evaluation loaders are chunksampler's.

Imported only when used (``import chunksampler.transformers``); ``import chunksampler`` imports
neither transformers nor torch. The Trainer builds its loaders as
``accelerator.prepare(DataLoader(dataset, sampler=..., batch_size=...))``, with a sampler of its
own, and Accelerate deals a batch sampler's batches round-robin among the processes: so this
Trainer returns ``chunksampler.torch.ChunkDataLoader``s instead, which the Trainer iterates as they
are (it moves each batch to its device itself). Each process reads its ``DistributedSampler``
shard, ``set_epoch`` reaches the sampler each epoch, and the Trainer's own resume (it counts the
batches trained from the checkpoint's ``global_step`` and skips them with Accelerate's
``skip_first_batches``, which makes a DataLoader over the same batch sampler) continues exactly:
the skipped batches' indices are drawn again, their rows are not read.

    trainer = ChunkTrainer(model, args, train_dataset=train, eval_dataset=val,
                           train_sampler=RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=256),
                           eval_sampler=SequentialSampler(chunk_size=64, preload_nchunks=8, batch_size=256))
    trainer.train()                              # or train(resume_from_checkpoint=...): exactly there

Tested with transformers 5.24 (Accelerate 1.15, torch 2.15) under ``torchrun --nproc-per-node 2``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import transformers

from . import _internals
from ._dist import accelerate_hint
from ._cursor import read_state, shard, write_state
from ._errors import ConfigError
from ._integration import BASES, AnySampler, agree_every_rank, check_sampler
from ._types import SamplerStateDict
from .reader import Reader, is_source
from .torch import ChunkDataLoader

__all__ = ["ChunkTrainer", "ChunkTrainerMixin"]

# The file of each checkpoint directory that holds the training sampler's state.
STATE_FILE = "chunksampler_state.json"


class ChunkTrainerMixin:
    """Gives a ``transformers.Trainer`` subclass chunksampler's loaders: mix it in before the Trainer
    class (``class MyTrainer(ChunkTrainerMixin, Seq2SeqTrainer)``); ``ChunkTrainer`` is it over
    ``Trainer``.

    ``train_sampler`` (required for ``train()``) and ``eval_sampler`` (for ``evaluate()`` and
    ``predict()``) are chunksampler samplers over ``train_dataset`` and the evaluation dataset: map-style
    datasets of ``len()`` rows, or sources that ``ChunkDataLoader`` reads a whole load request at a
    time (a zarr or h5py array, AnnData, a ``chunksampler.reader.Reader`` over a mapping of names to
    such arrays; see the reading tutorial), whose batches come out collated (a dict of tensors is what a model's
    ``forward(**batch)`` takes): the Trainer's default collator is not applied to them, a
    ``data_collator`` given to the Trainer is, to each batch. A source without ``len()`` (a zarr 3
    array), which the Trainer would refuse, is read through a ``Reader`` of it. A plain sampler is wrapped in a ``DistributedSampler`` of
    the Trainer's process index and count (``args.process_index``, ``args.world_size``), one
    process too: for training with ``DistributedSampler``'s defaults (each process its own
    contiguous shard, equal batch counts, which DDP needs); for evaluation in ``mode="global"``,
    equal batch counts too, since the Trainer gathers every evaluation batch from every process (the
    last rows that do not fill a batch on every process are left out, as ``remainder="drop"``
    says). A ``DistributedSampler`` of your own is used as it is: its rank and world size must be
    the Trainer's. The sampler decides the batches: ``per_device_train_batch_size``,
    ``per_device_eval_batch_size`` and ``dataloader_drop_last`` are not used; the collator
    (``data_collator``) and ``dataloader_num_workers``, ``dataloader_pin_memory``,
    ``dataloader_persistent_workers``, ``dataloader_prefetch_factor`` are.

    Epochs: the Trainer calls ``set_epoch`` on the loader each epoch. Resume:
    ``train(resume_from_checkpoint=...)`` continues after the checkpoint's batches, as the Trainer
    counts them (``ignore_data_skip=True`` starts the epoch over instead, as with any sampler).
    Each checkpoint also holds the training sampler's state (``chunksampler_state.json``); a resume from a
    checkpoint of another sampler configuration, seed, dataset size or process count raises
    ``StateMismatchError`` on every process before the first batch.
    """

    def __init__(self, *args: Any, train_sampler: AnySampler | None = None,
                 eval_sampler: AnySampler | None = None, **kwargs: Any) -> None:
        if train_sampler is not None:
            check_sampler(f"{type(self).__name__}: train_sampler", train_sampler)
        if eval_sampler is not None:
            check_sampler(f"{type(self).__name__}: eval_sampler", eval_sampler)
        _internals.trainer_hooks()  # the Trainer's private methods overridden and called here
        for name in ("train_dataset", "eval_dataset"):  # the Trainer asks their len(), which zarr 3's arrays lack
            if is_source(kwargs.get(name)) and not hasattr(kwargs[name], "__len__"):
                kwargs[name] = Reader(kwargs[name])
        super().__init__(*args, **kwargs)
        # Trainer(model, args, data_collator, ...): a collator the user gave, which a source's batches
        # take too (the Trainer's default one expects a list of rows).
        self._chunk_collator_given = kwargs.get("data_collator", args[2] if len(args) > 2 else None) is not None
        self._chunk_samplers = {"train": train_sampler, "eval": eval_sampler}
        self._chunk_train: ChunkDataLoader | None = None
        self._chunk_resume: tuple[str, SamplerStateDict] | None = None

    # --- loaders ----------------------------------------------------------------------------------

    def _chunk_loader(self, split: str, dataset: Any, description: str) -> ChunkDataLoader:
        owner = type(self).__name__
        sampler = self._chunk_samplers[split]
        if sampler is None:
            raise ConfigError(
                f"{owner}: {split}_sampler is not given; pass {split}_sampler=<a chunksampler sampler> to "
                f"{owner}(...) for {'train()' if split == 'train' else 'evaluate() and predict()'}"
            )
        if dataset is None:
            raise ConfigError(f"{owner}: {'train_dataset' if split == 'train' else 'eval_dataset'} is not given")
        args = self.args
        problem = None
        if isinstance(sampler, BASES):
            where = (args.process_index, args.world_size)
            sampler = shard("train" if split == "train" else "eval_gathered", sampler, lambda: where)
        elif (sampler.rank, sampler.world_size) != (args.process_index, args.world_size):
            problem = (
                f"{split}_sampler's dist_info gave rank {sampler.rank} of world_size {sampler.world_size}, "
                f"but this is process {args.process_index} of the Trainer's {args.world_size}"
            )
            launch = accelerate_hint() if args.world_size == 1 else None
            problem += (
                f". {launch}"
                if launch is not None
                else ": pass the plain sampler (the Trainer wraps it) or a DistributedSampler(sampler, "
                "dist_info='torch')"
            )
        # Each process's own sampler decides, so every process hears of any one's problem: one that
        # raised alone would leave the others waiting in the loader's first collective.
        agree_every_rank(owner, problem)
        if is_source(dataset):
            collator = self.data_collator if self._chunk_collator_given else None
        else:
            collator = _internals.trainer_collator(self, self.data_collator, description)
        settings = {
            "collate_fn": collator,
            "num_workers": args.dataloader_num_workers,
            "pin_memory": args.dataloader_pin_memory,
            "persistent_workers": args.dataloader_persistent_workers,
            "prefetch_factor": args.dataloader_prefetch_factor,
        }
        return ChunkDataLoader(dataset, sampler, equal_batches=True, **settings)

    def get_train_dataloader(self) -> ChunkDataLoader:
        """The training loader: a ``ChunkDataLoader`` over ``train_sampler`` (see the class)."""
        loader = self._chunk_loader("train", self.train_dataset, "training")
        if self._chunk_resume is not None:
            self._check_resume(loader)
        self._chunk_train = loader
        return loader

    def get_eval_dataloader(self, eval_dataset: Any = None) -> ChunkDataLoader:
        """An evaluation loader over ``eval_sampler`` (``eval_dataset``, a name of one, or the
        Trainer's ``eval_dataset``)."""
        if isinstance(eval_dataset, str):
            eval_dataset = self.eval_dataset[eval_dataset]
        return self._chunk_loader("eval", eval_dataset if eval_dataset is not None else self.eval_dataset,
                                  "evaluation")

    def get_test_dataloader(self, test_dataset: Any) -> ChunkDataLoader:
        """A prediction loader over ``eval_sampler``."""
        return self._chunk_loader("eval", test_dataset, "test")

    # --- checkpoints ------------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.train``; a checkpoint to resume from is first checked against ``train_sampler``."""
        self._chunk_resume = None
        if resume_from_checkpoint is True:
            resume_from_checkpoint = transformers.trainer_utils.get_last_checkpoint(self.args.output_dir)
        if isinstance(resume_from_checkpoint, (str, os.PathLike)):
            path = os.path.join(resume_from_checkpoint, STATE_FILE)
            if os.path.isfile(path):
                with open(path) as file:
                    train = read_state(type(self).__name__, json.load(file))
                if train is not None:
                    self._chunk_resume = (path, train)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _check_resume(self, loader: ChunkDataLoader) -> None:
        path, state = self._chunk_resume
        loader._cursor.check(state, f"{type(self).__name__}: {path} holds the state of another training sampler")

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self._chunk_train is None or not self.args.should_save:
            return
        folder = os.path.join(_internals.trainer_output_dir(self, trial), f"checkpoint-{self.state.global_step}")
        if os.path.isdir(folder):
            with open(os.path.join(folder, STATE_FILE), "w") as file:
                json.dump(write_state(self._chunk_train.state_dict()), file)


class ChunkTrainer(ChunkTrainerMixin, transformers.Trainer):
    """A ``transformers.Trainer`` whose training and evaluation loaders are chunksampler's: takes the
    Trainer's arguments and ``train_sampler=``, ``eval_sampler=`` (see ``ChunkTrainerMixin``)."""

