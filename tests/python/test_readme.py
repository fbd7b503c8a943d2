"""The Python examples of the README and the documentation pages run as printed, against the
installed package: every ``<!-- python-example: NAME -->`` block that has a ``<!-- python-output:
NAME -->`` block prints exactly that output."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from conftest import PAGES, SOURCE, shown_block
from page_blocks import blocks, excerpt_problems, python_blocks

import chunksampler

# Packages an example may need that the Debian stage of the suite lacks; there the example skips.
OPTIONAL = {"anndata", "torch", "torchdata", "lightning", "scvi", "jax", "annbatch", "h5py", "pandas", "zarr", "scipy"}


def named_examples() -> list[str]:
    return [name for page in PAGES for name, _, _ in blocks(page.read_text(), "python-example", "python")]


def test_readme_python_example_runs():
    readme = (SOURCE / "README.md").read_text()
    match = re.search(r"<!-- python-example -->\n```python\n(.*?)```", readme, re.S)
    assert match, "README.md has no <!-- python-example --> block"
    assert len(match.group(1).strip().splitlines()) <= 15
    exec(compile(match.group(1), "README.md", "exec"), {})


def test_the_pages_have_their_examples():
    # The worked examples of the splits, weighted batches and the StatefulDataLoader at least: a
    # page that lost its markers would otherwise pass by checking nothing.
    assert {"splits", "weighted", "stateful"} <= set(named_examples())


@pytest.mark.parametrize("name", named_examples())
def test_example_prints_what_its_page_shows(name, tmp_path, monkeypatch):
    page, code = shown_block("python-example", name, "python")
    output_page, shown = shown_block("python-output", name, "text")
    assert output_page == page, f"{name}'s output is shown on {output_page.name}, its code on {page.name}"
    monkeypatch.chdir(tmp_path)  # an example may write files (cells.h5ad, checkpoint.pt)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(page.relative_to(SOURCE)), "exec"), {})
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs {error.name}")
        raise
    assert printed.getvalue() == shown


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(SOURCE)))
def test_every_python_block_runs_as_pasted_or_is_cut_from_its_source(page):
    # The runnable ones run above; an excerpt's lines must be its file's, so neither can rot.
    text = page.read_text()
    for path, code, offset in python_blocks(text):
        if path is not None:
            problems = excerpt_problems(code, SOURCE / path)
            assert not problems, f"{page.name}:{text.count(chr(10), 0, offset) + 1}: {problems}"


def test_find_package_names_this_version():
    major_minor = ".".join(chunksampler.__version__.split(".")[:2])
    users = [*PAGES, SOURCE / "tests" / "cmake_consumer" / "CMakeLists.txt"]
    named = {(path.name, version) for path in users
             for version in re.findall(r"find_package\(chunksampler (\d+(?:\.\d+)*)", path.read_text())}
    assert named and all(version == major_minor for _, version in named), named
