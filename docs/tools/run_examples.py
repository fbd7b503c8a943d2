"""A Sphinx extension that runs the pages' Python examples beside the build.

Every ``<!-- python-example: NAME -->`` block of a page that has a ``<!-- python-output: NAME -->``
block on the same page runs in a fresh interpreter (the build's, with chunksampler installed) in an
empty temporary directory; what it prints must be the shown output, or the build warns at the
block's line, which ``sphinx-build -W`` makes an error. So a tutorial whose code fails, or whose
output drifted, fails the docs build (tests/python/test_readme.py checks the same blocks, and the
README's, in the test environments); page_blocks.py reads the blocks for both. Every other Python
block must be marked as an excerpt of a file and be one (``page_blocks.excerpt_problems``).
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from page_blocks import block, blocks, excerpt_problems, python_blocks
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
TIMEOUT = 300  # seconds per example
# The examples each build is running: (the pool, [(example, its future), ...]).
_running: dict[Sphinx, tuple[concurrent.futures.ThreadPoolExecutor, list]] = {}


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_excerpts(page: Path, source: Path, text: str) -> None:
    name = str(page.relative_to(source).with_suffix(""))
    try:
        for path, code, offset in python_blocks(text):
            if path is not None:
                for problem in excerpt_problems(code, source.parent / path):
                    logger.warning("python-excerpt of %s: %s", path, problem, location=(name, _line(text, offset)))
    except ValueError as error:
        logger.warning("%s", error, location=(name, 1))


def _run(name: str, code: str) -> subprocess.CompletedProcess | None:
    """Runs one example in a fresh interpreter in an empty temporary directory; None past TIMEOUT."""
    with tempfile.TemporaryDirectory(prefix=f"docs-example-{name}-") as work:
        try:
            return subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return None


def run_examples(app: Sphinx) -> None:
    source = Path(app.srcdir)
    examples = []  # (name, code, what its page shows, location)
    for page in sorted(source.rglob("*.md")):
        if "generated" in page.parts or "_build" in page.parts:
            continue
        text = page.read_text()
        check_excerpts(page, source, text)
        for name, code, offset in blocks(text, "python-example", "python"):
            location = (str(page.relative_to(source).with_suffix("")), _line(text, offset))
            shown = block(text, "python-output", "text", name)
            if shown is None:
                logger.warning("python-example %r has no python-output block on its page", name, location=location)
                continue
            examples.append((name, code, shown, location))
    if os.environ.get("CHUNKSAMPLER_DOCS_EXAMPLES_TESTED") == "1":
        # scripts/test.sh sets it: its Python stage has just run these blocks against the same wheel
        # (tests/python/test_readme.py, every training stack installed), so they run once per test run.
        logger.info("run_examples: %d Python examples left to tests/python/test_readme.py, which ran them",
                    len(examples))
        examples = []
    # One example per core at a time, while Sphinx reads and writes the pages; report_examples
    # waits for them when the build has finished (its warnings still fail the build).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    _running[app] = (pool, [(example, pool.submit(_run, example[0], example[1])) for example in examples])


def report_examples(app: Sphinx, exception: Exception | None) -> None:
    pool, running = _running.pop(app)
    for (name, _, shown, location), future in running:
        done = future.result()
        if done is None:
            logger.warning("python-example %r ran past %d s", name, TIMEOUT, location=location)
        elif done.returncode != 0:
            logger.warning("python-example %r failed (exit %d):\n%s", name, done.returncode, done.stderr[-2000:],
                           location=location)
        elif done.stdout != shown:
            logger.warning("python-example %r printed\n%s\nwhere its page shows\n%s", name, done.stdout, shown,
                           location=location)
    pool.shutdown()
    logger.info("run_examples: %d Python examples ran", len(running))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", run_examples)
    app.connect("build-finished", report_examples)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
