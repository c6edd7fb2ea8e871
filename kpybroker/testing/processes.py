"""Child processes that tests start (a broker, ZooKeeper): output drained, never left behind."""

from __future__ import annotations

import atexit
import os
import random
import re
import signal
import socket
import subprocess
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpybroker.testing.output import OutputDrain

_live: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Never leave a child behind when the test process exits without stopping it."""
    for child in list(_live):
        child.kill()


#: The lowest port :func:`free_port` hands out (above the well-known services' ports).
LOWEST_PICKED_PORT = 10000
_picker = random.Random()  # its own state: a test seeding ``random`` never repeats ports
#: The ports handed out lately: a server picked for may not have bound its port yet.
_recent: deque[int] = deque(maxlen=256)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing uses right now (for servers that cannot
    bind port 0 and report it, like ZooKeeper).

    Picked below the kernel's ephemeral range when there is room there: a port the
    kernel hands out for port 0 is also what it gives the next outgoing connection,
    so between this pick and the server's bind a client's socket could take it, and
    the server would fail to start (a rare failure seen in CI). Nor is a port handed
    out twice in a row of picks: a cluster picks ZooKeeper's port and its brokers'
    before any of them binds, and two equal picks made a broker fail to bind (CI).
    """
    lowest_ephemeral = _lowest_ephemeral_port()
    port = None
    if lowest_ephemeral - LOWEST_PICKED_PORT >= 1000:
        for _ in range(50):
            candidate = _picker.randrange(LOWEST_PICKED_PORT, lowest_ephemeral)
            if candidate not in _recent and _bindable(host, candidate):
                port = candidate
                break
    while port is None or port in _recent:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
    _recent.append(port)
    return port


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _lowest_ephemeral_port() -> int:
    """Where the kernel's range of ports for outgoing connections starts (Linux's default
    when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class StartError(RuntimeError):
    """A broker or ZooKeeper did not become ready; the message carries its output."""


class ChildProcess:
    """One running child, its stdout and stderr merged and read into memory as it runs.

    It shares the test run's process group, so whatever ends the run's group (a CI
    timeout, ^C) ends the child too.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        _live.add(self)
        assert self.process.stdout is not None
        self.output = OutputDrain(self.process.stdout, name=name)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first output line matching ``pattern``; StartError (and the child killed)
        when the child exits first or ``timeout`` passes."""
        match = self.output.wait_for(pattern, timeout)
        if match is None:
            self.fail_start(
                "it exited before it was ready"
                if self.output.closed
                else f"no line matching {pattern.pattern!r} within {timeout} s"
            )
        return match

    def fail_start(self, problem: str) -> None:
        """Kill the child and raise StartError with ``problem`` and its output."""
        self.kill()
        raise StartError(
            f"{self.name} did not become ready: {problem}\n"
            f"exit status: {self.process.returncode}\n"
            f"--- its output ---\n{self.output.text()[-20000:]}"
        )

    def stop(self, timeout: float) -> int:
        """SIGTERM, then wait ``timeout`` seconds before SIGKILL; the exit status."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.output.join()
        _live.discard(self)
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self.running:
            self.process.kill()
        self.process.wait(10)
        self.output.join()
        _live.discard(self)
