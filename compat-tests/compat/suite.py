"""What a suite is: its pins, how it installs, how its tests are started.

A suite lives in ``compat-tests/suites/<package>/suite.py`` and defines one
:class:`Suite` subclass named ``SUITE``-style in :data:`compat.registry.SUITES`.
The runner does the rest (brokers, timing, judging, results, report), so a
suite only says *what* to run. Suites whose tests are pytest files derive
from :class:`PytestSuite`.
"""

from __future__ import annotations

import abc
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from compat.expectations import Expectations
from compat.paths import COMPAT_ROOT, REPO_ROOT
from compat.security import ENV as SECURITY_ENV
from compat.security import SecuredBroker

#: Settings every suite's broker gets: no 3 s wait before a new group's first
#: rebalance (Kafka's own test setups and the reference launcher do the same).
BASE_BROKER_OVERRIDES: dict[str, object] = {"group.initial.rebalance.delay.ms": 0}


@dataclass
class RunContext:
    """What a suite's test command needs to know about this run."""

    target: str  # "kpybroker" or "kafka": what COMPAT_BOOTSTRAP points at
    bootstrap: str
    reference_bootstrap: str | None
    work_dir: Path  # scratch space, removed after the run
    junit_path: Path  # where the test runner must write JUnit XML
    selection: str | None  # a -k expression, or None for the whole suite
    test_timeouts: dict[str, float] = field(default_factory=dict)
    security: SecuredBroker | None = None  # the broker's other listeners (Suite.secured)

    def env(self) -> dict[str, str]:
        """The environment every suite's tests get."""
        env = dict(os.environ)
        env["COMPAT_BOOTSTRAP"] = self.bootstrap
        env["COMPAT_TARGET"] = self.target
        if self.reference_bootstrap:
            env["COMPAT_REFERENCE_BOOTSTRAP"] = self.reference_bootstrap
        env["COMPAT_TEST_TIMEOUTS"] = json.dumps(self.test_timeouts)
        if self.security is not None:
            env[SECURITY_ENV] = self.security.to_json()
        # Where a suite may leave files for whoever reads the results.
        env["COMPAT_ARTIFACTS"] = str(self.junit_path.parent)
        env["PYTHONUNBUFFERED"] = "1"
        return env


@dataclass
class Command:
    """A test runner invocation: it must write JUnit XML to ``junit``.

    ``junit`` None means ``RunContext.junit_path``; a suite that runs several
    commands (:meth:`Suite.commands`) gives each of the others a file of its own.
    """

    args: list[str]
    env: dict[str, str]
    cwd: Path = REPO_ROOT
    junit: Path | None = None
    #: Extra arguments that make the same command run only the tests that failed in its
    #: last run (None: the runner cannot run failures again).
    failed_only: list[str] | None = None

    def again_for_failures(self, junit: Path) -> Command | None:
        """The command that runs this one's failed tests again, writing ``junit``."""
        if self.failed_only is None or self.junit is None:
            return None
        args = [f"--junitxml={junit}" if a == f"--junitxml={self.junit}" else a for a in self.args]
        return Command([*args, *self.failed_only], self.env, self.cwd, junit)


class Suite(abc.ABC):
    """One row of the report card."""

    #: The name on the command line and in the results (``compat-tests/run NAME``).
    name: ClassVar[str]
    #: The row's title in the report.
    title: ClassVar[str]
    #: A few words for the report's table.
    summary: ClassVar[str]
    #: One sentence: what runs, for the report's section on the suite.
    what: ClassVar[str]
    #: True when the suite also needs a reference Apache Kafka.
    needs_reference: ClassVar[bool] = False
    #: Settings for this suite's kpybroker (on top of BASE_BROKER_OVERRIDES). A value may
    #: name the broker's address as ``{host}`` and ``{port}`` and all its listeners as
    #: ``{listeners}`` (``advertised.listeners``), known only once its ports are chosen.
    broker_overrides: ClassVar[Mapping[str, object]] = {}
    #: True when the suite's broker must be a secured one (tests/helpers/secure_broker.py):
    #: ``bootstrap`` stays its PLAINTEXT listener, where User:ANONYMOUS is a super user, and
    #: SASL_PLAINTEXT, SASL_SSL and SSL listeners are added, with every user of
    #: ``secure_broker.USERS`` given SCRAM-SHA-256 and SCRAM-SHA-512 credentials before the
    #: tests start. The tests find it in ``RunContext.security`` (COMPAT_SECURITY).
    secured: ClassVar[bool] = False
    #: Seconds the whole test command may take before it is killed.
    run_timeout: ClassVar[float] = 900.0

    @property
    def directory(self) -> Path:
        """The suite's folder (its suite.py, tests and known-failures.toml)."""
        return Path(sys.modules[type(self).__module__].__file__ or "").parent

    def expectations(self) -> Expectations:
        return Expectations.load(self.directory / "known-failures.toml")

    def overrides(self) -> dict[str, object]:
        return {**BASE_BROKER_OVERRIDES, **self.broker_overrides}

    @abc.abstractmethod
    def install(self) -> dict[str, str]:
        """Install (or find in the cache) everything pinned; return ``{component: version}``.

        Raises :class:`compat.install.InstallError` when something cannot be had.
        """

    @abc.abstractmethod
    def command(self, ctx: RunContext) -> Command:
        """The test command for this run."""

    def commands(self, ctx: RunContext) -> list[Command]:
        """Every test command of this run, in order (one, unless a suite needs several)."""
        return [self.command(ctx)]

    def notes(self) -> list[str]:
        """Extra lines for the report (e.g. the differential suite's allowlist)."""
        return []

    def annotations(self) -> dict[str, int]:
        """Extra counts for the report's table (e.g. allowed differences by kind)."""
        return {}


class PytestSuite(Suite):
    """A suite of pytest files, run by some Python (the project's, or a pinned virtualenv)."""

    #: Test files or directories, relative to the suite's folder.
    test_paths: ClassVar[Sequence[str]] = (".",)
    #: Seconds per test (pytest-timeout) unless a known-failure entry says less.
    test_timeout: ClassVar[float] = 300.0

    #: The interpreter running the tests; a suite with its own virtualenv sets it in install().
    python: str = sys.executable

    def rootdir(self) -> Path:
        """Where pytest runs (and finds its rootdir and ini file)."""
        return REPO_ROOT

    def paths(self) -> list[str]:
        return [str(self.directory / p) for p in self.test_paths]

    def pythonpath(self) -> list[Path]:
        """Import roots: the compat package (for the plugin) and the repository."""
        return [COMPAT_ROOT, REPO_ROOT]

    def command(self, ctx: RunContext) -> Command:
        return self.pytest_command(ctx, self.paths(), ctx.junit_path)

    def pytest_command(self, ctx: RunContext, paths: Sequence[str], junit: Path) -> Command:
        """pytest on ``paths``, writing JUnit XML to ``junit``."""
        # pytest's cache (for --last-failed) in the run's scratch space, one per command.
        cache = ctx.work_dir / f"pytest-cache-{junit.stem}"
        args = [
            self.python, "-m", "pytest", *paths,
            "-p", "compat.pytest_plugin", "-o", f"cache_dir={cache}",
            "-o", "addopts=", "-q", "-rfEs", "--tb=short",
            f"--timeout={self.test_timeout:g}", f"--junitxml={junit}",
        ]  # fmt: skip
        if ctx.selection:
            args += ["-k", ctx.selection]
        env = ctx.env()
        env["PYTHONPATH"] = os.pathsep.join(
            [*(str(p) for p in self.pythonpath()), *filter(None, [env.get("PYTHONPATH")])]
        )
        return Command(args, env, self.rootdir(), junit, ["--last-failed", "--lfnf=none"])
