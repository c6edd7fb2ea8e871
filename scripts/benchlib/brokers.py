"""Both brokers as measured subprocesses, and topic creation with the same admin client.

The processes are started by ``tests/helpers`` (``KpyBroker`` and
``ReferenceKafka``, the launcher the integration tests use); this module adds
what the benchmark measures: the time from spawning the process to the first
ApiVersions answer, and the process's CPU time and RSS. For the secured
workloads, both start with the security settings of ``secure_broker``
(``SecureKpyBroker`` and ``SecureReferenceKafka``) on top of the same bench settings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import procstat, wire
from benchlib.plan import KAFKA_HEAP, KAFKA_SETTINGS, KPYBROKER_SETTINGS
from benchlib.results import KAFKA, KPYBROKER
from tests.helpers.brokers import KpyBroker, ManagedBroker
from tests.helpers.process import REPO_ROOT, rss_bytes
from tests.helpers.reference_kafka import ReferenceKafka, SecureReferenceKafka
from tests.helpers.secure_broker import Credentials, SecureKpyBroker

#: kpybroker's bytecode cache (see ``bytecode_env``), outside the checkout.
PYCACHE = Path.home() / ".cache" / "kpybroker" / "bench-pycache"

#: Partitions per CreateTopics request: Kafka refuses requests of more than 10,000.
CREATE_BATCH_PARTITIONS = 1_000

#: Seconds between startup probes: the resolution of the startup figure.
PROBE_INTERVAL_S = 0.005


class Measured(ManagedBroker):
    """Adds the startup probe and ``/proc`` readings to a managed broker.

    The probe starts when the process is about to be spawned (``prepare`` is
    the last step before ``Popen``, after Kafka's storage formatting) and
    connects every 5 ms until ApiVersions is answered: "startup" is the time
    to the first accepted and served connection, not to a log line.
    """

    label = "broker"

    def prepare(self) -> None:
        super().prepare()
        #: The command line as run, for the doc.
        self.argv = self.command()
        self.spawned_at = time.monotonic()
        self.answered_at: float | None = None
        self._probe = threading.Thread(target=self._probe_until_answered, daemon=True)
        self._probe.start()

    def _probe_until_answered(self) -> None:
        deadline = self.spawned_at + self.start_timeout
        while time.monotonic() < deadline:
            if wire.answers_api_versions(self.host, self.port, timeout=1.0):
                self.answered_at = time.monotonic()
                return
            time.sleep(PROBE_INTERVAL_S)

    def startup_seconds(self) -> float:
        """Seconds from spawn to the first ApiVersions answer (call after ``start``)."""
        self._probe.join(self.start_timeout)
        if self.answered_at is None:
            raise RuntimeError(f"{self.label} never answered ApiVersions")
        return self.answered_at - self.spawned_at

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.label} is not running")
        return self.process.pid

    def cpu_seconds(self) -> float:
        return procstat.cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)


#: A broker of a workload that starts its own (unstarted), with the given directory.
BrokerFactory = Callable[[Path], Measured]


def bytecode_env(env: dict[str, str], pycache: Path = PYCACHE) -> dict[str, str]:
    """``env`` with Python's bytecode cached under ``pycache``.

    ``pip install`` compiles a package's bytecode at install time; a checkout run
    with ``PYTHONDONTWRITEBYTECODE`` (as some shells and CI set) would compile
    every module at every start instead, which doubles kpybroker's startup.
    """
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def compile_kpybroker() -> None:
    """Import everything the broker imports at startup once, so its bytecode is cached."""
    subprocess.run(
        [sys.executable, "-m", "kpybroker", "--version"],
        env=bytecode_env(dict(os.environ)),
        cwd=REPO_ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )


class CachedBytecode(ManagedBroker):
    """Runs kpybroker from cached bytecode, as an installed package is (``bytecode_env``).

    ``pycache`` is where: an empty directory makes a start compile every module it imports
    (workload 14's cold start).
    """

    pycache = PYCACHE

    def env(self) -> dict[str, str]:
        return bytecode_env(super().env(), self.pycache)


class BenchKpyBroker(Measured, CachedBytecode, KpyBroker):
    """``python -m kpybroker`` with its defaults (plus ``KPYBROKER_SETTINGS``), run from
    cached bytecode as an installed package is."""

    label = KPYBROKER

    def __init__(self, base_dir: Path) -> None:
        super().__init__(base_dir, KPYBROKER_SETTINGS)


class BenchKafka(Measured, ReferenceKafka):
    """Apache Kafka in KRaft combined mode with its shipped settings (``KAFKA_SETTINGS``)."""

    label = KAFKA

    def __init__(self, base_dir: Path, lib: Path) -> None:
        super().__init__(base_dir, KAFKA_SETTINGS, lib=lib, heap=KAFKA_HEAP)


class SecureBenchKpyBroker(Measured, CachedBytecode, SecureKpyBroker):
    """``BenchKpyBroker`` with the listeners and security settings of ``secure_broker``."""

    label = KPYBROKER

    def __init__(self, base_dir: Path, credentials: Credentials) -> None:
        super().__init__(base_dir, credentials, KPYBROKER_SETTINGS)


class SecureBenchKafka(Measured, SecureReferenceKafka):
    """``BenchKafka`` with the listeners and security settings of ``secure_broker``."""

    label = KAFKA

    def __init__(self, base_dir: Path, lib: Path, credentials: Credentials) -> None:
        super().__init__(base_dir, credentials, KAFKA_SETTINGS)
        # SecureReferenceKafka takes neither: BenchKafka's jars and heap.
        self.lib = lib
        self.heap = KAFKA_HEAP


#: The brokers of the secured workloads, which have ``bootstrap_for(listener)``.
SECURED_BROKERS = (SecureBenchKpyBroker, SecureBenchKafka)


def listener_bootstrap(broker: Measured, listener: str) -> str:
    """``host:port`` of ``listener`` on ``broker``: the PLAINTEXT port every broker has, or
    a secured broker's other listeners."""
    if listener == "PLAINTEXT":
        return broker.bootstrap
    if not isinstance(broker, SECURED_BROKERS):
        raise TypeError(f"{broker!r} has no {listener} listener")
    return broker.bootstrap_for(listener)


def kafka_version(lib: Path) -> str:
    """The version in the name of the kafka-clients jar of ``lib``."""
    for jar in lib.glob("kafka-clients-*.jar"):
        if m := re.fullmatch(r"kafka-clients-(.+)\.jar", jar.name):
            return m.group(1)
    return "unknown"


def _create(admin: AdminClient, topics: list[NewTopic], timeout: float) -> None:
    if topics:
        futures = admin.create_topics(topics, request_timeout=timeout, operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout)


def create_topics(
    bootstrap: str, partitions_by_topic: dict[str, int], timeout: float = 300.0
) -> None:
    """Create topics (replication factor 1) and wait until every partition has a leader.

    Kafka answers CreateTopics once the controller has recorded the topics; its
    broker side creates the logs a moment later. Waiting for leaders in the
    Metadata answer means no workload starts against a partition still being set up.
    """
    # Quiet: an admin client outlives the broker it used, and would log reconnect attempts.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    batch: list[NewTopic] = []
    for name, count in partitions_by_topic.items():
        batch.append(NewTopic(name, count, 1))
        if sum(t.num_partitions for t in batch) >= CREATE_BATCH_PARTITIONS:
            _create(admin, batch, timeout)
            batch = []
    _create(admin, batch, timeout)
    deadline = time.monotonic() + timeout
    while True:
        listed = admin.list_topics(timeout=timeout).topics
        ready = sum(
            1
            for name in partitions_by_topic
            if name in listed
            for p in listed[name].partitions.values()
            if p.leader >= 0 and p.error is None
        )
        if ready == sum(partitions_by_topic.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ready} of {sum(partitions_by_topic.values())} partitions ready")
        time.sleep(0.2)
