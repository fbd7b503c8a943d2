"""Helpers shared by the Python tests; they run against the installed package (scripts/test_python.sh)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import chunksampler


def observations(request: chunksampler.LoadRequest) -> list[np.ndarray]:
    """Each batch of `request` as the observation indices it names (chunks concatenated, then indexed)."""
    rows = np.concatenate([np.arange(s.start, s.stop, dtype=np.int64) for s in request["requests"]])
    return [rows[split] for split in request["splits"]]


def epoch_batches(sampler, n_obs: int, **kwargs) -> list[np.ndarray]:
    """Every batch of one epoch, as observation indices."""
    return [batch for request in sampler.sample(n_obs, **kwargs) for batch in observations(request)]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


SOURCE = Path(__file__).resolve().parents[2]
# The pages' marked blocks are read by one module, docs/tools/page_blocks.py, which the docs build
# uses too (imported where used: test_require_stacks runs a copy of this file outside the tree).
sys.path.insert(0, str(SOURCE / "docs" / "tools"))
# The pages whose shown outputs the tests check: the README and the documentation site's sources.
PAGES = [SOURCE / "README.md", *sorted((SOURCE / "docs").rglob("*.md"))]


def shown_block(kind: str, name: str, language: str) -> tuple[Path, str]:
    """The page holding the ``<!-- KIND: NAME -->`` fenced block of LANGUAGE, and the block's text.
    A name belongs to one page."""
    from page_blocks import block_pattern

    pattern = block_pattern(kind, language, name)
    found = [(page, m.group(2)) for page in PAGES for m in pattern.finditer(page.read_text())]
    assert len(found) == 1, f"{len(found)} blocks <!-- {kind}: {name} --> in README.md and docs/, not one"
    return found[0]


def shown_output(name: str) -> str:
    """The text of the ``<!-- python-output: NAME -->`` block of the README or a documentation page:
    what a documented command prints, which the test that runs the command compares with what it
    printed."""
    return shown_block("python-output", name, "text")[1]


# Seconds a multi-process job (torchrun, Lightning's DDP, Ray, JAX's processes) may take before it
# counts as hung and is killed: a guard, not a speed check, and generous, since the stacks stage
# runs two test files at a time (pytest -n 2) and so two such jobs may share the cores.
JOB_TIMEOUT = 600


def free_port() -> int:
    """A TCP port on the loopback address that nothing listens on now, for a job's coordinator."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_child(args: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs this interpreter on ``args`` (one thread for OpenMP) in a process group of its own, in
    ``cwd`` if given, killed whole (the processes it started too) and TimeoutExpired raised if it
    outlives ``timeout``, so that no multi-process job can hang the suite."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             encoding="utf-8", env=env, start_new_session=True, cwd=cwd)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


# The examples' commands on the pages name directories under work/, which .gitignore ignores. A test
# that runs an example as its page shows runs it in an example tree, with the page's relative paths,
# and checks afterwards that `git status` there is clean: that the example wrote nothing outside the
# directories its command line names, or nothing that our ignore rules miss.


def _git(tree: Path, *args: str) -> str:
    """``git ARGS`` in ``tree``, with no user's or system's configuration (no global ignore file)."""
    if shutil.which("git") is None:
        pytest.fail("the tests that run the examples check `git status` after them: install git (Debian: git)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    command = ["git", "-c", "core.excludesFile=" + os.devnull, "-c", "user.name=chunksampler tests",
               "-c", "user.email=tests@chunksampler.invalid", "-c", "commit.gpgSign=false", *args]
    run = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"{' '.join(command)} in {tree} exited with {run.returncode}:\n{run.stderr}"
    return run.stdout


def make_example_tree(path: Path) -> Path:
    """Makes ``path`` (created if missing) a git repository whose one commit is this repository's
    .gitignore, and returns it: the working directory for an example's commands as its page shows
    them. ``assert_tree_clean`` checks it afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE / ".gitignore", path / ".gitignore")
    _git(path, "init", "-q")
    _git(path, "add", ".gitignore")
    _git(path, "commit", "-q", "-m", "the repository's .gitignore")
    return path


def assert_tree_clean(tree: Path, what: str = "the example") -> None:
    """Fails, naming each path, if ``git status`` in the example tree ``tree`` shows anything: a
    file the example wrote outside the directories its command line named (which .gitignore
    ignores), or a change to the .gitignore itself."""
    status = _git(tree, "status", "--porcelain", "--untracked-files=all")
    assert not status, (f"{what} left in its working directory {tree} what .gitignore does not ignore "
                        f"(a user's `git status` would show it):\n{status[:3000]}")


@pytest.fixture
def example_tree(tmp_path: Path) -> Path:
    """A fresh example tree (``make_example_tree``) in this test's temporary directory."""
    return make_example_tree(tmp_path / "tree")


# The stacks stage of scripts/test_python.sh sets CHUNKSAMPLER_REQUIRE_STACKS=1. There every training
# stack is installed, so a skip means that an import broke (a module-level importorskip turns a
# whole file of tests into one skip) and it fails the stage, as CHUNKSAMPLER_REQUIRE_MPI does for
# the C++ MPI tests. The Debian stage leaves it unset: there the integrations' tests skip, their
# packages absent. A stack that raises anything but ModuleNotFoundError (a broken install) is an
# error in both stages: pytest 9.2's importorskip lets it through (earlier ones skip, failed here).
REQUIRE_STACKS = os.environ.get("CHUNKSAMPLER_REQUIRE_STACKS") == "1"
# The skips the stacks stage expects, each with a comment saying why it skips with every stack
# installed: a test's id below tests/python (as `test_x.py::test_y[param]`, or `test_x.py` for a
# skip of the whole module) -> text its skip reason contains. None today: on the stacks every test
# runs.
EXPECTED_SKIPS: dict[str, str] = {}
HERE = Path(__file__).resolve().parent


def _skip_key(node) -> str:
    """The node's id below this directory, the same whatever directory pytest runs from."""
    try:
        file = Path(node.path).resolve().relative_to(HERE).as_posix()
    except ValueError:
        return node.nodeid
    _, sep, rest = node.nodeid.partition("::")
    return file + sep + rest


def _fail_unexpected_skip(report, node) -> None:
    """Turns the skip `report` of `node` into a failure unless EXPECTED_SKIPS allows it."""
    if not (REQUIRE_STACKS and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    key = _skip_key(node)
    if key in EXPECTED_SKIPS and EXPECTED_SKIPS[key] in reason:
        return
    try:
        # The reason first: the short summary's line shows the start of the message.
        pytest.fail(f"unexpected skip: {reason}\nCHUNKSAMPLER_REQUIRE_STACKS=1 (the stacks stage) fails a skip that "
                    f"EXPECTED_SKIPS in tests/python/conftest.py does not allow: {key}", pytrace=False)
    except pytest.fail.Exception:
        excinfo = pytest.ExceptionInfo.from_current()
    report.outcome = "failed"
    report.longrepr = node.repr_failure(excinfo)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_unexpected_skip(outcome.get_result(), item)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_unexpected_skip(outcome.get_result(), collector)
