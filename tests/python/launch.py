"""``Launch``: a child job (a multi-process launcher, or a script that starts its own ranks) run in a
session of its own, so that one that overruns is killed with every process it started (other ranks,
DataLoader workers) and the test fails naming it, instead of hanging the suite. The integrations'
tests (Lightning, Accelerate) run their jobs through it. ``run_together``: the processes of a
``jax.distributed`` job started side by side, in the ``child_env`` of JAX on one CPU thread (the
JAX and Grain tests). ``crash_then_resume``: an example killed at its crash, then resumed, as one
launch. ``run_in_session``: one job that may fail on purpose (an example's crash), in a session of its
own, killed whole if it overruns."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import JOB_TIMEOUT, free_port, shown_output



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


def crash_then_resume(out: Path, name: str, crash: list[str], resume: list[str]) -> Launch:
    """A ``Launch`` in ``out`` of ``crash`` then ``resume``, one after the other in one shell, so that the
    pair overlaps other launches; ``crash_and_resume_runs`` splits what it printed."""
    script = (f"echo '== crash'; {shlex.join(crash)}; echo \"== crash exited $?\"; "
              f"echo '== resume'; {shlex.join(resume)}; echo \"== resume exited $?\"")
    return Launch(out, name, ["bash", "-c", script])


def crash_and_resume_runs(launch: Launch) -> dict[str, tuple[str, int]]:
    """``{"crash": (output, exit status), "resume": (...)}`` of a ``crash_then_resume`` launch."""
    assert launch.returncode == 0, launch.output[-3000:]
    runs = {run: (text, int(code)) for run, text, code in
            re.findall(r"^== (crash|resume)\n(.*?)^== \1 exited (\d+)$", launch.output, re.M | re.S)}
    assert set(runs) == {"crash", "resume"}, launch.output[-3000:]
    return runs


def check_crash_and_resume(full: Launch, chained: Launch, page_name: str) -> None:
    """An example's crash and resume (``chained``, a ``crash_then_resume`` launch) against its
    uninterrupted run (``full``), all three over 2 epochs of 16 steps: the crash kills every process
    (status 3, the launcher non-zero) and prints what the page's ``PAGE_NAME-crash`` block shows; the
    resume prints the first line of ``PAGE_NAME-resume``, ends its epoch 1 on the uninterrupted
    run's last batch, and ends with the uninterrupted run's weights."""
    runs = crash_and_resume_runs(chained)
    (crashed, crash_code), (resumed, resume_code) = runs["crash"], runs["resume"]
    assert crash_code != 0 and "exitcode  : 3" in crashed, crashed[-3000:]
    assert [line for line in crashed.splitlines() if line.startswith(("epoch ", "killed "))] == \
        shown_output(f"{page_name}-crash").splitlines()
    assert resume_code == 0, resumed[-3000:]
    mine = [line for line in resumed.splitlines() if line.startswith(("epoch ", "32 steps"))]
    want = [line for line in full.output.splitlines() if line.startswith(("epoch ", "32 steps"))]
    assert mine[0] == shown_output(f"{page_name}-resume").splitlines()[0]
    last = ", batch 15 ends " + want[1].rsplit(", batch 15 ends ", 1)[1]
    assert mine[0].endswith(last), (mine[0], last)
    assert len(mine) == 2 and mine[1] == want[2] and mine[1].startswith("32 steps; weights "), (mine, want)


@contextmanager
def waited(*runs: Launch) -> Iterator[tuple[Launch, ...]]:
    """The runs (started together, so they overlap), each waited for; on the way out, any still
    running is killed with its process group (a test that failed early, an interrupted session)."""
    try:
        yield tuple(run.wait() for run in runs)
    finally:
        for run in runs:
            run.kill()


# Every variable dist_info="env" reads (include/chunksampler/dist_info.hpp), cleared around each test.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                      "SLURM_PROCID", "SLURM_NTASKS")


def child_env(**variables: str) -> dict[str, str]:
    """This environment without any launcher's variables, plus `variables`: JAX on CPU, one thread."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1", **variables)
    return env


def run_in_session(argv: list[str], env: dict[str, str], timeout: float,
                   cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs ``argv`` in a session of its own and returns its status and output (a job that is meant
    to fail, which ``run_together`` would not let through); past ``timeout`` its whole process group
    (the ranks it launched too) is killed and the test fails with its output. A process the job left
    behind in its group (a rank its launcher did not wait for) is killed when it ends."""
    with subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"{shlex.join(argv)} ran past {timeout} s:\n{out[-3000:]}\n{err[-3000:]}")
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def run_together(commands: list[tuple[list[str], dict[str, str]]], timeout: float,
                 cwd: Path | None = None) -> list[str]:
    """Runs the commands at once (in `cwd` if given), each in its own session; returns what each
    printed. If one fails or `timeout` passes, every process group is killed and the test fails
    with their output."""
    logs = [tempfile.TemporaryFile("w+") for _ in commands]
    processes = [subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                  cwd=cwd)
                 for (argv, env), log in zip(commands, logs)]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in processes):
            if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in processes):
                break
            time.sleep(0.05)
    finally:
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        codes = [p.wait() for p in processes]
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
    if any(code != 0 for code in codes):
        pytest.fail(f"exit codes {codes} (timeout {timeout} s):\n" + "\n".join(o[-3000:] for o in outputs))
    return outputs
