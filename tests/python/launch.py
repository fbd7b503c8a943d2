"""``Launch``: a child job (a multi-process launcher, or a script that starts its own ranks) run in a
session of its own, so that one that overruns is killed with every process it started (other ranks,
DataLoader workers) and the test fails naming it, instead of hanging the suite. The integrations'
tests (Lightning, Accelerate) run their jobs through it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import JOB_TIMEOUT, free_port



class Launch:
    """Runs ``command`` in ``out`` (made if missing) with a free ``MASTER_PORT`` and no inherited
    rank variables; ``name`` names it in failures. ``result(part, rank)`` reads what the job wrote
    to ``out/<part>-rank<rank>.json``."""

    def __init__(self, out: Path, name: str, command: list[str], timeout: float = JOB_TIMEOUT) -> None:
        out.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK")}
        env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        self.out, self.name, self.timeout, self.started = out, name, timeout, time.monotonic()
        self.proc = subprocess.Popen(
            command, cwd=out, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.returncode: int | None = None
        self.output = ""

    def wait(self) -> Launch:
        if self.returncode is None:
            try:
                output, _ = self.proc.communicate(timeout=max(1.0, self.timeout - (time.monotonic() - self.started)))
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                output, _ = self.proc.communicate()
                pytest.fail(f"{self.name} hung: killed after {self.timeout} s\n{output[-3000:]}")
            self.returncode, self.output = self.proc.returncode, output
        return self

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()

    def result(self, part: str, rank: int) -> dict:
        path = self.out / f"{part}-rank{rank}.json"
        assert path.exists(), f"{self.name}: {part} wrote nothing on rank {rank}:\n{self.output[-3000:]}"
        return json.loads(path.read_text())


@contextmanager
def waited(*runs: Launch) -> Iterator[tuple[Launch, ...]]:
    """The runs (started together, so they overlap), each waited for; on the way out, any still
    running is killed with its process group (a test that failed early, an interrupted session)."""
    try:
        yield tuple(run.wait() for run in runs)
    finally:
        for run in runs:
            run.kill()
