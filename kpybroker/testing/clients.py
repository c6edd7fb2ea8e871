"""What a test does with a broker besides its own client code: topics, records, an admin.

They use confluent-kafka (librdkafka), which kpybroker depends on already, so
they work whichever client the project under test uses.
"""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message
    from confluent_kafka.admin import AdminClient


def format_value(value: object) -> str:
    """A server.properties or topic config value: booleans as Kafka spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Record:
    """One record read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    #: Milliseconds since the epoch (CreateTime or LogAppendTime, as the topic says).
    timestamp: int = -1


class ClientHelpers(abc.ABC):
    """Topics and records for a broker or a cluster, given its ``bootstrap_servers``; and,
    for either, ``with`` starting it and stopping it."""

    @abc.abstractmethod
    def start(self) -> Self:
        """Start, and return once ready."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop, and remove what was made for the run."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    @abc.abstractmethod
    def bootstrap_servers(self) -> str:
        """``host:port[,host:port...]`` for clients' bootstrap.servers."""

    def metadata_sources(self) -> list[str]:
        """Bootstrap addresses whose metadata must all show a new topic ready."""
        return [self.bootstrap_servers]

    def admin(self, config: Mapping[str, object] | None = None) -> AdminClient:
        """confluent-kafka's AdminClient for this broker, with further librdkafka settings."""
        return admin_client(self.bootstrap_servers, config)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic and wait until it is usable: every partition has a leader and a
        full ISR in the metadata every broker serves."""
        from confluent_kafka.admin import NewTopic

        topic_config = {key: format_value(value) for key, value in (config or {}).items()}
        new_topic = NewTopic(name, partitions, replication_factor, config=topic_config)
        admin = self.admin()  # referenced until the result: a destroyed client fails it
        admin.create_topics([new_topic], request_timeout=timeout)[name].result(timeout)
        deadline = time.monotonic() + timeout
        for bootstrap in self.metadata_sources():
            admin = admin_client(bootstrap)
            while not topic_ready(admin, name, partitions, replication_factor):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {name!r} was not ready within {timeout} s")
                time.sleep(0.02)

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str | None],
        *,
        key: bytes | str | None = None,
        partition: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Write ``values`` to ``topic`` (acks=all) and wait until all are acknowledged;
        KafkaException with the error of the first that failed."""
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            {"bootstrap.servers": self.bootstrap_servers, "acks": "all", "linger.ms": 0}
        )
        failures = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        where = {} if partition is None else {"partition": partition}
        for value in values:
            producer.produce(topic, value=value, key=key, on_delivery=delivered, **where)
            producer.poll(0)
        if producer.flush(timeout) > 0:
            raise TimeoutError(f"records to {topic!r} were not acknowledged within {timeout} s")
        if failures:
            raise KafkaException(failures[0])

    def wait_for_records(self, topic: str, count: int, timeout: float = 30.0) -> list[Record]:
        """The first ``count`` records of ``topic`` (all partitions, from the beginning), once
        there are that many; TimeoutError, saying how many there were, if not in time.

        It reads without a consumer group (no offsets are committed), so it can be
        called again and sees the same records.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"kpybroker-testing-{uuid.uuid4().hex}",  # librdkafka wants one
                "enable.auto.commit": False,
            }
        )
        records: list[Record] = []
        try:
            partitions = wait_for_partitions(consumer, topic, deadline, timeout)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            while len(records) < count and (remaining := deadline - time.monotonic()) > 0:
                for message in consumer.consume(count - len(records), min(remaining, 0.5)):
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    records.append(record_of(message))
        finally:
            consumer.close()
        if len(records) < count:
            raise TimeoutError(f"{len(records)} of {count} records in {topic!r} after {timeout} s")
        return records[:count]


def admin_client(bootstrap: str, config: Mapping[str, object] | None = None) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **(config or {})})


def topic_ready(admin: AdminClient, name: str, partitions: int, replication_factor: int) -> bool:
    topic = admin.list_topics(name, timeout=5).topics.get(name)
    if topic is None or topic.error is not None or len(topic.partitions) < partitions:
        return False
    return all(
        p.error is None and p.leader >= 0 and len(p.isrs) >= replication_factor
        for p in topic.partitions.values()
    )


def wait_for_partitions(
    consumer: Consumer, topic: str, deadline: float, timeout: float
) -> list[int]:
    """The topic's partition numbers, once its metadata has them (it may not exist yet)."""
    while True:
        found = consumer.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return sorted(found.partitions)
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic!r} did not appear within {timeout} s")
        time.sleep(0.05)


def record_of(message: Message) -> Record:
    _, timestamp = message.timestamp()
    return Record(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        headers=list(message.headers() or ()),
        timestamp=timestamp,
    )
