"""What the share-group integration tests share: the brokers' settings, the Java tool
they run, and topics with records produced by a real client."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from tests.helpers.clients import ConfluentClient

HEARTBEAT_INTERVAL_MS = 500
#: Broker settings: members hear of their assignment within half a second (Kafka's
#: default heartbeat interval is 5 s), and groups may lock records for just 1 s.
SHARE_OVERRIDES = {
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    "group.share.min.record.lock.duration.ms": 1000,
}

VERIFIABLE_SHARE_CONSUMER = "org.apache.kafka.tools.VerifiableShareConsumer"


def produce(bootstrap: str, topic: str, values: list[bytes], batch: int = 0) -> None:
    """Produce to partition 0 (acks=all); with ``batch``, flush every ``batch`` records so
    the log holds many small record batches (a share fetch acquires whole batches)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    errors: list[Any] = []
    for i, value in enumerate(values, 1):
        producer.produce(
            topic,
            value=value,
            partition=0,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
        if batch and i % batch == 0:
            # A bound, not a timing: a failover under a loaded machine may take most of 30 s.
            assert producer.flush(60) == 0
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert not errors, errors[:5]


def new_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    ConfluentClient().create_topic(bootstrap, topic, partitions)
