"""Points annbatch 0.3.1's own sampler tests at chunksampler: rewrites, in place, the copies of
``tests/test_sampler.py`` and ``tests/test_class_sampler.py`` in an unpacked annbatch sdist.

Only the imports of annbatch's samplers and the targets its tests patch change; every test body,
and every import of annbatch itself (``annbatch.abc.Sampler``, ``annbatch.Loader``,
``annbatch.types``, the fixtures of ``tests/conftest.py``), stays as annbatch wrote it. Each
replacement must match exactly as often as stated, keeps the file's line count (so a traceback's
line numbers are the sdist's), and no import or patch of ``annbatch.samplers`` may remain: a
new annbatch release fails here, loudly, rather than testing annbatch against itself.

    python rewrite.py SDIST_DIR
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ANNBATCH = "annbatch.samplers"

# Where chunksampler keeps the DataLoader-worker lookup that annbatch's tests patch to fake workers.
WORKERS = '"chunksampler._workers.get_torch_worker_info"'

# (text in annbatch's file, its replacement, how many times it occurs)
REWRITES: dict[str, list[tuple[str, str, int]]] = {
    "tests/test_sampler.py": [
        (
            "from annbatch.samplers import (\n"
            "    ClassSampler,\n"
            "    DistributedSampler,\n"
            "    RandomSampler,\n"
            "    SequentialSampler,\n"
            "    WeightedClassSampler,\n"
            ")\n"
            "from annbatch.samplers._utils import WorkerInfo\n",
            "from chunksampler import (\n"
            "    ClassSampler,\n"
            "    DistributedSampler,\n"
            "    RandomSampler,\n"
            "    SequentialSampler,\n"
            "    WeightedClassSampler,\n"
            ")\n"
            "from chunksampler import WorkerInfo\n",
            1,
        ),
        ('"annbatch.samplers._chunk_sampler.get_torch_worker_info"', WORKERS, 4),
    ],
    "tests/test_class_sampler.py": [
        (
            "from annbatch.samplers import ClassSampler, WeightedClassSampler\n"
            "from annbatch.samplers._distributed_sampler import DistributedSampler\n"
            "from annbatch.samplers._utils import WorkerInfo\n",
            "from chunksampler import ClassSampler, WeightedClassSampler\n"
            "from chunksampler import DistributedSampler\n"
            "from chunksampler import WorkerInfo\n",
            1,
        ),
        ('"annbatch.samplers._class_samplers._class_sampler.get_torch_worker_info"', WORKERS, 1),
    ],
}


def leftovers(source: str) -> list[str]:
    """Imports of annbatch's samplers, and strings naming them (patch targets), still in ``source``;
    docstrings that mention them in prose are not code and may stay."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ANNBATCH):
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.startswith(ANNBATCH)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(ANNBATCH):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def rewrite(sdist: Path) -> None:
    problems = []
    for name, rewrites in REWRITES.items():
        path = sdist / name
        source = path.read_text()
        for old, new, count in rewrites:
            if old.count("\n") != new.count("\n"):
                raise AssertionError(f"{name}: a replacement must keep the line count: {old!r}")
            found = source.count(old)
            if found != count:
                problems.append(f"{name}: expected {count} of {old!r}, found {found}")
            source = source.replace(old, new)
        problems += [f"{name}: {what}" for what in leftovers(source)]
        path.write_text(source)
    if problems:
        sys.exit("rewrite.py: annbatch's tests are not the ones it was written for:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rewrite(Path(sys.argv[1]))
