"""What the Python benchmarks share: reading their stores into the page cache before timing."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


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
