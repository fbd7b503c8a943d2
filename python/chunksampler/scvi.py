"""scvi-tools integration: ``AnnbatchDataModule``, scvi-tools' data module for annbatch collections
with chunksampler's samplers, sharded across the ranks of a DDP job and resumable exactly.

Imported only when used (``import chunksampler.scvi``); ``import chunksampler`` imports neither
scvi-tools nor Lightning. scvi-tools' own ``scvi.dataloaders.AnnbatchDataModule`` builds annbatch's
samplers over the whole training range in ``train_dataloader()`` whatever sampler its Loader holds,
so under DDP every rank reads every cell, and nothing of the sampler survives a restart. This
subclass keeps everything else of it (the label encoders, ``registry`` and the batch conversion in
``on_before_batch_transfer``) and serves the samplers given to it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import scvi.dataloaders

from . import _internals
from ._dist import DistInfo
from ._errors import ConfigError, StateFormatError, StateMismatchError
from ._cursor import Cursor, read_state, shard, write_state
from ._integration import check_every_rank, check_sampler, job_ranks
from ._samplers import ClassSampler, DistributedSampler, RandomSampler, SequentialSampler, WeightedClassSampler
from ._split import check_disjoint
from ._types import SamplerStateDict

__all__ = ["AnnbatchDataModule"]

# The samplers it takes: the integrations' bases but MixtureSampler, whose mask scvi-tools' split
# cannot cut.
_Base = RandomSampler | SequentialSampler | ClassSampler | WeightedClassSampler
_KINDS = (RandomSampler, SequentialSampler, ClassSampler, WeightedClassSampler)
# What scvi-tools' training mixin passes to set_split when model.train gets neither size.
_SCVI_DEFAULT_SPLIT = (0.9, None)


def _lightning_batches_done(trainer: Any) -> tuple[int, int]:
    """``(epoch, batches)``: the epoch Lightning's fit loop is in and how many of its batches the
    training loop has finished, in the count Lightning restores a mid-epoch checkpoint to.

    Lightning 2.6's counters, read at the two moments that matter (its training epoch loop,
    ``_TrainingEpochLoop.advance``):

    - A ``ModelCheckpoint`` saving every ``n`` training steps saves in ``on_train_batch_end`` of
      batch ``k``: that batch has been trained on (``ready``, ``started`` and ``processed`` are
      ``k``) but ``completed`` is still ``k - 1``, and the fetcher may have read batch ``k + 1``
      already (it prefetches one batch when the loader has no length). ``processed`` is the
      batches trained on. At the end of an epoch (``on_train_epoch_end``, or after validation)
      ``processed`` is the epoch's batch count.
    - On a restart Lightning sets ``completed`` to ``processed`` (``reset`` of the epoch loop, for
      a checkpoint saved in ``on_train_batch_end``), then ``ready = started = processed =
      completed``, and fetches until ``ready`` reaches ``len(loader)``: it counts the restored
      batches against the length of the whole epoch, so ``len(loader)`` must stay the epoch's
      count from its start (a sampler's ``n_batches`` while a restore is pending), not what is
      left. A checkpoint saved after an epoch's last batch resumes at the next epoch's start.
      Read when the first batch of an epoch is fetched, ``processed`` is where the epoch resumes.

    ``trainer.current_epoch`` is the epochs the fit loop has completed: the current one's number.
    The counters are Lightning's internals, read through ``chunksampler._internals``.
    """
    return _internals.lightning_batches_done(trainer)


def _is_whole(sampler: _Base) -> bool:
    """Whether the sampler reads every row: it was made without a mask."""
    return sampler.mask == slice(0, None)


def _rows(mask: slice | list[slice], n_obs: int) -> int:
    """Rows a mask holds over ``n_obs`` observations."""
    ranges = mask if isinstance(mask, list) else [mask]
    return sum(len(range(*r.indices(n_obs))) for r in ranges)


def _check_sampler(name: str, sampler: object) -> _Base:
    if isinstance(sampler, DistributedSampler):
        raise TypeError(
            f"AnnbatchDataModule: {name} must be the sampler a DistributedSampler would wrap, not a "
            "DistributedSampler: the data module shards it itself once Lightning has started the ranks (dist_info)"
        )
    return check_sampler(f"AnnbatchDataModule: {name}", sampler, _KINDS)  # type: ignore[no-any-return]


class _Epochs:
    """What ``train_dataloader()`` and ``val_dataloader()`` return: the annbatch Loader over one
    sharded sampler, whose epochs follow Lightning's.

    An iteration decides which epoch it plays, and from where, when its first batch is fetched, not
    when it is created: Lightning creates the training iterator before it has settled a restored
    epoch (a checkpoint saved after an epoch's last batch resumes at the next one), and reuses it.
    ``len()`` is the epoch's batch count from its start, as Lightning counts a resumed epoch.
    """

    def __init__(self, module: AnnbatchDataModule, loader: Any, sampler: DistributedSampler, training: bool) -> None:
        self._module = module
        self._loader = loader
        self._training = training
        self.batch_sampler = sampler

    def __len__(self) -> int:
        return self.batch_sampler.n_batches(self._loader.n_obs)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        trainer = self._module.trainer
        if trainer is not None:
            if self._training:
                self._module._begin_train_epoch(self.batch_sampler, trainer)
            else:
                self.batch_sampler.set_epoch(trainer.current_epoch)
        yield from self._loader


class AnnbatchDataModule(scvi.dataloaders.AnnbatchDataModule):
    """scvi-tools' ``AnnbatchDataModule`` with the samplers you give it, each rank reading its own
    shard, and an exact resume from a Lightning checkpoint.

    Pass it to ``model.train(datamodule=...)`` as scvi-tools' own: ``registry``, the encoders of
    ``batch_key``, ``label_key``, ``sample_key`` and the covariates, and the conversion of annbatch's
    batches into scvi-tools' tensors (``on_before_batch_transfer``) are scvi-tools' code, unchanged.
    What differs is where the batches come from:

    - ``train_sampler`` (default: ``dataset``'s own ``batch_sampler``, so
      ``annbatch.Loader(batch_sampler=chunksampler.RandomSampler(...))`` keeps its sampler) is a
      ``RandomSampler``, ``SequentialSampler``, ``ClassSampler`` or ``WeightedClassSampler`` (for
      scvi-tools' class sampling, built from ``collection.obs(columns=[key])[key].values``);
      ``validation_sampler`` likewise (default: a ``SequentialSampler`` of the training sampler's
      shape over the validation rows). They are copied, never changed.
    - The split: samplers made without a mask take scvi-tools' split from ``model.train``'s
      ``train_size`` and ``validation_size`` (validation the first rows, then training, as scvi-tools
      cuts it). Samplers made with a ``mask`` (from ``chunksampler.split_mask``, say) are the split
      themselves; their masks must be disjoint, and ``model.train`` must then leave both sizes at
      their defaults.
    - Under DDP (``model.train(strategy="ddp_find_unused_parameters_true", devices=N)``, as scVI
      needs) ``train_dataloader()`` wraps the training sampler in ``DistributedSampler(dist_info=
      "torch", mode=mode, remainder=remainder)``, with equal batch counts on every rank (DDP's
      gradient all-reduce needs the same number of steps on each);
      validation in ``DistributedSampler(mode="global", enforce_equal_batches=False)``, so each
      validation cell is read once across the ranks, and every rank must get at least one validation
      batch (the metrics' sync at the epoch's end waits for every rank). Every rank must use the
      same seed (``rng=np.random.default_rng(SEED)``, or no ``rng``: the shards then use the shared
      seed 0); ranks whose samplers differ in a setting or a seed are refused. ``dist_info`` names
      another source of rank and world size (``"env"``, a callable), default: ``torch.distributed``
      where it is initialized, else one process.
    - Epochs follow Lightning's (``set_epoch(trainer.current_epoch)``), and ``state_dict`` records
      the sampler's state after the batches the training loop finished, which a Lightning
      checkpoint keeps; ``trainer.fit(..., ckpt_path=...)`` (``model.train(ckpt_path=...)``)
      continues the epoch with exactly the batches its ranks had not trained on. A checkpoint of
      another sampler configuration, seed, collection size or (contiguous mode) world size raises
      ``StateMismatchError``.

    ``model.train``'s ``batch_size`` must be the samplers' own (or left at scvi-tools' default), and
    ``shuffle_set_split`` is not used: the sampler says whether the training rows are shuffled.

    Checkpoints: scvi-tools' Trainer adds its ``SaveCheckpoint`` (scvi-tools model directories; it
    fails for a model made from ``registry``) whenever ``enable_checkpointing=True``, and Lightning
    refuses a ``ModelCheckpoint`` without it; a callback that calls ``trainer.save_checkpoint(path)``
    on every rank saves Lightning checkpoints, with this module's state, under scvi-tools' defaults.
    """

    def __init__(
        self,
        dataset: Any,
        *,
        train_sampler: _Base | None = None,
        validation_sampler: _Base | None = None,
        mode: Literal["contiguous", "global"] = "contiguous",
        remainder: Literal["drop", "pad", "rotate"] = "drop",
        dist_info: DistInfo | None = None,
        batch_key: str | None = None,
        label_key: str | None = None,
        sample_key: str | None = None,
        unlabeled_category: str | None = "Unknown",
        model_name: str = "SCVI",
        categorical_covariate_keys: list[str] | None = None,
        continuous_covariate_keys: list[str] | None = None,
        var_names: list[str] | None = None,
        layer: str | None = None,
    ) -> None:
        if train_sampler is None:
            train_sampler = getattr(dataset, "batch_sampler", None)
            name = "train_sampler (the Loader's batch_sampler)"
        else:
            name = "train_sampler"
        train = _check_sampler(name, train_sampler)._copy()
        validation = None
        if validation_sampler is not None:
            validation = _check_sampler("validation_sampler", validation_sampler)._copy()
        # The shard settings, checked now rather than on every rank once training has begun.
        DistributedSampler(train, dist_info=lambda: (0, 1), mode=mode, remainder=remainder)
        super().__init__(
            dataset,
            batch_size=train.batch_size,
            batch_key=batch_key,
            label_key=label_key,
            sample_key=sample_key,
            unlabeled_category=unlabeled_category,
            model_name=model_name,
            categorical_covariate_keys=categorical_covariate_keys,
            continuous_covariate_keys=continuous_covariate_keys,
            var_names=var_names,
            layer=layer,
            chunk_size=train.chunk_size,
            preload_nchunks=train.preload_nchunks,
            preload_to_gpu=False,
            shuffle=train.shuffle,
        )
        self.mode = mode
        self.remainder = remainder
        self._dist_info = dist_info
        self._masked = not _is_whole(train) or (validation is not None and not _is_whole(validation))
        self._train = train
        self._validation = validation
        self._sharded: DistributedSampler | None = None
        # The training state load_state_dict() was given, until the next training epoch begins.
        self._pending: SamplerStateDict | None = None
        if self._masked:
            self._use_masks()
        else:
            self._set_counts()

    # --- the split -------------------------------------------------------------------------------

    def _use_masks(self) -> None:
        """The samplers' own masks are the split: checked disjoint, counted."""
        masks = {"train_sampler": self._train.mask}
        if self._validation is not None:
            masks["validation_sampler"] = self._validation.mask
        check_disjoint(masks)
        self._set_counts()

    def _set_counts(self) -> None:
        """scvi-tools' attributes for the split: ``n_train``, ``n_val`` and the index arrays."""
        import numpy as np

        n_obs = self.dataset.n_obs

        def indices(sampler: _Base | None) -> np.ndarray:
            if sampler is None:
                return np.array([], dtype=int)
            mask = sampler.mask
            ranges = mask if isinstance(mask, list) else [mask]
            return np.concatenate([np.arange(*r.indices(n_obs)) for r in ranges])

        self.train_idx = indices(self._train)
        self.val_idx = indices(self._validation)
        self.n_train = len(self.train_idx)
        self.n_val = len(self.val_idx)
        self._train_mask = self._train.mask
        self._val_mask = None if self._validation is None else self._validation.mask

    def set_batch_size(self, batch_size: int | None = None) -> None:
        """Checks ``model.train``'s ``batch_size`` against the samplers', which fix it (scvi-tools
        passes None for its default)."""
        if batch_size is None:
            return
        if batch_size != self._train.batch_size:
            raise ConfigError(
                f"AnnbatchDataModule: batch_size ({batch_size}) must equal train_sampler.batch_size "
                f"({self._train.batch_size}): the samplers fix the batch size; build them with batch_size={batch_size} "
                "or leave model.train's batch_size at its default"
            )

    def set_split(
        self,
        train_size: float | None = None,
        validation_size: float | None = None,
        shuffle_set_split: bool = True,
        batch_size: int | None = None,
    ) -> None:
        """Cuts scvi-tools' split (``model.train``'s ``train_size``, ``validation_size``) onto samplers
        made without a mask: validation the first rows, training the next (scvi-tools' order). With
        masks, the masks are the split, and both sizes must be scvi-tools' defaults."""
        self.set_batch_size(batch_size)
        if self._masked:
            if (train_size, validation_size) not in ((None, None), _SCVI_DEFAULT_SPLIT):
                raise ConfigError(
                    f"AnnbatchDataModule: train_size ({train_size}) and validation_size ({validation_size}) must be "
                    "left at model.train's defaults: the samplers' masks are the split"
                )
            return
        if train_size is None and validation_size is None:
            return
        super().set_split(train_size, validation_size, shuffle_set_split, batch_size)
        train_mask, val_mask = _internals.scvi_split(self, scvi.dataloaders.AnnbatchDataModule)
        # The samplers are this module's own copies, which nothing else holds: their masks change in place.
        self._train.mask = train_mask
        if val_mask is None:
            self._validation = None
        else:
            if self._validation is None:
                self._validation = SequentialSampler(
                    self._train.chunk_size, self._train.preload_nchunks, self._train.batch_size, mask=val_mask
                )
            else:
                self._validation.mask = val_mask
        self._set_counts()

    # --- the loaders -----------------------------------------------------------------------------

    def _ranks(self) -> Any:
        """The ``dist_info`` the shards are cut with."""
        if self._dist_info is not None:
            return self._dist_info
        ranks = job_ranks()
        return lambda: ranks

    def _loader(self, sampler: DistributedSampler) -> Any:
        return _internals.annbatch_loader(self.dataset, sampler)

    def train_dataloader(self) -> _Epochs:
        """This rank's shard of the training sampler, as an iterable of annbatch batches (Lightning
        converts each with ``on_before_batch_transfer``)."""
        sharded = shard("train", self._train, self._ranks(), mode=self.mode, remainder=self.remainder)
        sharded.validate(self.dataset.n_obs)
        # Refuses, on every rank, ranks whose samplers differ in a setting, a seed (a seed drawn from
        # fresh entropy differs on each), a rank or world size, or a batch count.
        check_every_rank("AnnbatchDataModule", sharded, self.dataset.n_obs, equal_batches=True)
        if self._pending is not None:
            # Refuses a state of another configuration now, on every rank, before any batch; the
            # first training epoch restores it again (or, for an earlier epoch's, drops it).
            sharded.load_state_dict(self._pending)
        self._sharded = sharded
        return _Epochs(self, self._loader(sharded), sharded, training=True)

    def val_dataloader(self) -> _Epochs | list:
        """This rank's part of the validation rows, each read by one rank (an empty list without
        validation, as scvi-tools')."""
        if self._validation is None:
            return []
        validation = self._validation
        sharded = shard("eval", validation, self._ranks())
        n_obs, world_size = self.dataset.n_obs, sharded.world_size
        counts = [shard("eval", validation, lambda r=r: (r, world_size)).n_batches(n_obs) for r in range(world_size)]
        if min(counts) == 0:
            raise ConfigError(
                f"AnnbatchDataModule: the validation rows ({_rows(self._validation.mask, n_obs)}) make "
                f"{sum(counts)} batches of {self._validation.batch_size}, fewer than the {world_size} ranks; every "
                "rank needs at least one validation batch (DDP syncs the validation metrics across ranks)"
            )
        return _Epochs(self, self._loader(sharded), sharded, training=False)

    def _begin_train_epoch(self, sampler: DistributedSampler, trainer: Any) -> None:
        """Puts the sampler where Lightning's epoch begins: the restored point of a checkpoint, or
        the start of Lightning's current epoch."""
        epoch, done = _lightning_batches_done(trainer)
        pending, self._pending = self._pending, None
        if pending is not None:
            saved_epoch, saved_done = pending["epoch"], pending["batches_done"]
            if saved_epoch == epoch:
                if saved_done != done:
                    raise StateMismatchError(
                        f"AnnbatchDataModule: the checkpoint's sampler state is {saved_done} batches into epoch "
                        f"{saved_epoch}, but Lightning resumes that epoch after {done}"
                    )
                sampler.load_state_dict(pending)
                return
            if saved_epoch > epoch:
                raise StateMismatchError(
                    f"AnnbatchDataModule: the checkpoint's sampler state is in epoch {saved_epoch}, but Lightning "
                    f"resumes epoch {epoch}"
                )
        if done != 0:
            raise StateMismatchError(
                f"AnnbatchDataModule: Lightning resumes epoch {epoch} after {done} batches, but the checkpoint holds "
                "no sampler state for it (saved by another data module?), so the rest of the epoch is unknown"
            )
        sampler.set_epoch(epoch)

    # --- checkpoints -----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The training sampler's state after the batches Lightning's training loop has finished in
        its current epoch, as ``{"format": "chunksampler.loaders/1", "train": state, "world_size": n}``,
        the envelope every chunksampler data module writes (``{}`` before training has begun). The
        state names no rank: each rank's sampler restores it to its own shard."""
        trainer = self.trainer
        sampler = self._sharded
        if trainer is None or sampler is None:
            return {}
        return write_state(self._train_state(sampler, *_lightning_batches_done(trainer)))

    def _train_state(self, sampler: DistributedSampler, epoch: int, done: int) -> SamplerStateDict:
        """The state after ``done`` batches of Lightning's epoch ``epoch``, read from where the
        training sampler stands: no epoch is laid out again, and no sampler is copied but to name the
        start of an epoch the sampler is not at."""
        if self._pending is not None:
            return self._pending  # restored, and Lightning has not begun an epoch since: the same point
        since, upcoming = sampler._since, sampler.epoch
        if since in ("sample", "end") and upcoming == epoch + 1:
            # Lightning's epoch, which the annbatch Loader plays: the point after ``done`` of its
            # batches, however far the sampler's iterator has read ahead of the Loader (by a request).
            handed = sampler.state_dict()["batches_done"]  # the batches the Loader has handed on
            if done > handed:
                raise ConfigError(
                    f"AnnbatchDataModule.state_dict: Lightning counts {done} batches in epoch {epoch}, more than the "
                    f"{handed} its loader has handed out"
                )
            return sampler.state_dict(done)
        if done == 0:  # the start of Lightning's epoch, before its first batch
            if upcoming == epoch and not sampler.restore_pending:
                return sampler._next_state()
            start = sampler._copy()  # the live sampler stays where it is
            start.set_epoch(epoch)
            return start._next_state()
        if since == "end" and upcoming == epoch:
            # Lightning has counted the epoch played as completed but not yet reset its batch count (in
            # on_train_epoch_start, and after the last epoch): that epoch's end.
            return sampler.state_dict()
        raise ConfigError(
            f"AnnbatchDataModule.state_dict: Lightning counts {done} batches in epoch {epoch}, but the training "
            f"loader has not begun that epoch (its sampler's next epoch is {upcoming})"
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Makes the next training epoch continue after ``state_dict`` (from ``state_dict()``; Lightning
        calls this when it restores a checkpoint; chunksampler 0.3's ``chunksampler.scvi/1`` is read
        too, and a format it does not know, a newer chunksampler's, raises ``StateFormatError`` naming
        it). Checked against the sampler when ``train_dataloader()`` builds it: another configuration,
        seed, collection size or world size raises ``StateMismatchError``."""
        train = read_state("AnnbatchDataModule", state_dict)
        if train is None:
            raise StateFormatError(
                f"AnnbatchDataModule.load_state_dict: the state holds no training sampler state, got {state_dict!r:.200}"
            )
        if self._sharded is not None:
            # Checked on a copy: the live sampler may be serving an epoch.
            Cursor("AnnbatchDataModule", self._sharded, self.dataset.n_obs).check(
                train, "AnnbatchDataModule.load_state_dict: the state is not one of the training sampler"
            )
        self._pending = train

    # --- what it serves --------------------------------------------------------------------------

    @property
    def train_sampler(self) -> _Base:
        """The training sampler (a copy of the one given), with the split's mask."""
        return self._train._copy()

    @property
    def validation_sampler(self) -> _Base | None:
        """The validation sampler (a copy), or None without validation rows."""
        return None if self._validation is None else self._validation._copy()
