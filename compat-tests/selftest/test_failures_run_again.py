"""A pytest suite's unexpected failures are run once more: one that passes then is flaky
(listed, not failing the suite), one that fails again stays failed. Real pytest runs, no
broker."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from compat.expectations import Entry, Expectations
from compat.results import SuiteResult
from compat.runner import _failures_again, _judge, run_command
from compat.suite import PytestSuite, RunContext
from suites.differential.suite import DifferentialSuite

TESTS = """
from pathlib import Path

MARK = Path({mark!r})


def test_fine():
    pass


def test_fails_once():
    first = not MARK.exists()
    MARK.touch()
    assert not first, "first run"


def test_always_fails():
    assert False, "every run"


def test_known():
    assert False, "listed"
"""


class _Suite(PytestSuite):
    name = "fake"
    title = "Fake"
    summary = what = "fake"
    test_timeout: ClassVar[float] = 60.0

    def install(self) -> dict[str, str]:
        return {}


def test_a_failure_that_passes_when_run_again_is_flaky(tmp_path: Path) -> None:
    test_file = tmp_path / "test_fake.py"
    test_file.write_text(TESTS.format(mark=str(tmp_path / "ran-once")))
    junit = tmp_path / "junit.xml"
    ctx = RunContext("kpybroker", "127.0.0.1:1", None, tmp_path, junit, None)
    suite = _Suite()
    command = suite.pytest_command(ctx, [str(test_file)], junit)
    command.cwd = tmp_path
    expectations = Expectations(known_failures=[Entry("test_fake::test_known", "listed")])
    log = tmp_path / "output.log"

    assert run_command(command, log, 120, echo=False, prefix="") == ""
    rerun = _failures_again(command, junit, expectations)
    assert rerun is not None and rerun.junit == tmp_path / "junit-again.xml"
    assert run_command(rerun, log, 120, echo=False, prefix="") == ""

    result = SuiteResult(suite="fake", title="Fake", target="kpybroker", command="")
    _judge(result, [junit], [rerun.junit], expectations, None)
    verdicts = {t.id: t.status for t in result.tests}
    assert verdicts == {
        "test_fake::test_fine": "passed",
        "test_fake::test_fails_once": "flaky",
        "test_fake::test_always_fails": "failed",
        "test_fake::test_known": "known-failure",
    }
    flaky = next(t for t in result.tests if t.status == "flaky")
    assert "first run" in flaky.message
    assert result.status == "failed"  # test_always_fails


def test_no_run_again_without_unexpected_failures(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" tests="1">'
        '<testcase classname="test_fake" name="test_known" time="0.1">'
        '<failure message="listed"/></testcase></testsuite></testsuites>'
    )
    ctx = RunContext("kpybroker", "127.0.0.1:1", None, tmp_path, junit, None)
    command = _Suite().pytest_command(ctx, ["x"], junit)
    expectations = Expectations(known_failures=[Entry("test_fake::test_known", "listed")])
    assert _failures_again(command, junit, expectations) is None


def test_the_differential_suite_does_not_run_failed_scenarios_again(tmp_path: Path) -> None:
    """A scenario run again meets the state its first run left on both brokers."""
    junit = tmp_path / "junit.xml"
    ctx = RunContext("kpybroker", "127.0.0.1:1", None, tmp_path, junit, None)
    assert DifferentialSuite().command(ctx).again_for_failures(tmp_path / "again.xml") is None
