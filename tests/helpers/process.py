"""Child processes for tests: output draining, one-shot tool runs, free ports."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class OutputDrain:
    """Reads a child's pipe in a daemon thread into an in-memory buffer.

    The pipe never fills (a child blocked on a full stderr pipe would look hung),
    and the text stays available to the test. ``wait_for`` blocks until a line
    matches a pattern.
    """

    def __init__(self, stream: IO[bytes], name: str = "output") -> None:
        self._stream = stream
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"drain-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                with self._cond:
                    self._lines.append(line)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass  # the pipe was closed under us
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """True once the child closed its end (normally: it exited)."""
        return self._closed

    def text(self) -> str:
        """Everything read so far."""
        with self._cond:
            return "".join(self._lines)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        """Return the first line matching ``pattern``, waiting up to ``timeout`` seconds.

        Returns None on timeout or when the stream ends without a match.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    match = pattern.search(line)
                    if match:
                        return match
                seen = len(self._lines)
                remaining = deadline - time.monotonic()
                if self._closed or remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the reader thread to reach the end of the stream."""
        self._thread.join(timeout)


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one run of a command-line tool."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """A multi-line account of the run, for assertion messages."""
        return (
            f"$ {shlex.join(self.args)}\nexit status {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )

    def check(self) -> ToolResult:
        """Return self when the tool exited 0, else raise AssertionError describing the run."""
        if self.returncode != 0:
            raise AssertionError(f"command failed\n{self.describe()}")
        return self


#: A fixture's tool runner: ``run(*args, input=..., timeout=...) -> ToolResult``.
ToolRunner = Callable[..., ToolResult]


def run_tool(
    args: Sequence[str],
    *,
    input: str | bytes | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ToolResult:
    """Run a command to completion, with a timeout, capturing stdout and stderr.

    A command still running at the timeout is killed, and AssertionError is
    raised with whatever it printed.
    """
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.Popen(
        list(args),
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        result = ToolResult(
            list(args), -9, out.decode(errors="replace"), err.decode(errors="replace")
        )
        raise AssertionError(f"command timed out after {timeout} s\n{result.describe()}") from None
    return ToolResult(
        list(args), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


def wait_until(
    predicate: Callable[[], object],
    timeout: float,
    interval: float = 0.2,
    message: str = "condition",
) -> None:
    """Poll ``predicate()`` until it is truthy; raise AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)
