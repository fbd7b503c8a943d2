"""pytest plugin for annbatch's sampler tests run against chunksampler (scripts/test_annbatch.sh).

Loaded with ``-p differences_plugin``. It reads ``differences.toml`` beside it and
- marks each test listed under ``[differences.CATEGORY]`` as a strict xfail with its reason, so a
  listed test that starts passing fails the run (remove it from the list then). It must fail by
  a check: an assertion, or ``pytest.raises``/``pytest.warns`` finding no exception or warning,
  the wrong message or the wrong value. An error (AttributeError, TypeError, a missing module)
  fails the run even for a listed test, unless its entry names it (``raises``: a chunksampler or
  builtin exception), for a difference that is an error by design (a value chunksampler refuses);
- an entry with ``strict = false`` is a difference that shows only on some draws (annbatch's test
  takes no seed, so chunksampler draws one from fresh entropy): it may fail by a check or pass,
  and its reason must say how often it passes;
- fails the run if a listed test id matches no test, so the list cannot go stale;
- refuses to run a test module that still holds one of annbatch's samplers, so the tests cannot
  quietly test annbatch against itself;
- prints one line at the end: passed, expected differences by category, skipped, failed.
"""

from __future__ import annotations

import builtins
import tomllib
from collections import Counter
from pathlib import Path

import pytest

import chunksampler

_LIST = Path(__file__).with_name("differences.toml")

# How a listed test may fail: an assertion (its own, or pytest.raises' `match`), or pytest's
# "DID NOT RAISE" / "DID NOT WARN".
_CHECKS = (AssertionError, pytest.fail.Exception)


def _exception(name: str) -> type[BaseException]:
    found = getattr(chunksampler, name, None) or getattr(builtins, name, None)
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise pytest.UsageError(f"{_LIST.name}: raises = {name!r} is no chunksampler or builtin exception")
    return found


class _Differences:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        listed = tomllib.loads(_LIST.read_text())
        self.reasons: dict[str, tuple[str, str, tuple[type[BaseException], ...], bool]] = {}
        for category, tests in listed.get("differences", {}).items():
            for nodeid, entry in tests.items():
                if nodeid in self.reasons:
                    raise pytest.UsageError(f"{_LIST.name}: {nodeid} is listed twice")
                if isinstance(entry, str):
                    self.reasons[nodeid] = (category, entry, _CHECKS, True)
                else:
                    raises = (_exception(entry["raises"]),) if "raises" in entry else _CHECKS
                    self.reasons[nodeid] = (category, entry["reason"], raises, entry.get("strict", True))
        self.stale: list[str] = []
        self.outcomes: dict[str, str] = {}

    def _whole_run(self) -> bool:
        """Whether the command line asked for whole files only, so every listed id should be seen."""
        option = self.config.option
        return not option.keyword and not option.markexpr and all("::" not in arg for arg in self.config.args)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for module in {item.module for item in items if item.module is not None}:
            held = [
                name
                for name, value in vars(module).items()
                if isinstance(value, type) and value.__module__.startswith("annbatch.samplers")
            ]
            if held:
                raise pytest.UsageError(f"{module.__name__} still uses annbatch's {held}: rewrite.py missed them")

        for item in items:
            if item.nodeid in self.reasons:
                category, reason, raises, strict = self.reasons[item.nodeid]
                item.add_marker(pytest.mark.xfail(strict=strict, raises=raises, reason=f"{category}: {reason}"))

        if self._whole_run():
            seen = {item.nodeid for item in items}
            self.stale += [f"{nodeid}: no such test" for nodeid in self.reasons if nodeid not in seen]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # one outcome per test, whatever phase decided it: a failure anywhere wins
        if report.failed:
            outcome = "failed"
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            outcome = "passed"
        else:
            return
        if self.outcomes.get(report.nodeid) != "failed":
            self.outcomes[report.nodeid] = outcome

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        for problem in self.stale:
            write(f"{_LIST.name} is stale: {problem}", red=True)
        counts = Counter(self.outcomes.values())
        # a test annbatch itself marks xfail would have no category here
        xfailed = Counter(
            self.reasons.get(nodeid, ("annbatch's own xfail",))[0]
            for nodeid, outcome in self.outcomes.items()
            if outcome == "xfailed"
        )
        parts = [f"{counts['passed']} passed", f"{counts['xfailed']} expected differences"]
        if xfailed:
            parts[-1] += " (" + ", ".join(f"{c} {n}" for c, n in sorted(xfailed.items())) + ")"
        if counts["skipped"]:
            parts.append(f"{counts['skipped']} skipped")
        parts.append(f"{counts['failed']} failed")
        write("annbatch 0.3.1's sampler tests on chunksampler: " + ", ".join(parts), bold=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.stale and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Differences(config), "annbatch-differences")
