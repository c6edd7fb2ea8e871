"""The container image's entrypoint, run as the image runs it but without docker: KAFKA_*
variables in, a broker out that real clients use with exactly those settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.helpers.brokers import KpyBroker, launcher

pytestmark = pytest.mark.timeout(120)

ENTRYPOINT = [sys.executable, "-m", "kpybroker.tools.container_config"]


def without_kafka_variables(environ: dict[str, str]) -> dict[str, str]:
    """An environment (PYTHONPATH included) less any KAFKA_* the machine happens to set."""
    return {k: v for k, v in environ.items() if not k.startswith("KAFKA_")}


class EntrypointBroker(KpyBroker):
    """The broker as the image starts it: configured by the environment alone."""

    kind = "kpybroker-container"

    @property
    def properties_file(self) -> Path:
        return self.base_dir / "etc" / "server.properties"

    def command(self) -> list[str]:
        return [*ENTRYPOINT, "--properties-file", str(self.properties_file)]

    def env(self) -> dict[str, str]:
        settings = {
            "KAFKA_BROKER_ID": "7",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{self.host}:{self.port}",
            "KAFKA_LOG_DIRS": str(self.log_dir),
            "KAFKA_NUM_PARTITIONS": "3",
            "KAFKA_LOG_SEGMENT_BYTES": "1048576",
            "KAFKA_HEAP_OPTS": "-Xmx1G",  # what a Kafka deployment may still set: ignored
        }
        return without_kafka_variables(super().env()) | settings


def test_the_environment_configures_a_broker_that_clients_use(tmp_path: Path) -> None:
    with launcher(tmp_path) as brokers:
        broker = EntrypointBroker(tmp_path / "container")
        brokers.brokers.append(broker)
        broker.start()

        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("from-env", b"hello")
        assert producer.flush(30) == 0
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
        assert list(metadata.brokers) == [7]  # KAFKA_BROKER_ID
        # A topic created on first use takes KAFKA_NUM_PARTITIONS.
        assert len(metadata.topics["from-env"].partitions) == 3
        # The listener was derived from KAFKA_ADVERTISED_LISTENERS, as apache/kafka's image does.
        written = broker.properties_file.read_text()
        assert f"\nlisteners=PLAINTEXT://0.0.0.0:{broker.port}\n" in written
        assert "log.segment.bytes=1048576\n" in written
        assert subprocess.run([*ENTRYPOINT, "--check", "--properties-file",
                               str(broker.properties_file)]).returncode == 0  # fmt: skip
        # exec: the broker is the entrypoint's own process, so SIGTERM reaches it directly.
        assert broker.stop() == 0
        assert "shut down cleanly" in broker.log_text()


def test_a_misspelt_variable_stops_the_container_before_the_broker_starts(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [*ENTRYPOINT, "--properties-file", str(tmp_path / "server.properties")],
        env=without_kafka_variables(dict(os.environ)) | {"KAFKA_LOG_RETENTION_HOUR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "kpybroker-container: KAFKA_LOG_RETENTION_HOUR sets log.retention.hour, which is not"
    )
    assert not (tmp_path / "server.properties").exists()
