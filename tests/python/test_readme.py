"""The README's Python example runs as printed, against the installed package."""

from __future__ import annotations

import re
from pathlib import Path


def test_readme_python_example_runs():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    match = re.search(r"<!-- python-example -->\n```python\n(.*?)```", readme, re.S)
    assert match, "README.md has no <!-- python-example --> block"
    assert len(match.group(1).strip().splitlines()) <= 15
    exec(compile(match.group(1), "README.md", "exec"), {})
