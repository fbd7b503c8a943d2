"""Python values to the C++ library's types, with a TypeError that says what is expected.

Only types are checked here; every rule on the values (sizes, ranges, divisibility) is the C++
library's, raised as ConfigError.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._errors import ConfigError

__all__ = [
    "class_codes",
    "flag",
    "floats",
    "index",
    "indices",
    "mask_from",
    "mask_to",
    "optional_index",
    "real",
    "seed_from",
    "worker_from",
]

_UINT64 = np.iinfo(np.uint64)
_INT64 = np.iinfo(np.int64)


def index(name: str, value: object) -> int:
    """``value`` as an int (anything with ``__index__`` but a bool) that fits the C++ int64."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        result = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    # Beyond int64 the binding's own TypeError would name the function, not the parameter.
    if not _INT64.min <= result <= _INT64.max:
        raise ConfigError(f"{name} ({result}) must be in [-2^63, 2^63): a 64-bit integer")
    return result


def optional_index(name: str, value: object) -> int | None:
    """``value`` as an int, or None."""
    return None if value is None else index(name, value)


def real(name: str, value: object) -> float:
    """``value`` as a float (a Python or numpy real number, not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def flag(name: str, value: object) -> bool:
    """``value`` as a bool (a Python or numpy bool)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def mask_from(mask: object) -> list[tuple[int, int | None]] | None:
    """A mask as the ``(start, stop)`` pairs of its ranges: one ``slice(start, stop)``, or a list or
    tuple of them (several ranges). ``slice(start, None)`` is open-ended (it ends at each epoch's
    ``n_obs``) and ``slice(None, stop)`` starts at 0. Only types are checked here: whether the
    ranges are sorted, disjoint, non-empty and inside ``n_obs`` is the C++ ``Ranges``' rule."""
    if mask is None:
        return None
    if isinstance(mask, slice):
        return [_range("mask", mask)]
    if not isinstance(mask, (list, tuple)):
        raise TypeError(
            "mask must be a slice (e.g. slice(0, 1000) or slice(100, None)), a list of slices "
            f"(e.g. [slice(0, 1000), slice(5000, None)]) or None, got {type(mask).__name__}"
        )
    return [_range(f"mask[{i}]", item) for i, item in enumerate(mask)]


def _range(name: str, mask: object) -> tuple[int, int | None]:
    """One range of a mask, named ``name`` in messages, as ``(start, stop)``."""
    if not isinstance(mask, slice):
        raise TypeError(f"{name} must be a slice (e.g. slice(0, 1000) or slice(100, None)), got {type(mask).__name__}")
    if mask.step is not None and mask.step != 1:
        raise ConfigError(f"{name}.step must be 1, but got {mask.step!r}: a mask's range is contiguous (None means 1)")
    start = 0 if mask.start is None else index(f"{name}.start", mask.start)
    return start, optional_index(f"{name}.stop", mask.stop)


def mask_to(mask: list[tuple[int, int | None]] | None) -> slice | list[slice]:
    """The C++ sampler's mask as annbatch spells it: all of ``[0, n_obs)`` is ``slice(0, None)``,
    one range a slice, several a list of slices."""
    if mask is None:
        return slice(0, None)
    if len(mask) == 1:
        return slice(mask[0][0], mask[0][1])
    return [slice(start, stop) for start, stop in mask]


def seed_from(rng: object) -> tuple[np.random.Generator, int]:
    """The generator a sampler keeps and the uint64 seed the C++ sampler takes, drawn from it."""
    if rng is None:
        rng = np.random.default_rng()
    elif isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        warnings.warn(
            f"Passing a seed as rng is deprecated (as in annbatch); pass np.random.default_rng({rng!r}) instead.",
            FutureWarning,
            stacklevel=4,
        )
        rng = np.random.default_rng(rng)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator or None, got {type(rng).__name__}")
    return rng, int(rng.integers(0, _UINT64.max, dtype=np.uint64, endpoint=True))


def worker_from(worker: object) -> tuple[int, int]:
    """A ``(id, num_workers)`` pair; None is the whole rank, ``(0, 1)``."""
    if worker is None:
        return 0, 1
    if not isinstance(worker, tuple) or len(worker) != 2:
        raise TypeError(f"worker must be a tuple (id, num_workers) or None, got {worker!r}")
    return index("worker id", worker[0]), index("num_workers", worker[1])


def floats(name: str, values: object) -> list[float]:
    """A 1-D sequence of real numbers (a list, tuple or numpy array) as a list of floats."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    array = np.asarray(values)
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.number) or array.size == 0):
        raise TypeError(f"{name} must be a 1-D sequence of numbers, got {array.ndim}-D {array.dtype}")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got {array.dtype}")
    return [float(x) for x in array.astype(np.float64)]


def indices(name: str, values: object) -> list[int]:
    """A 1-D sequence of integers as a list of ints."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}")
    return [index(f"{name}[{i}]", v) for i, v in enumerate(values)]  # type: ignore[arg-type]


_CODE_TYPES = (np.int8, np.int16, np.int32, np.int64)


def code_array(values: object, must: str, too_large: Callable[[Any], Exception]) -> np.ndarray:
    """``values`` as a contiguous 1-D array of a type C++ reads in place (int8, int16, int32 or
    int64), copied only where it is not one already; ``TypeError(must + ", got ...")`` for anything
    else, ``too_large(code)`` for an unsigned code above int64's range."""
    array = np.asarray(values)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        raise TypeError(f"{must}, got {array.ndim}-D {array.dtype}")
    if array.dtype.type not in _CODE_TYPES:
        # int(): numpy compares a uint64 with a Python int in float64, which calls 2^63 equal to
        # 2^63 - 1, and the copy below would then wrap it to a negative code.
        if array.size and int(array.max()) > _INT64.max:
            raise too_large(array.max())
        array = array.astype(np.int64)
    return np.ascontiguousarray(array)


def class_codes(classes: object) -> np.ndarray:
    """One class code per observation, from a ``pandas.Categorical`` (its ``codes``, as annbatch
    takes them) or a 1-D integer array; as a contiguous array of a type the C++ sampler reads
    without a copy (int8, int16, int32 or int64), copied only when it is not one already."""
    codes = getattr(classes, "codes", classes) if hasattr(classes, "categories") else classes
    if isinstance(codes, (str, bytes)) or not hasattr(codes, "__len__"):
        raise TypeError(f"classes must be a pandas.Categorical or a 1-D integer array, got {type(classes).__name__}")
    return code_array(
        codes,
        "classes must be a pandas.Categorical or a 1-D integer array of class codes",
        lambda code: ConfigError(f"classes: code {code} must be < 2^31"),
    )
