"""Kafka clients on the host talking to the brokers in containers (confluent-kafka): create
a topic, produce numbered records with acks=all, read them back, look at replicas."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from containercheck.engine import CheckFailed, wait_for

REQUEST_TIMEOUT = 30.0
#: How long produce and consume may take before the check gives up: generous, as a broker
#: may be electing leaders or catching up meanwhile.
DELIVERY_TIMEOUT = 120.0


def create_topic(
    bootstrap: str, topic: str, partitions: int, replicas: int, configs: dict[str, str]
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(topic, partitions, replicas, config=configs)
    admin.create_topics([new_topic])[topic].result(REQUEST_TIMEOUT)


def in_sync_replicas(bootstrap: str, topic: str) -> list[int]:
    """How many replicas each partition of ``topic`` has in sync, by partition number; a
    partition without a leader counts none."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, REQUEST_TIMEOUT)
    partitions = metadata.topics[topic].partitions
    return [len(partitions[p].isrs) if partitions[p].leader >= 0 else 0 for p in sorted(partitions)]


def broker_count(bootstrap: str) -> int:
    return len(
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(None, REQUEST_TIMEOUT).brokers
    )


def wait_for_in_sync(bootstrap: str, topic: str, replicas: int, timeout: float) -> float:
    def all_in_sync() -> bool:
        return all(count == replicas for count in in_sync_replicas(bootstrap, topic))

    return wait_for(f"every partition of {topic} to have {replicas} in sync", all_in_sync, timeout)


def produce(bootstrap: str, topic: str, numbers: range) -> float:
    """Write one record per number (key and value say it), idempotent with acks=all; return
    the seconds until the last was acknowledged."""
    start = time.monotonic()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": int(DELIVERY_TIMEOUT * 1000),
        }
    )
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for number in numbers:
        producer.produce(topic, key=str(number), value=f"record {number}", on_delivery=delivered)
        producer.poll(0)
    unsent = producer.flush(DELIVERY_TIMEOUT)
    if unsent or failures:
        raise CheckFailed(
            f"{unsent} records to {topic} unacknowledged and {len(failures)} failed"
            + (f", the first: {failures[0]}" if failures else "")
        )
    return time.monotonic() - start


def consume_all(bootstrap: str, topic: str, expected: range, group: str | None = None) -> float:
    """Read ``topic`` from the start in a consumer group (a new one unless named) until it
    has given exactly the records ``produce`` wrote for ``expected``, then commit; return
    the seconds that took."""
    start = time.monotonic()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"container-check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: list[int] = []
    try:
        consumer.subscribe([topic])
        while len(seen) < len(expected):
            if time.monotonic() - start > DELIVERY_TIMEOUT:
                raise CheckFailed(f"read {len(seen)} of {len(expected)} records from {topic}")
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is not None:
                    raise CheckFailed(f"consuming {topic}: {message.error()}")
                seen.append(int(message.key()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    if sorted(seen) != list(expected):
        raise CheckFailed(
            f"read {len(seen)} records ({len(set(seen))} distinct) from {topic}, "
            f"expected {expected.start}..{expected.stop - 1} once each"
        )
    return time.monotonic() - start
