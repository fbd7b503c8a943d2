"""The Python benchmark script runs (its --smoke mode: one small epoch), so a change that breaks it
is caught here and not at the next measurement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "python" / "bench_python.py"


def test_bench_python_smoke_agrees_and_exits_0():
    # --smoke exits 1 when sample(), sample_arrays() and the expected count of indices disagree.
    result = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ns/index" in result.stdout


GRAIN_SCRIPT = SCRIPT.parent / "bench_grain.py"


def test_bench_grain_smoke_checks_and_exits_0():
    # --smoke: 2,560 rows, Grain's MapDataset and DataLoader and our ChunkDataset in-process on both
    # stores (about 20 s); it raises, so exits 1, when a batch is misshapen, a row is read twice, a
    # batch does not hold the store's values or an epoch of ours misses a row.
    pytest.importorskip("grain")
    pytest.importorskip("zarr")
    result = subprocess.run([sys.executable, str(GRAIN_SCRIPT), "--smoke"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ChunkDataset rows/s" in result.stdout


CLASS_SCRIPT = SCRIPT.parent / "bench_class.py"


def test_bench_class_smoke_agrees_and_exits_0():
    # --smoke: 10^5 rows, every layout, annbatch's ClassSampler and WeightedClassSampler beside ours
    # (about 15 s); it exits 1 when an epoch of either holds other than N positions.
    pytest.importorskip("annbatch")
    pytest.importorskip("pandas")
    result = subprocess.run([sys.executable, str(CLASS_SCRIPT), "--smoke"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("| ClassSampler |") == 4 and result.stdout.count("| WeightedClassSampler |") == 4
