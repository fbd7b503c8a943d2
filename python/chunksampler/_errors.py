"""The exceptions chunksampler raises: the C++ library's types, with its messages unchanged.

Each message names the parameter (or state field), its value and the rule it broke.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._types import SplitReport

__all__ = [
    "ConfigError",
    "DistEnvironmentError",
    "FragmentedSplitError",
    "IntegrationError",
    "NotADataLoaderError",
    "ReadError",
    "ShortRunsError",
    "StateError",
    "StateFileError",
    "StateFormatError",
    "StateMismatchError",
    "StateWriteError",
]


class ConfigError(ValueError):
    """A bad configuration or argument (C++ ``chunksampler::ConfigError``): an option, ``n_obs``,
    a mask, a worker, a rank."""


class FragmentedSplitError(ConfigError):
    """``split_mask`` refused a selection that lies scattered on disk: more of its rows than
    ``max_short_share`` allows lie in runs shorter than ``chunk_size``, each read as short chunks
    (C++ ``chunksampler::FragmentedSplitError``). ``report`` holds the numbers (a ``SplitReport``),
    ``columns`` the names of the columns to sort the rows by on disk, which is the remedy."""

    def __init__(self, message: str, report: SplitReport, columns: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.report = report
        self.columns = list(columns)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.report, self.columns)


class ShortRunsError(ConfigError):
    """A class sampler refused classes whose runs are shorter than ``chunk_size`` (a chunk lies inside
    one run of its class; C++ ``chunksampler::ShortRunsError``). ``codes`` holds the code of every
    such class, ascending (the message lists the first 20); a sampler made from a
    ``pandas.Categorical`` adds their labels to the message."""

    def __init__(self, message: str, codes: list[int] | tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.codes = list(codes)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.codes)


class NotADataLoaderError(ConfigError, AttributeError):
    """Raised for an attribute of a torch ``DataLoader`` that a chunksampler loader does not have,
    where a framework would read it to rebuild the loader without the chunk sampler (Accelerate's
    ``skip_first_batches``, Ray Train's ``prepare_data_loader``): a ``ConfigError`` whose message
    says what to call instead, and an ``AttributeError``, so that ``hasattr`` and
    ``getattr(loader, name, default)`` answer as for any missing attribute."""


class ReadError(OSError):
    """A source failed while a loader read a load request's rows (a store's I/O or decoding error):
    the message names the field and the rows, ``__cause__`` is the source's own exception. The
    loader's state stays before that request's batches, so iterating again retries it."""


class StateError(ValueError):
    """Something is wrong with a sampler state (C++ ``chunksampler::StateError``); one of the two below."""


class StateMismatchError(StateError):
    """A well-formed state that does not fit this sampler: another configuration, seed, dataset
    size, world size or worker (C++ ``chunksampler::StateMismatchError``)."""


class StateFormatError(StateError):
    """State text that cannot be read as a state (C++ ``chunksampler::StateFormatError``)."""


class StateFileError(StateError):
    """A checkpoint file ``load_state`` cannot read: missing, or unreadable (C++
    ``chunksampler::StateFileError``). ``errno`` is the operating system's error number
    (``errno.ENOENT`` for a missing file). A ``StateError``, so a job that starts afresh on a corrupt
    checkpoint does so on a missing one too."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.errno)


class StateWriteError(OSError):
    """``save_state`` or ``write_atomically`` could not write, sync or rename the file: a full disk,
    no permission (C++ ``chunksampler::StateWriteError``). An ``OSError`` whose ``errno`` is the
    operating system's. The previous file is still in place, unless only the directory's sync after
    the rename failed (the new one is then in place, not yet durable). Not a ``StateError``: nothing
    is wrong with the state."""


class DistEnvironmentError(RuntimeError):
    """The launcher's environment, not an argument, is at fault, e.g. ``dist_info="env"`` with no
    launcher variables set (C++ ``chunksampler::EnvironmentError``; renamed so that it does not
    shadow Python's builtin ``EnvironmentError``)."""


class IntegrationError(RuntimeError):
    """An integration found missing what it reads of another library's internals: a private
    attribute, method or frame layout that the installed release has renamed, moved or changed
    (torch's DataLoader iterator count, Accelerate's and Ray Train's loader preparation, Lightning's
    batch progress, the Trainer's ``_save_checkpoint``; the docs' training stacks page lists them).
    Raised at the hook's first use, in place of a silent fallback that would resume at the wrong
    batch or let a framework rebuild a loader. The message names the library, its installed version,
    the hook and the versions chunksampler was checked on; ``library``, ``version`` and ``hook`` hold
    them. A ``RuntimeError``: the installed versions, not an argument, are at fault."""

    def __init__(self, message: str, library: str | None = None, version: str | None = None,
                 hook: str | None = None) -> None:
        super().__init__(message)
        self.library = library
        self.version = version
        self.hook = hook

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.library, self.version, self.hook)
