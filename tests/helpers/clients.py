"""Stock Kafka clients (confluent-kafka, kafka-python) driven the same way by every test.

Each :class:`ClientDriver` creates a topic with the client's admin API,
produces :class:`~tests.helpers.records.TestRecord` s to their partitions, and
reads partitions back from offset 0 (``assign``, no consumer group).
"""

from __future__ import annotations

import abc
import functools
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.helpers.records import ConsumedRecord, DeliveryReport, TestRecord

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class ClientDriver(abc.ABC):
    """One client library, reduced to what the tests need."""

    name: str

    @abc.abstractmethod
    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None
    ) -> None:
        """Create ``topic`` with the admin API and wait until its leaders are known."""

    @abc.abstractmethod
    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Iterable[TestRecord],
        *,
        codec: str = "none",
        idempotent: bool = False,
        timeout: float = 120.0,
    ) -> DeliveryReport:
        """Send every record to its partition, flush, and report the acknowledgements."""

    @abc.abstractmethod
    def consume(
        self, bootstrap: str, topic: str, counts: Mapping[int, int], timeout: float = 120.0
    ) -> dict[int, list[ConsumedRecord]]:
        """Read ``counts[p]`` records from each partition ``p``, from offset 0.

        Stops early, returning what it has, after ``timeout`` seconds.
        """

    def __repr__(self) -> str:
        return self.name


class ConfluentClient(ClientDriver):
    """confluent-kafka (librdkafka)."""

    name = "confluent"

    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None
    ) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
            operation_timeout=30,
            request_timeout=30,
        )
        futures[topic].result(timeout=60)
        deadline = time.monotonic() + 30
        while True:
            meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {topic} has no leaders 30 s after creation: {meta}")
            time.sleep(0.2)

    @staticmethod
    def producer_config(
        bootstrap: str, codec: str = "none", idempotent: bool = False, **extra: Any
    ) -> dict[str, Any]:
        """A librdkafka producer configuration (acks=all)."""
        return {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "acks": "all",
            "linger.ms": 5,
            **extra,
        }

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Iterable[TestRecord],
        *,
        codec: str = "none",
        idempotent: bool = False,
        timeout: float = 120.0,
    ) -> DeliveryReport:
        from confluent_kafka import Producer

        producer = Producer(self.producer_config(bootstrap, codec, idempotent))
        report = DeliveryReport()
        for record in records:
            confluent_produce(producer, topic, record, report)
        remaining = producer.flush(timeout)
        if remaining:
            raise AssertionError(f"{remaining} records still unacknowledged after {timeout} s")
        return report

    def consume(
        self, bootstrap: str, topic: str, counts: Mapping[int, int], timeout: float = 120.0
    ) -> dict[int, list[ConsumedRecord]]:
        from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError
        from confluent_kafka import TopicPartition as TP

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                # librdkafka insists on a group id; assign() below uses no group.
                "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        got: dict[int, list[ConsumedRecord]] = {p: [] for p in counts}
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in counts])
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and any(len(got[p]) < n for p, n in counts.items()):
                for msg in consumer.consume(num_messages=10000, timeout=0.5):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise AssertionError(f"consumer error: {err}")
                    ts_type, ts = msg.timestamp()
                    got[msg.partition()].append(
                        ConsumedRecord(
                            partition=msg.partition(),
                            offset=msg.offset(),
                            key=msg.key(),
                            value=msg.value(),
                            headers=list(msg.headers() or []),
                            timestamp_ms=ts,
                            timestamp_type="create"
                            if ts_type == TIMESTAMP_CREATE_TIME
                            else "log-append",
                        )
                    )
        finally:
            consumer.close()
        return got


def confluent_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark of each partition of ``topic`` (ListOffsets through librdkafka)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {
            p: consumer.get_watermark_offsets(TP(topic, p), timeout=30, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def confluent_produce(
    producer: Any, topic: str, record: TestRecord, report: DeliveryReport
) -> None:
    """``producer.produce`` one record, waiting for queue space; acks land in ``report``."""
    while True:
        try:
            producer.produce(
                topic,
                value=record.value,
                key=record.key,
                partition=record.partition,
                timestamp=record.timestamp_ms,
                headers=record.headers or None,
                on_delivery=functools.partial(_confluent_delivered, report, record.index),
            )
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


def _confluent_delivered(report: DeliveryReport, index: int, err: Any, msg: Any) -> None:
    if err is not None:
        report.errors[index] = str(err)
    else:
        report.acked[index] = (msg.partition(), msg.offset())


class KafkaPythonClient(ClientDriver):
    """kafka-python (pure Python)."""

    name = "kafka-python"

    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None
    ) -> None:
        from kafka import KafkaConsumer
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics(
                [NewTopic(topic, partitions, 1, topic_configs=dict(config or {}))],
                timeout_ms=30000,
            )
        finally:
            admin.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            deadline = time.monotonic() + 30
            while len(consumer.partitions_for_topic(topic) or ()) != partitions:
                if time.monotonic() > deadline:
                    raise AssertionError(f"topic {topic} not in metadata 30 s after creation")
                time.sleep(0.2)
        finally:
            consumer.close()

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Iterable[TestRecord],
        *,
        codec: str = "none",
        idempotent: bool = False,
        timeout: float = 120.0,
    ) -> DeliveryReport:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent,
            acks="all",
            linger_ms=5,
            batch_size=65536,
        )
        report = DeliveryReport()
        futures = []
        try:
            for record in records:
                futures.append(
                    (
                        record.index,
                        producer.send(
                            topic,
                            value=record.value,
                            key=record.key,
                            headers=record.headers,
                            partition=record.partition,
                            timestamp_ms=record.timestamp_ms,
                        ),
                    )
                )
            producer.flush(timeout=timeout)
        finally:
            producer.close(timeout=10)
        for index, future in futures:
            if not future.is_done:
                report.errors[index] = "not done after flush"
            elif future.failed():
                report.errors[index] = repr(future.exception)
            else:
                meta = future.value
                report.acked[index] = (meta.partition, meta.offset)
        return report

    def consume(
        self, bootstrap: str, topic: str, counts: Mapping[int, int], timeout: float = 120.0
    ) -> dict[int, list[ConsumedRecord]]:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        got: dict[int, list[ConsumedRecord]] = {p: [] for p in counts}
        partitions = [TopicPartition(topic, p) for p in counts]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and any(len(got[p]) < n for p, n in counts.items()):
                for tp, batch in consumer.poll(timeout_ms=500, max_records=20000).items():
                    got[tp.partition].extend(
                        ConsumedRecord(
                            partition=tp.partition,
                            offset=r.offset,
                            key=r.key,
                            value=r.value,
                            headers=[(k, v) for k, v in (r.headers or [])],
                            timestamp_ms=r.timestamp,
                            timestamp_type="create" if r.timestamp_type == 0 else "log-append",
                        )
                        for r in batch
                    )
        finally:
            consumer.close()
        return got


CLIENTS: Sequence[ClientDriver] = (ConfluentClient(), KafkaPythonClient())


def assert_broker_healthy(
    bootstrap: str, topic: str = "health-check", timeout: float = 30.0
) -> None:
    """A fresh confluent-kafka producer and consumer round-trip one record through ``topic``.

    Creates the topic (one partition) when it does not exist yet.
    """
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=timeout).topics:
        ConfluentClient().create_topic(bootstrap, topic, 1)
    value = uuid.uuid4().bytes
    acked: list[tuple[Any, Any]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: acked.append((e, m)))
    producer.flush(timeout)
    assert acked and acked[0][0] is None, f"health-check produce failed: {acked}"
    offset = acked[0][1].offset()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "health-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TP(topic, 0, offset)])
        msg = consumer.poll(timeout)
        assert msg is not None, f"health-check: nothing read back at offset {offset}"
        assert msg.error() is None, f"health-check consume failed: {msg.error()}"
        assert msg.value() == value and msg.offset() == offset
    finally:
        consumer.close()
