"""The Python benchmark script runs (its --smoke mode: one small epoch), so a change that breaks it
is caught here and not at the next measurement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "python" / "bench_python.py"


def test_bench_python_smoke_agrees_and_exits_0():
    # --smoke exits 1 when sample(), sample_arrays() and the expected count of indices disagree.
    result = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ns/index" in result.stdout
