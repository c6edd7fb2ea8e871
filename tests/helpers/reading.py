"""Reading a topic to its end with librdkafka, as a read_committed or read_uncommitted consumer.

"The end" is what the consumer can see: with read_committed it stops at the
last stable offset, so the transaction tests read what a committed reader
would, and an open transaction holds the read there.
"""

from __future__ import annotations

import time
import uuid
from typing import NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
from confluent_kafka import TopicPartition as TP


class Read(NamedTuple):
    partition: int
    offset: int
    key: str | None
    value: str


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str, *, timeout: float = 60.0
) -> list[Read]:
    """Every record each partition's consumer reaches, in (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: list[Read] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            key = message.key()
            records.append(
                Read(
                    message.partition(),
                    message.offset(),
                    None if key is None else key.decode(),
                    message.value().decode(),
                )
            )
        assert len(at_end) == partitions, f"only partitions {sorted(at_end)} reached their end"
        return sorted(records)
    finally:
        consumer.close()
