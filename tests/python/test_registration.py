"""The samplers are registered as annbatch.abc.Sampler whichever is imported first, without
chunksampler importing annbatch. Each case runs in a fresh interpreter with a fake annbatch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = """
import sys
import numpy as np
import annbatch.abc
import chunksampler as cs
base = cs.RandomSampler(chunk_size=10, preload_nchunks=1, batch_size=5, rng=np.random.default_rng(0))
samplers = [
    base,
    cs.SequentialSampler(chunk_size=10, preload_nchunks=1, batch_size=5),
    cs.ClassSampler(10, 1, 5, classes=np.zeros(100, dtype=np.int8), num_samples=50),
    cs.WeightedClassSampler(10, 1, 5, classes=np.zeros(100, dtype=np.int8), num_samples=50, composition="stratified"),
    cs.MixtureSampler(10, 1, 5, sizes=[50, 50]),
    cs.DistributedSampler(base, dist_info=lambda: (0, 1)),
]
assert all(isinstance(s, annbatch.abc.Sampler) for s in samplers), [type(s) for s in samplers]
assert not isinstance(object(), annbatch.abc.Sampler)
print("registered")
"""


@pytest.fixture
def fake_annbatch(tmp_path):
    """A package ``annbatch`` whose ``abc`` module defines an ABC ``Sampler``; returns a runner."""
    package = tmp_path / "annbatch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "abc.py").write_text(textwrap.dedent("""
        import abc

        class Sampler(abc.ABC):
            @abc.abstractmethod
            def sample(self, n_obs): ...
    """))

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    run.package = package
    return run


def test_chunksampler_first(fake_annbatch):
    result = fake_annbatch(
        "import sys\nimport chunksampler\nassert 'annbatch' not in sys.modules, 'chunksampler imported annbatch'\n" + CHECK
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "registered\n"


def test_annbatch_first(fake_annbatch):
    result = fake_annbatch("import annbatch.abc\n" + CHECK)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "registered\n"


def test_annbatch_package_imports_its_abc_itself(fake_annbatch):
    (fake_annbatch.package / "__init__.py").write_text("from . import abc\n")
    result = fake_annbatch("import chunksampler\nimport annbatch\n" + CHECK)
    assert result.returncode == 0, result.stderr


def test_the_fake_is_not_registered_without_chunksampler(fake_annbatch):
    """The check above can fail: without the hook (annbatch.abc imported with it removed first),
    chunksampler's classes are no Sampler."""
    result = fake_annbatch(
        "import sys\nimport chunksampler\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_RegisterOnImport']\n" + CHECK
    )
    assert result.returncode != 0 and "AssertionError" in result.stderr


@pytest.mark.parametrize("first", ["chunksampler", "annbatch.abc"])
def test_an_annbatch_without_a_sampler_abc_still_imports(fake_annbatch, first):
    """annbatch releases before its sampler API had an annbatch.abc without Sampler."""
    (fake_annbatch.package / "abc.py").write_text("X = 1\n")
    second = "annbatch.abc" if first == "chunksampler" else "chunksampler"
    result = fake_annbatch(f"import {first}\nimport {second}\nimport annbatch.abc\nprint(annbatch.abc.X)")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"
