"""Several brokers sharing a ZooKeeper, for tests of replication and failover."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kpybroker.testing.brokers import KafkaBroker
from kpybroker.testing.clients import ClientHelpers, admin_client
from kpybroker.testing.runners import Mode
from kpybroker.testing.zookeeper import ZooKeeper


class KafkaCluster(ClientHelpers):
    """``size`` brokers (ids 0 to size-1) with their metadata in ZooKeeper.

    Without ``zookeeper`` (a connection string) it starts a ZooKeeper server of its
    own from Debian's package, and raises ZooKeeperUnavailable when java or the
    package is missing. The brokers use a chroot of their own, so clusters can share
    a ZooKeeper. Each broker is a :class:`KafkaBroker` (``brokers``) in ``mode``.
    """

    def __init__(
        self,
        size: int = 3,
        overrides: Mapping[str, object] | None = None,
        *,
        zookeeper: str | None = None,
        mode: Mode = "inprocess",
        start_timeout: float = 30.0,
    ) -> None:
        self.size = size
        self.overrides = dict(overrides or {})
        self.mode = mode
        self.start_timeout = start_timeout
        self.zookeeper_connect = zookeeper
        self.zookeeper: ZooKeeper | None = None
        self.directory = Path(tempfile.mkdtemp(prefix="kpybroker-cluster-"))
        self.brokers: list[KafkaBroker] = []

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' addresses (a test may have stopped one)."""
        return ",".join(self.metadata_sources())

    def metadata_sources(self) -> list[str]:
        return [broker.bootstrap_servers for broker in self.brokers if broker.listeners]

    def start(self) -> KafkaCluster:
        """ZooKeeper (unless given), then the brokers, then wait until each knows them all."""
        try:
            connect = self.zookeeper_connect
            if connect is None:
                self.zookeeper = ZooKeeper(self.directory / "zookeeper").start()
                connect = self.zookeeper.connect
            chroot = f"/kpybroker-{uuid.uuid4().hex[:12]}"
            for broker_id in range(self.size):
                settings = {
                    "broker.id": broker_id,
                    "zookeeper.connect": connect + chroot,
                    **self.overrides,
                }
                directory = self.directory / f"broker-{broker_id}"
                self.brokers.append(KafkaBroker(settings, mode=self.mode, directory=directory))
                self.brokers[-1].start()
            self.wait_for_brokers()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_brokers(self) -> None:
        """Until every broker's metadata lists them all (topics can then use each)."""
        deadline = time.monotonic() + self.start_timeout
        for bootstrap in self.metadata_sources():
            admin = admin_client(bootstrap)
            while len(admin.list_topics(timeout=5).brokers) < self.size:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{bootstrap} did not see {self.size} brokers in time")
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop the brokers and the ZooKeeper it started, and remove their files; then
        raise the first RuntimeError of a broker that did not stop cleanly."""
        failures = []
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except RuntimeError as exc:
                failures.append(exc)
        self.brokers = []
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        shutil.rmtree(self.directory, ignore_errors=True)
        if failures:
            raise failures[0]


@contextmanager
def cluster(
    size: int = 3,
    overrides: Mapping[str, object] | None = None,
    *,
    zookeeper: str | None = None,
    mode: Mode = "inprocess",
) -> Iterator[KafkaCluster]:
    """A started :class:`KafkaCluster`, stopped and removed on exit::

    with cluster(3) as kafka:
        kafka.create_topic("orders", partitions=6, replication_factor=3)
    """
    with KafkaCluster(size, overrides, zookeeper=zookeeper, mode=mode) as started:
        yield started
