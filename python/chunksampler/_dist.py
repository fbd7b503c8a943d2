"""Where a DistributedSampler learns its rank and world size (its ``dist_info`` argument)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Union

from . import _chunksampler
from ._convert import index

__all__ = ["DistInfo", "resolve_dist_info"]

DistInfo = Union[Literal["torch", "jax", "env"], Callable[[], "tuple[int, int]"]]


def _torch() -> tuple[int, int]:
    import torch.distributed as dist  # only when asked for: torch is optional

    if not dist.is_initialized():
        raise RuntimeError(
            "torch.distributed is not initialized; call torch.distributed.init_process_group() before "
            "creating a DistributedSampler with dist_info='torch'"
        )
    return dist.get_rank(), dist.get_world_size()


def _jax() -> tuple[int, int]:
    import jax  # only when asked for: jax is optional

    if not jax.distributed.is_initialized():
        raise RuntimeError(
            "JAX distributed is not initialized; call jax.distributed.initialize() before creating a "
            "DistributedSampler with dist_info='jax'"
        )
    return jax.process_index(), jax.process_count()


def _env() -> tuple[int, int]:
    return _chunksampler.dist_from_env()


_BACKENDS: dict[str, Callable[[], tuple[int, int]]] = {"torch": _torch, "jax": _jax, "env": _env}


def resolve_dist_info(dist_info: DistInfo) -> tuple[int, int]:
    """Calls ``dist_info`` (or the named backend's query) once and returns ``(rank, world_size)``.

    Raises TypeError unless it is "torch", "jax", "env" or a callable returning two integers.
    """
    if isinstance(dist_info, str):
        if dist_info not in _BACKENDS:
            raise ValueError(f"dist_info must be one of {sorted(_BACKENDS)} or a callable, got {dist_info!r}")
        result = _BACKENDS[dist_info]()
    elif callable(dist_info):
        result = dist_info()
    else:
        raise TypeError(
            "dist_info must be 'torch', 'jax', 'env' or a callable returning (rank, world_size), "
            f"got {type(dist_info).__name__}"
        )
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(f"dist_info must return a (rank, world_size) pair of ints, got {result!r}")
    rank, world_size = result
    return index("rank", rank), index("world_size", world_size)

