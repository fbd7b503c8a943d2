"""Registers the samplers as virtual subclasses of ``annbatch.abc.Sampler`` where annbatch is used.

annbatch is not imported for it (it pulls in zarr, anndata and more): if ``annbatch.abc`` is
already imported the classes are registered now, otherwise when it is.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["register_with_annbatch"]


def _register(abc_module: ModuleType, classes: tuple[type, ...]) -> None:
    # annbatch releases before its sampler API have an annbatch.abc without Sampler: nothing to
    # register with there, and importing them must not fail because chunksampler is loaded.
    sampler = getattr(abc_module, "Sampler", None)
    if sampler is None:
        return
    for cls in classes:
        sampler.register(cls)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds ``annbatch.abc`` as the path finder does and registers the classes once it has run."""

    def __init__(self, classes: tuple[type, ...]) -> None:
        self._classes = classes

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != "annbatch.abc":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        classes = self._classes

        def exec_module(module: ModuleType) -> None:
            run(module)
            _register(module, classes)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        sys.meta_path.remove(self)
        return spec


def register_with_annbatch(classes: tuple[type, ...]) -> None:
    """Registers ``classes`` with ``annbatch.abc.Sampler`` now or when annbatch is imported."""
    module = sys.modules.get("annbatch.abc")
    if module is not None:
        _register(module, classes)
    else:
        sys.meta_path.insert(0, _RegisterOnImport(classes))
