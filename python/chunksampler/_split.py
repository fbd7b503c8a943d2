"""Train / validation / test splits chosen by categorical columns (an AnnData ``obs`` column such
as ``split``, or ``split`` and ``cell_line``), as masks the samplers read, without rewriting the
data: the C++ library's ``split_mask`` and ``check_disjoint`` (<chunksampler/split.hpp>).

The columns' codes are read where they lie (a ``pandas.Categorical``'s codes are int8, int16 or
int32: viewed, not copied) and scanned with the GIL released; every rule and number is C++'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _chunksampler
from ._convert import code_array, index, mask_from, real
from ._types import SplitReport

__all__ = ["SplitReport", "check_disjoint", "split_mask"]



def split_mask(
    obs: Any,
    groupby: str | Sequence[str],
    select: Sequence[Any],
    *,
    chunk_size: int,
    max_short_share: float | None = None,
) -> tuple[list[slice], SplitReport]:
    """The rows whose key (one value per ``groupby`` column) is one of ``select``, as a mask for a
    sampler's ``mask=``, with a report of how fragmented they lie on disk.

    ``obs`` is a ``pandas.DataFrame`` (an AnnData's ``obs``) or a mapping of column name to column.
    A categorical column (a categorical ``Series`` or a ``pandas.Categorical``) is selected by its
    categories' labels, compared as strings; any other column must hold integer codes (a numpy
    array; int8, int16, int32 and int64 are read without a copy) and is selected by code. A row
    whose code no key names (pandas' NA, -1, included) is never selected.

    ``select`` is a list of keys, each a tuple of one value per ``groupby`` column
    (``[("train", "K562"), ("train", "HepG2")]``); with one column, a key may be the bare value
    (``select=["train"]``, and ``groupby="split"``).

    Returns ``(mask, report)``: ``mask`` the maximal runs of selected rows, a list of slices in
    row order (one slice per ``report.runs``), and ``report`` a ``SplitReport``. One scan of the
    codes without the GIL, in O(runs + categories + keys) memory beside the mask.

    Raises ``ConfigError`` (C++'s message, naming the parameter, the value and the rule) for
    ``chunk_size`` outside ``[1, 2^62]``, ``max_short_share`` outside ``[0, 1]``, columns of
    different lengths, no keys, a key with another number of values than columns, a label not
    among the column's categories (listing them), a negative code, a selection that matches no
    row; ``FragmentedSplitError`` (a ``ConfigError`` carrying ``.report``) when
    ``report.short_share > max_short_share``: reorder the data on disk by the ``groupby``
    columns.

    >>> import pandas as pd
    >>> obs = pd.DataFrame({"split": pd.Categorical(["train"] * 6 + ["test"] * 2 + ["train"] * 4)})
    >>> split_mask(obs, "split", ["train"], chunk_size=4)
    ([slice(0, 6, None), slice(8, 12, None)], SplitReport(runs=2, rows=10, short_runs=0, short_rows=0, short_share=0.0))
    """
    names = _groupby(groupby)
    columns = [_column(obs, name) for name in names]
    keys, one_column = _keys(select, [bool(categories) for _, _, categories in columns])
    share = None if max_short_share is None else real("max_short_share", max_short_share)
    ranges, numbers = _chunksampler.split_mask(columns, keys, one_column, index("chunk_size", chunk_size), share)
    return [slice(start, stop) for start, stop in ranges], SplitReport(*numbers)


def check_disjoint(masks: Mapping[str, slice | Sequence[slice] | None]) -> None:
    """Raises ``ConfigError`` when two of the named masks share a row, naming both (by position
    and name), the first shared row and the two ranges that hold it; passes otherwise.

    ``masks`` maps a split's name to its mask, in any form a sampler takes (as ``split_mask``
    returns it, a slice, a list of slices; None is every row). An open-ended range reaches every
    row from its start.

    >>> check_disjoint({"train": [slice(0, 6), slice(8, 12)], "test": [slice(6, 8)]})
    """
    if not isinstance(masks, Mapping):
        raise TypeError(f"masks must be a mapping of split name to mask, got {type(masks).__name__}")
    pairs = []
    for name, mask in masks.items():
        if not isinstance(name, str):
            raise TypeError(f"masks: a split's name must be a str, got {type(name).__name__}")
        ranges = mask_from(mask)
        pairs.append((name, [(0, None)] if ranges is None else ranges))
    _chunksampler.check_disjoint(pairs)


def _groupby(groupby: object) -> list[str]:
    if isinstance(groupby, str):
        return [groupby]
    if not isinstance(groupby, (list, tuple)) or not all(isinstance(name, str) for name in groupby):
        raise TypeError(f"groupby must be a column name or a list of column names, got {groupby!r}")
    return list(groupby)


def _column(obs: Any, name: str) -> tuple[str, np.ndarray, list[str]]:
    """Column ``name`` of ``obs`` as the binding takes it: (name, codes, categories' labels)."""
    if not hasattr(obs, "__getitem__") or isinstance(obs, (str, bytes)):
        raise TypeError(f"obs must be a pandas DataFrame or a mapping of column name to codes, got {type(obs).__name__}")
    try:
        column = obs[name]
    except KeyError:
        raise KeyError(f"groupby: obs has no column {name!r}") from None
    # A categorical Series reaches its Categorical through .array; a Categorical is one.
    categorical = column.array if hasattr(column, "cat") else column
    if hasattr(categorical, "codes") and hasattr(categorical, "categories"):
        return name, _codes(name, categorical.codes), [str(label) for label in categorical.categories]
    return name, _codes(name, column), []


def _codes(name: str, values: object) -> np.ndarray:
    """A column's codes as a contiguous array of a type C++ reads in place, copied only when they
    are not one already (another integer type, or strided)."""
    return code_array(
        values,
        f"obs[{name!r}] must be categorical or a 1-D array of integer codes",
        lambda code: TypeError(f"obs[{name!r}]: code {code} does not fit an int64"),
    )


def _keys(select: object, named: list[bool]) -> tuple[list[list[int | str]], bool]:
    """``select`` as keys of values the binding takes, and whether it is the one-column form (bare
    values, one column): a categorical column's values as labels (str), another's as codes."""
    if isinstance(select, (str, bytes)) or not isinstance(select, Sequence):
        raise TypeError(
            f"select must be a list of keys (tuples of one value per groupby column), got {type(select).__name__}"
        )
    bare = all(not isinstance(key, (tuple, list)) for key in select)
    keys = []
    for k, key in enumerate(select):
        values = list(key) if isinstance(key, (tuple, list)) else [key]
        where = f"select[{k}]" if bare else f"select[{k}]" + "[{}]"
        keys.append([_value(where.format(c), value, c < len(named) and named[c]) for c, value in enumerate(values)])
    return keys, bare and len(named) == 1


def _value(where: str, value: object, named: bool) -> int | str:
    """A selected value: a label (a categorical column's, as str) or a code (an int)."""
    if named or isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where} must be a code (an int) or a category's label, got bool")
    return index(where, value)
