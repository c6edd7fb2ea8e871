"""A real single-node Apache Kafka (KRaft, broker+controller) for reference runs.

Started from the jars that ``compat-tests/java/fetch-jars`` caches, with a
small heap (the machines have 2 cores). Used to validate the integration tests
themselves (``KPYBROKER_TEST_TARGET=kafka``), and for differential tests and
benchmarks::

    with ReferenceKafka(tmp_path, {"num.partitions": 3}) as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap})

It has the same interface as :class:`tests.helpers.brokers.KpyBroker`.
"""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path
from types import TracebackType

from kpybroker.testing.output import OutputDrain
from kpybroker.testing.processes import free_port
from tests.helpers.brokers import ManagedBroker, Overrides
from tests.helpers.java import (
    KAFKA_SERVER,
    STORAGE_TOOL,
    fetch_kafka_lib,
    java_command,
    run_java,
)
from tests.helpers.secure_broker import SECURE_LISTENERS, Credentials, server_properties

#: Settings a single-node cluster needs (Kafka's defaults assume three nodes),
#: and settings that make tests quick. Test overrides are applied on top.
SINGLE_NODE_DEFAULTS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
    # After a SIGKILL the restarted node must wait out its old registration's
    # session before it is unfenced: keep that short.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
}


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid().toString()`` makes them."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


#: kpybroker settings that Kafka has as feature levels, chosen when the storage is formatted.
FORMAT_FEATURES = frozenset({"transaction.version", "eligible.leader.replicas.version"})


class ReferenceKafka(ManagedBroker):
    """Apache Kafka in combined KRaft mode on 127.0.0.1 (PLAINTEXT + CONTROLLER ports)."""

    kind = "kafka"
    # The JVM exits with 128+15 when SIGTERM ends it, after Kafka's shutdown hook.
    clean_exit_codes = (0, 143)
    start_timeout = 120.0
    stop_timeout = 60.0
    READY = re.compile(r"Kafka Server started|Shutdown broker|ERROR.*Exiting Kafka")

    def __init__(
        self,
        base_dir: Path,
        overrides: Overrides | None = None,
        *,
        lib: Path | None = None,
        heap: str = "512m",
        node_id: int = 1,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(base_dir, overrides)
        self.lib = lib or fetch_kafka_lib()
        self.heap = heap
        self.node_id = node_id
        self.log_level = log_level
        self.controller_port = free_port(self.host)
        self.config_path = self.base_dir / "server.properties"
        self.cluster_id = random_cluster_id()

    def settings(self) -> dict[str, str]:
        """The full server.properties of this broker."""
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **SINGLE_NODE_DEFAULTS,
        }
        if "log.dirs" in self.overrides:
            # The metadata log stays in ``log_dir`` when a test gives other log.dirs:
            # Kafka halts when the metadata log's directory fails, and a test that
            # fails one of its log dirs wants the broker to live on. Only then: a set
            # metadata.log.dir is a STATIC_BROKER_CONFIG in DescribeConfigs, which the
            # differential suite compares with kpybroker's default.
            settings["metadata.log.dir"] = str(self.log_dir)
        for key, value in self.overrides.items():
            if key in ("listeners", "metadata.log.dir"):
                raise ValueError(f"ReferenceKafka sets {key} itself")
            if key not in FORMAT_FEATURES:
                settings[key] = value
        return settings

    def prepare(self) -> None:
        """Write server.properties; format the storage on first start."""
        text = "".join(f"{key}={value}\n" for key, value in self.settings().items())
        self.config_path.write_text(text)
        if (self.log_dir / "meta.properties").exists():
            return
        features = [
            arg
            for key, value in self.overrides.items()
            if key in FORMAT_FEATURES
            for arg in ("--feature", f"{key}={value}")
        ]
        run_java(
            self.lib,
            STORAGE_TOOL,
            [
                "format",
                "--config",
                str(self.config_path),
                "--cluster-id",
                self.cluster_id,
                *features,
            ],
            timeout=120,
        ).check()

    def command(self) -> list[str]:
        return java_command(
            self.lib,
            KAFKA_SERVER,
            [str(self.config_path)],
            heap=self.heap,
            log_level=self.log_level,
            jvm_options=["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", f"-Xms{self.heap}"],
        )

    def wait_ready(self, drain: OutputDrain, timeout: float) -> str | None:
        match = drain.wait_for(self.READY, timeout)
        if match is None:
            if drain.closed:
                return "the JVM exited before 'Kafka Server started'"
            return f"no 'Kafka Server started' within {timeout} s"
        if "started" not in match.group(0):
            return f"Kafka failed: {match.group(0)!r}"
        return None

    def __enter__(self) -> ReferenceKafka:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class SecureReferenceKafka(ReferenceKafka):
    """Apache Kafka with the listeners and security of ``secure_broker``."""

    def __init__(
        self, base_dir: Path, credentials: Credentials, overrides: Overrides | None = None
    ) -> None:
        super().__init__(base_dir, overrides)
        self.credentials = credentials
        self.ports = {name: free_port(self.host) for name in SECURE_LISTENERS}

    def settings(self) -> dict[str, str]:
        settings = super().settings()
        extra = ",".join(f"{name}://{self.host}:{port}" for name, port in self.ports.items())
        settings |= server_properties(self.credentials, self.ports)
        settings["listeners"] += "," + extra
        settings["advertised.listeners"] += "," + extra
        settings["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
        settings |= {k: v for k, v in self.overrides.items() if k not in FORMAT_FEATURES}
        return settings

    def command(self) -> list[str]:
        """Kafka 4.4 reads a JWKS URL only when a JVM property lists it as allowed."""
        command = super().command()
        url = self.settings().get("sasl.oauthbearer.jwks.endpoint.url")
        if url is not None:
            command.insert(1, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={url}")
        return command

    def bootstrap_for(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"
