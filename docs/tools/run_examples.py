"""A Sphinx extension that runs the pages' Python examples during the build.

Every ``<!-- python-example: NAME -->`` block of a page that has a ``<!-- python-output: NAME -->``
block on the same page runs in a fresh interpreter (the build's, with chunksampler installed) in an
empty temporary directory; what it prints must be the shown output, or the build warns at the
block's line, which ``sphinx-build -W`` makes an error. So a tutorial whose code fails, or whose
output drifted, fails the docs build (tests/python/test_readme.py checks the same blocks, and the
README's, in the test environments); page_blocks.py reads the blocks for both.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from page_blocks import block, blocks
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
TIMEOUT = 300  # seconds per example


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def run_examples(app: Sphinx) -> None:
    source = Path(app.srcdir)
    ran = 0
    for page in sorted(source.rglob("*.md")):
        if "generated" in page.parts or "_build" in page.parts:
            continue
        text = page.read_text()
        for name, code, offset in blocks(text, "python-example", "python"):
            location = (str(page.relative_to(source).with_suffix("")), _line(text, offset))
            shown = block(text, "python-output", "text", name)
            if shown is None:
                logger.warning("python-example %r has no python-output block on its page", name, location=location)
                continue
            with tempfile.TemporaryDirectory(prefix=f"docs-example-{name}-") as work:
                try:
                    done = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                                          timeout=TIMEOUT)
                except subprocess.TimeoutExpired:
                    logger.warning("python-example %r ran past %d s", name, TIMEOUT, location=location)
                    continue
            ran += 1
            if done.returncode != 0:
                logger.warning("python-example %r failed (exit %d):\n%s", name, done.returncode, done.stderr[-2000:],
                               location=location)
            elif done.stdout != shown:
                logger.warning("python-example %r printed\n%s\nwhere its page shows\n%s", name, done.stdout, shown,
                               location=location)
    logger.info("run_examples: %d Python examples ran", ran)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", run_examples)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
