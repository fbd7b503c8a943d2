"""CHUNKSAMPLER_REQUIRE_STACKS=1 (the stacks stage of scripts/test_python.sh) fails every skip that
conftest.py's EXPECTED_SKIPS does not allow: a module-level importorskip, one inside a test, a
skip with the wrong reason, a broken install. An expected failure (xfail) is no skip. Checked on a
small suite of its own under a copy of this directory's conftest.py, run by a child pytest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SUITE = {
    "test_missing.py": """
import pytest
pytest.importorskip("chunksampler_no_such_stack")
def test_never_runs():
    pass
""",
    "test_inside.py": """
import pytest
def test_runs():
    pass
def test_skips_inside():
    pytest.importorskip("chunksampler_no_such_stack")
def test_allowed():
    pytest.skip("needs a GPU")
def test_allowed_id_other_reason():
    pytest.skip("No module named 'jax'")
@pytest.mark.xfail(reason="an expected failure is no skip", strict=True)
def test_expected_failure():
    assert False
""",
    "test_broken.py": """
import pytest
pytest.importorskip("chunksampler_broken_stack")
def test_never_runs():
    pass
""",
}


# Loaded into the child pytest: each test's (or module's) outcome as the session ended, after
# conftest.py's hooks, in outcomes.json.
RECORDER = """
import json
outcomes = {}
def pytest_runtest_logreport(report):
    outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    if outcome != "passed" or report.when == "call":
        outcomes.setdefault(report.nodeid, outcome)
def pytest_collectreport(report):
    if not report.passed:
        outcomes[report.nodeid] = report.outcome
def pytest_sessionfinish(session):
    with open("outcomes.json", "w") as f:
        json.dump(outcomes, f)
"""


def run_suite(tmp_path: Path, require: bool) -> tuple[int, dict[str, str], str]:
    """Runs SUITE under a copy of conftest.py that allows test_allowed's skip; returns pytest's exit
    status, each test's outcome and what pytest printed."""
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    with open(tmp_path / "conftest.py", "a") as conftest:
        conftest.write('\nEXPECTED_SKIPS.update({"test_inside.py::test_allowed": "needs a GPU",\n'
                       '                       "test_inside.py::test_allowed_id_other_reason": "needs a GPU"})\n')
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    lib = tmp_path / "lib"
    (lib / "chunksampler_broken_stack").mkdir(parents=True)
    (lib / "chunksampler_broken_stack" / "__init__.py").write_text(
        'raise ImportError("a broken install: undefined symbol in _C.so")\n')
    (lib / "outcome_recorder.py").write_text(RECORDER)
    # No plugins from entry points (fast_array_utils' on the stacks imports dask: seconds a run); the
    # short summary's lines whole.
    env = {**os.environ, "PYTHONPATH": str(lib), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "200"}
    env.pop("CHUNKSAMPLER_REQUIRE_STACKS", None)
    if require:
        env["CHUNKSAMPLER_REQUIRE_STACKS"] = "1"
    files = list(SUITE) if require else [name for name in SUITE if name != "test_broken.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "outcome_recorder",
                           "--continue-on-collection-errors", *files], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads((tmp_path / "outcomes.json").read_text()), done.stdout + done.stderr


def test_unexpected_skips_fail_the_stacks_stage(tmp_path):
    code, outcomes, output = run_suite(tmp_path, require=True)
    assert code == 1, output
    assert outcomes == {
        "test_missing.py": "failed",
        # pytest 9.2 raises a broken install's ImportError, earlier ones skip (and so fail here).
        "test_broken.py": "failed",
        "test_inside.py::test_runs": "passed",
        "test_inside.py::test_skips_inside": "failed",
        "test_inside.py::test_allowed": "skipped",
        "test_inside.py::test_allowed_id_other_reason": "failed",
        "test_inside.py::test_expected_failure": "xfailed",
    }, output
    assert "ERROR test_missing.py - Failed: unexpected skip: could not import 'chunksampler_no_such_stack'" in output, output
    assert "FAILED test_inside.py::test_skips_inside - Failed: unexpected skip: could not import" in output, output
    assert "FAILED test_inside.py::test_allowed_id_other_reason - Failed: unexpected skip: No module named 'jax'" in output
    assert "EXPECTED_SKIPS in tests/python/conftest.py does not allow: test_missing.py" in output, output
    assert "a broken install" in output, output


def test_without_it_skips_are_skips(tmp_path):
    code, outcomes, output = run_suite(tmp_path, require=False)
    assert code == 0, output
    assert outcomes == {
        "test_missing.py": "skipped",
        "test_inside.py::test_runs": "passed",
        "test_inside.py::test_skips_inside": "skipped",
        "test_inside.py::test_allowed": "skipped",
        "test_inside.py::test_allowed_id_other_reason": "skipped",
        "test_inside.py::test_expected_failure": "xfailed",
    }, output
