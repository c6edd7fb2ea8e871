"""Brokers as real subprocesses: the broker under test, or a real Kafka.

:class:`ManagedBroker` is the interface the tests use (``bootstrap``, ``port``,
``log_dir``, ``process``, ``stop()``, ``kill()``, ``restart()``,
``log_text()``). :class:`KpyBroker` runs ``python -m kpybroker``;
:class:`tests.helpers.reference_kafka.ReferenceKafka` runs Apache Kafka, so the
same tests can be checked against the real thing (``KPYBROKER_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import abc
import atexit
import os
import re
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kpybroker.testing.clients import format_value
from kpybroker.testing.output import OutputDrain
from kpybroker.testing.processes import free_port
from tests.helpers.process import REPO_ROOT

#: Environment variable choosing what the ``broker`` fixtures start.
TARGET_ENV = "KPYBROKER_TEST_TARGET"
TARGETS = ("kpybroker", "kafka")

#: Where broker subprocesses cache their bytecode, outside the checkout: a run with
#: ``PYTHONDONTWRITEBYTECODE`` (the Dockerfile sets it) would otherwise compile every
#: module the broker imports at each of the hundreds of starts, a second or more each.
PYCACHE = Path.home() / ".cache" / "kpybroker" / "test-pycache"

Overrides = Mapping[str, object]
#: The ``broker_factory`` fixture: ``factory(overrides=None) -> started broker``.
BrokerFactory = Callable[..., "ManagedBroker"]


_live: weakref.WeakSet[ManagedBroker] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Never leave a broker behind when the test process exits abnormally."""
    for broker in list(_live):
        broker.kill()


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries its output."""


class ManagedBroker(abc.ABC):
    """One broker process on 127.0.0.1 with its own data directory.

    The port and directory stay the same across :meth:`restart`, so a restarted
    broker finds its data again. Output (stdout and stderr merged) of every run
    is drained into memory: :meth:`log_text`.
    """

    host = "127.0.0.1"
    #: Exit statuses that count as a clean shutdown after SIGTERM.
    clean_exit_codes: tuple[int, ...] = (0,)
    #: Seconds to wait for readiness.
    start_timeout: float = 20.0
    #: Seconds to wait for exit after SIGTERM before SIGKILL.
    stop_timeout: float = 30.0
    #: What the tests call this kind of broker (in messages).
    kind: str = "broker"

    def __init__(self, base_dir: Path, overrides: Overrides | None = None) -> None:
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.base_dir / "data"
        self.log_dir.mkdir(exist_ok=True)
        self.overrides: dict[str, str] = {k: format_value(v) for k, v in (overrides or {}).items()}
        self.port = free_port(self.host)
        self.process: subprocess.Popen[bytes] | None = None
        self._drain: OutputDrain | None = None
        self._previous_output: list[str] = []
        self.starts = 0

    # -- what subclasses provide ------------------------------------------------

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The argv that starts the broker."""

    @abc.abstractmethod
    def wait_ready(self, drain: OutputDrain, timeout: float) -> str | None:
        """Block until the broker is ready; return None, or why it is not."""

    def prepare(self) -> None:  # noqa: B027 - an optional hook
        """Run before each start (e.g. write config files, format storage)."""

    def env(self) -> dict[str, str]:
        """The child's environment."""
        return dict(os.environ)

    # -- the interface the tests use ------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients' bootstrap.servers."""
        return f"{self.host}:{self.port}"

    @property
    def is_running(self) -> bool:
        """True while the process exists and has not exited."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> ManagedBroker:
        """Start the process and wait until it is ready (BrokerStartError if not)."""
        if self.is_running:
            raise RuntimeError(f"{self.kind} is already running")
        self._archive_output()
        self.prepare()
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=self.env(),
            # Same process group as pytest: whatever kills the test run's group
            # (a CI timeout, ^C) reaches the broker too, so none is orphaned.
        )
        self.starts += 1
        _live.add(self)
        assert self.process.stdout is not None
        self._drain = OutputDrain(self.process.stdout, name=f"{self.kind}-{self.port}")
        problem = self.wait_ready(self._drain, self.start_timeout)
        if problem is not None:
            if self.is_running:
                self.process.kill()
            self.process.wait(10)
            self._drain.join()
            raise BrokerStartError(
                f"{self.kind} on port {self.port} did not become ready: {problem}\n"
                f"exit status: {self.process.returncode}\n"
                f"--- its output ---\n{self._drain.text()[-20000:]}"
            )
        return self

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, then wait; SIGKILL after ``timeout``. Returns the exit status.

        Returns None when no process was running.
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(
                    f"{self.kind} did not exit within {timeout or self.stop_timeout} s of "
                    f"SIGTERM; killed it\n--- its output ---\n{self.log_text()[-20000:]}"
                ) from None
        if self._drain is not None:
            self._drain.join()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the process (a crash) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        if self._drain is not None:
            self._drain.join()

    def restart(self) -> ManagedBroker:
        """Stop cleanly if running, then start again on the same port and directory.

        AssertionError when a running broker does not exit cleanly on SIGTERM.
        """
        was_running = self.is_running
        code = self.stop()
        if was_running and code not in self.clean_exit_codes:
            raise AssertionError(
                f"{self.kind} exited with status {code} after SIGTERM\n"
                f"--- its output ---\n{self.log_text()[-20000:]}"
            )
        return self.start()

    def log_text(self) -> str:
        """Output of every run so far (earlier runs first, separated by a marker)."""
        parts = list(self._previous_output)
        if self._drain is not None:
            parts.append(self._drain.text())
        return "".join(parts)

    def wait_for_output(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first line of the current run matching ``pattern``, waiting for it.

        A thread reads the output, so a line the process wrote before it answered a
        request may not be in ``log_text()`` yet when the answer arrives.
        """
        match = self._drain.wait_for(re.compile(pattern), timeout) if self._drain else None
        if match is None:
            raise AssertionError(f"no line matching {pattern!r} in {timeout} s")
        return match

    def check_alive(self) -> None:
        """AssertionError (with the output) when the process has exited."""
        if not self.is_running:
            code = self.process.returncode if self.process else None
            raise AssertionError(
                f"{self.kind} exited unexpectedly (status {code})\n"
                f"--- its output ---\n{self.log_text()[-20000:]}"
            )

    def _archive_output(self) -> None:
        if self._drain is not None:
            self._drain.join()
            self._previous_output.append(self._drain.text())
            self._previous_output.append(f"----- {self.kind} restarted -----\n")
            self._drain = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bootstrap} dir={self.log_dir}>"


class KpyBroker(ManagedBroker):
    """``python -m kpybroker`` with ``--override`` for listeners, log.dirs and extras."""

    kind = "kpybroker"
    READY = re.compile(r"ready, listening on (?P<urls>\S+)")

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.overrides,
        }
        argv = [sys.executable, "-m", "kpybroker"]
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        return argv

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
        return env

    def wait_ready(self, drain: OutputDrain, timeout: float) -> str | None:
        match = drain.wait_for(self.READY, timeout)
        if match is None:
            if drain.closed:
                return "the process exited before logging its ready line"
            return f"no line 'ready, listening on ...' within {timeout} s"
        want = f"PLAINTEXT://{self.host}:{self.port}"
        if want not in match.group("urls").split(","):
            return f"ready line {match.group(0)!r} does not list {want}"
        return None


def selected_target() -> str:
    """The value of KPYBROKER_TEST_TARGET (default ``kpybroker``), validated."""
    target = os.environ.get(TARGET_ENV, "kpybroker").strip().lower() or "kpybroker"
    if target not in TARGETS:
        raise ValueError(f"{TARGET_ENV}={target!r}: expected one of {', '.join(TARGETS)}")
    return target


def create_broker(target: str, base_dir: Path, overrides: Overrides | None = None) -> ManagedBroker:
    """An unstarted broker of the given target kind."""
    if target == "kafka":
        from tests.helpers.reference_kafka import ReferenceKafka

        return ReferenceKafka(base_dir, overrides)
    return KpyBroker(base_dir, overrides)


class BrokerLauncher:
    """Starts brokers in numbered directories under ``root`` and stops them all at the end."""

    def __init__(self, root: Path, target: str | None = None) -> None:
        self.root = Path(root)
        self.target = target or selected_target()
        self.brokers: list[ManagedBroker] = []

    def __call__(self, overrides: Overrides | None = None) -> ManagedBroker:
        """Start a new broker with these server.properties overrides."""
        broker = create_broker(self.target, self.root / f"broker-{len(self.brokers)}", overrides)
        self.brokers.append(broker)
        broker.start()
        return broker

    def close(self) -> list[str]:
        """Stop every broker; return complaints about unclean shutdowns."""
        problems = []
        for broker in self.brokers:
            if broker.process is None:
                continue
            was_running = broker.is_running
            try:
                code = broker.stop()
            except AssertionError as exc:
                problems.append(str(exc))
                continue
            if was_running and code not in broker.clean_exit_codes:
                problems.append(
                    f"{broker.kind} exited with status {code} after SIGTERM\n"
                    f"--- its output ---\n{broker.log_text()[-20000:]}"
                )
        return problems


@contextmanager
def launcher(root: Path, target: str | None = None) -> Iterator[BrokerLauncher]:
    """A :class:`BrokerLauncher` whose brokers are stopped on exit.

    Raises AssertionError at exit when a broker did not shut down cleanly on
    SIGTERM (the command-line contract asks for exit status 0).
    """
    brokers = BrokerLauncher(root, target)
    try:
        yield brokers
    finally:
        problems = brokers.close()
    if problems:
        raise AssertionError("\n\n".join(problems))
