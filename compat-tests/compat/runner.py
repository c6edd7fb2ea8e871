"""Running one suite: install, fresh broker(s), the test command, judging, the JSON result.

Each phase is timed separately (install, broker start, tests), since the
report and CI care about where the minutes go. Whatever goes wrong (an
install that fails, a broker that does not start or crashes, a test runner
that writes no results or is killed at its timeout) becomes a *problem* on
the suite and makes it fail: a suite never passes without having run its
tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from compat.brokers import BrokerRun, fresh_broker
from compat.expectations import Expectations
from compat.install import InstallError
from compat.paths import RESULTS_ROOT, RUN_COMMAND
from compat.results import BAD_STATUSES, SuiteResult, Verdict, parse_junit
from compat.suite import Command, RunContext, Suite
from compat.vcs import describe_commit


def results_dir(target: str) -> Path:
    """Results for kpybroker feed the report; runs against Kafka itself are kept apart."""
    return RESULTS_ROOT if target == "kpybroker" else RESULTS_ROOT / f"against-{target}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class _Phases:
    """Wall-clock seconds per phase, in the order they ran."""

    def __init__(self) -> None:
        self.durations: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.durations[name] = round(time.monotonic() - start, 1)


def _tee(stream: IO[str], sinks: list[IO[str]], prefix: str) -> None:
    for line in stream:
        for sink in sinks:
            sink.write(line if sink is not sys.stdout else prefix + line)
            sink.flush()


def run_command(
    command: Command, log_path: Path, timeout: float, *, echo: bool, prefix: str
) -> str:
    """Run the test command, copying its output to ``log_path`` (and stdout when ``echo``).

    Returns a problem description, or "" when it ran to completion (whatever
    its exit status: failing tests are judged from the JUnit XML).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:  # a suite's second command continues the same log
        log.write(f"$ {' '.join(command.args)}\n(cwd {command.cwd})\n")
        log.flush()
        proc = subprocess.Popen(
            command.args,
            cwd=command.cwd,
            env=command.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # so a timeout can kill the runner and its children
        )
        assert proc.stdout is not None
        sinks: list[IO[str]] = [log, sys.stdout] if echo else [log]
        reader = threading.Thread(target=_tee, args=(proc.stdout, sinks, prefix), daemon=True)
        reader.start()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            reader.join(5)
            return f"the test command was killed after {timeout:g} s"
        reader.join(10)
    return ""


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def run_suite(
    suite: Suite, *, target: str = "kpybroker", selection: str | None = None, echo: bool = True
) -> SuiteResult:
    """Run one suite from install to judged results, and write its JSON."""
    out_dir = results_dir(target)
    artifacts = out_dir / suite.name
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    result = SuiteResult(
        suite=suite.name,
        title=suite.title,
        target=target,
        command=f"{RUN_COMMAND} {suite.name}"
        + (f" --target {target}" if target != "kpybroker" else ""),
        started=_now(),
        commit=describe_commit(),
        summary=suite.summary,
        what=suite.what,
    )
    expectations = suite.expectations()
    if target != "kpybroker":
        expectations = expectations.without_known_failures()
    phases = _Phases()
    junit = artifacts / "junit.xml"
    reports: list[Path] = []
    again: list[Path] = []
    try:
        with phases("install"):
            result.versions = suite.install()
        _run_against_fresh_brokers(
            suite, result, phases, expectations, junit, reports, again, selection, echo
        )
    except InstallError as exc:
        result.problems.append(f"install failed: {exc}")
    except Exception as exc:  # a broker that would not start, a bug in a suite definition
        result.problems.append(f"{type(exc).__name__}: {exc}"[:4000])
    _judge(result, reports or [junit], again, expectations, selection)
    try:
        result.notes = suite.notes()
        result.annotations = suite.annotations()
    except Exception as exc:  # a broken allowlist must fail the suite, not the runner
        result.problems.append(f"notes: {type(exc).__name__}: {exc}")
    result.durations_s = {**phases.durations, "total": round(sum(phases.durations.values()), 1)}
    result.finished = _now()
    result.write(out_dir / f"{suite.name}.json")
    return result


def _run_against_fresh_brokers(
    suite: Suite,
    result: SuiteResult,
    phases: _Phases,
    expectations: Expectations,
    junit: Path,
    reports: list[Path],
    again: list[Path],
    selection: str | None,
    echo: bool,
) -> None:
    """Start the broker(s), run the test commands, stop them; problems go on ``result``.

    ``reports`` gets the JUnit XML file of each command, whether or not it ran; ``again``
    those of the commands that ran a command's unexpected failures once more.
    """
    artifacts = junit.parent
    work = Path(tempfile.mkdtemp(prefix=f"compat-{suite.name}-"))
    brokers: list[BrokerRun] = []
    try:
        with contextlib.ExitStack() as stack:

            def start(kind: str, name: str, *, secured: bool = False) -> BrokerRun:
                log = artifacts / f"{name}.log"
                broker = fresh_broker(kind, work / name, log, suite.overrides(), secured=secured)
                run = stack.enter_context(broker)
                brokers.append(run)
                return run

            with phases("brokers"):
                main = start(result.target, result.target, secured=suite.secured)
                reference = start("kafka", "reference-kafka") if suite.needs_reference else None
            ctx = RunContext(
                target=result.target,
                bootstrap=main.bootstrap,
                reference_bootstrap=reference.bootstrap if reference else None,
                work_dir=work,
                junit_path=junit,
                selection=selection,
                test_timeouts=expectations.timeouts(),
                security=main.security,
            )
            with phases("tests"):
                commands = suite.commands(ctx)
                reports.extend(command.junit or junit for command in commands)
                deadline = time.monotonic() + suite.run_timeout
                for command in commands:
                    problem = run_command(
                        command, artifacts / "output.log", deadline - time.monotonic(),
                        echo=echo, prefix=f"[{suite.name}] ",
                    )  # fmt: skip
                    rerun = None if problem else _failures_again(command, junit, expectations)
                    if rerun is not None:
                        again.append(rerun.junit or junit)
                        problem = run_command(
                            rerun, artifacts / "output.log", deadline - time.monotonic(),
                            echo=echo, prefix=f"[{suite.name} again] ",
                        )  # fmt: skip
                    if problem:
                        result.problems.append(problem)
                        break
    finally:
        # The brokers have stopped (ExitStack): collect what was noticed about them.
        for run in brokers:
            result.problems.extend(run.problems)
            result.broker_log_errors.extend(run.error_lines)
        shutil.rmtree(work, ignore_errors=True)


def _failures_again(command: Command, junit: Path, expectations: Expectations) -> Command | None:
    """The command that runs ``command``'s unexpected failures once more, if it had any and
    can: a test that then passes is judged flaky, not failed, and listed as such."""
    report = command.junit or junit
    if not report.exists():
        return None
    failed = [c for c in parse_junit(report) if expectations.judge(c).status == "failed"]
    if not failed:
        return None
    return command.again_for_failures(report.with_name(f"{report.stem}-again.xml"))


def _judge(
    result: SuiteResult,
    reports: list[Path],
    again: list[Path],
    expectations: Expectations,
    selection: str | None,
) -> None:
    """Verdicts per test from the JUnit XML files, and the suite's status from them and its
    problems. A failure that passed when run again (``again``'s reports) is flaky."""
    cases = [case for report in reports if report.exists() for case in parse_junit(report)]
    passed_again = {
        case.id
        for report in again
        if report.exists()
        for case in parse_junit(report)
        if case.outcome == "passed"
    }
    missing = [report.name for report in reports if not report.exists()]
    result.tests = [_flaky_if_passed_again(expectations.judge(c), passed_again) for c in cases]
    if missing and not result.problems:
        result.problems.append(f"the test runner wrote no results ({', '.join(missing)} missing)")
    elif not missing:
        if selection is None:  # on a partial run, unmatched entries prove nothing
            result.problems.extend(
                f"stale entry, matches no test: {entry}"
                for entry in expectations.stale([c.id for c in cases])
            )
        if not cases:
            result.problems.append("the test runner reported no tests")
    bad = any(t.status in BAD_STATUSES for t in result.tests)
    if result.problems and not result.tests:
        result.status = "error"
    else:
        result.status = "failed" if bad or result.problems else "passed"


def _flaky_if_passed_again(verdict: Verdict, passed_again: set[str]) -> Verdict:
    if verdict.status != "failed" or verdict.id not in passed_again:
        return verdict
    verdict.status, verdict.reason = "flaky", "failed, then passed when run again"
    return verdict
