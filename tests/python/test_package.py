"""The installed package: what it ships and where it is imported from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import chunksampler
from chunksampler import _chunksampler


def test_imported_from_the_installed_package_not_the_source_tree():
    source_tree = Path(__file__).resolve().parents[2] / "python"
    assert not Path(chunksampler.__file__).resolve().is_relative_to(source_tree)
    assert Path(_chunksampler.__file__).parent == Path(chunksampler.__file__).parent


def test_ships_typing_marker_and_stub():
    package = Path(chunksampler.__file__).parent
    assert (package / "py.typed").is_file()
    stub = (package / "_chunksampler.pyi").read_text()
    assert "class RandomSampler" in stub and "class DistributedMixtureSampler" in stub
    assert "def split_mask" in stub and "def check_disjoint" in stub
    assert "class WeightedClassSampler" in stub and "class Composition" in stub
    assert "def __getstate__" in stub and "def __copy__" in stub


def test_every_public_name_has_a_docstring():
    for name in chunksampler.__all__:
        if name != "__version__":
            assert getattr(chunksampler, name).__doc__, name


def test_version_is_the_cpp_headers():
    assert chunksampler.__version__.count(".") == 2
    assert chunksampler.__version__ != "unknown"


def test_extension_needs_no_shared_libfmt():
    # In a fresh interpreter: torch, which other tests import, loads a libfmt of its own.
    if not Path("/proc/self/maps").exists():
        return  # not Linux: nothing to read the loaded libraries from
    code = "import chunksampler._chunksampler; print('libfmt' in open('/proc/self/maps').read())"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_the_reader_imports_no_framework_nor_store():
    # In a fresh interpreter: the engine imports zarr, h5py, scipy or anndata only with a source of theirs.
    code = (
        "import sys, chunksampler.reader; "
        "print(sorted(m for m in ('torch', 'zarr', 'h5py', 'scipy', 'anndata', 'jax', 'grain') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_dir_is_the_public_api():
    assert dir(chunksampler) == sorted(chunksampler.__all__)
    # Nothing public beyond __all__ but the integrations' modules and the reading engine, once imported.
    integrations = {"torch", "lightning", "scvi", "accelerate", "transformers", "grain", "reader"}
    extra = {name for name in vars(chunksampler) if not name.startswith("_")} - set(chunksampler.__all__)
    assert extra <= integrations, extra
    assert not hasattr(chunksampler, "version") and not hasattr(chunksampler, "annotations")


EXTRAS = {"torch", "torchdata", "lightning", "scvi", "annbatch", "zarrs", "jax", "grain", "accelerate", "transformers",
          "ray", "all", "test"}


def test_the_extras_hold_what_the_stacks_run():
    # scripts/deps.sh makes the stacks' environment by installing the extras `all` and `test`; here
    # every requirement of every extra is installed, at a version inside its bounds.
    from importlib import metadata

    requirements = pytest.importorskip("packaging.requirements")
    assert set(metadata.metadata("chunksampler").get_all("Provides-Extra")) == EXTRAS
    declared = [requirements.Requirement(text) for text in metadata.requires("chunksampler")]
    for extra in sorted(EXTRAS):
        wanted = [r for r in declared if r.marker is not None and r.marker.evaluate({"extra": extra})]
        assert wanted, extra
        for requirement in wanted:
            if requirement.name == "chunksampler":  # one extra naming others: `all` names every one
                assert requirement.extras <= EXTRAS, requirement
                assert extra != "all" or requirement.extras == EXTRAS - {"all", "test"}, requirement
                continue
            try:
                installed = metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                pytest.skip(f"{requirement.name} (extra {extra}) is not installed here")
            assert requirement.specifier.contains(installed, prereleases=True), (extra, str(requirement), installed)
