"""The check the integrations make on every rank of a ``torch.distributed`` job before they serve
a sampler: that every rank holds the same sampler (settings and seed) sharded for this job, with
as many batches as the others where a collective per batch needs that.

The ranks exchange what they hold (one ``all_gather_object``) so that all of them decide alike:
an error on one rank alone would leave the others waiting in their next collective. Every rank
must therefore call it at the same point of the program.
"""

from __future__ import annotations

from typing import Any

from ._errors import ConfigError
from ._samplers import DistributedSampler

__all__ = ["check_ranks", "by_rank"]

_SEED_FIX = (
    "build the sampler with rng=np.random.default_rng(SEED), the same SEED on every rank (or without rng: a "
    "DistributedSampler then uses the shared seed 0)"
)


def _what(sampler: Any, n_obs: int, rank: int) -> dict[str, Any]:
    """What one rank holds, in plain values that pickle."""
    distributed = isinstance(sampler, DistributedSampler)
    return {
        "rank": rank,
        "sampler": type(sampler).__name__,
        "sampler_rank": sampler.rank if distributed else None,
        "sampler_world_size": sampler.world_size if distributed else None,
        "fingerprint": sampler._impl.fingerprint,
        "seed": sampler.seed,
        "n_batches": sampler.n_batches(n_obs, worker=(0, 1)),
        "repr": repr(sampler),
    }


def _ranks(ranks: list[int]) -> str:
    """``rank 2`` or ``ranks 0, 1``."""
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))}"


def _grouped(pairs: list[tuple[Any, int]]) -> dict[Any, list[int]]:
    """The ranks of each value of ``(value, rank)`` pairs, in the order the values first come."""
    groups: dict[Any, list[int]] = {}
    for value, rank in pairs:
        groups.setdefault(value, []).append(rank)
    return groups


def by_rank(problems: list[str | None]) -> str | None:
    """``ranks 0, 1: problem; rank 3: other problem`` for each rank's problem (``problems[rank]``, None
    where it found none); None where none did."""
    groups = _grouped([(problem, rank) for rank, problem in enumerate(problems) if problem is not None])
    return "; ".join(f"{_ranks(ranks)}: {problem}" for problem, ranks in groups.items()) or None


def _by_value(everyone: list[dict[str, Any]], key: str) -> str:
    """``value on ranks a, b; value on rank c`` for the ranks' values of ``key``."""
    groups = _grouped([(r[key], r["rank"]) for r in everyone])
    return "; ".join(f"{value} on {_ranks(ranks)}" for value, ranks in groups.items())


# What a job is called, how a DistributedSampler of its ranks is made, which collective needs equal
# batch counts and what keeps them equal, in check_ranks' messages.
_JOBS = {
    "torch": (
        "torch.distributed job",
        "DistributedSampler(sampler, dist_info='torch'), made on each rank after the process group is "
        "initialized (in setup() or train_dataloader())",
        "DDP's gradient all-reduce waits for every rank",
        "Keep the DistributedSampler's enforce_equal_batches=True, or pass equal_batches=False for a loader that "
        "needs no collective per batch (validation, test, prediction)",
    ),
    "jax": (
        "jax.distributed job",
        "DistributedSampler(sampler, dist_info='jax'), made in each process after jax.distributed.initialize()",
        "each training step's collective (jax.lax.pmean of the gradients) waits for every process",
        "Keep the DistributedSampler's enforce_equal_batches=True",
    ),
}


def check_ranks(
    owner: str,
    sampler: Any,
    n_obs: int,
    *,
    job: tuple[int, int],
    equal_batches: bool,
    gather: Any = None,
    kind: str = "torch",
) -> None:
    """Raises ConfigError on every rank of the job ``(rank, world_size)`` if any rank's sampler

    - is no DistributedSampler under several ranks, or has another rank or world size than the job's;
    - has other settings (its fingerprint: every setting that shapes the epochs) or another seed than
      another rank's: in global mode the ranks' shares would overlap, and no rank's checkpoint
      would restore on another;
    - with ``equal_batches``, has another batch count (DDP's gradient all-reduce waits for every rank).

    ``gather(list, obj)`` is ``torch.distributed.all_gather_object`` by default; ``kind`` (``"torch"``
    or ``"jax"``) names the job in the messages.
    """
    job_name, fix, collective, keep = _JOBS[kind]
    rank, world_size = job
    mine = _what(sampler, n_obs, rank)
    if world_size == 1:
        everyone = [mine]
    else:
        if gather is None:
            import torch.distributed

            gather = torch.distributed.all_gather_object
        everyone = [None] * world_size
        gather(everyone, mine)
    problems: list[str | None] = []
    for r in everyone:
        problem = None
        if r["sampler_world_size"] is None:
            if world_size > 1:
                problem = f"a {r['sampler']}, not a DistributedSampler, so every rank would read every observation"
        elif (r["sampler_rank"], r["sampler_world_size"]) != (r["rank"], world_size):
            problem = f"dist_info gave rank {r['sampler_rank']} of world_size {r['sampler_world_size']}"
        problems.append(problem)
    found = by_rank(problems)
    if found is not None:
        raise ConfigError(
            f"{owner}: the sampler's rank and world_size must be this {job_name}'s on every rank "
            f"(world_size {world_size}); {found}. Use {fix}"
        )
    if len({r["fingerprint"] for r in everyone}) > 1:
        raise ConfigError(
            f"{owner}: every rank must build the same sampler, but their settings differ: "
            f"{_by_value(everyone, 'repr')}"
        )
    if len({r["seed"] for r in everyone}) > 1:
        raise ConfigError(
            f"{owner}: every rank must use the same seed, but the seeds are {_by_value(everyone, 'seed')}: the "
            "ranks' shares of a global-mode epoch would overlap, and no rank's checkpoint would restore on another; "
            + _SEED_FIX
        )
    counts = [r["n_batches"] for r in everyone]
    if equal_batches and len(set(counts)) > 1:
        raise ConfigError(
            f"{owner}: with equal_batches=True (training), every rank must have as many batches as the others, "
            f"since {collective}; got {counts} batches on ranks 0 to {world_size - 1}. {keep}"
        )
