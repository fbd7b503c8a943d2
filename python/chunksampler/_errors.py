"""The exceptions chunksampler raises: the C++ library's types, with its messages unchanged.

Each message names the parameter (or state field), its value and the rule it broke.
"""

from __future__ import annotations

__all__ = ["ConfigError", "DistEnvironmentError", "StateError", "StateFormatError", "StateMismatchError"]


class ConfigError(ValueError):
    """A bad configuration or argument (C++ ``chunksampler::ConfigError``): an option, ``n_obs``,
    a mask, a worker, a rank."""


class StateError(ValueError):
    """Something is wrong with a sampler state (C++ ``chunksampler::StateError``); one of the two below."""


class StateMismatchError(StateError):
    """A well-formed state that does not fit this sampler: another configuration, seed, dataset
    size, world size or worker (C++ ``chunksampler::StateMismatchError``)."""


class StateFormatError(StateError):
    """State text that cannot be read as a state (C++ ``chunksampler::StateFormatError``)."""


class DistEnvironmentError(RuntimeError):
    """The launcher's environment, not an argument, is at fault, e.g. ``dist_info="env"`` with no
    launcher variables set (C++ ``chunksampler::EnvironmentError``; renamed so that it does not
    shadow Python's builtin ``EnvironmentError``)."""
