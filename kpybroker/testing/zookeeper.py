"""A standalone Apache ZooKeeper server for tests, from Debian's ``zookeeper`` package.

It runs as a plain process (not Debian's service) on 127.0.0.1 and a given port,
with its data in a given directory, and is ready once it serves sessions. Without
java or the package's jars, :class:`ZooKeeperUnavailable` says what is missing.
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kpybroker.testing.processes import ChildProcess, free_port

#: The server's jar (its manifest names its dependencies) and a logging backend
#: that writes to stderr, both from the package's dependencies.
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: A small JVM starts faster: serial GC, no C2 compiler.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


class ZooKeeperUnavailable(RuntimeError):
    """java or ZooKeeper's jars are not installed (Debian: ``apt-get install zookeeper``)."""


def server_settings(data_dir: Path, host: str, port: int, tick_ms: int) -> dict[str, object]:
    """zoo.cfg for one server. A short tick allows sessions down to two ticks (1 s at
    500 ms), for fault tests; the maximum is raised above the brokers' 18 s default."""
    return {
        "tickTime": tick_ms,
        "maxSessionTimeout": 60_000,
        "dataDir": data_dir,
        "clientPortAddress": host,
        "clientPort": port,
        "admin.enableServer": "false",  # its Jetty would take port 8080
        "4lw.commands.whitelist": "ruok,srvr,stat,cons",
    }


def write_config(path: Path, settings: Mapping[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def server_command(config_path: Path, heap: str = "256m") -> list[str]:
    """The argv of a ZooKeeper server; ZooKeeperUnavailable when java or a jar is missing."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailable("java not found on PATH (ZooKeeper needs a JRE)")
    for jar in (ZOOKEEPER_JAR, SLF4J_BINDING):
        if not jar.exists():
            raise ZooKeeperUnavailable(f"{jar} not found (Debian: apt-get install zookeeper)")
    return [
        java,
        f"-Xmx{heap}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        *JVM_OPTIONS,
        "-cp",
        f"{ZOOKEEPER_JAR}:{SLF4J_BINDING}",
        SERVER_MAIN,
        str(config_path),
    ]


def four_letter_word(host: str, port: int, word: str) -> str:
    """The server's answer to an admin command such as ``srvr``; "" if none."""
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def wait_serving(host: str, port: int, timeout: float, running: Callable[[], bool]) -> str | None:
    """Wait for ``srvr`` to report a mode (``ruok`` answers ``imok`` already while the
    server is still loading its data and turns sessions away); None, or why not."""
    deadline = time.monotonic() + timeout
    while "Mode:" not in four_letter_word(host, port, "srvr"):
        if not running():
            return "the JVM exited before ZooKeeper served sessions"
        if time.monotonic() > deadline:
            return f"ZooKeeper did not serve sessions within {timeout} s"
        time.sleep(0.05)
    return None


class ZooKeeper:
    """One standalone server in ``directory``; ``connect`` is its connection string."""

    host = "127.0.0.1"

    def __init__(self, directory: Path, *, tick_ms: int = 500, start_timeout: float = 30.0):
        self.directory = Path(directory)
        self.tick_ms = tick_ms
        self.start_timeout = start_timeout
        self.port = 0
        self.child: ChildProcess | None = None

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append a chroot as needed)."""
        return f"{self.host}:{self.port}"

    def start(self) -> ZooKeeper:
        self.port = free_port(self.host)
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        write_config(config, server_settings(data, self.host, self.port, self.tick_ms))
        child = self.child = ChildProcess(server_command(config), name=f"zookeeper-{self.port}")
        problem = wait_serving(self.host, self.port, self.start_timeout, lambda: child.running)
        if problem is not None:
            child.fail_start(problem)
        return self

    def stop(self, timeout: float = 20.0) -> None:
        if self.child is not None:
            self.child.stop(timeout)
            self.child = None
