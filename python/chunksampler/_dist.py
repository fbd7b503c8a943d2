"""Where a DistributedSampler learns its rank and world size (its ``dist_info`` argument)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Literal, Union

from . import _chunksampler, _internals
from ._convert import index
from ._errors import ConfigError, DistEnvironmentError

__all__ = ["DistInfo", "accelerate_hint", "resolve_dist_info"]

DistInfo = Union[Literal["torch", "jax", "env"], Callable[[], "tuple[int, int]"]]


def torch_job() -> tuple[int, int] | None:
    """``(rank, world_size)`` of an initialized ``torch.distributed`` job, else None."""
    import torch.distributed as dist  # only when asked for: torch is optional

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def jax_job() -> tuple[int, int] | None:
    """``(jax.process_index(), jax.process_count())`` of an initialized ``jax.distributed`` job, else
    None (JAX not imported, or not initialized: nothing in JAX is started to ask)."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized():
        return None
    return jax.process_index(), jax.process_count()


def _torch() -> tuple[int, int]:
    job = torch_job()
    if job is None:
        accelerate = accelerate_hint()
        if accelerate is not None:
            raise DistEnvironmentError(f"dist_info='torch': torch.distributed is not initialized. {accelerate}")
        raise DistEnvironmentError(
            "torch.distributed is not initialized; call torch.distributed.init_process_group() before "
            "creating a DistributedSampler with dist_info='torch'"
        )
    return job


def accelerate_hint() -> str | None:
    """Where Hugging Face Accelerate runs this program as one process (its state's
    ``distributed_type`` is NO), what that state is and what to change so that it starts the
    process group: the launch, not a call, since Accelerate's launcher (or the Trainer's) makes it.
    None where Accelerate is not in use (never imported, no state made, not launched by
    ``accelerate launch``) or runs several processes.

    ``accelerate launch --num_processes N`` without ``--multi_gpu`` (or a config that says so)
    starts one process on a CPU machine, with ``MASTER_ADDR``/``MASTER_PORT`` set for the N it was
    asked for and no ``RANK``; the Trainer run as ``python script.py`` is one process as well.
    Reads ``sys.modules`` and the environment only: imports nothing."""
    launched = "ACCELERATE_MIXED_PRECISION" in os.environ  # every `accelerate launch` sets it
    shared = _internals.accelerate_shared_state()
    if not shared and not launched:
        return None
    one_of_many = launched and "MASTER_PORT" in os.environ and "RANK" not in os.environ
    launch = (
        "Launch the script with `accelerate launch --multi_gpu --num_processes N script.py` (--multi_gpu on a "
        "CPU machine too: it makes Accelerate start the N processes with torchrun; Accelerator(cpu=True) then "
        "runs them on the CPU), or choose multi-GPU in `accelerate config`"
    )
    asked = (
        "`accelerate launch` was asked for several processes (it set MASTER_ADDR/MASTER_PORT) but, without "
        "--multi_gpu, started one"
    )
    if not shared:
        # Launched, but the Accelerator that starts the process group is not made yet.
        if not one_of_many:
            return (
                "Accelerate's launcher started this process, and no Accelerator() has been made yet: make the "
                "Accelerator() first (it starts the process group), then the DistributedSampler."
            )
        return f"{asked}, so no process group will be started. {launch}."
    processes = shared.get("num_processes", 1)
    distributed_type = getattr(shared.get("distributed_type"), "value", shared.get("distributed_type"))
    if processes > 1 or distributed_type not in (None, "NO"):
        return None
    seen = (
        f"Accelerate runs this program as {processes} process (its state: distributed_type={distributed_type}, "
        f"num_processes={processes})"
    )
    if one_of_many:
        seen += f"; {asked}"
    fix = launch
    if "transformers" in sys.modules:
        fix += (
            "; under the Hugging Face Trainer, `torchrun --nproc-per-node N script.py` does it too, and "
            "ChunkTrainer takes the plain sampler and shards it by the Trainer's own process index and count"
        )
    else:
        fix += ", then make the Accelerator() before the DistributedSampler"
    return (
        f"{seen}, so no process group was started. {fix}. For one process on purpose, use the sampler without "
        "DistributedSampler (prepare_loader and ChunkTrainer accept it), or dist_info=lambda: (0, 1)."
    )


def _launcher() -> tuple[int, int] | None:
    """What the launcher's variables say, ``(rank, world_size)``, or None where they say nothing
    readable (none set, a rank without its world size, a value that is not an integer)."""
    try:
        return _chunksampler.dist_from_env()
    except (DistEnvironmentError, ConfigError):
        return None


# The launchers' variables, as dist_info="env" reads them (C++ detail::launcher_variables), for messages.
_LAUNCHER_VARIABLES = (
    "RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS"
)


def _jax() -> tuple[int, int]:
    """``(jax.process_index(), jax.process_count())`` of an initialized ``jax.distributed`` job.

    Refuses, rather than report one process, where a wrong answer would make every process read
    the whole dataset unnoticed:

    - ``jax.distributed`` not initialized: on CPU and GPU, JAX would say "process 0 of 1" in every
      process (and asking would start its backend, after which ``jax.distributed.initialize()`` can
      no longer be called), so this raises ``DistEnvironmentError`` naming
      ``jax.distributed.initialize()``, and touches nothing in JAX, whatever the launcher's
      variables say (they only add to the message). annbatch's ``dist_info="jax"`` raises here too
      (a plain RuntimeError). A TPU pod, where JAX counts hosts without ``jax.distributed``, calls
      ``jax.distributed.initialize()`` as well (JAX recommends it) or passes a callable.
    - the launcher's variables (those ``dist_info="env"`` reads) name more processes than JAX
      joined: processes outside JAX's job would read the same shards, so this raises
      ``DistEnvironmentError`` with both counts. Where they name fewer, or nothing readable,
      JAX's count stands: its processes have met at the coordinator, and their shards are
      disjoint whatever the environment says; the ranks are always JAX's.
    - jax missing: ``ModuleNotFoundError`` (an ImportError) naming the package.
    """
    try:
        import jax  # noqa: F401  (only when asked for: jax is optional; jax_job reads it from sys.modules)
    except ImportError as error:
        raise ModuleNotFoundError(
            f"dist_info='jax' needs the jax package, and importing it failed ({error}); install it "
            "(pip install jax) or pass another dist_info ('torch', 'env' or a callable returning (rank, world_size))",
            name="jax",
        ) from error

    launcher = _launcher()
    job = jax_job()
    if job is None:
        said = (
            f"; the launcher's variables ({_LAUNCHER_VARIABLES}) say this is rank {launcher[0]} of {launcher[1]}"
            if launcher is not None and launcher[1] > 1
            else ""
        )
        raise DistEnvironmentError(
            "dist_info='jax': JAX distributed is not initialized (jax.distributed.initialize() was not called; "
            "on CPU and GPU, JAX then counts every process as process 0 of 1, and each would read the whole "
            f"dataset){said}. Call "
            "jax.distributed.initialize() in every process, before any other JAX call, then create the "
            "DistributedSampler (one process alone: use the sampler itself, or dist_info=lambda: (0, 1))"
        )
    rank, world_size = job
    if launcher is not None and launcher[1] > world_size:
        raise DistEnvironmentError(
            f"dist_info='jax': jax.distributed joined {world_size} process(es) (this is process {rank}), "
            f"but the launcher's variables ({_LAUNCHER_VARIABLES}) say there are {launcher[1]} (this is rank "
            f"{launcher[0]}): the processes outside JAX's job would read the same shards. Pass "
            "jax.distributed.initialize() the launcher's num_processes and process_id, or, if the launcher's "
            "processes really run separate JAX jobs, dist_info=lambda: (jax.process_index(), jax.process_count())"
        )
    return rank, world_size


def _env() -> tuple[int, int]:
    return _chunksampler.dist_from_env()


_BACKENDS: dict[str, Callable[[], tuple[int, int]]] = {"torch": _torch, "jax": _jax, "env": _env}


def resolve_dist_info(dist_info: DistInfo) -> tuple[int, int]:
    """Calls ``dist_info`` (or the named backend's query) once and returns ``(rank, world_size)``.

    Raises TypeError unless it is "torch", "jax", "env" or a callable returning two integers.
    """
    if isinstance(dist_info, str):
        if dist_info not in _BACKENDS:
            raise ConfigError(f"Unknown dist_info {dist_info!r}: it must be one of {sorted(_BACKENDS)} or a callable")
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

