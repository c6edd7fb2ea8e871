"""The reference Apache Kafka launcher itself (used for differential tests and benchmarks)."""

from __future__ import annotations

import pytest

from tests.helpers.clients import assert_broker_healthy
from tests.helpers.reference_kafka import ReferenceKafka


@pytest.mark.timeout(300)
def test_reference_kafka_starts_serves_and_restarts(reference_kafka: ReferenceKafka) -> None:
    """It starts, serves stock clients, and comes back after a SIGKILL and a clean restart."""
    assert_broker_healthy(reference_kafka.bootstrap)
    assert (reference_kafka.log_dir / "meta.properties").exists()
    reference_kafka.kill()
    reference_kafka.start()
    reference_kafka.restart()
    assert_broker_healthy(reference_kafka.bootstrap)
    assert "Kafka Server started" in reference_kafka.log_text()
