"""Sampler configurations of every kind for the property tests: a hypothesis strategy that draws
small ones, a way to build the Python sampler of one (any rank of it), and the same configuration
as the C++ oracle's command line (tests/python/oracle/plan_dump.cpp)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

import chunksampler as cs

KINDS = ("random", "sequential", "class", "weighted", "mixture")


@dataclasses.dataclass(frozen=True)
class Config:
    """One sampler configuration; ``world_size`` makes it a DistributedSampler of it."""

    kind: str
    chunk_size: int
    preload_nchunks: int
    batch_size: int
    n_obs: int
    seed: int | None = 0  # None: the sampler is made without rng
    drop_last: bool = False
    # One range (start, stop), or several ((start, stop), ...); stop None is open-ended.
    mask: tuple[int, int | None] | tuple[tuple[int, int | None], ...] | None = None
    replacement: bool = False
    num_samples: int | None = None
    codes: tuple[int, ...] = ()
    class_weights: tuple[float, ...] | None = None
    composition: str = "independent"
    sizes: tuple[int, ...] = ()
    weights: tuple[float, ...] | None = None
    temperature: float = 1.0
    world_size: int | None = None
    rank: int = 0
    mode: str = "contiguous"
    remainder: str = "drop"
    enforce_equal_batches: bool = True
    epoch: int = 0
    worker: tuple[int, int] = (0, 1)

    def base(self) -> Any:
        """The plain sampler, seeded from ``np.random.default_rng(seed)`` (made without rng where seed is None)."""
        shape = {"chunk_size": self.chunk_size, "preload_nchunks": self.preload_nchunks, "batch_size": self.batch_size}
        mask = self.mask_arg()
        rng = None if self.seed is None else np.random.default_rng(self.seed)
        if self.kind == "random":
            return cs.RandomSampler(
                **shape, drop_last=self.drop_last, mask=mask, replacement=self.replacement,
                num_samples=self.num_samples, rng=rng,
            )
        if self.kind == "sequential":
            return cs.SequentialSampler(**shape, drop_last=self.drop_last, mask=mask)
        if self.kind == "weighted":
            return cs.WeightedClassSampler(
                **shape, classes=np.array(self.codes, dtype=np.int16), num_samples=self.num_samples,
                class_weights=self.class_weights, mask=mask, drop_last=self.drop_last, rng=rng,
                composition=self.composition,
            )
        if self.kind == "class":
            return cs.ClassSampler(
                **shape, classes=np.array(self.codes, dtype=np.int16), num_samples=self.num_samples,
                class_weights=self.class_weights, mask=mask, drop_last=self.drop_last, rng=rng,
            )
        assert self.kind == "mixture"
        return cs.MixtureSampler(
            **shape, sizes=list(self.sizes), weights=self.weights, temperature=self.temperature,
            num_samples=self.num_samples, drop_last=self.drop_last, rng=rng,
        )

    def ranges(self) -> list[tuple[int, int | None]] | None:
        """The mask's ranges, as given."""
        if self.mask is None:
            return None
        return [self.mask] if not isinstance(self.mask[0], tuple) else list(self.mask)  # type: ignore[list-item]

    def mask_arg(self) -> slice | list[slice] | None:
        """The ``mask=`` argument: a slice for one range, a list of slices for several."""
        if self.mask is None:
            return None
        if not isinstance(self.mask[0], tuple):
            return slice(*self.mask)
        return [slice(*r) for r in self.mask]

    def make(self, rank: int | None = None, world_size: int | None = None) -> Any:
        """The sampler of rank ``rank`` (this configuration's by default) of ``world_size`` ranks."""
        base = self.base()
        world = self.world_size if world_size is None else world_size
        if world is None:
            return base
        r = self.rank if rank is None else rank
        return cs.DistributedSampler(
            base, dist_info=lambda: (r, world), mode=self.mode, remainder=self.remainder,
            enforce_equal_batches=self.enforce_equal_batches,
        )

    def oracle_args(self, seed: int, epochs: int) -> list[str]:
        """plan_dump's arguments for this configuration with the C++ seed ``seed``."""
        args = {
            "sampler": self.kind, "n_obs": self.n_obs, "chunk_size": self.chunk_size,
            "preload_nchunks": self.preload_nchunks, "batch_size": self.batch_size,
            "drop_last": int(self.drop_last), "epoch": self.epoch, "epochs": epochs,
            "worker": self.worker[0], "num_workers": self.worker[1],
        }
        if self.kind != "sequential":
            args["seed"] = seed
        if self.mask is not None:
            args["mask"] = ",".join(f"{start}:{'' if stop is None else stop}" for start, stop in self.ranges())
        if self.num_samples is not None:
            args["num_samples"] = self.num_samples
        if self.kind == "random":
            args["replacement"] = int(self.replacement)
        if self.kind in ("class", "weighted"):
            args["codes"] = ",".join(map(str, self.codes))
            if self.class_weights is not None:
                args["class_weights"] = ",".join(map(repr, map(float, self.class_weights)))
        if self.kind == "weighted":
            args["composition"] = self.composition
        if self.kind == "mixture":
            args["sizes"] = ",".join(map(str, self.sizes))
            args["temperature"] = repr(float(self.temperature))
            if self.weights is not None:
                args["weights"] = ",".join(map(repr, map(float, self.weights)))
        if self.world_size is not None:
            args.update(
                world_size=self.world_size, rank=self.rank, mode=self.mode, remainder=self.remainder,
                enforce_equal_batches=int(self.enforce_equal_batches),
            )
        return [f"{key}={value}" for key, value in args.items()]


def batch_sizes(chunk_size: int, preload_nchunks: int) -> list[int]:
    """The batch sizes a sampler of this shape takes: the divisors of a request's rows."""
    rows = chunk_size * preload_nchunks
    return [d for d in range(1, rows + 1) if rows % d == 0]


def _mask(draw, n_obs: int):
    """None, one range, or 2 to 4 sorted ranges, some adjacent (merged by C++), the last sometimes
    open-ended."""
    kind = draw(st.sampled_from(["none", "one", "many"]))
    if kind == "none":
        return None
    if kind == "one":
        start = draw(st.integers(0, n_obs // 3))
        return start, draw(st.sampled_from([None, n_obs, max(start + 1, n_obs - draw(st.integers(0, n_obs // 3)))]))
    return many_ranges_of(draw, n_obs)


def many_ranges_of(draw, n_obs: int) -> tuple[tuple[int, int | None], ...]:
    """2 to 4 sorted, disjoint ranges inside ``[0, n_obs)``, each in its own stretch of
    ``n_obs // k`` rows; a range that fills its stretch to the end touches the next one when that
    starts at its stretch's start (adjacent ranges); the last is open-ended sometimes."""
    k = draw(st.integers(2, min(4, n_obs)))
    stretch = n_obs // k
    ranges: list[tuple[int, int | None]] = []
    for i in range(k):
        gap = draw(st.sampled_from([0, draw(st.integers(0, stretch // 2))]))
        length = draw(st.sampled_from([stretch - gap, draw(st.integers(1, stretch - gap))]))
        ranges.append((i * stretch + gap, i * stretch + gap + length))
    if draw(st.booleans()):
        ranges[-1] = (ranges[-1][0], None)
    return tuple(ranges)


@st.composite
def configs(draw, kinds=KINDS, distributed=True, workers=True, many_ranges=False) -> Config:
    """A small configuration of one of ``kinds``, distributed sometimes (``distributed=True``), never
    (False) or always ("always"); most can be served (the tests reject the rest). With
    ``many_ranges``, the mask of a sampler that takes one always has several ranges."""
    kind = draw(st.sampled_from(kinds))
    chunk_size = draw(st.integers(1, 8))
    # A weighted sampler's requests mix their chunks' classes: more chunks a request give the mix room.
    preload_nchunks = draw(st.integers(1, 6 if kind == "weighted" else 3))
    per_request = chunk_size * preload_nchunks
    batch_size = draw(st.sampled_from(batch_sizes(chunk_size, preload_nchunks)))
    fields: dict[str, Any] = {
        "kind": kind, "chunk_size": chunk_size, "preload_nchunks": preload_nchunks, "batch_size": batch_size,
        "seed": draw(st.integers(0, 2**32)), "drop_last": draw(st.booleans()), "epoch": draw(st.integers(0, 3)),
    }
    wrapped = distributed == "always" or (distributed and draw(st.booleans()))
    world = draw(st.integers(1, 4)) if wrapped else None
    floor = (world or 1) * max(per_request, batch_size) * 2
    if kind in ("random", "sequential"):
        n_obs = draw(st.integers(floor, floor + 200))
        fields.update(n_obs=n_obs, mask=many_ranges_of(draw, n_obs) if many_ranges else _mask(draw, n_obs))
        if kind == "random" and draw(st.booleans()):
            fields.update(replacement=draw(st.booleans()), num_samples=draw(st.integers(1, n_obs)))
    elif kind in ("class", "weighted"):
        n_classes = draw(st.integers(1, 3))
        # Runs of at least chunk_size, every class among them, stretched to hold `floor` codes.
        runs = draw(st.lists(st.tuples(st.integers(0, n_classes - 1), st.integers(1, 3)), min_size=1, max_size=8))
        runs = [(c, 1) for c in range(n_classes)] + runs
        stretch = max(1, -(-floor // (chunk_size * sum(length for _, length in runs))))
        codes = [c for c, length in runs for _ in range(length * chunk_size * stretch)]
        fields.update(codes=tuple(codes), n_obs=len(codes), num_samples=draw(st.integers(1, 150)))
        if draw(st.booleans()):
            weights = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n_classes, max_size=n_classes))
            fields.update(class_weights=tuple(weights))
        if many_ranges or draw(st.booleans()):
            fields.update(mask=many_ranges_of(draw, len(codes)) if many_ranges else _mask(draw, len(codes)))
        if kind == "weighted":
            fields.update(composition=draw(st.sampled_from(["independent", "stratified"])))
    else:
        sizes = draw(st.lists(st.integers(chunk_size, 80), min_size=1, max_size=3))
        while sum(sizes) < floor:
            sizes[0] += floor
        fields.update(sizes=tuple(sizes), n_obs=sum(sizes) + draw(st.integers(0, 10)))
        if draw(st.booleans()):
            weights = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 5.0]), min_size=len(sizes), max_size=len(sizes)))
            fields.update(weights=tuple(weights))
        fields.update(temperature=draw(st.sampled_from([0.5, 1.0, 2.0])))
        if draw(st.booleans()):
            fields.update(num_samples=draw(st.integers(1, 2 * sum(sizes))))
    if world is not None:
        fields.update(
            world_size=world, rank=draw(st.integers(0, world - 1)),
            mode=draw(st.sampled_from(["contiguous", "global"])),
            remainder=draw(st.sampled_from(["drop", "pad", "rotate"])),
            enforce_equal_batches=draw(st.booleans()),
        )
    if workers and draw(st.booleans()):
        num_workers = draw(st.integers(2, 3))
        fields.update(worker=(draw(st.integers(0, num_workers - 1)), num_workers))
    return Config(**fields)


def servable(config: Config) -> Any | None:
    """The sampler of ``config`` at its epoch, or None if the C++ library refuses the configuration
    (ConfigError: a rule on the values, which other tests check) in that epoch or the next, the two
    the tests play: with ``remainder="rotate"`` an odd epoch reads its own shard, which a class
    sampler may find without a chunk of its classes."""
    try:
        sampler = config.make()
        for epoch in (config.epoch + 1, config.epoch):
            sampler.set_epoch(epoch)
            sampler.validate(config.n_obs)
            sampler.n_batches(config.n_obs, worker=config.worker)
    except cs.ConfigError:
        return None
    return sampler


def as_lists(batches) -> list[list[int]]:
    """Batches (numpy arrays) as plain lists, so that lists of them compare with ==."""
    return [np.asarray(b).tolist() for b in batches]


def picks(n: int, limit: int = 24) -> list[int]:
    """Every k in [0, n] if there are few, else both ends and an even spread between."""
    if n + 1 <= limit:
        return list(range(n + 1))
    step = math.ceil(n / (limit - 1))
    return sorted({*range(0, n + 1, step), n})


# One configuration of each kind over 600 observations, plain and as rank 1 and 2 of 3 in each
# shard mode: what the pickling and copy tests run every kind through.
EVERY_KIND_N_OBS = 600
_CODES = tuple(np.repeat([0, 1, 2, 1, 0, 2], [120, 80, 100, 90, 110, 100]).tolist())
_BASES = {
    "random": Config("random", 10, 3, 6, EVERY_KIND_N_OBS, seed=1, mask=(5, 590)),
    "sequential": Config("sequential", 10, 2, 5, EVERY_KIND_N_OBS, mask=(0, 555)),
    "class": Config("class", 10, 2, 5, EVERY_KIND_N_OBS, seed=2, codes=_CODES, num_samples=600,
                    class_weights=(1.0, 2.0, 1.0)),
    "weighted": Config("weighted", 10, 2, 5, EVERY_KIND_N_OBS, seed=4, codes=_CODES, num_samples=600,
                       class_weights=(1.0, 2.0, 1.0), composition="stratified"),
    "mixture": Config("mixture", 10, 2, 10, EVERY_KIND_N_OBS, seed=3, sizes=(300, 200, 100), weights=(1.0, 1.0, 2.0)),
}
EVERY_KIND = {
    **_BASES,
    **{f"{k}-contiguous": Config(**{**v.__dict__, "world_size": 3, "rank": 1}) for k, v in _BASES.items()},
    **{f"{k}-global": Config(**{**v.__dict__, "world_size": 3, "rank": 2, "mode": "global"})
       for k, v in _BASES.items()},
}
