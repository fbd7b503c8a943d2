"""The README's Python examples run as printed, against the installed package."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs():
    readme = README.read_text()
    match = re.search(r"<!-- python-example -->\n```python\n(.*?)```", readme, re.S)
    assert match, "README.md has no <!-- python-example --> block"
    assert len(match.group(1).strip().splitlines()) <= 15
    exec(compile(match.group(1), "README.md", "exec"), {})


def named_example(name: str) -> tuple[str, str]:
    """The code of the README's ``<!-- python-example: NAME -->`` block and the output its
    ``<!-- python-output: NAME -->`` block shows."""
    readme = README.read_text()
    code = re.search(rf"<!-- python-example: {name} -->\n```python\n(.*?)```", readme, re.S)
    output = re.search(rf"<!-- python-output: {name} -->\n```text\n(.*?)```", readme, re.S)
    assert code and output, f"README.md has no python-example and python-output blocks named {name!r}"
    return code.group(1), output.group(1)


def test_readme_splits_example_prints_what_the_readme_shows(tmp_path, monkeypatch):
    pytest.importorskip("anndata")
    code, shown = named_example("splits")
    monkeypatch.chdir(tmp_path)  # it writes cells.h5ad
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue() == shown


def test_readme_weighted_example_prints_what_the_readme_shows():
    code, shown = named_example("weighted")
    assert len(code.strip().splitlines()) <= 15
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue() == shown


def test_readme_stateful_dataloader_example_prints_what_the_readme_shows(tmp_path, monkeypatch):
    pytest.importorskip("torchdata.stateful_dataloader")
    code, shown = named_example("stateful")
    monkeypatch.chdir(tmp_path)  # it writes checkpoint.pt
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue() == shown
