"""The Python benchmark script runs (its --smoke mode: one small epoch), so a change that breaks it
is caught here and not at the next measurement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "benchmarks" / "python"


def smoke(script: str, timeout: int, *flags: str) -> str:
    """Runs ``script --smoke`` and returns its output, failing the test on a non-zero exit."""
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--smoke", *flags], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_bench_python_smoke_agrees_and_exits_0():
    # --smoke exits 1 when sample(), sample_arrays() and the expected count of indices disagree.
    assert "ns/index" in smoke("bench_python.py", 120)


def test_bench_python_beside_annbatch_smoke_agrees_and_exits_0():
    # --annbatch exits 1 when the two packages' samplers yield different numbers of indices.
    pytest.importorskip("annbatch")
    assert "speed-up" in smoke("bench_python.py", 120, "--annbatch")


def test_bench_grain_smoke_checks_and_exits_0():
    # --smoke: 2,560 rows, Grain's MapDataset and DataLoader and our ChunkDataset in-process on both
    # stores (about 20 s); it raises, so exits 1, when a batch is misshapen, a row is read twice, a
    # batch does not hold the store's values or an epoch of ours misses a row.
    pytest.importorskip("grain")
    pytest.importorskip("zarr")
    assert "ChunkDataset rows/s" in smoke("bench_grain.py", 300)


def test_bench_class_smoke_agrees_and_exits_0():
    # --smoke: 10^5 rows, every layout, annbatch's ClassSampler and WeightedClassSampler beside ours
    # (about 15 s); it exits 1 when an epoch of either holds other than N positions.
    pytest.importorskip("annbatch")
    pytest.importorskip("pandas")
    out = smoke("bench_class.py", 300)
    assert out.count("| ClassSampler |") == 4 and out.count("| WeightedClassSampler |") == 4


def test_bench_readers_smoke_counts_and_exits_0():
    # --smoke: 4,096 rows on the four stores, our torch and Grain loaders, annbatch's Loader and the
    # floor in process, once (about 40 s); it exits 1 when a loader hands out other than the epoch's
    # rows or ours read a dense store's chunk other than once.
    for module in ("annbatch", "grain", "zarr", "anndata", "torch"):
        pytest.importorskip(module)
    out = smoke("bench_readers.py", 600)
    assert out.count("| torch | 0 |") == 4 and out.count("| annbatch | 0 |") == 3
