"""A real Apache ZooKeeper server for tests that crash and restart it.

kpybroker.testing.zookeeper has the server (Debian's ``zookeeper`` package, a
plain process on 127.0.0.1); this is the same server as a :class:`ManagedBroker`,
for tests that ``kill`` and ``restart`` it::

    zookeeper = ZooKeeperServer(tmp_path).start()
    store = ZooKeeperMetadataStore(zookeeper.connect + "/chroot")
    ...
    zookeeper.stop()

The port and data directory stay the same across ``restart``, ``kill`` and
``start``, so clients reconnect to the same server and find their sessions again.
A missing package raises ``ZooKeeperUnavailable`` (run scripts/install-test-deps).
"""

from __future__ import annotations

from pathlib import Path

from kpybroker.testing.output import OutputDrain
from kpybroker.testing.zookeeper import (
    server_command,
    server_settings,
    wait_serving,
    write_config,
)
from tests.helpers.brokers import ManagedBroker


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
        settings = server_settings(self.log_dir, self.host, self.port, self.tick_ms)
        write_config(self.config_path, settings)

    def command(self) -> list[str]:
        return server_command(self.config_path, self.heap)

    def wait_ready(self, drain: OutputDrain, timeout: float) -> str | None:
        return wait_serving(self.host, self.port, timeout, lambda: self.is_running)
