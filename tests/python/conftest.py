"""Helpers shared by the Python tests; they run against the installed package (scripts/test_python.sh)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

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
# The pages whose shown outputs the tests check: the README and the documentation site's sources.
PAGES = [SOURCE / "README.md", *sorted((SOURCE / "docs").rglob("*.md"))]


def shown_block(kind: str, name: str, language: str) -> tuple[Path, str]:
    """The page holding the ``<!-- KIND: NAME -->`` fenced block of LANGUAGE, and the block's text.
    A name belongs to one page."""
    pattern = re.compile(rf"<!-- {re.escape(kind)}: {re.escape(name)} -->\n```{language}\n(.*?)```", re.S)
    found = [(page, m.group(1)) for page in PAGES for m in pattern.finditer(page.read_text())]
    assert len(found) == 1, f"{len(found)} blocks <!-- {kind}: {name} --> in README.md and docs/, not one"
    return found[0]


def shown_output(name: str) -> str:
    """The text of the ``<!-- python-output: NAME -->`` block of the README or a documentation page:
    what a documented command prints, which the test that runs the command compares with what it
    printed."""
    return shown_block("python-output", name, "text")[1]


def free_port() -> int:
    """A TCP port on the loopback address that nothing listens on now, for a job's coordinator."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_child(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Runs this interpreter on ``args`` (one thread for OpenMP) in a process group of its own,
    killed whole (the processes it started too) and TimeoutExpired raised if it outlives
    ``timeout``, so that no multi-process job can hang the suite."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             encoding="utf-8", env=env, start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)
