"""Helpers shared by the ``test_log_life_*`` and ``test_crash_*`` modules (no tests here).

Records are produced one batch at a time (confluent-kafka, ``linger.ms=0``,
flushed after each), with equal-sized keys and values, so every batch has the
size :func:`batch_size` gives and a topic's ``segment.bytes`` can be set to
hold an exact number of them. That makes which offsets retention and
compaction leave checkable offset by offset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kpybroker.protocol.errors import KafkaError as BrokerError
from kpybroker.protocol.records import NewRecord, build_batch, validate_batch
from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import ConfluentClient

Pair = tuple[bytes | None, bytes | None]

#: Broker settings that make the background work of the log visible within seconds.
FAST_LOG_TASKS: dict[str, object] = {
    "log.retention.check.interval.ms": 100,
    "log.cleaner.backoff.ms": 100,
    "log.segment.delete.delay.ms": 0,
}


def batch_size(key: bytes | None, value: bytes | None) -> int:
    """Bytes of a one-record batch with this key and value (and no headers), as any v2
    writer lays it out: librdkafka's batches of one record have exactly this size."""
    return len(build_batch([NewRecord(key, value, (), 0)], timestamp=0))


def create_topic(
    bootstrap: str, topic: str, config: Mapping[str, object], partitions: int = 1
) -> None:
    ConfluentClient().create_topic(
        bootstrap, topic, partitions, {k: str(v) for k, v in config.items()}
    )


def produce_each(
    bootstrap: str,
    topic: str,
    pairs: Sequence[Pair],
    *,
    partition: int = 0,
    timestamp: int | None = None,
) -> list[int]:
    """Produce each pair as its own batch (acks=all), in order; returns their offsets."""
    producer = Producer(ConfluentClient.producer_config(bootstrap, **{"linger.ms": 0}))
    results: list[tuple[Any, Any]] = []
    for key, value in pairs:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            timestamp=timestamp or 0,
            on_delivery=lambda err, msg: results.append((err, msg)),
        )
        producer.flush(30)
    assert len(results) == len(pairs)
    for err, _ in results:
        assert err is None, f"produce failed: {err}"
    return [msg.offset() for _, msg in results]


def consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, Pair]]:
    """``(offset, (key, value))`` of every record from the log start to the high watermark.

    kafka-python without a group: nothing here involves the group coordinator
    (and so ``__consumer_offsets``), which these tests are not about.
    """
    tp = KafkaTopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    got: list[tuple[int, Pair]] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"{tp} not read to {end} in 30 s: {got[-3:]}")
            for batch in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, (r.key, r.value)) for r in batch]
        return got
    finally:
        consumer.close()


def offsets_of(records: Sequence[tuple[int, Pair]]) -> list[int]:
    return [offset for offset, _ in records]


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start offset, high watermark): ListOffsets -2 and -1."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition)
    low, high = (
        admin.list_offsets({tp: spec})[tp].result(timeout=30).offset
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest())
    )
    return low, high


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def partition_dir(broker: ManagedBroker, topic: str, partition: int = 0) -> Path:
    return broker.log_dir / f"{topic}-{partition}"


def valid_prefix_end(segments: Sequence[Path]) -> int:
    """The offset after the last batch a recovering broker keeps: batches are checked in
    segment order (structure and CRC) and everything from the first bad one on goes."""
    end = 0
    for path in segments:
        data = path.read_bytes()
        position = 0
        while position < len(data):
            try:
                header = validate_batch(data, position, from_client=False)
            except BrokerError:
                return end
            end = header.last_offset + 1
            position += header.size
    return end
