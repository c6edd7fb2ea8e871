"""Child processes for tests: one-shot tool runs, free ports, waiting for conditions."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def rss_bytes(pid: int) -> int:
    """Process ``pid``'s resident set size (``VmRSS``); FileNotFoundError when it is gone."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise FileNotFoundError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    """How many descriptors process ``pid`` has open; FileNotFoundError when it is gone."""
    return len(os.listdir(f"/proc/{pid}/fd"))
