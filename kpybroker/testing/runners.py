"""The two ways a test's broker runs: on a thread of the test process, or as a child process.

Both start a broker from server.properties settings and return its advertised
listeners (``NAME://host:port``, with the port bound for port 0) once it serves.
In-process is the quickest (no interpreter to start, no second import of the
broker); a subprocess is the broker exactly as deployed, and does not share the
test's GIL.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, Protocol

from kpybroker.testing.processes import ChildProcess, StartError

if TYPE_CHECKING:
    import asyncio

    from kpybroker.config import BrokerConfig, Listener

Mode = Literal["inprocess", "subprocess"]
MODES: tuple[Mode, ...] = ("inprocess", "subprocess")


class Runner(Protocol):
    def start(self, settings: Mapping[str, str], timeout: float) -> list[str]:
        """Start the broker and wait until it serves; its advertised listeners."""

    def stop(self, timeout: float) -> None:
        """Stop it and wait until it has stopped; RuntimeError when it did not cleanly."""


def runner_for(mode: Mode, name: str) -> Runner:
    if mode == "inprocess":
        return InProcessRunner(name)
    if mode == "subprocess":
        return SubprocessRunner(name)
    raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")


def listener_urls(advertised: list[Listener]) -> list[str]:
    return [f"{listener.name}://{listener.host}:{listener.port}" for listener in advertised]


class InProcessRunner:
    """The broker on a thread of its own, with its own event loop (uvloop's if installed).

    Stopping sets the broker's stop event from this thread; the loop then stops the
    broker, and the loop's runner cancels and awaits whatever task is left and shuts
    its executor down. ``leftover_tasks`` names such tasks: none, for a broker that
    stops everything it started.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.leftover_tasks: list[str] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._listeners: list[str] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, settings: Mapping[str, str], timeout: float) -> list[str]:
        # The broker's modules load on first use, not when a test suite imports this.
        from kpybroker.cli import event_loop_factory
        from kpybroker.config import BrokerConfig

        config = BrokerConfig.load(None, settings)  # a ConfigError raises here, in the caller
        _, loop_factory = event_loop_factory()
        self._thread = threading.Thread(
            target=self._run, args=(config, loop_factory), name=self.name, daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop(timeout)
            raise StartError(f"{self.name} did not serve within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            raise StartError(f"{self.name} did not start: {self._error!r}") from self._error
        return self._listeners

    def _run(self, config: BrokerConfig, loop_factory: Callable[[], asyncio.AbstractEventLoop]):
        import asyncio  # here, not at the top: a test run that starts no broker skips it

        try:
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                runner.run(self._serve(config))
        except BaseException as exc:  # handed to the thread that starts or stops it
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self, config: BrokerConfig) -> None:
        import asyncio

        from kpybroker.cli import serve

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()

        def on_ready(advertised: list[Listener]) -> None:
            self._listeners = listener_urls(advertised)
            self._ready.set()

        try:
            await serve(config, self._stop, on_ready)
        finally:
            current = asyncio.current_task()
            self.leftover_tasks = sorted(
                task.get_name() for task in asyncio.all_tasks() if task is not current
            )

    def stop(self, timeout: float) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            # A loop that closed already (the broker failed) needs no stopping.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"{self.name} did not stop within {timeout} s")
        self._thread = None
        if self._error is not None:
            raise RuntimeError(f"{self.name} failed: {self._error!r}") from self._error


class SubprocessRunner:
    """``python -m kpybroker`` with ``--override`` settings, ready at its "ready" line."""

    READY = re.compile(r"ready, listening on (?P<urls>.+)$")

    def __init__(self, name: str) -> None:
        self.name = name
        self.child: ChildProcess | None = None

    def start(self, settings: Mapping[str, str], timeout: float) -> list[str]:
        argv = [sys.executable, "-m", "kpybroker"]
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        self.child = ChildProcess(argv, name=self.name, env={"PYTHONUNBUFFERED": "1"})
        match = self.child.wait_for_line(self.READY, timeout)
        return [url.strip() for url in match.group("urls").split(",")]

    def stop(self, timeout: float) -> None:
        if self.child is None:
            return
        status = self.child.stop(timeout)
        if status != 0:
            raise RuntimeError(
                f"{self.name} exited with status {status} after SIGTERM\n"
                f"--- its output ---\n{self.child.output.text()[-20000:]}"
            )
        self.child = None
