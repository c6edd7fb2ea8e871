"""A real Apache ZooKeeper server for tests, from Debian's ``zookeeper`` package.

It runs as a plain process (not Debian's service) on 127.0.0.1 and a free port,
with its data in the test's directory, and is ready once it serves sessions::

    zookeeper = ZooKeeperServer(tmp_path).start()
    store = ZooKeeperMetadataStore(zookeeper.connect + "/chroot")
    ...
    zookeeper.stop()

The port and data directory stay the same across ``restart``, ``kill`` and
``start``, so clients reconnect to the same server and find their sessions again.
A missing package raises ``MissingDependency`` (run scripts/install-test-deps).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.helpers.brokers import ManagedBroker
from tests.helpers.java import TOOL_JVM_OPTIONS, MissingDependency, java_executable
from tests.helpers.process import OutputDrain

#: The server's jar (its manifest names its dependencies) and a logging backend
#: that writes to stderr, both from the package's dependencies.
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperServer(ManagedBroker):
    """One standalone ZooKeeper server; ``connect`` is its connection string."""

    kind = "zookeeper"
    # The JVM exits with 128+15 when SIGTERM ends it.
    clean_exit_codes = (0, 143)
    start_timeout = 30.0
    stop_timeout = 20.0

    def __init__(self, base_dir: Path, *, tick_ms: int = 500, heap: str = "256m") -> None:
        super().__init__(base_dir)
        self.tick_ms = tick_ms
        self.heap = heap
        self.config_path = self.base_dir / "zoo.cfg"

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append a chroot as needed)."""
        return self.bootstrap

    def prepare(self) -> None:
        """Write zoo.cfg. A short tick allows sessions down to two ticks (1 s), for
        fault tests; the maximum is raised above the brokers' 18 s default."""
        settings = {
            "tickTime": self.tick_ms,
            "maxSessionTimeout": 60_000,
            "dataDir": self.log_dir,
            "clientPortAddress": self.host,
            "clientPort": self.port,
            "admin.enableServer": "false",  # its Jetty would take port 8080
            "4lw.commands.whitelist": "ruok,srvr,stat,cons",
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))

    def command(self) -> list[str]:
        for jar in (ZOOKEEPER_JAR, SLF4J_BINDING):
            if not jar.exists():
                raise MissingDependency(
                    f"{jar} not found: run scripts/install-test-deps (Debian's zookeeper package)"
                )
        return [
            java_executable(),
            f"-Xmx{self.heap}",
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            *TOOL_JVM_OPTIONS,
            "-cp",
            f"{ZOOKEEPER_JAR}:{SLF4J_BINDING}",
            SERVER_MAIN,
            str(self.config_path),
        ]

    def wait_ready(self, drain: OutputDrain, timeout: float) -> str | None:
        """Wait for ``srvr`` to report a mode: ``ruok`` answers ``imok`` already while
        the server is still loading its data and turns sessions away."""
        deadline = time.monotonic() + timeout
        while "Mode:" not in self.four_letter_word("srvr"):
            if not self.is_running:
                return "the JVM exited before ZooKeeper served sessions"
            if time.monotonic() > deadline:
                return f"ZooKeeper did not serve sessions within {timeout} s"
            time.sleep(0.05)
        return None

    def four_letter_word(self, word: str) -> str:
        """The server's answer to an admin command such as ``ruok``; "" if none."""
        try:
            with socket.create_connection((self.host, self.port), timeout=5) as sock:
                sock.sendall(word.encode())
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
        except OSError:
            return ""
        return b"".join(chunks).decode(errors="replace")
