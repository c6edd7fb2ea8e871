"""Workload 4: confluent-kafka (librdkafka) produces, then a group consumer reads, verified.

Each record's value is its index (12 digits) followed by filler that depends
on the index, so the consumer can check every record's content, and that no
record is missing or duplicated. The values are built before the producer's
clock starts, and verification runs after the consumer's clock stops: both
clocks measure the client and the broker, not this script.

Workload 7 writes its topic here too: a transactional producer commits nine
transactions of every ten and aborts the tenth, after flushing it, so that the
aborted records are in the log (librdkafka purges what it has not sent when a
transaction aborts). A read_committed consumer then checks that exactly the
committed records come back.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from benchlib.plan import AbortedTopic

INDEX_DIGITS = 12
CONSUME_BATCH = 10_000
#: librdkafka stops fetching for ``fetch.queue.backoff.ms`` (default 1000) whenever its
#: local queue holds ``queued.min.messages``; a consumer that drains 1M records in half
#: a second would then measure that timer (about 5 s on either broker), not the broker.
FETCH_QUEUE_BACKOFF_MS = 10


class VerificationError(RuntimeError):
    """Records came back missing, duplicated or changed."""


def fillers(record_size: int) -> list[bytes]:
    """256 different tails, chosen by the index's low byte."""
    return [bytes([k]) * (record_size - INDEX_DIGITS) for k in range(256)]


def produce(bootstrap: str, topic: str, records: int, record_size: int, linger_ms: int) -> float:
    """Produce ``records`` values with acks=all; return the seconds until all are acknowledged."""
    failures: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    tails = fillers(record_size)
    values = [b"%012d" % i + tails[i & 0xFF] for i in range(records)]
    send = producer.produce
    started = time.perf_counter()
    for value in values:
        while True:
            try:
                send(topic, value)
                break
            except BufferError:
                producer.poll(0.01)  # the local queue is full: let librdkafka send
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise VerificationError(
            f"{remaining} records unsent, {len(failures)} failed (first: {failures[:1]})"
        )
    return elapsed


def consume_and_verify(
    bootstrap: str, topic: str, records: int, record_size: int, timeout: float = 300.0
) -> float:
    """Read every record in a new consumer group; verify them; return the seconds from the
    first record to the last (the group join is not counted)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:12]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    started: float | None = None
    deadline = time.monotonic() + timeout
    try:
        while len(values) < records and time.monotonic() < deadline:
            for msg in consumer.consume(CONSUME_BATCH, 1.0):
                if msg.error() is not None:
                    raise VerificationError(f"consumer error: {msg.error()}")
                if started is None:
                    started = time.perf_counter()
                values.append(msg.value())
        elapsed = time.perf_counter() - (started or time.perf_counter())
    finally:
        consumer.close()
    verify(values, records, record_size)
    return elapsed


def verify(values: list[bytes], records: int, record_size: int) -> None:
    """Every index in ``range(records)`` exactly once, each with its exact value."""
    tails = fillers(record_size)
    seen = bytearray(records)
    changed = duplicated = 0
    for value in values:
        index = int(value[:INDEX_DIGITS]) if value[:INDEX_DIGITS].isdigit() else -1
        if not 0 <= index < records or value != b"%012d" % index + tails[index & 0xFF]:
            changed += 1
        elif seen[index]:
            duplicated += 1
        else:
            seen[index] = 1
    missing = records - seen.count(1)
    if changed or duplicated or missing:
        raise VerificationError(
            f"of {records} records: {missing} missing, {duplicated} duplicated, "
            f"{changed} with wrong content ({len(values)} read)"
        )


def produce_transactions(bootstrap: str, topic: str, spec: AbortedTopic) -> float:
    """Write ``spec``'s records in transactions, aborting 1 in ``spec.abort_every`` (each
    flushed first, so its records reach the log); return the seconds the writing took."""
    failures: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:12]}",
            "acks": "all",
            "linger.ms": 5,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    producer.init_transactions(60)
    tails = fillers(spec.record_size)
    values = [b"%012d" % i + tails[i & 0xFF] for i in range(spec.records)]
    send, partitions = producer.produce, spec.partitions
    started = time.perf_counter()
    for first in range(0, spec.records, spec.per_transaction):
        producer.begin_transaction()
        for index in range(first, min(first + spec.per_transaction, spec.records)):
            while True:
                try:
                    send(topic, values[index], partition=index % partitions)
                    break
                except BufferError:
                    producer.poll(0.01)
        if spec.aborted(first):
            remaining = producer.flush(60)
            if remaining:
                raise VerificationError(f"{remaining} records of an aborted transaction unsent")
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    elapsed = time.perf_counter() - started
    if failures:
        raise VerificationError(f"{len(failures)} records failed (first: {failures[:1]})")
    return elapsed


def read_committed_and_verify(
    bootstrap: str, topic: str, spec: AbortedTopic, timeout: float = 300.0
) -> int:
    """Read every partition to its end with ``isolation.level=read_committed``; check that
    each committed record comes back once, with its content, and no aborted record does.
    Return the count read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:12]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(spec.partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < spec.partitions and time.monotonic() < deadline:
            for msg in consumer.consume(CONSUME_BATCH, 1.0):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif err is not None:
                    raise VerificationError(f"consumer error: {err}")
                else:
                    values.append(msg.value())
    finally:
        consumer.close()
    tails = fillers(spec.record_size)
    seen = bytearray(spec.records)
    changed = duplicated = aborted = 0
    for value in values:
        index = int(value[:INDEX_DIGITS]) if value[:INDEX_DIGITS].isdigit() else -1
        if not 0 <= index < spec.records or value != b"%012d" % index + tails[index & 0xFF]:
            changed += 1
        elif spec.aborted(index):
            aborted += 1
        elif seen[index]:
            duplicated += 1
        else:
            seen[index] = 1
    missing = spec.committed - seen.count(1)
    if changed or duplicated or aborted or missing or len(at_end) < spec.partitions:
        raise VerificationError(
            f"read_committed, of {spec.committed} committed records: {missing} missing, "
            f"{duplicated} duplicated, {changed} with wrong content, {aborted} aborted ones "
            f"read ({len(values)} read; {len(at_end)} of {spec.partitions} partitions read "
            "to the end)"
        )
    return len(values)
