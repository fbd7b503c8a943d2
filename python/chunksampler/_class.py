"""The class samplers: ``ClassSampler`` and ``WeightedClassSampler``, which keep their codes' runs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from . import _chunksampler
from ._base import _MaskedSampler, _shape
from ._convert import class_codes, floats, index, mask_from, seed_from
from ._errors import ConfigError, ShortRunsError

_COMPOSITIONS = {
    "independent": _chunksampler.Composition.independent,
    "stratified": _chunksampler.Composition.stratified,
}


class ClassSampler(_MaskedSampler):
    """Class-coherent sampler with replacement, a drop-in for ``annbatch.samplers.ClassSampler``:
    every batch holds observations of one class.

    ``classes`` is a ``pandas.Categorical`` with one entry per observation (annbatch's argument; its
    ``codes`` are read) or a 1-D integer array of class codes. Each ``lcm(chunk_size, batch_size)``
    block draws a class with probability proportional to ``class_weights`` (one per category;
    0 excludes a class; uniform by default) among the classes the range holds, and each of its
    chunks starts at a uniformly random valid start of that class: every start whose chunk lies in
    one run of the class and in ``mask`` is equally likely (annbatch draws a run first, which favours
    short runs). An epoch reads ``num_samples`` positions. Every run of a class with a positive
    weight must be at least ``chunk_size`` long. The codes are scanned once into runs, and the
    sampler keeps only the runs of the classes it samples (not the codes): a copy or a pickle
    carries those runs, and assigning ``mask`` or ``rng`` makes the C++ sampler again from them. Unlike annbatch's, it serves DataLoader workers (each its own share of the draws),
    restores exactly, and a ``DistributedSampler`` may wrap it.

    >>> codes = np.repeat(np.arange(4), 250)
    >>> sampler = ClassSampler(10, 4, 10, classes=codes, num_samples=400, rng=np.random.default_rng(0))
    >>> sampler.n_batches(1000)
    40
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        classes: Any,
        num_samples: int,
        class_weights: Any = None,
        mask: slice | Sequence[slice] | None = None,
        drop_last: bool = False,
        rng: np.random.Generator | None = None,
    ) -> None:
        self._make(_chunksampler.ClassSampler, chunk_size, preload_nchunks, batch_size, classes, num_samples,
                   class_weights, mask, drop_last, rng, {})

    def _make(
        self,
        native: Any,
        chunk_size: object,
        preload_nchunks: object,
        batch_size: object,
        classes: object,
        num_samples: object,
        class_weights: object,
        mask: object,
        drop_last: object,
        rng: Any,
        extra: dict[str, Any],
    ) -> None:
        """Checks the arguments both class samplers take and scans the codes into the C++ sampler."""
        options = _shape(chunk_size, preload_nchunks, batch_size, drop_last)
        options["mask"] = mask_from(mask)
        options["num_samples"] = index("num_samples", num_samples)
        categories = getattr(classes, "categories", None) if hasattr(classes, "codes") else None
        # The categories themselves, not a list of them: listing 10^5 labels costs more than the
        # scan of the codes, and only an error message needs any of them.
        labels = categories
        options["class_weights"] = (
            [] if class_weights is None else _class_weights(type(self).__name__, class_weights, labels)
        )
        codes = class_codes(classes)
        self._rng, options["seed"] = seed_from(rng)
        self._seed_chosen = rng is not None
        try:
            self._impl = native(codes, **options, **extra)
        except ConfigError as error:
            raise _with_labels(error, labels) from None

    @property
    def replacement(self) -> bool:
        """Always True: chunks are drawn with replacement."""
        return True

    @property
    def num_samples(self) -> int:
        """Positions per epoch."""
        return self._impl.num_samples

    @property
    def class_weights(self) -> np.ndarray | None:
        """The weights as given (None: every class alike)."""
        weights = self._impl.class_weights
        return np.array(weights) if weights else None

    def __repr__(self) -> str:
        return (
            f"ClassSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, num_samples={self.num_samples}, n_obs={self._impl.n_obs}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed})"
        )


class WeightedClassSampler(ClassSampler):
    """Class-weighted sampler with replacement, a drop-in for ``annbatch.samplers.WeightedClassSampler``:
    every batch mixes the classes in proportion to ``class_weights``.

    Chunks are chosen as ``ClassSampler`` chooses them (a class by weight among the classes the range
    holds, then a uniformly random valid start of that class), with its arguments, rules and
    errors, but each chunk has its own class and a request's rows are shuffled together before they
    are cut into batches: a batch is a uniform sample without replacement of its request's rows.
    ``composition`` (not in annbatch) says how a request's chunks get their classes:
    ``"independent"`` (annbatch's) draws each chunk's class by weight, so a request matches the
    weights in expectation; ``"stratified"`` gives every request of ``n`` chunks ``floor(n * s)`` or
    ``ceil(n * s)`` chunks of a class of share ``s`` of the weights, and the epoch's chunks too. A
    subclass of ``ClassSampler``, as annbatch's is; unlike annbatch's, it serves DataLoader workers,
    restores exactly, and a ``DistributedSampler`` may wrap it.

    >>> codes = np.repeat([0, 1, 2], 200)
    >>> sampler = WeightedClassSampler(10, 10, 20, classes=codes, num_samples=1000, class_weights=[5, 3, 2],
    ...                                composition="stratified", rng=np.random.default_rng(0))
    >>> {tuple(np.bincount(codes[[c.start for c in r["requests"]]]).tolist()) for r in sampler.sample(600)}
    {(5, 3, 2)}
    """

    def __init__(
        self,
        chunk_size: int,
        preload_nchunks: int,
        batch_size: int,
        *,
        classes: Any,
        num_samples: int,
        class_weights: Any = None,
        mask: slice | Sequence[slice] | None = None,
        drop_last: bool = False,
        rng: np.random.Generator | None = None,
        composition: Literal["independent", "stratified"] = "independent",
    ) -> None:
        # Strings first: an unhashable value would raise a TypeError from the lookup that names nothing.
        if not isinstance(composition, str) or composition not in _COMPOSITIONS:
            raise ConfigError(
                f"WeightedClassSampler: composition ({composition!r}) must be one of {sorted(_COMPOSITIONS)}"
            )
        self._make(_chunksampler.WeightedClassSampler, chunk_size, preload_nchunks, batch_size, classes, num_samples,
                   class_weights, mask, drop_last, rng, {"composition": _COMPOSITIONS[composition]})

    @property
    def composition(self) -> str:
        """``"independent"`` (each chunk's class drawn by weight) or ``"stratified"`` (every request's
        class counts within one chunk of the weights)."""
        return self._impl.composition.name

    def __repr__(self) -> str:
        return (
            f"WeightedClassSampler(chunk_size={self.chunk_size}, preload_nchunks={self.preload_nchunks}, "
            f"batch_size={self.batch_size}, num_samples={self.num_samples}, n_obs={self._impl.n_obs}, "
            f"drop_last={self.drop_last}, mask={self.mask}, seed={self.seed}, composition={self.composition!r})"
        )


def _class_weights(sampler: str, weights: object, labels: Sequence[Any] | None) -> list[float]:
    """``class_weights`` as floats in the order of the class codes; with a Categorical, one per
    category."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(weights, pandas.Series):
        raise TypeError(
            "class_weights must be a sequence in the order of classes.categories, not a pandas Series (its index "
            "may order the weights otherwise); pass series.reindex(classes.categories).to_numpy()"
        )
    values = floats("class_weights", weights)
    if labels is not None and len(values) != len(labels):
        raise ConfigError(
            f"{sampler}: class_weights has {len(values)} entries; it needs one weight per class in "
            f"classes.categories ({len(labels)})"
        )
    return values


def _with_labels(error: ConfigError, labels: Any) -> ConfigError:
    """A ``ShortRunsError`` (which carries the class codes) with the Categorical's labels of the first
    20 added to its message, as the message lists their codes; any other error as it is."""
    if not isinstance(error, ShortRunsError) or labels is None:
        return error
    codes = error.codes[:20]
    if not codes or max(codes) >= len(labels):
        return error
    # Python scalars, as a list of the categories holds them (an Index's item may be a numpy one).
    named = labels.take(codes).tolist() if hasattr(labels, "take") else [labels[code] for code in codes]
    return ShortRunsError(f"{error} (by label: classes {named!r})", error.codes)
