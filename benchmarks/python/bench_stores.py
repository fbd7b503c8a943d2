"""What the Python benchmarks of stores share (bench_loader.py, bench_grain.py): stores kept between
runs, and reading them into the page cache before timing."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path


def kept(directory: Path, stamp: str, expected: dict, names: Iterable[str]) -> tuple[dict[str, Path], bool]:
    """The stores ``directory/<name>.zarr`` and whether an earlier run left them there holding what
    ``expected`` says (as the file ``stamp`` beside them records). Where it did not, the directory is
    made, the stale stores and stamp removed: write the stores, then ``stamp`` with ``expected``."""
    paths = {name: directory / f"{name}.zarr" for name in names}
    record = directory / stamp
    if record.exists() and json.loads(record.read_text()) == expected and all(p.exists() for p in paths.values()):
        return paths, True
    directory.mkdir(parents=True, exist_ok=True)
    record.unlink(missing_ok=True)
    for path in paths.values():
        shutil.rmtree(path, ignore_errors=True)
    return paths, False


def warm_page_cache(roots: Iterable[Path]) -> int:
    """Reads every file under ``roots`` once, so that every timed run reads from memory; returns the
    bytes read."""
    total = 0
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                with open(os.path.join(directory, name), "rb") as f:
                    while block := f.read(1 << 24):
                        total += len(block)
    return total
